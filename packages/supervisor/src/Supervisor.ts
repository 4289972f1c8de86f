/**
 * The Supervisor, the library platform teams embed.
 *
 * `make` composes the engine's parts, each an internal module whose comment says which fibers it
 * owns and what closing its scope settles: the approvals engine (cards), `SupervisorEvents` (the
 * event PubSub and its metrics), `Admission` (the FIFO semaphore, adaptive or not), `Budget` (the
 * run's and each item's token and turn-time budgets), `SlotPool` (one app-server per slot, its
 * restarts, and the shutdown that refuses open cards while the children can still hear it),
 * `ItemWorktree` (a work item's git worktree) and `WorkItemLifecycle` (a work item from admission
 * to its result, its thread in its own thread scope: see ThreadRunner).
 *
 * Scopes: the supervisor's scope (its layer's) owns the approvals engine, the card metrics' observer
 * of its events, the admission controller, the run budget's questions, and the slots with their connections; closing
 * it runs the shutdown first, then stops the slots and their children, then refuses what is still
 * open. Work items run in the caller's fiber (`run`) or a fiber in the caller's scope (`start`).
 */
import { Approvals as ApprovalsNs } from "@warden/approvals"
import type { ApprovalEvent, Card, Approvals as ApprovalsTypes } from "@warden/approvals"
import type { Decision } from "@warden/protocol"
import type { Transport as TransportNs } from "@warden/transport"
import type { ConnectionEnded as ConnectionEndedNs } from "@warden/transport"
import { Context, Effect, Layer, Option } from "effect"
import type { Duration, Exit, Queue, Scope, Stream } from "effect"
import * as Config from "./Config.js"
import type { ConfigError } from "./Config.js"
import type { RequestError, WorkItemFailed } from "./Errors.js"
import * as Admission from "./internal/Admission.js"
import type * as AppServerConnection from "./internal/AppServerConnection.js"
import * as Budget from "./internal/Budget.js"
import * as ItemWorktree from "./internal/ItemWorktree.js"
import * as SlotPool from "./internal/SlotPool.js"
import type { NoActiveTurn } from "./internal/StartedItem.js"
import * as SupervisorEvents from "./internal/SupervisorEvents.js"
import * as WorkItemLifecycle from "./internal/WorkItemLifecycle.js"
import { Telemetry } from "./Telemetry.js"
import type { WorkEvent, WorkItem, WorkResult } from "./WorkItem.js"

/**
 * How a slot restarts its app-server after the connection ended, and what happens to its work items.
 *
 * Restarts back off from `backoff`, doubling, at most `maxAttempts` consecutive times; the work
 * items that were running on it `resume` their threads, or `fail` with `connection-lost`.
 */
export interface RestartConfig {
  /** What happens to work items whose app-server died: resume their threads (default), or fail them. */
  readonly policy?: "resume" | "fail"
  /** Consecutive restarts before a slot gives up (default 3; 0 = never restart). */
  readonly maxAttempts?: number
  /** First backoff; doubles each consecutive attempt (default 1 second). */
  readonly backoff?: Duration.DurationInput
  /** A connection that stayed up this long resets the consecutive count (default 60 seconds). */
  readonly stableAfter?: Duration.DurationInput
}

/**
 * The supervisor's configuration; every field is optional (`{}` runs one app-server, four work
 * items at a time, 15-minute card deadlines, no rules, no handler). Decoded once by {@link make}
 * (`ConfigError` on a bad value); durations are what `Duration.decode` reads (`"5 minutes"`).
 */
