/**
 * One run of work items under a supervisor, as the CLI does it (`warden run` and `warden demo`):
 * every item on its own thread, events reported as JSON lines and/or on the board, cards answered
 * by the chosen source, the audit trail appended, and the exit code computed from how the items
 * ended.
 *
 * Scopes, in the order they close (the reverse of how they are opened below):
 * 1. the answering fiber (prompt or stdin);
 * 2. the supervisor: every still-open card is refused (`shutdown`) while the child can still
 *    hear it, then the app-server is stopped;
 * 3. the work items (interrupted if Ctrl-C came first);
 * 4. the reporter: the events still queued are reported, then `run.finished`, then the audit
 *    trail is closed;
 * 5. the board's clock.
 * So Ctrl-C anywhere reports every card's settlement and every item's end before the process exits.
 *
 * (Named for what it runs rather than "session": in codex's protocol a session is what an
 * `acceptForSession` answer lasts for, a different thing.)
 */
import { Approvals, Audit, EventPump, SecretMask } from "@warden/approvals"
import type { ApprovalEvent, Policy } from "@warden/approvals"
import { Supervisor } from "@warden/supervisor"
import type { Telemetry } from "@warden/supervisor"
import type { WorkItem } from "@warden/supervisor"
import { Transport } from "@warden/transport"
import {
  Cause,
  Context,
  Deferred,
  Effect,
  ExecutionStrategy,
  Exit,
  Fiber,
  FiberSet,
  Layer,
  Queue,
  Redacted,
  Scope
} from "effect"
import * as Board from "../terminal/Board.js"
import type * as CardPrompt from "../answering/CardPrompt.js"
import * as ExitCodes from "../contract/ExitCodes.js"
import type * as Opts from "../contract/Options.js"
import * as JsonOutput from "../contract/JsonOutput.js"
import * as Prompting from "../answering/Prompting.js"
import type { Screen } from "../terminal/Screen.js"
import * as StdinDecisions from "../answering/StdinDecisions.js"
import * as RunState from "@warden/inbox/RunState"
import type { RunOffers } from "../state/StateLedger.js"

/** Who answers the cards that no rule (or handler) decided. */
export type Answering = "prompt" | "stdin" | "none"

/** Where the run is recorded (`warden run --state`: StateLedger.ts), if anywhere. */
export interface Recorder {
  /** The ledger writes the `--audit` trail itself (from the records it writes): no sink here. */
  readonly writesAudit?: boolean
  /** Records what the supervisor publishes; called once, before any item runs. */
  readonly attach: (supervisor: Supervisor.SupervisorShape) => Effect.Effect<void>
  /** Records a work item (with its id) as submitted, just before it runs. */
  readonly submitted: (item: WorkItem.WorkItem) => void
  /** `--approvals stdin`'s "always": remember an allow scoped to the card (author `stdin`). */
  readonly always?: StdinDecisions.RememberAlways
  /** The terminal prompt's "always" (author `prompt`). */
  readonly prompt?: CardPrompt.Always
  /** "always" as another channel says it (`web`: the author of the rule). */
  readonly alwaysAs?: (author: string) => StdinDecisions.RememberAlways
  /** Rules offered at a person's acceptance, replayed with the run's rules (the terminal and the inbox offer them). */
  readonly offers?: (rules: Policy.Rules | undefined) => RunOffers
}

export interface Options {
  readonly transport: Layer.Layer<Transport.Transport>
  readonly supervisor: Supervisor.SupervisorConfig
  /** Each item's `id` is set to its index. */
  readonly items: ReadonlyArray<WorkItem.WorkItem>
  readonly answering: Answering
  readonly json: boolean
  readonly audit: string | undefined
  readonly title: string
  readonly screen: Screen
  /** Work items asked for that will not run (`warden resume`'s not-resumed items): the exit code is 1 at best. */
  readonly notRun?: number
  /**
   * The ledger's recorder, opened once codex has been spawned (so the child starts up on another
   * core while the ledger opens), before anything is attached or run; its scope must enclose this
   * run's (it outlives the supervisor). When it fails, the app-server is stopped and nothing runs.
   */
  readonly recorder?: Effect.Effect<Recorder | undefined, ExitCodes.CliExit>
  /** `--inbox`: serve the web inbox on this address while the run lasts. */
  readonly inbox?: Opts.InboxSetting
  /**
   * `warden serve`: besides `items`, work items are submitted through the inbox (`POST /api/items`,
   * needs `inbox`), each made from its prompt by `item` and numbered after the last; the run lasts
   * until it is stopped (SIGINT/SIGTERM), which is then its normal end (exit 0).
   */
  readonly serve?: { readonly item: (prompt: string) => WorkItem.WorkItem }
  /**
   * `--otlp`: the exporters (`Observability.layer`), built before everything else of the run and
   * closed after it, so that what the run's close settles is exported too (the last flush).
   */
  readonly telemetry?: Layer.Layer<Telemetry.Telemetry>
}

