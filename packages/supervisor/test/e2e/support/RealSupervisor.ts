/**
 * A Supervisor over the REAL pinned codex app-server (ChildProcessTransport) against a
 * ScriptedModel, in its own scope: `withRealSupervisor` runs a test body, closes the scope, then
 * asserts that no process the test started (codex, the commands and MCP servers it ran) remains.
 *
 * Everything is real time (`it.live` / `it.scopedLive`); every wait has a short deadline whose
 * failure message says what was awaited and what was seen.
 */
import type { ApprovalEvent, Card } from "@warden/approvals"
import { McpServer, ProcessTree, RealCodex, ScriptedModel } from "@warden/testkit"
import { ChildProcessTransport } from "@warden/transport"
import { assert } from "@effect/vitest"
import { Duration, Effect, Exit, ExecutionStrategy, Option, Queue, Scope, Stream, SubscriptionRef } from "effect"
import { Supervisor } from "../../../src/index.js"
import type { WorkItem } from "../../../src/index.js"

export interface Log<A> {
  readonly all: Effect.Effect<ReadonlyArray<A>>
  /** The first entry (from the very start) matching `predicate`, waiting for it if needed. */
  readonly first: <B extends A>(
    what: string,
    predicate: (a: A) => a is B,
    timeout?: Duration.DurationInput
  ) => Effect.Effect<B, Error>
}

const makeLog = <A>(queue: Queue.Dequeue<A>, describe: (a: A) => string) =>
  Effect.gen(function* () {
    const ref = yield* SubscriptionRef.make<ReadonlyArray<A>>([])
    yield* Effect.forever(
      Effect.flatMap(Queue.take(queue), (a) => SubscriptionRef.update(ref, (all) => [...all, a]))
    ).pipe(Effect.interruptible, Effect.forkScoped)
    const log: Log<A> = {
      all: SubscriptionRef.get(ref),
      first: (what, predicate, timeout = "10 seconds") =>
        ref.changes.pipe(
          Stream.filterMap((all) => Option.fromNullable(all.find(predicate))),
          Stream.take(1),
          Stream.runHead,
          Effect.flatten,
          Effect.orDieWith(() => new Error(`the log ended before ${what}`)),
          Effect.timeoutFail({
            duration: timeout,
            onTimeout: () =>
              new Error(
                `timed out after ${Duration.format(Duration.decode(timeout))} waiting for ${what}; seen: ${Effect.runSync(
                  SubscriptionRef.get(ref)
                )
                  .slice(-12)
                  .map(describe)
                  .join(" | ")}`
              )
          })
        )
    }
    return log
  })

const describeApproval = (e: ApprovalEvent.ApprovalEvent): string =>
  e._tag === "CardOpened"
    ? `opened ${e.card.id} ${e.card.title}`
    : e._tag === "CardSettled"
      ? `settled ${e.settlement.card.id} ${e.settlement.outcome} (${e.settlement.source._tag})`
      : `late ${e.card.id}`

const describeEvent = (e: Supervisor.SupervisorEvent): string =>
  e._tag === "Work"
    ? `${e.event._tag}${e.event._tag === "Notification" ? ` ${e.event.method}` : ""}`
    : e._tag === "ItemFinished"
      ? `ItemFinished ${String(e.item)} ${e.exit._tag}`
      : e._tag

export interface Real {
  readonly model: ScriptedModel.Service
  readonly launch: RealCodex.Launch
  readonly supervisor: Supervisor.SupervisorShape
  readonly approvals: Log<ApprovalEvent.ApprovalEvent>
  readonly events: Log<Supervisor.SupervisorEvent>
  /** The running codex app-server of this test (found in /proc by its model's URL). */
  readonly codexPids: () => Array<number>
  /** Close the supervisor's scope now (as an embedder shutting down), before the body ends. */
  readonly stop: Effect.Effect<void>
  /** The first card opened for work item `item`. */
  readonly cardOf: (item: string | number) => Effect.Effect<Card.CardView, Error>
  /** How the card with this id settled (waits for it). */
  readonly settlementOf: (cardId: string) => Effect.Effect<Card.Settlement, Error>
}

export interface Options {
  readonly name: string
  readonly script: ScriptedModel.ScriptInput
  readonly codex?: Omit<RealCodex.Options, "baseUrl">
  readonly supervisor?: Supervisor.SupervisorConfig
}