export interface SupervisorConfig {
  /**
   * The app-server connection: `clientInfo` and `capabilities` sent in `initialize`, the deadline
   * of our requests (`requestTimeout`, default 2 minutes; `requestTimeouts` by method), and the
   * retries of `-32001` overload answers (`overloadRetries`, default 5; `overloadBackoff`, 100 ms).
   */
  readonly connection?: AppServerConnection.ConnectionConfig
  /** How cards are decided: rules, handler, deadlines, safety limits (see `Approvals.ApprovalsConfig`). */
  readonly approvals?: ApprovalsTypes.ApprovalsConfig
  /** Stall watchdog (default 10 minutes). */
  readonly stallTimeout?: Duration.DurationInput
  /** turn/interrupt deadline before the connection is recycled (default 30 seconds). */
  readonly interruptTimeout?: Duration.DurationInput
  /** Running work items at most; the rest wait in FIFO order (default 4). */
  readonly concurrency?: number
  /**
   * Adaptive admission (off by default): when codex reports pressure (a `-32001` overload answer, a
   * rate limit reached in `account/rateLimits/updated`, a turn error saying rate limit, overload or
   * HTTP 429/503), the number of running items allowed halves (at most once per `cooldown`, default
   * 5 seconds; never below 1) and then grows by one after each `recoverAfter` (default 30 seconds)
   * without pressure, up to `concurrency`. Running items are never stopped. Each move is an
   * `AdmissionChanged` event.
   */
  readonly admission?: {
    readonly adaptive?: boolean
    readonly cooldown?: Duration.DurationInput
    readonly recoverAfter?: Duration.DurationInput
  }
  /** App-server processes; threads spread across them and stay on theirs (default 1). */
  readonly pool?: number
  /** Restarts of a dead app-server and the fate of its work items. */
  readonly restart?: RestartConfig
  /**
   * The run's token budget: when the work items' tokens together reach `maxTokens`, no further item
   * is admitted while Warden asks, as a card of its own, whether to continue for another
   * `maxTokens`; anything but yes admits no further item (those waiting fail `budget-exhausted`;
   * running ones go on).
   */
  readonly runBudget?: { readonly maxTokens: number }
  /**
   * This run's name in the branches of work items with a `worktree` (`warden/<runId>/<item id>`):
   * letters, digits, `.`, `_`, `-`, at most 64 (default: a new run id, `RunId.make`, for every
   * supervisor; the CLI passes its ledger run's id, a cluster runner its own run id).
   */
  readonly runId?: string
}

/**
 * What the supervisor tells subscribers, about app-servers and work items.
 *
 * Each slot's app-server coming up, going away, failing to start, restarting or giving up; every
 * work item's events (`Work`); and every item's end (`ItemFinished`, with its exit). Messages and
 * stderr tails are masked.
 */
export type SupervisorEvent =
  /** A slot's app-server answered `initialize`; `connection` is unique to this connection (it grows across restarts). */
  | {
      readonly _tag: "ConnectionReady"
      readonly slot: number
      readonly connection: number
      readonly init: AppServerConnection.InitializeResult
    }
  /** A ready connection ended (`reason`, a message, the stderr tail); its cards were settled connection-lost. */
  | {
      readonly _tag: "ConnectionLost"
      readonly slot: number
      readonly connection: number
      readonly reason: ConnectionEndedNs.EndReason
      readonly message: string
      readonly stderrTail: string
    }
  /**
   * A slot's app-server could not be brought up: the child could not be spawned, or it ended (or
   * failed) before the `initialize` handshake completed. `reason` is the connection's end reason
   * when it ended; `stderrTail` what it wrote to stderr (empty when nothing could be read).
   */
  | {
      readonly _tag: "ConnectionFailed"
      readonly slot: number
      readonly reason: ConnectionEndedNs.EndReason | undefined
      readonly message: string
      readonly stderrTail: string
    }
  /** The slot starts its app-server again after `delayMs` (`attempt`: consecutive failures so far). */
  | { readonly _tag: "ConnectionRestarting"; readonly slot: number; readonly attempt: number; readonly delayMs: number }
  /** More than `restart.maxAttempts` consecutive failures: the slot is down, its waiting work items fail. */
  | { readonly _tag: "ConnectionGaveUp"; readonly slot: number; readonly detail: string }
  /**
   * Adaptive admission moved: at most `limit` of `max` (`concurrency`) work items run now; `reason`
   * is the pressure codex reported, or `recovered` after a quiet period.
   */
  | { readonly _tag: "AdmissionChanged"; readonly limit: number; readonly max: number; readonly reason: string }
  /** An event of a work item. */
  | { readonly _tag: "Work"; readonly event: WorkEvent }
  /** A work item ended: its result, or how it failed (or was interrupted). */
  | {
      readonly _tag: "ItemFinished"
      readonly item: string | number | undefined
      readonly exit: Exit.Exit<WorkResult, WorkItemFailed>
    }

/**
 * `steer` or `interrupt` found no running turn.
 *
 * The thread does not exist yet, or no turn of the item runs right now (between turns, or after
 * the item ended).
 */
export { NoActiveTurn } from "./internal/StartedItem.js"

/**
 * A work item started with `start`, living in the caller's scope (closing it stops the item).
 *
 * Its thread id, events, steering, interrupting, its result, and `stop`.
 */
