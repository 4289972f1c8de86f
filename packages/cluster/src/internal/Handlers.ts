/**
 * The work item entity's handlers, built once per entity activation on a runner, over that
 * runner's one local `Supervisor`. Per-item state (the live handle, open cards, the event hub)
 * lives in the closure.
 *
 * - `Run` (persisted): a final stored item returns its stored result; an item last held by
 *   another incarnation is a move (`item.moved`, reason `shard-moved`): its open cards are settled
 *   `stranded` (once: the UPDATE only touches unsettled rows), then the thread is resumed with the
 *   remaining prompts. An item this incarnation was running and did not finish is a move too
 *   (reason `shard-lost`, from the runner to itself): the runner let go of the item's shard (its
 *   run interrupted, its open cards refused) and got it back, and the persisted `Run` came again.
 * - `Answer`: a card of this process goes to this supervisor's inbox; a card of another
 *   incarnation is never written to anyone: `AlreadySettled` from the stored settlement, else
 *   `UnknownCard`.
 *
 * @internal
 */
import { Entity } from "@effect/cluster"
import { SecretMask } from "@warden/approvals"
import type { ApprovalEvent } from "@warden/approvals"
import { Ledger, LedgerEvent } from "@warden/ledger"
import { Supervisor } from "@warden/supervisor"
import type { Errors, WorkItem } from "@warden/supervisor"
import { Cause, Context, Deferred, Effect, Exit, Fiber, FiberId, Option, PubSub, Queue, Schema, Stream } from "effect"
import { WorkItemEntity } from "../WorkItemEntity.js"
import * as Wire from "../Wire.js"
import { ItemStore } from "./ItemStore.js"
import type { ItemRow } from "./ItemStore.js"

/** Who this runner process is: its run id (the incarnation of every item it runs) and address. */
export interface RunnerInfoShape {
  readonly runId: string
  readonly address: string
  /** This machine (`os.hostname()`) and the codex home its app-servers use: where threads live. */
  readonly host: string
  readonly codexHome: string
}

export class RunnerInfo extends Context.Tag("@warden/cluster/RunnerInfo")<RunnerInfo, RunnerInfoShape>() {}

/**
 * The runner's ledger run, when the runner records one (`Runner.layer({ ledger: true })`): the
 * ledger and this process's run in it (run id = the runner's run id).
 */
export class LedgerRecording extends Context.Tag("@warden/cluster/LedgerRecording")<LedgerRecording, {
  readonly ledger: Ledger.LedgerShape
  readonly run: Ledger.Run
}>() {}

/** What a runner keeps of one item across the item's activations on it. */
export interface LocalItem {
  /** The run in progress: a `Run` delivered again while it runs joins it. */
  run: Deferred.Deferred<Wire.RunResult> | undefined
  /**
   * The seq of the item's next line from this runner. A shard lost and regained brings a new
   * activation of the item's entity on the same runner (same incarnation); its lines go on from
   * here, since consumers de-duplicate by incarnation and seq.
   */
  nextSeq: number
}

/**
 * This runner's items, by item id, shared by every activation of every item's entity (an entity
 * whose shard was released and regained, or rebuilt after a defect, is a new activation on the
 * same runner). An entry is made when a run of its item starts here and goes when the item
 * finishes here; one whose item was moved away and finished elsewhere stays (a number).
 */
export class LocalItems extends Context.Tag("@warden/cluster/LocalItems")<LocalItems, Map<string, LocalItem>>() {}

const final = (status: string) => status === "completed" || status === "failed" || status === "stopped"

const encodeResult = Schema.encodeSync(Schema.parseJson(Wire.RunResult))
const decodeResult = Schema.decodeUnknownOption(Schema.parseJson(Wire.RunResult))

const statusOf = (result: Wire.RunResult) =>
  result._tag === "Completed" ? "completed" : result._tag === "Failed" ? "failed" : "stopped"