/** A work item on the test's workspace with `[lane:NAME]` in its prompt (the ScriptedModel routes by it). */
export const item = (
  real: Real,
  id: string,
  lane: string,
  extra: Partial<WorkItem.WorkItem> = {}
): WorkItem.WorkItem => ({
  id,
  prompt: `${ScriptedModel.laneMarker(lane)} ${id}`,
  cwd: real.launch.workspace,
  sandbox: "workspace-write",
  approvalPolicy: "on-request",
  ...extra
})

/** Every MCP server registered for these tests. */
export const mcpName = "tk"

export const withRealSupervisor = <A, E>(
  options: Options,
  body: (real: Real) => Effect.Effect<A, E, Scope.Scope>
): Effect.Effect<A, E | Error, Scope.Scope> =>
  Effect.gen(function* () {
    const before = new Set(ProcessTree.liveDescendants(process.pid))
    const t0 = Date.now()
    const outer = yield* Effect.scope
    const scope = yield* Scope.fork(outer, ExecutionStrategy.sequential)
    const model = yield* ScriptedModel.make(options.script).pipe(Scope.extend(scope))
    const launch = yield* RealCodex.make({ ...options.codex, baseUrl: model.baseUrl }).pipe(Scope.extend(scope))
    const transport = ChildProcessTransport.layer({
      command: launch.command,
      args: launch.args,
      env: launch.env,
      cwd: launch.cwd
    })
    const supervisor = yield* Supervisor.make(options.supervisor).pipe(Effect.provide(transport), Scope.extend(scope))
    // In the outer scope: what the supervisor's own closing settles is recorded too.
    const approvals = yield* Effect.flatMap(supervisor.subscribeApprovals, (q) => makeLog(q, describeApproval))
    const events = yield* Effect.flatMap(supervisor.subscribe, (q) => makeLog(q, describeEvent))
    const real: Real = {
      model,
      launch,
      supervisor,
      approvals,
      events,
      // The app-server processes the transport started: a process of codex's own whose command
      // line looks the same (seen under load) is one of their descendants, not another child.
      codexPids: () => {
        const all = ProcessTree.find(process.pid, launch.command, "app-server", model.baseUrl)
        return all.filter((pid) => !all.includes(ProcessTree.parentOf(pid) ?? -1))
      },
      stop: Scope.close(scope, Exit.void),
      cardOf: (id) =>
        Effect.map(
          approvals.first(
            `a card for work item ${String(id)}`,
            (e): e is Extract<ApprovalEvent.ApprovalEvent, { _tag: "CardOpened" }> =>
              e._tag === "CardOpened" && e.card.workItem === id
          ),
          (e) => e.card
        ),
      settlementOf: (cardId) =>
        Effect.map(
          approvals.first(
            `card ${cardId} to settle`,
            (e): e is Extract<ApprovalEvent.ApprovalEvent, { _tag: "CardSettled" }> =>
              e._tag === "CardSettled" && e.settlement.card.id === cardId
          ),
          (e) => e.settlement
        )
    }
    let tree: Array<number> = []
    const result = yield* body(real).pipe(
      Scope.extend(scope),
      Effect.onExit((exit) =>
        Effect.sync(() => {
          tree = ProcessTree.liveDescendants(process.pid).filter((p) => !before.has(p))
        }).pipe(Effect.zipRight(Scope.close(scope, exit)))
      )
    )
    const closedAt = Date.now()
    const left = ProcessTree.liveDescendants(process.pid).filter((p) => !before.has(p))
    assert.deepStrictEqual(
      left.map((p) => `${p} ${ProcessTree.commandLine(p).slice(0, 120)}`),
      [],
      "no process started by the test remains"
    )
    assert.deepStrictEqual(tree.filter(ProcessTree.isAlive), [], "the processes seen before the close are gone")
    // eslint-disable-next-line no-console
    console.info(`[e2e timing] ${options.name}: ${closedAt - t0} ms (${tree.length} processes at the end of the body)`)
    return result
  })

/** The testkit MCP server, registered as `tk`. */
export const mcpRegistration = (logFile?: string) =>
  McpServer.registration({ name: mcpName, ...(logFile ? { logFile } : {}) })