export interface WorkHandle {
  /** Resolves once the thread exists (started or resumed); fails with the item's `WorkItemFailed` if it ends before. */
  readonly threadId: Effect.Effect<string, WorkItemFailed>
  /**
   * This item's events in order, from its first; ends when the item ends. One consumer. Until it
   * is first read only the item's latest 500 events are kept: a reader that starts later begins
   * with those (`subscribe` and `events` of the supervisor see every event as it happens).
   */
  readonly events: Stream.Stream<WorkEvent>
  /** Add input to the running turn (`turn/steer`). */
  readonly steer: (text: string) => Effect.Effect<void, RequestError | NoActiveTurn>
  /** turn/interrupt with a deadline; the turn then completes as interrupted. */
  readonly interrupt: Effect.Effect<void, NoActiveTurn>
  /** Wait for the item's result; fails with its `WorkItemFailed` (interrupted if it was stopped). */
  readonly await: Effect.Effect<WorkResult, WorkItemFailed>
  /** Stop the work item: interrupt its turn best-effort, refuse its open cards, unregister it. */
  readonly stop: Effect.Effect<void>
}

/**
 * The running supervisor, as the `Supervisor` service provides it.
 *
 * Run or start work items, answer cards through the inbox, and subscribe to supervisor and
 * approval events.
 */
export interface SupervisorShape {
  /**
   * Run a work item to its result, in the caller's fiber, once admitted (at most `concurrency` run
   * at a time; the rest wait FIFO). Fails with `WorkItemFailed`: `start-failed`, `resume-failed`,
   * `turn-failed-to-start`, `stalled`, `connection-lost`. Interrupting it stops the item.
   */
  readonly run: (item: WorkItem) => Effect.Effect<WorkResult, WorkItemFailed>
  /** Start a work item in a fiber of the caller's scope and return its handle at once. */
  readonly start: (item: WorkItem) => Effect.Effect<WorkHandle, never, Scope.Scope>
  /** The open cards: a stream of their changes, a snapshot, and `answer` (as a person). */
  readonly inbox: {
    readonly updates: Stream.Stream<ApprovalsTypes.InboxUpdate>
    readonly open: Effect.Effect<ReadonlyArray<Card.CardView>>
    readonly answer: (cardId: Card.CardId, decision: Decision.Decision) => Effect.Effect<ApprovalsTypes.AnswerResult>
    /** Answer every open card of a group (`CardGroup.groupOf`) at once, each written once (see `Approvals.answerGroup`). */
    readonly answerGroup: (group: string, decision: Decision.Decision) => Effect.Effect<ApprovalsTypes.GroupAnswer>
  }
  /** Supervisor events (connections, work, finished items) from the moment of subscription. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<SupervisorEvent>, never, Scope.Scope>
  /**
   * Call `observer` with every supervisor event in the synchronous step that publishes it (no
   * queue, no fiber woken per event: a thread's streaming notifications are most of them), until
   * the caller's scope closes. It runs wherever the event is published, the connection's read
   * loop included: keep it short, synchronous, and never throwing (a throw is logged, and the
   * others are called all the same). The ledger records this way.
   */
  readonly observe: (observer: (event: SupervisorEvent) => void) => Effect.Effect<void, never, Scope.Scope>
  /** Supervisor events from the moment the stream starts. */
  readonly events: Stream.Stream<SupervisorEvent>
  /** Approval events (card opened/settled/late) from the moment of subscription. */
  readonly subscribeApprovals: Effect.Effect<Queue.Dequeue<ApprovalEvent.ApprovalEvent>, never, Scope.Scope>
  /** The supervisor's approvals engine (provide it as `Approvals.Approvals` for `Audit.jsonlSink`). */
  readonly approvals: ApprovalsTypes.ApprovalsShape
  /** The first ready connection's `initialize` result (waits for it). */
  readonly ready: Effect.Effect<AppServerConnection.InitializeResult, WorkItemFailed>
}

/** The `Supervisor` service tag, provided by `layer` (or `layerWithApprovals`). */
export class Supervisor extends Context.Tag("@warden/supervisor/Supervisor")<Supervisor, SupervisorShape>() {}

/**
 * The supervisor's parts, composed in the caller's scope, over a resolved configuration and the
 * `Approvals` service of the context. The order is the order of the finalizers, backwards: the
 * approvals engine (the context's) closes after everything here; the slot pool, made last, runs
 * its shutdown first.
 */