/**
 * Why a `Run` reaching this incarnation is a move, if it is: the item was last held by another
 * incarnation (`shard-moved`: its runner died, stopped, or gave the shard up to this one), or this
 * incarnation was running it and did not finish (`shard-lost`: the runner let go of the item's
 * shard, e.g. a shard lock refresh slower than the engine allows, which stopped the run, and took
 * the shard back). A `Run` delivered again while the item runs here joins the run (`runOnce`)
 * and never gets this far.
 */
const moveReason = (before: ItemRow | undefined, runId: string): Wire.MoveReason | undefined => {
  if (before === undefined || before.incarnation === null) return undefined
  if (before.incarnation !== runId) return "shard-moved"
  return before.status === "running" ? "shard-lost" : undefined
}

export const make = Effect.gen(function*() {
  const address = yield* Entity.CurrentAddress
  const itemId = address.entityId
  const info = yield* RunnerInfo
  const store = yield* ItemStore
  const localItems = yield* LocalItems
  const recording = Option.getOrUndefined(yield* Effect.serviceOption(LedgerRecording))
  const supervisor = yield* Supervisor.Supervisor
  const hub = yield* PubSub.unbounded<Wire.ItemEvent>()
  const holder = { incarnation: info.runId, runner: info.address, host: info.host, codexHome: info.codexHome }
  // Kept in `localItems` from the start of a run here until the item finishes here (an activation
  // that only answers `Status` or `Events` of an ended item leaves nothing behind).
  const local: LocalItem = localItems.get(itemId) ?? { run: undefined, nextSeq: 0 }
  /** The seq of this activation's first line: `history[i]` has seq `firstSeq + i`. */
  const firstSeq = local.nextSeq
  let handle: Supervisor.WorkHandle | undefined
  let running = false
  let stopRequested = false
  let threadId: string | undefined
  /** This incarnation's open cards of the item: global id → line. */
  const openCards = new Map<string, Record<string, unknown>>()

  /** Every line of this activation, replayed to each new subscriber (a re-sent `Events` misses nothing). */
  const history: Array<Wire.ItemEvent> = []
  const publish = (line: Record<string, unknown>) => {
    const event = new Wire.ItemEvent({ seq: local.nextSeq++, incarnation: info.runId, runner: info.address, line: { ...line, item: itemId } })
    history.push(event)
    hub.unsafeOffer(event)
  }

  // Approval events of this item: written to storage first, then published (so what a client saw is stored).
  const onApproval = (event: ApprovalEvent.ApprovalEvent) =>
    Effect.gen(function*() {
      if (event._tag === "CardOpened") {
        if (event.card.workItem !== itemId) return
        const id = Wire.globalCardId(info.runId, event.card.id)
        yield* store.cardOpened({ id, itemId, incarnation: info.runId, method: event.card.method })
        const line = { type: "card.opened", card: id, method: event.card.method, title: SecretMask.maskText(event.card.title), runner: info.address }
        openCards.set(id, line)
        publish(line)
      } else if (event._tag === "CardSettled") {
        const card = event.settlement.card
        if (card.workItem !== itemId) return
        const id = Wire.globalCardId(info.runId, card.id)
        const source = event.settlement.source._tag === "Person" ? "person" : event.settlement.source._tag
        yield* store.cardSettled(id, event.settlement.outcome, source)
        openCards.delete(id)
        publish({ type: "card.settled", card: id, outcome: event.settlement.outcome, source, latencyMs: event.settlement.latencyMs })
      }
    }).pipe(Effect.uninterruptible)

  const onWork = (event: WorkItem.WorkEvent) =>
    Effect.gen(function*() {
      switch (event._tag) {
        case "ThreadReady":
          threadId = event.threadId
          yield* store.setThread(itemId, event.threadId)
          publish({ type: event.resumed ? "thread.resumed" : "thread.ready", threadId: event.threadId })
          return
        case "ThreadStartedFresh":
          publish({ type: "thread.fresh", missingThreadId: event.missingThreadId, detail: SecretMask.maskText(event.detail) })
          return
        case "TurnStarted":
          publish({ type: "turn.started", threadId: event.threadId, turnId: event.turnId })
          return
        case "TurnCompleted":
          if (event.turn.status === "completed") yield* store.turnDone(itemId)
          publish({ type: "turn.completed", threadId: event.threadId, turnId: event.turn.turnId, status: event.turn.status })
          return
        case "Resumed":
          publish({ type: "thread.resumed", threadId: event.threadId, attempt: event.attempt })
          return
        case "ConnectionLost":
          publish({ type: "connection.lost", detail: SecretMask.maskText(event.detail) })
          return
        default:
          return
      }
    }).pipe(Effect.uninterruptible)

  const finish = (result: Wire.RunResult) =>
    Effect.gen(function*() {
      yield* store.finish(itemId, statusOf(result), encodeResult(result))
      publish({ type: "item.finished", status: statusOf(result), result: Schema.encodeSync(Wire.RunResult)(result) })
      // Nothing more is published for a finished item: a later activation may start its lines at 0.
      if (localItems.get(itemId) === local) localItems.delete(itemId)
      return result
    })

  const run = (spec: Wire.ItemSpec) =>
    Effect.gen(function*() {
      const before = yield* store.get(itemId)
      if (before !== undefined && final(before.status) && before.result !== null) {
        const stored = decodeResult(before.result)
        if (Option.isSome(stored)) return stored.value
      }
      if (before?.status === "stop-requested" || stopRequested) {
        return yield* finish(new Wire.Stopped({ threadId: before?.threadId ?? null }))
      }
      const reason = moveReason(before, info.runId)
      if (before !== undefined && reason !== undefined) {
        // Open cards of earlier incarnations (a runner that died with them open): stranded, once.
        // This incarnation's own cards of the item were settled when its run was cut off.
        const stranded = yield* store.strand(itemId, info.runId)
        // What the earlier runs settled themselves (refused while shutting down, or while their
        // shard was let go of) may never have reached a subscriber: told again, marked replayed.
        for (const card of yield* store.cards({ itemId })) {
          if (card.outcome !== null && !stranded.includes(card.id)) {
            publish({ type: "card.settled", card: card.id, outcome: card.outcome, source: card.source, replayed: true })
          }
        }
        for (const card of stranded) publish({ type: "card.settled", card, outcome: "stranded", source: "stranded" })
        // The audit trail says the same: the earlier incarnation's open cards of this item, stranded once.
        if (recording !== undefined && reason === "shard-moved" && before.incarnation !== null) {
          yield* recording.ledger.markStrandedItem(before.incarnation, itemId).pipe(
            Effect.catchAll((e) => Effect.logWarning(`ledger: ${SecretMask.maskText(e.message)}`))
          )
        }
        publish({ type: "item.moved", from: before.runner, to: info.address, reason, stranded })
        // The thread lives in the codex home of the runner that started it: another host (or
        // another codex home) cannot resume it, and starting a fresh thread would hide that.
        const elsewhere = before.threadId !== null && before.host !== null &&
          (before.host !== info.host || before.codexHome !== info.codexHome)
        if (elsewhere) {
          yield* store.claim(itemId, holder, true)
          return yield* finish(
            new Wire.Failed({
              reason: "thread-unreachable",
              detail: SecretMask.maskText(
                `thread ${before.threadId} lives in the codex home ${before.codexHome} of runner ${before.runner} on host ${before.host}; ` +
                  `this runner (host ${info.host}, codex home ${info.codexHome}) cannot resume it`
              ),
              threadId: before.threadId
            })
          )
        }
      }
      yield* store.claim(itemId, holder, reason !== undefined)
      const moves = (before?.moves ?? 0) + (reason !== undefined ? 1 : 0)
      publish({ type: "item.placed", runner: info.address, incarnation: info.runId })
      const turnsDone = before?.turnsDone ?? 0
      const prompts = [spec.prompt, ...(spec.followUps ?? [])].slice(turnsDone)
      threadId = before?.threadId ?? undefined
      if (prompts.length === 0 && threadId !== undefined) {
        return yield* finish(new Wire.Completed({ threadId, status: "completed", finalMessage: null, turns: turnsDone, moves }))
      }
      const work: WorkItem.WorkItem = {
        id: itemId,
        prompt: prompts[0] ?? spec.prompt,
        followUps: prompts.slice(1),
        ...(threadId !== undefined ? { threadId, ifThreadMissing: "start" as const } : {}),
        ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
        ...(spec.model !== undefined ? { model: spec.model } : {}),
        ...(spec.approvalPolicy !== undefined ? { approvalPolicy: spec.approvalPolicy } : {}),
        ...(spec.sandbox !== undefined ? { sandbox: spec.sandbox } : {})
      }
      recording?.run.record(LedgerEvent.itemSubmitted(work))
      return yield* Effect.scoped(
        Effect.gen(function*() {
          const approvals = yield* supervisor.subscribeApprovals
          const loop = yield* Queue.take(approvals).pipe(Effect.flatMap(onApproval), Effect.forever, Effect.interruptible, Effect.forkScoped)
          // Whatever ends the item (its end, a stop, this runner shutting down), the approval
          // events already published for it are handled before the scope closes.
          const drain = Effect.gen(function*() {
            yield* Fiber.interrupt(loop)
            for (const event of yield* Queue.takeAll(approvals)) yield* onApproval(event)
          })
          const exit = yield* Effect.scoped(
            Effect.gen(function*() {
              running = true
              const h = yield* supervisor.start(work)
              handle = h
              const events = yield* Stream.runForEach(h.events, onWork).pipe(Effect.forkScoped)
              const exit = yield* Effect.exit(h.await)
              yield* Fiber.join(events)
              return exit
            })
          ).pipe(Effect.ensuring(Effect.sync(() => {
            running = false
            handle = undefined
          })), Effect.onInterrupt(() => drain))
          yield* drain
          const result: Wire.RunResult = Exit.match(exit, {
            onSuccess: (r) =>
              new Wire.Completed({
                threadId: r.threadId,
                status: r.status,
                finalMessage: r.finalMessage === undefined ? null : SecretMask.maskText(r.finalMessage),
                turns: turnsDone + r.turns.length,
                moves
              }),
            onFailure: (cause) => {
              if (stopRequested) return new Wire.Stopped({ threadId: threadId ?? null })
              const failure = Cause.failureOption(cause)
              if (Option.isSome(failure)) {
                const e: Errors.WorkItemFailed = failure.value
                return new Wire.Failed({ reason: e.reason, detail: SecretMask.maskText(e.detail), threadId: e.threadId ?? threadId ?? null })
              }
              return new Wire.Failed({ reason: "defect", detail: SecretMask.maskText(Cause.pretty(cause)), threadId: threadId ?? null })
            }
          })
          return yield* finish(result)
        })
      )
    })

  /**
   * One run per activation: a `Run` delivered again while the first runs (the engine may deliver a
   * persisted request again, e.g. after its shard was re-acquired) joins the first instead of
   * resuming the thread a second time. A run that did not succeed (interrupted) lets the next
   * delivery start afresh, also one that joined it while it was stopping.
   */
  const runOnce = (spec: Wire.ItemSpec): Effect.Effect<Wire.RunResult> =>
    Effect.suspend(() => {
      const running = local.run
      if (running !== undefined) {
        publish({ type: "item.redelivered" })
        // A run cut off while stopping (its shard let go of, then taken back before it had
        // stopped) ends without a result: this delivery runs the item, it does not take the cut.
        return Deferred.await(running).pipe(
          Effect.catchAllCause(() =>
            Effect.suspend(() => {
              if (local.run === running) local.run = undefined
              return runOnce(spec)
            })
          )
        )
      }
      const done = Deferred.unsafeMake<Wire.RunResult>(FiberId.none)
      local.run = done
      localItems.set(itemId, local)
      return run(spec).pipe(
        Effect.onExit((exit) =>
          Effect.suspend(() => {
            if (local.run === done) local.run = undefined
            return Deferred.done(done, exit)
          })
        )
      )
    })

  const notActive = (detail: string) => new Wire.ItemNotActive({ itemId, detail })

  const liveStatus = Effect.gen(function*() {
    const row = yield* store.get(itemId)
    return new Wire.ItemStatus({
      status: running ? "running" : row?.status ?? "unknown",
      runner: running ? info.address : row?.runner ?? null,
      incarnation: running ? info.runId : row?.incarnation ?? null,
      threadId: threadId ?? row?.threadId ?? null,
      turnsDone: row?.turnsDone ?? 0,
      openCards: [...openCards.keys()]
    })
  })

  return WorkItemEntity.of({
    Run: (request) => runOnce(request.payload.spec),
    Steer: (request) =>
      handle === undefined
        ? Effect.fail(notActive("not running on this runner"))
        : handle.steer(request.payload.text).pipe(Effect.mapError((e) => notActive(e._tag === "NoActiveTurn" ? "no running turn" : e.message))),
    Interrupt: () =>
      handle === undefined ? Effect.fail(notActive("not running on this runner")) : handle.interrupt.pipe(Effect.mapError(() => notActive("no running turn"))),
    Stop: () =>
      Effect.gen(function*() {
        stopRequested = true
        if (handle !== undefined) return yield* handle.stop
        const row = yield* store.get(itemId)
        if (row !== undefined && !final(row.status)) yield* store.requestStop(itemId)
      }),
    Status: () => liveStatus,
    Events: () =>
      Stream.unwrapScoped(
        Effect.gen(function*() {
          const subscription = yield* PubSub.subscribe(hub)
          const status = yield* liveStatus
          const snapshot = new Wire.ItemEvent({
            seq: -1,
            incarnation: info.runId,
            runner: info.address,
            line: { type: "item.snapshot", item: itemId, status: status.status, threadId: status.threadId, openCards: [...openCards.values()] }
          })
          const past = history.slice()
          if (!running && final(status.status)) return Stream.make(snapshot, ...past)
          if (past.some((e) => e.line["type"] === "item.finished")) return Stream.make(snapshot, ...past)
          return Stream.concat(
            Stream.make(snapshot, ...past),
            Stream.fromQueue(subscription).pipe(Stream.filter((e) => e.seq >= firstSeq + past.length), Stream.takeUntil((e) => e.line["type"] === "item.finished"))
          )
        })
      ),
    Answer: (request) =>
      Effect.gen(function*() {
        const { cardId } = request.payload
        const parsed = Wire.parseCardId(cardId)
        if (parsed === undefined) return new Wire.UnknownCard({ cardId })
        if (parsed.runId === info.runId) {
          // A card of this process: it must be this item's, then the inbox's race decides.
          const row = yield* store.card(cardId)
          if (row === undefined || row.itemId !== itemId) return new Wire.UnknownCard({ cardId })
          const result = yield* supervisor.inbox.answer(parsed.cardId, request.payload.decision)
          switch (result._tag) {
            case "Settled":
              return new Wire.Settled({ outcome: result.settlement.outcome })
            case "AlreadySettled":
              return new Wire.AlreadySettled({ outcome: result.settlement.outcome })
            case "UnknownCard":
              return new Wire.UnknownCard({ cardId })
          }
        }
        // A card of another incarnation: nothing is written anywhere.
        const row = yield* store.card(cardId)
        if (row === undefined || row.itemId !== itemId || row.outcome === null) return new Wire.UnknownCard({ cardId })
        return new Wire.AlreadySettled({ outcome: row.outcome })
      })
  })
})