export interface Result {
  readonly tally: RunState.RunState
  readonly exitCode: number
}

export const run = (options: Options): Effect.Effect<Result, ExitCodes.CliExit> => {
  const prompts = options.items.map((item) => item.prompt)
  const tally = RunState.make(prompts, Date.now())
  let exitCode: number = ExitCodes.Failed
  let aborted = false

  return Effect.scoped(
    Effect.gen(function* () {
      const screen = options.screen
      const board = yield* Board.make(screen, tally, { title: options.title })
      const emit = (line: JsonOutput.Line) => {
        if (options.json) screen.out(JsonOutput.render(line, new Date()))
      }
      const onSupervisorEvent = (event: Supervisor.SupervisorEvent) => {
        RunState.applySupervisorEvent(tally, event, Date.now())
        for (const line of JsonOutput.fromSupervisorEvent(event, tally)) emit(line)
        board.onSupervisorEvent(event)
      }
      const onApprovalEvent = (event: ApprovalEvent.ApprovalEvent) => {
        RunState.applyApprovalEvent(tally, event)
        for (const line of JsonOutput.fromApprovalEvent(event)) emit(line)
        board.onApprovalEvent(event)
      }

      /** Records the audit file (`--audit` without the ledger) could not take, and why the first was lost. */
      const auditLost: { count: number; detail: string | undefined } = { count: 0, detail: undefined }
      // The reporter outlives the supervisor (closed by hand, last).
      const reporterScope = yield* Scope.make(ExecutionStrategy.sequential)
      const queues: {
        supervisor?: Queue.Dequeue<Supervisor.SupervisorEvent>
        approvals?: Queue.Dequeue<ApprovalEvent.ApprovalEvent>
      } = {}
      // The reporter's readers of the two subscriptions (an EventPump never loses an event it was handed).
      const pumps: Array<EventPump.EventPump> = []
      yield* Effect.addFinalizer((exit) =>
        Effect.gen(function* () {
          // Everything published is reported. (A ledger that could not be opened: nothing ran, no
          // reader was started, nothing is reported: the error says why.)
          if (!aborted) {
            for (const pump of pumps) yield* pump.settle
            // Stopped before the readers started (while the ledger opened): nothing was taken
            // from the subscriptions yet, so what waits there is all of it.
            if (pumps.length === 0) {
              if (queues.approvals) for (const e of yield* Queue.takeAll(queues.approvals)) onApprovalEvent(e)
              if (queues.supervisor) for (const e of yield* Queue.takeAll(queues.supervisor)) onSupervisorEvent(e)
            }
          }
          // Stopped (Ctrl-C): exit 1 even if every item managed to complete meanwhile; but a stop is
          // how `warden serve` ends.
          const stopped = Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
          exitCode = Exit.isInterrupted(exit)
            ? options.serve !== undefined && stopped && !aborted
              ? ExitCodes.Ok
              : ExitCodes.Failed
            : ExitCodes.forItems(RunState.finalStatuses(tally), options.notRun ?? 0)
          // The process ends with this code too (Main.ts), though the command itself was interrupted.
          if (stopped) ExitCodes.stopEndsWith(exitCode)
          if (!aborted) {
            emit(JsonOutput.runFinished(tally, exitCode))
            board.finish()
          }
          yield* Scope.close(reporterScope, exit)
          // The audit file's sink wrote what was left as its scope closed: its losses are all known.
          if (auditLost.count > 0 && options.audit !== undefined) {
            ExitCodes.ledgerLost()
            const message = ExitCodes.auditLinesMissing(options.audit, auditLost.count, auditLost.detail ?? "")
            process.stderr.write(`warden: ${SecretMask.maskText(message)}\n`)
          }
        })
      )

      const itemFibers = yield* FiberSet.make<Exit.Exit<WorkItem.WorkResult, unknown>>()

      // Told when the first spawn of codex was attempted (it succeeded or failed).
      const spawned = yield* Deferred.make<void>()
      const transport = Layer.map(options.transport, (context) => {
        const inner = Context.get(context, Transport.Transport)
        return Context.make(Transport.Transport, {
          connect: inner.connect.pipe(Effect.ensuring(Deferred.succeed(spawned, undefined)))
        })
      })
      const supervisor = yield* Supervisor.make(options.supervisor).pipe(
        Effect.provide(transport),
        Effect.mapError((error) => ExitCodes.usage(error.message))
      )
      // Subscribed at once (the first connection's events are reported), forwarded once the ledger is open.
      queues.approvals = yield* supervisor.subscribeApprovals.pipe(Scope.extend(reporterScope))
      queues.supervisor = yield* supervisor.subscribe.pipe(Scope.extend(reporterScope))
      // The ledger opens beside codex's start-up: after the spawn, before anything is recorded or
      // run. What the supervisor publishes meanwhile (its first connection's events) is reported,
      // but not recorded in the ledger.
      const recorder =
        options.recorder === undefined
          ? undefined
          : yield* Deferred.await(spawned).pipe(
              Effect.zipRight(options.recorder),
              Effect.tapError(() =>
                Effect.sync(() => {
                  aborted = true
                })
              )
            )
      if (recorder !== undefined) yield* recorder.attach(supervisor)
      // Rules offered at a person's acceptance, replayed with the run's own rules.
      const offers = recorder?.offers?.(options.supervisor.approvals?.rules)
      pumps.push(
        yield* EventPump.make(queues.approvals, (e) => Effect.sync(() => onApprovalEvent(e))).pipe(
          Scope.extend(reporterScope)
        ),
        yield* EventPump.make(queues.supervisor, (e) => Effect.sync(() => onSupervisorEvent(e))).pipe(
          Scope.extend(reporterScope)
        )
      )
      if (options.audit !== undefined && recorder?.writesAudit !== true) {
        yield* Audit.jsonlSink(options.audit, {
          onLost: (detail) => {
            auditLost.count++
            auditLost.detail ??= detail
          }
        }).pipe(
          Effect.provideService(Approvals.Approvals, supervisor.approvals),
          Scope.extend(reporterScope),
          Effect.mapError((error) => ExitCodes.usage(error.message))
        )
      }

      switch (options.answering) {
        case "prompt":
          yield* Prompting.run(supervisor, board, recorder?.prompt, offers)
          break
        case "stdin":
          yield* StdinDecisions.run(supervisor, board.log, recorder?.always)
          break
        case "none":
          break
      }

      const start = (item: WorkItem.WorkItem) => {
        recorder?.submitted(item)
        return FiberSet.run(itemFibers, supervisor.run(item).pipe(Effect.exit))
      }
      const serve = options.serve
      const submit =
        serve === undefined
          ? undefined
          : ({ prompt }: { readonly prompt: string }) =>
              Effect.suspend(() => {
                const index = RunState.add(tally, prompt)
                emit({ type: "item.submitted", item: index, prompt })
                return Effect.as(start({ ...serve.item(prompt), id: index }), index)
              })

      if (options.inbox !== undefined) {
        // Loaded only when asked for: a run without --inbox never loads the HTTP server.
        const { WebInbox } = yield* Effect.promise(() => import("@warden/inbox"))
        const always = recorder?.alwaysAs?.("web")
        const inbox = yield* WebInbox.make(supervisor, {
          host: options.inbox.host,
          port: options.inbox.port,
          allowRemote: options.inbox.allowRemote,
          ...(options.inbox.publicUrl !== undefined ? { publicUrl: options.inbox.publicUrl } : {}),
          title: options.title,
          items: options.items.map((item, index) => ({ id: index, prompt: item.prompt })),
          ...(submit ? { submit } : {}),
          ...(always ? { always } : {}),
          ...(offers ? { offers: { after: offers.after, take: (id: string) => offers.take(id, "web") } } : {}),
          // The server's own lines (the connection cap reached) go where the notifications' do.
          log: board.log,
          ...(options.inbox.notify ? { notify: { ...options.inbox.notify, report: board.log } } : {})
        }).pipe(Effect.mapError((error) => new ExitCodes.CliExit({ code: ExitCodes.Failed, message: error.message })))
        if (!WebInbox.isLoopback(inbox.host)) {
          screen.err(
            `warden: WARNING: the inbox listens on ${inbox.host}, not loopback: anyone who reaches it with the token decides cards, over plain HTTP`
          )
        }
        // The token is printed here, once, and goes through nothing Warden records (not the logger, not --json, not the ledger).
        screen.err(`warden: inbox at ${Redacted.value(inbox.link)}`)
        emit({
          type: "inbox.listening",
          url: inbox.url,
          ...(options.inbox.publicUrl !== undefined ? { publicUrl: inbox.publicUrl } : {})
        })
      }

      const fibers = yield* Effect.forEach(options.items, (item, index) => start({ ...item, id: index }))
      // `warden serve` takes items until it is stopped; `warden run` ends with its items.
      if (serve !== undefined) return yield* Effect.never
      yield* Effect.forEach(fibers, Fiber.await, { discard: true })
    })
  ).pipe(
    (run) => (options.telemetry === undefined ? run : Effect.provide(run, options.telemetry)),
    Effect.map(() => ({ tally, exitCode }))
  )
}