const compose = (
  config: Config.ResolvedConfig
): Effect.Effect<SupervisorShape, never, Scope.Scope | TransportNs.Transport | ApprovalsNs.Approvals> =>
  Effect.gen(function* () {
    const approvals = yield* ApprovalsNs.Approvals
    // Telemetry (`Telemetry.Telemetry` in the context, e.g. from Observability.layer): metrics, request spans, card spans under their turns.
    const telemetry = Option.getOrUndefined(yield* Effect.serviceOption(Telemetry))
    const events = yield* SupervisorEvents.make(approvals, telemetry !== undefined)
    const admission = yield* Admission.make({ max: config.concurrency, ...config.admission }, (change) =>
      events.publish({ _tag: "AdmissionChanged", ...change })
    )
    const budgets = yield* Budget.make(approvals, {
      runBudget: config.runBudget,
      interruptTimeout: config.interruptTimeout
    })
    const slots = yield* SlotPool.make({
      approvals,
      config,
      pressure: admission.pressure,
      telemetry,
      publish: events.publish
    })
    const items = WorkItemLifecycle.make({
      admission,
      budgets,
      worktrees: ItemWorktree.make(config.runId),
      slots,
      publish: events.publish,
      runnerConfig: {
        stallTimeout: config.stallTimeout,
        interruptTimeout: config.interruptTimeout,
        telemetry: telemetry !== undefined
      },
      restartPolicy: config.restart.policy
    })
    return {
      run: items.run,
      start: items.start,
      inbox: {
        updates: approvals.inbox,
        open: approvals.openCards,
        answer: approvals.answer,
        answerGroup: approvals.answerGroup
      },
      subscribe: events.subscribe,
      observe: events.observe,
      events: events.stream,
      subscribeApprovals: approvals.subscribe,
      approvals,
      ready: slots.ready
    }
  })

/**
 * The supervisor, in the caller's scope. It runs an approvals engine of its own, built from
 * `config.approvals` (to provide one, see {@link makeWithApprovals}). The configuration is decoded
 * first, once: a bad value (a duration `Duration.decode` rejects, a count below 1, a misspelt key,
 * bad rules) fails with a `ConfigError` naming the fields, before any app-server is started.
 *
 * Then it starts `pool` slots, each connecting through the `Transport` in the background (`make`
 * does not wait for them: `ready` does), and returns. Closing the scope refuses the cards still
 * open (outcome `shutdown`) while the children can hear it, then stops every child.
 *
 * @example
 * ```ts
 * import { CodexCommand, Supervisor } from "@warden/supervisor"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const supervisor = yield* Supervisor.make({ stallTimeout: "10 minutes", restart: { policy: "resume" } })
 *   const handle = yield* supervisor.start({ prompt: "fix the failing test", cwd: "/path/to/repo" })
 *   yield* Effect.log(`thread ${yield* handle.threadId}`)
 *   return yield* handle.await // WorkResult, or fails with WorkItemFailed
 * }).pipe(Effect.scoped, Effect.provide(CodexCommand.transportLayer({ command: "codex" })))
 * ```
 */
export const make = (
  input: SupervisorConfig = {}
): Effect.Effect<SupervisorShape, ConfigError, Scope.Scope | TransportNs.Transport> =>
  Effect.flatMap(Config.resolve(input), (config) =>
    // The default engine, made in the same scope before the parts: it closes after them.
    Effect.provideServiceEffect(compose(config), ApprovalsNs.Approvals, ApprovalsNs.make(config.approvals))
  )

/**
 * The supervisor, in the caller's scope, over the `Approvals` service of its context.
 *
 * The engine is yours (an `Approvals.layer`, shared with what else needs it: `Audit.jsonlSink`,
 * an inbox, a second supervisor) instead of one of its own.
 *
 * The cards are configured on that service, so a configuration with `approvals` fails with a
 * `ConfigError` (it would otherwise be ignored). Otherwise as {@link make}: closing the scope
 * refuses this supervisor's open cards (outcome `shutdown`) while its children can hear it; the
 * `Approvals` service, built before the supervisor, is released after it.
 *
 * @example
 * ```ts
 * import { Approvals } from "@warden/approvals"
 * import { CodexCommand, Supervisor } from "@warden/supervisor"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const supervisor = yield* Supervisor.makeWithApprovals({ concurrency: 2 })
 *   return yield* supervisor.run({ prompt: "fix the failing test", cwd: "/path/to/repo" })
 * }).pipe(
 *   Effect.scoped,
 *   Effect.provide(Approvals.layer({ deadlines: { default: "2 minutes" } })),
 *   Effect.provide(CodexCommand.transportLayer({ command: "codex" }))
 * )
 * ```
 */
export const makeWithApprovals = (
  input: SupervisorConfig = {}
): Effect.Effect<SupervisorShape, ConfigError, Scope.Scope | TransportNs.Transport | ApprovalsNs.Approvals> =>
  Effect.suspend(() =>
    (input as SupervisorConfig | null | undefined)?.approvals !== undefined
      ? Effect.fail(new Config.ConfigError({ issues: [approvalsFromContext] }))
      : Effect.flatMap(Config.resolve(input), compose)
  )

const approvalsFromContext =
  "approvals: this supervisor uses the Approvals service of its context; configure the cards there (Approvals.layer), not here"

/**
 * The supervisor (`make`) as a scoped layer providing `Supervisor`, over a `Transport`.
 *
 * The `Transport` is `CodexCommand.transportLayer` for the real child, `FakeAppServer` or
 * `MemoryTransport` in tests.
 * Building it fails with a `ConfigError` before anything starts; releasing it refuses the cards
 * still open (outcome `shutdown`), then stops every child.
 *
 * @example
 * ```ts
 * import { Decision } from "@warden/protocol"
 * import { CodexCommand, Supervisor } from "@warden/supervisor"
 * import { Console, Effect, Layer, Stream } from "effect"
 *
 * const WardenLive = Supervisor.layer({
 *   approvals: {
 *     handler: (card) => Effect.sync(() => (card.summary.kind === "command" && card.summary.argv?.[0] === "echo" ? Decision.Accept : undefined)),
 *     deadlines: { default: "1 minute", perMethod: { "mcpServer/elicitation/request": "30 seconds" } }
 *   },
 *   concurrency: 4,
 *   restart: { policy: "resume", maxAttempts: 3, backoff: "1 second" }
 * }).pipe(Layer.provide(CodexCommand.transportLayer({ command: "codex" })))
 *
 * const program = Effect.gen(function*() {
 *   const supervisor = yield* Supervisor.Supervisor
 *   yield* supervisor.events.pipe(Stream.runForEach((e) => Console.log(e._tag)), Effect.forkScoped)
 *   const result = yield* supervisor.run({ prompt: "say hello", cwd: "/path/to/repo" })
 *   yield* Console.log(result.status, result.finalMessage)
 * })
 *
 * Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(WardenLive)))
 * ```
 */
export const layer = (config: SupervisorConfig = {}): Layer.Layer<Supervisor, ConfigError, TransportNs.Transport> =>
  Layer.scoped(Supervisor, make(config))

/**
 * The supervisor ({@link makeWithApprovals}) as a scoped layer providing `Supervisor`, over a
 * `Transport` and the `Approvals` service.
 *
 * The layer to compose when the approvals engine is yours (shared with `Audit.jsonlSink`, an
 * inbox, or replaced in a test). `layer(config)` is this layer with an engine of its own, built
 * from `config.approvals`; here `config` has no `approvals` (a `ConfigError` otherwise). Provide
 * the `Approvals` layer with `Layer.provideMerge` to keep it in the output: it is built before the
 * supervisor and released after it, so the supervisor's shutdown still refuses its open cards
 * while the children can hear it.
 *
 * @example
 * ```ts
 * import { Approvals, Audit } from "@warden/approvals"
 * import { CodexCommand, Supervisor } from "@warden/supervisor"
 * import { Effect, Layer } from "effect"
 *
 * const WardenLive = Supervisor.layerWithApprovals({ concurrency: 4 }).pipe(
 *   Layer.provideMerge(Approvals.layer({ rules: { rules: [{ id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } }] } })),
 *   Layer.provide(CodexCommand.transportLayer({ command: "codex" }))
 * )
 *
 * const program = Effect.gen(function*() {
 *   yield* Audit.jsonlSink("audit.jsonl") // the supervisor's cards: the same Approvals service
 *   const supervisor = yield* Supervisor.Supervisor
 *   return yield* supervisor.run({ prompt: "say hello", cwd: "/path/to/repo" })
 * })
 *
 * Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(WardenLive)))
 * ```
 */
export const layerWithApprovals = (
  config: SupervisorConfig = {}
): Layer.Layer<Supervisor, ConfigError, TransportNs.Transport | ApprovalsNs.Approvals> =>
  Layer.scoped(Supervisor, makeWithApprovals(config))
