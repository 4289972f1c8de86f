/**
 * The Supervisor, the library platform teams embed.
 *
 * Scopes: the supervisor's layer scope owns the approvals engine, one slot per app-server
 * process (each slot restarts its child with backoff, bounded), and the shutdown finalizer that
 * refuses open cards while the child can still hear it. Work items run in the caller's fiber
 * (`run`) or a fiber in the caller's scope (`start`), behind a FIFO admission semaphore; each
 * work item's thread runs in its own thread scope (see ThreadRunner).
 */
import { Approvals as ApprovalsNs, Card as CardNs, SecretMask } from "@warden/approvals"
import type { ApprovalEvent, Card, Approvals as ApprovalsTypes } from "@warden/approvals"
import type { Decision } from "@warden/protocol"
import { Transport as TransportNs } from "@warden/transport"
import type { ConnectionEnded as ConnectionEndedNs } from "@warden/transport"
import {
  Cause,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  FiberId,
  FiberRef,
  Layer,
  Metric,
  Option,
  PubSub,
  Queue,
  Stream,
  SubscriptionRef,
  Tracer,
  FiberSet
} from "effect"
import { Scope } from "effect"
import * as AppServerConnection from "./internal/AppServerConnection.js"
import * as Config from "./Config.js"
import type { ConfigError } from "./Config.js"
import type { RequestError } from "./Errors.js"
import { WorkItemFailed } from "./Errors.js"
import * as Admission from "./internal/Admission.js"
import * as Budget from "./internal/Budget.js"
import * as GitWorktree from "./internal/GitWorktree.js"
import * as StartedItem from "./internal/StartedItem.js"
import * as ThreadRunner from "./internal/ThreadRunner.js"
import { Attributes, labelsOf, Metrics, Telemetry } from "./Telemetry.js"
import type { TurnResult, WorkEvent, WorkItem, WorkResult } from "./WorkItem.js"
import type { WorktreeSummary } from "./Worktree.js"

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
  | { readonly _tag: "ConnectionReady"; readonly slot: number; readonly connection: number; readonly init: AppServerConnection.InitializeResult }
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
  | { readonly _tag: "ItemFinished"; readonly item: string | number | undefined; readonly exit: Exit.Exit<WorkResult, WorkItemFailed> }

/**
 * `steer` or `interrupt` found no running turn.
 *
 * The thread does not exist yet, or no turn of the item runs right now (between turns, or after
 * the item ended).
 */
export class NoActiveTurn extends Error {
  readonly _tag = "NoActiveTurn"
  constructor() {
    super("the work item has no running turn to steer or interrupt")
  }
}

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
  /** Supervisor events from the moment the stream starts. */
  readonly events: Stream.Stream<SupervisorEvent>
  /** Approval events (card opened/settled/late) from the moment of subscription. */
  readonly subscribeApprovals: Effect.Effect<Queue.Dequeue<ApprovalEvent.ApprovalEvent>, never, Scope.Scope>
  /** The supervisor's approvals engine (provide it as `Approvals.Approvals` for `Audit.jsonlSink`). */
  readonly approvals: ApprovalsTypes.ApprovalsShape
  /** The first ready connection's `initialize` result (waits for it). */
  readonly ready: Effect.Effect<AppServerConnection.InitializeResult, WorkItemFailed>
}

/** The `Supervisor` service tag, provided by `layer`. */
export class Supervisor extends Context.Tag("@warden/supervisor/Supervisor")<Supervisor, SupervisorShape>() {}

/** What a work item's set-up starts from, and the caller's context to put back when it ends. */
interface ItemStart {
  readonly given: WorkItem
  readonly session: ThreadRunner.Session
  readonly emitOuter: (event: WorkEvent) => void
  readonly scope: Scope.CloseableScope
  callerContext: Context.Context<never> | undefined
}

/** A running work item's state between its steps (Supervisor's `runWith`). */
interface ItemRun {
  readonly item: WorkItem
  readonly session: ThreadRunner.Session
  readonly emit: (event: WorkEvent) => void
  readonly exhausted: () => string | undefined
  readonly finish: Effect.Effect<WorktreeSummary | undefined>
  readonly slot: Slot
  readonly span: Tracer.Span | undefined
  readonly traced: boolean
  attempt: ThreadRunner.Attempt | undefined
  readonly turns: Array<TurnResult>
  remaining: ReadonlyArray<string>
  threadId: string | undefined
  resumes: number
  deadServer: number | undefined
}

/**
 * `start`'s handle. Its effects are made when asked for (getters: an idle item holds no effect
 * of its own), so a handle is a few fields; destructuring it works as for a plain object.
 */
class Handle implements WorkHandle {
  constructor(
    private readonly fiber: Fiber.RuntimeFiber<WorkResult, WorkItemFailed>,
    private readonly session: ThreadRunner.Session,
    private readonly itemEvents: StartedItem.ItemEvents,
    private readonly threadIdLatch: StartedItem.ThreadIdLatch,
    private readonly interruptTimeout: Duration.Duration
  ) {}
  get threadId() {
    return this.threadIdLatch.await
  }
  get events() {
    return this.itemEvents.stream
  }
  get steer() {
    return (text: string) =>
      Effect.flatMap(this.activeTurn, ({ server, threadId, turnId }) =>
        server.request("turn/steer", { threadId, expectedTurnId: turnId, input: [{ type: "text", text }] }).pipe(Effect.asVoid))
  }
  get interrupt() {
    return Effect.flatMap(this.activeTurn, ({ server, threadId, turnId }) => ThreadRunner.interruptTurn(server, threadId, turnId, this.interruptTimeout))
  }
  get await() {
    return Fiber.join(this.fiber)
  }
  get stop() {
    return Effect.asVoid(Fiber.interrupt(this.fiber))
  }
  private get activeTurn() {
    return Effect.suspend(() => {
      const { server, threadId, turnId } = this.session
      return server && threadId && turnId ? Effect.succeed({ server, threadId, turnId }) : Effect.fail(new NoActiveTurn())
    })
  }
}

type SlotState =
  | { readonly _tag: "Starting" }
  | { readonly _tag: "Ready"; readonly server: AppServerConnection.AppServer }
  | { readonly _tag: "Down"; readonly error: WorkItemFailed }

interface Slot {
  readonly index: number
  readonly state: SubscriptionRef.SubscriptionRef<SlotState>
  threads: number
  /** A work item leaves the slot (one effect per slot, every item's scope finalizer). */
  readonly leave: Effect.Effect<void>
}

/** An item without a budget is never exhausted (one function for all of them). */
const neverExhausted = (): string | undefined => undefined

/**
 * The supervisor, in the caller's scope. The configuration is decoded first, once: a bad value
 * (a duration `Duration.decode` rejects, a count below 1, a misspelt key, bad rules) fails with a
 * `ConfigError` naming the fields, before any app-server is started.
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
export const make = (input: SupervisorConfig = {}): Effect.Effect<SupervisorShape, ConfigError, Scope.Scope | TransportNs.Transport> =>
  Effect.gen(function*() {
    const config = yield* Config.resolve(input)
    const transport = yield* TransportNs.Transport
    const approvals = yield* ApprovalsNs.make(config.approvals)
    const events = yield* PubSub.unbounded<SupervisorEvent>()
    // Telemetry (`Telemetry.Telemetry` in the context, e.g. from Observability.layer): metrics, request spans, card spans under their turns.
    const telemetry = Option.getOrUndefined(yield* Effect.serviceOption(Telemetry))
    const instrument = telemetry === undefined ? undefined : instrumentEvent()
    const publish = (event: SupervisorEvent) => {
      events.unsafeOffer(event)
      instrument?.(event)
    }
    if (telemetry !== undefined) yield* countCards(approvals)
    const restart = config.restart
    const maxAttempts = restart.maxAttempts
    const backoff = restart.backoff
    const stableAfter = Duration.toMillis(restart.stableAfter)
    const runnerConfig: ThreadRunner.RunnerConfig = {
      stallTimeout: config.stallTimeout,
      interruptTimeout: config.interruptTimeout,
      telemetry: telemetry !== undefined
    }

    const admission = yield* Admission.make(
      { max: config.concurrency, ...config.admission },
      (change) => publish({ _tag: "AdmissionChanged", ...change })
    )

    // Budgets: Warden's own questions, and the run's token budget (see Budget).
    const asker = yield* Budget.asker(approvals)
    const forkInSupervisor = yield* FiberSet.makeRuntime<never>()
    const runMax = Option.getOrUndefined(config.runBudget)?.maxTokens
    let runAllowance = runMax ?? Infinity
    let runTotal = 0
    /** While a question about the run's budget is open: its answer (true: admit on). */
    let runQuestion: Deferred.Deferred<boolean> | undefined
    let runClosed = false
    const runBudgetExhausted = () =>
      new WorkItemFailed({
        reason: "budget-exhausted",
        detail: `the run reached its token budget (${runAllowance}) and continuing was not allowed: no further work item is admitted`,
        threadId: undefined
      })
    const askRunBudget = (where: { readonly threadId: string; readonly turnId: string | undefined }) => {
      if (runMax === undefined || runClosed || runQuestion !== undefined || runTotal < runAllowance) return
      const question = Deferred.unsafeMake<boolean>(FiberId.none)
      runQuestion = question
      forkInSupervisor(
        Effect.gen(function*() {
          const yes = yield* asker.ask({
            workItem: undefined,
            threadId: where.threadId,
            turnId: where.turnId,
            message: `the run reached ${runTotal} tokens (budget ${runAllowance}): continue for another ${runMax}?`
          })
          if (yes) runAllowance += runMax
          else runClosed = true
          runQuestion = undefined
          yield* Deferred.succeed(question, yes)
          if (yes) askRunBudget(where)
        })
      )
    }
    /** Admission's second gate: waits while the run's budget question is open; fails once it was refused. */
    const runGate = Effect.suspend(() => {
      if (runClosed) return Effect.fail(runBudgetExhausted())
      if (runQuestion === undefined) return Effect.void
      return Effect.flatMap(Deferred.await(runQuestion), (yes) => (yes ? Effect.void : Effect.fail(runBudgetExhausted())))
    })

    /**
     * The item's budget watch (when it has a budget) and its share of the run's tokens: the
     * emitter the item's runner uses, and what exhausted it (once a budget question was refused).
     */
    const withBudget = (item: WorkItem, session: ThreadRunner.Session, emit: (event: WorkEvent) => void) =>
      Effect.gen(function*() {
        const budget = item.budget
        const own = budget !== undefined && (budget.maxTokens !== undefined || budget.maxTurnTime !== undefined)
        if (!own && runMax === undefined) return { emit, exhausted: neverExhausted }
        let exhausted: string | undefined
        let events: Queue.Queue<WorkEvent> | undefined
        if (own) {
          const decoded = yield* Effect.try({
            try: (): Budget.ItemBudget => {
              const maxTokens = budget.maxTokens
              if (maxTokens !== undefined && !(Number.isSafeInteger(maxTokens) && maxTokens > 0)) throw new Error(`budget.maxTokens must be a positive integer, got ${String(maxTokens)}`)
              return { maxTokens, maxTurnTime: budget.maxTurnTime === undefined ? undefined : Duration.decode(budget.maxTurnTime) }
            },
            catch: (e) => new WorkItemFailed({ reason: "start-failed", detail: e instanceof Error ? e.message : String(e), threadId: item.threadId })
          })
          const queue = yield* Effect.acquireRelease(Queue.unbounded<WorkEvent>(), Queue.shutdown)
          events = queue
          yield* Budget.watch({
            item: item.id,
            label: `item ${String(item.id ?? "")}`.trim(),
            budget: decoded,
            events: queue,
            asker,
            exhaust: (detail) => {
              exhausted = detail
            },
            interrupt: Effect.suspend(() =>
              session.server && session.threadId && session.turnId
                ? ThreadRunner.interruptTurn(session.server, session.threadId, session.turnId, runnerConfig.interruptTimeout)
                : Effect.void
            )
          })
        }
        let counted = 0
        const wrapped = (event: WorkEvent) => {
          events?.unsafeOffer(event)
          if (runMax !== undefined && event._tag === "Notification" && event.method === "thread/tokenUsage/updated") {
            const total = Budget.totalTokensOf(event.params)
            if (total !== undefined && total > counted) {
              runTotal += total - counted
              counted = total
              askRunBudget({ threadId: event.threadId, turnId: event.turnId })
            }
          }
          emit(event)
        }
        return { emit: wrapped, exhausted: () => exhausted }
      })

    const slots: Array<Slot> = []
    for (let index = 0; index < config.pool; index++) {
      const slot: Slot = {
        index,
        state: yield* SubscriptionRef.make<SlotState>({ _tag: "Starting" }),
        threads: 0,
        leave: Effect.sync(() => {
          slot.threads--
        })
      }
      slots.push(slot)
    }

    // Set by the shutdown finalizer, before the slots' fibers are interrupted; a slot loop ends by
    // itself when it sees it (after a connection ended, before its back-off). An interruption that
    // reaches a slot fiber while it closes its connection's scope (waiting, uninterruptibly, for
    // the transport's stopper) is erased when that finalizer ends (Effect 3.22's `addFinalizer`
    // puts the fiber's FiberRefs back, `currentInterruptedCause` included): the slot would sleep
    // its back-off and restart the app-server while the supervisor's close waits for it, forever.
    // See docs/performance.md (the stall watchdog).
    let isStopping = false
    const stopped = () => isStopping

    const slotLoop = (slot: Slot) =>
      Effect.gen(function*() {
        let consecutive = 0
        let restarts = 0 // how many times this slot started its app-server again (the connection span's warden.restart)
        while (true) {
          if (stopped()) return
          let readyAt: number | undefined
          const outcome = yield* Effect.scoped(
            Effect.gen(function*() {
              const connection = yield* transport.connect.pipe(
                Effect.tapError((error) =>
                  Effect.sync(() =>
                    publish({
                      _tag: "ConnectionFailed",
                      slot: slot.index,
                      reason: { _tag: "SpawnFailed", detail: error.detail },
                      message: error.message,
                      stderrTail: ""
                    })
                  )
                )
              )
              const server = yield* AppServerConnection.make(
                connection,
                approvals,
                config.connection,
                admission.pressure,
                telemetry && { readLoopLag: telemetry.readLoopLag ?? true }
              ).pipe(
                Effect.tapError((error) =>
                  // The end is reported once stdout drained and the child exited, so its tail is whole.
                  (connection.isOpen() ? Effect.succeed(connection.endedNow()) : connection.ended.pipe(
                    Effect.timeoutOption("2 seconds"),
                    Effect.map((ended) => ended._tag === "Some" ? ended.value : connection.endedNow())
                  )).pipe(
                    Effect.map((raw) => {
                      const ended = raw && AppServerConnection.maskEnded(raw)
                      publish({
                        _tag: "ConnectionFailed",
                        slot: slot.index,
                        reason: ended?.reason,
                        message: ended && error._tag === "ConnectionLost" ? ended.message : SecretMask.maskText(error.message),
                        stderrTail: ended?.stderrTail ?? SecretMask.maskText(connection.stderrTail())
                      })
                    })
                  )
                )
              )
              readyAt = yield* Effect.clockWith((c) => c.currentTimeMillis)
              yield* SubscriptionRef.set(slot.state, { _tag: "Ready", server })
              publish({ _tag: "ConnectionReady", slot: slot.index, connection: server.id, init: server.init })
              const ended = yield* server.ended
              if (stopped()) return "the supervisor is stopping"
              yield* SubscriptionRef.set(slot.state, { _tag: "Starting" })
              publish({
                _tag: "ConnectionLost",
                slot: slot.index,
                connection: server.id,
                reason: ended.reason,
                message: ended.message,
                stderrTail: ended.stderrTail
              })
              return ended.message
            }).pipe(Effect.withSpan("warden.connection", { attributes: { "warden.slot": slot.index, "warden.restart": restarts }, captureStackTrace: false }))
          ).pipe(
            Effect.catchAll((error) => Effect.succeed(error.message)),
            // A defect while connecting counts as a failed attempt (restart with backoff, bounded),
            // never as the end of the slot; interruption (the supervisor stopping) still ends it.
            Effect.catchAllCause((cause) =>
              Cause.isInterruptedOnly(cause)
                ? Effect.failCause(cause)
                : Effect.as(Effect.logError("app-server connection failed with a defect", cause), `Warden failed while connecting: ${Cause.squash(cause)}`)
            )
          )
          if (stopped()) return
          const endedAt = yield* Effect.clockWith((c) => c.currentTimeMillis)
          // Only a connection that got through the handshake and then stayed up counts as stable.
          consecutive = readyAt !== undefined && endedAt - readyAt >= stableAfter ? 1 : consecutive + 1
          if (consecutive > maxAttempts) {
            const error = new WorkItemFailed({
              reason: "connection-lost",
              detail: `the app-server could not be kept running (${maxAttempts} restarts); last: ${outcome}`,
              threadId: undefined
            })
            yield* SubscriptionRef.set(slot.state, { _tag: "Down", error })
            publish({ _tag: "ConnectionGaveUp", slot: slot.index, detail: error.detail })
            return
          }
          const delay = Duration.times(backoff, 2 ** (consecutive - 1))
          publish({ _tag: "ConnectionRestarting", slot: slot.index, attempt: consecutive, delayMs: Duration.toMillis(delay) })
          yield* Effect.sleep(delay)
          restarts++
        }
      })

    for (const slot of slots) {
      yield* slotLoop(slot).pipe(
        // Supervised: a slot loop that dies anyway leaves the slot Down (waiting items fail with
        // the cause), never a slot that looks alive and serves nobody.
        Effect.onExit((exit) =>
          Exit.isFailure(exit) && !Exit.isInterrupted(exit)
            ? Effect.zipRight(
              Effect.logError("app-server slot crashed", exit.cause),
              SubscriptionRef.set(slot.state, {
                _tag: "Down",
                error: new WorkItemFailed({ reason: "connection-lost", detail: `the app-server slot failed: ${Cause.squash(exit.cause)}`, threadId: undefined })
              })
            )
            : Effect.void
        ),
        Effect.interruptible,
        Effect.forkScoped
      )
    }

    // Runs before the slots' scopes close: refuse open cards while the children can hear it.
    yield* Effect.addFinalizer(() =>
      Effect.zipRight(Effect.sync(() => {
        isStopping = true
      }), Effect.forEach(slots, (slot) =>
        Effect.map(SubscriptionRef.get(slot.state), (state) => {
          if (state._tag === "Ready") state.server.desk.closeWhere(() => true, { _tag: "Shutdown" })
        }), { discard: true }))
    )

    /** The slot's server once ready (skipping `notId`, a connection known dead); fails when the slot is down. */
    const serverOf = (slot: Slot, notId?: number) =>
      slot.state.changes.pipe(
        Stream.filter((s) => s._tag === "Down" || (s._tag === "Ready" && s.server.id !== notId && s.server.isOpen())),
        Stream.take(1),
        Stream.runHead,
        Effect.flatMap((state) => {
          if (state._tag === "Some" && state.value._tag === "Ready") return Effect.succeed(state.value.server)
          if (state._tag === "Some" && state.value._tag === "Down") return Effect.fail(state.value.error)
          return Effect.fail(new WorkItemFailed({ reason: "connection-lost", detail: "the supervisor is shutting down", threadId: undefined }))
        })
      )

    const pickSlot = Effect.gen(function*() {
      let best: Slot | undefined
      for (const slot of slots) {
        const state = yield* SubscriptionRef.get(slot.state)
        if (state._tag === "Down") continue
        if (!best || slot.threads < best.threads) best = slot
      }
      return best ?? slots[0]!
    })


    /** Map a runner failure to the work item's typed failure; `ready` says whether the thread existed. */
    const toWorkFailure = (error: unknown, item: WorkItem, session: ThreadRunner.Session): WorkItemFailed => {
      if (error instanceof WorkItemFailed) return error
      const e = error as { readonly _tag?: string; readonly message?: string }
      const threadId = session.threadId ?? item.threadId
      if (e._tag === "ConnectionLost") {
        return new WorkItemFailed({ reason: "connection-lost", detail: e.message ?? "connection lost", threadId, cause: error })
      }
      return new WorkItemFailed({
        reason: session.threadId !== undefined ? "turn-failed-to-start" : item.threadId !== undefined ? "resume-failed" : "start-failed",
        detail: e.message ?? String(error),
        threadId,
        cause: error
      })
    }

    const runId = config.runId
    let unnamedItems = 0

    /**
     * The item's worktree, when it asks for one: made now, finished once (committed, kept or
     * removed) by whichever comes first, the item's success (so its result carries the summary) or
     * the close of the item's scope (any failure, a stop). The item then runs in the worktree.
     */
    const withWorktree = (item: WorkItem, emit: (event: WorkEvent) => void) =>
      Effect.gen(function*() {
        if (item.worktree === undefined || item.worktree === false) {
          return { work: item, finish: Effect.succeed<WorktreeSummary | undefined>(undefined) }
        }
        const options = item.worktree === true ? {} : item.worktree
        const name = String(item.id ?? `item-${++unnamedItems}`)
        const made = yield* GitWorktree.create(item.cwd ?? process.cwd(), { run: runId, item: name }, options).pipe(
          Effect.mapError((e) => new WorkItemFailed({ reason: "worktree-failed", detail: SecretMask.maskText(e.message), threadId: item.threadId }))
        )
        emit({ _tag: "WorktreeReady", item: item.id, path: made.path, branch: made.branch, base: made.base, reused: made.reused })
        const finish = yield* Effect.cached(
          GitWorktree.finish(made, options, `warden: work item ${name} (run ${runId})`).pipe(
            Effect.tap((worktree) => Effect.sync(() => emit({ _tag: "WorktreeFinished", item: item.id, worktree })))
          )
        )
        yield* Effect.addFinalizer(() => finish)
        // Uninterruptible: a stop that came while git commits must not leave the memo interrupted
        // and the worktree unfinished (each git command is bounded, see GitWorktree).
        return {
          work: { ...item, cwd: made.cwd },
          finish: Effect.uninterruptible(Effect.map(finish, (summary): WorktreeSummary | undefined => summary))
        }
      })

    const newSession = (): ThreadRunner.Session => ({ server: undefined, threadId: undefined, turnId: undefined, usage: undefined })

    let running = 0
    const countRunning = (delta: number) => Effect.suspend(() => Metric.set(Metrics.workItemsRunning, running += delta))

    /**
     * The item's attempts, one after another, while the connection is lost under one and the
     * restart policy resumes on a new one; then its result. A loop of `flatMap`s: an idle item's
     * stack keeps one frame here and one for its attempt (see `runWith`).
     */
    const attempts = (run: ItemRun): Effect.Effect<WorkResult, WorkItemFailed> =>
      Effect.flatMap(attempt(run), (again) => (again ? attempts(run) : finishItem(run)))

    /**
     * One attempt at the item's thread: true when the connection was lost under it and the
     * restart policy resumes on a new one. Made when it runs (`suspend`): the frame above keeps
     * this, not the program.
     */
    const attempt = (run: ItemRun): Effect.Effect<boolean, WorkItemFailed> =>
      Effect.suspend(() =>
        Effect.flatMap(serverOf(run.slot, run.deadServer), (server) =>
          Effect.flatMap(ThreadRunner.openAttempt, (current) => {
            run.attempt = current
            const exited = (exit: Exit.Exit<void, unknown>) => afterAttempt(run, server.id, current, exit)
            return Effect.matchCauseEffect(
              Effect.suspend(() =>
                ThreadRunner.run(server, run.item, run.remaining, run.threadId, run.session, run.emit, runnerConfig, (turn) => {
                  run.turns.push(turn)
                  run.remaining = run.remaining.slice(1)
                }, current, run.traced)
              ),
              { onFailure: (cause) => exited(Exit.failCause(cause)), onSuccess: () => exited(Exit.void) }
            )
          })))

    /** An attempt ended: closed; true to resume on a new connection, or how the item fails. */
    const afterAttempt = (run: ItemRun, serverId: number, attempt: ThreadRunner.Attempt, exit: Exit.Exit<void, unknown>) =>
      Effect.gen(function*() {
        const { emit, item, session } = run
        run.attempt = undefined
        yield* ThreadRunner.closeAttempt(attempt, exit)
        yield* ThreadRunner.enterSpan(run.span)
        if (Exit.isSuccess(exit)) return false
        const failure = exit.cause._tag === "Fail" ? (exit.cause.error as { readonly _tag: string; readonly message: string }) : undefined
        run.threadId = session.threadId ?? run.threadId
        const threadId = run.threadId
        if (failure === undefined) {
          return yield* Effect.failCause(Cause.map(exit.cause, (e) => toWorkFailure(e, item, session)))
        }
        if (failure._tag !== "ConnectionLost") return yield* Effect.fail(toWorkFailure(failure, item, session))
        emit({ _tag: "ConnectionLost", item: item.id, threadId, detail: failure.message })
        if (telemetry !== undefined) yield* spanEvent("warden.connection_lost", { "warden.detail": failure.message })
        const lastTurn = run.turns[run.turns.length - 1]
        const unfinished = run.remaining.length > 0 && !(lastTurn && lastTurn.status !== "completed")
        if (restart.policy !== "resume" || !unfinished) return yield* Effect.fail(toWorkFailure(failure, item, session))
        run.deadServer = serverId
        run.resumes++
        if (threadId !== undefined) emit({ _tag: "Resumed", item: item.id, threadId, attempt: run.resumes })
        if (telemetry !== undefined) yield* spanEvent("warden.resume", { "warden.attempt": run.resumes, "warden.thread_id": threadId ?? "" })
        return true
      })

    /** The item's result once its turns ran (its budget checked, its worktree finished). */
    const finishItem = (run: ItemRun) =>
      Effect.gen(function*() {
        const { session, turns } = run
        const spent = run.exhausted()
        if (spent !== undefined) {
          return yield* Effect.fail(new WorkItemFailed({ reason: "budget-exhausted", detail: spent, threadId: session.threadId }))
        }
        const last = turns[turns.length - 1]
        if (!last || session.threadId === undefined) {
          return yield* Effect.fail(new WorkItemFailed({ reason: "start-failed", detail: "no turn ran", threadId: session.threadId }))
        }
        const worktree = yield* run.finish
        const result: WorkResult = {
          ...(worktree !== undefined ? { worktree } : {}),
          id: run.item.id,
          threadId: session.threadId,
          status: last.status,
          finalMessage: [...turns].reverse().find((t) => t.finalMessage !== undefined)?.finalMessage,
          items: turns.flatMap((t) => t.items),
          usage: session.usage,
          errors: turns.flatMap((t) => t.errors),
          turns,
          resumes: run.resumes
        }
        return result
      })

    /**
     * A work item, in the caller's fiber. Its item scope is made here and closed with the item's
     * exit however the item ends (the item itself is the only interruptible part); then the
     * fiber's current span is the caller's again, `ItemFinished` is published and `ended` told
     * (`start`'s handle).
     *
     * What the item holds is a finalizer of its scope, not a wrapper around its program: the
     * admission permit, the running count, its span, its worktree and budget, its slot's count,
     * and the thread's attempt in flight (ThreadRunner). Its program is `flatMap`s made when they
     * run, no generator: a work item idling in a turn is a fiber parked on one callback with a
     * stack of seven small frames (docs/performance.md, "idle thread").
     */
    const runWith = (
      given: WorkItem,
      session: ThreadRunner.Session,
      emitOuter: (event: WorkEvent) => void,
      ended?: (exit: Exit.Exit<WorkResult, WorkItemFailed>) => void
    ): Effect.Effect<WorkResult, WorkItemFailed> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Scope.make(), (scope) => {
          const itemStart: ItemStart = { given, session, emitOuter, scope, callerContext: undefined }
          const end = (exit: Exit.Exit<WorkResult, WorkItemFailed>) => endItem(itemStart, exit, ended)
          // Made when it runs (`suspend`): the frames kept while the item idles hold this, not the set-up's program.
          return Effect.matchCauseEffect(restore(Effect.suspend(() => Effect.flatMap(setUp(itemStart), attempts))), {
            onFailure: (cause) => end(Exit.failCause(cause)),
            onSuccess: (result) => end(Exit.succeed(result))
          })
        })
      )

    /** The item's set-up in its scope: admission, span, worktree, budget, slot; what its attempts share. */
    const setUp = (itemStart: ItemStart) =>
      Effect.gen(function*() {
        const { emitOuter, given, scope, session } = itemStart
        itemStart.callerContext = yield* FiberRef.get(FiberRef.currentContext)
        yield* admission.acquire(scope)
        if (telemetry !== undefined) {
          yield* countRunning(1)
          yield* Scope.addFinalizer(scope, countRunning(-1))
        }
        const traced = yield* ThreadRunner.tracesVisibly(telemetry !== undefined)
        // With telemetry on, a work item is a trace of its own (root), linked to the caller's span if any.
        const caller = telemetry === undefined ? Option.none() : yield* Effect.option(Effect.currentSpan)
        const span = yield* ThreadRunner.spanIn(traced, scope, "warden.workItem", {
          attributes: { "warden.item": String(given.id ?? "") },
          captureStackTrace: false,
          ...(telemetry === undefined ? {} : {
            root: true,
            links: Option.isSome(caller) ? [{ _tag: "SpanLink" as const, span: caller.value, attributes: {} }] : []
          })
        })
        yield* ThreadRunner.enterSpan(span)
        yield* runGate
        const { finish, work: item } = yield* Scope.extend(withWorktree(given, emitOuter), scope)
        const { emit, exhausted } = yield* Scope.extend(withBudget(item, session, emitOuter), scope)
        const slot = yield* pickSlot
        slot.threads++
        yield* Scope.addFinalizer(scope, slot.leave)
        const run: ItemRun = {
          item,
          session,
          emit,
          exhausted,
          finish,
          slot,
          span,
          traced,
          attempt: undefined,
          turns: [],
          remaining: [item.prompt, ...(item.followUps ?? [])],
          threadId: item.threadId,
          resumes: 0,
          deadServer: undefined
        }
        // The attempt in flight, closed by the item scope if the item ends during it.
        yield* Scope.addFinalizerExit(scope, (exit) => {
          const open = run.attempt
          run.attempt = undefined
          return open === undefined ? Effect.void : ThreadRunner.closeAttempt(open, exit)
        })
        return run
      })

    /**
     * The item ended: its scope closed with its exit (a finalizer that dies, a defect of ours,
     * joins the item's cause; the rest still runs), the caller's current span back on the fiber,
     * `ItemFinished` published and `ended` told.
     */
    const endItem = (itemStart: ItemStart, exit: Exit.Exit<WorkResult, WorkItemFailed>, ended: ((exit: Exit.Exit<WorkResult, WorkItemFailed>) => void) | undefined) =>
      Effect.gen(function*() {
        const closed = yield* Effect.exit(Scope.close(itemStart.scope, exit))
        const final: Exit.Exit<WorkResult, WorkItemFailed> = Exit.isSuccess(closed)
          ? exit
          : Exit.failCause(Exit.isFailure(exit) ? Cause.sequential(exit.cause, closed.cause) : closed.cause)
        if (itemStart.callerContext !== undefined) yield* FiberRef.set(FiberRef.currentContext, itemStart.callerContext)
        publish({ _tag: "ItemFinished", item: itemStart.given.id, exit: final })
        ended?.(final)
        return yield* final
      })

    const emitter = (extra?: (event: WorkEvent) => void) => (event: WorkEvent) => {
      if (event._tag === "Notification" && event.method === "error") {
        const pressure = Admission.pressureOfError((event.params as { error?: unknown } | null)?.error)
        if (pressure !== undefined) admission.pressure(pressure)
      } else if (event._tag === "TurnCompleted" && event.turn.error !== undefined) {
        const pressure = Admission.pressureOfError(event.turn.error)
        if (pressure !== undefined) admission.pressure(pressure)
      }
      publish({ _tag: "Work", event })
      extra?.(event)
    }

    const run = (item: WorkItem) => runWith(item, newSession(), emitter())

    const start = (item: WorkItem): Effect.Effect<WorkHandle, never, Scope.Scope> =>
      Effect.suspend(() => {
        const events = new StartedItem.ItemEvents()
        const threadId = new StartedItem.ThreadIdLatch()
        const session = newSession()
        const emit = emitter((event) => {
          events.offer(event)
          if (event._tag === "ThreadReady") threadId.done(Exit.succeed(event.threadId))
        })
        const ended = (exit: Exit.Exit<WorkResult, WorkItemFailed>) => {
          events.end()
          if (Exit.isFailure(exit)) {
            const failure = exit.cause._tag === "Fail"
              ? exit.cause.error
              : new WorkItemFailed({ reason: "start-failed", detail: "the work item was stopped", threadId: undefined })
            threadId.done(Exit.fail(failure))
          }
        }
        return Effect.map(Effect.forkScoped(runWith(item, session, emit, ended)), (fiber) =>
          new Handle(fiber, session, events, threadId, runnerConfig.interruptTimeout))
      })
    const ready = Effect.flatMap(pickSlot, (slot) => Effect.map(serverOf(slot), (server) => server.init))

    return {
      run,
      start,
      inbox: { updates: approvals.inbox, open: approvals.openCards, answer: approvals.answer, answerGroup: approvals.answerGroup },
      subscribe: PubSub.subscribe(events),
      events: Stream.fromPubSub(events),
      subscribeApprovals: approvals.subscribe,
      approvals,
      ready
    }
  })

/** An event on the current span (the work item's), at the clock's time (its message already masked). */
const spanEvent = (name: string, attributes: Record<string, unknown>): Effect.Effect<void> =>
  Effect.flatMap(Effect.option(Effect.currentSpan), (span) =>
    Option.isNone(span)
      ? Effect.void
      : Effect.clockWith((clock) => Effect.sync(() => span.value.event(name, clock.unsafeCurrentTimeNanos(), attributes))))

/** Metrics of the supervisor's own events (telemetry on): restarts, losses, ended work items. Cheap, synchronous. */
const instrumentEvent = () => {
  const bySlot = labelsOf([Attributes.slot])
  const byReason = labelsOf([Attributes.reason])
  const byStatus = labelsOf([Attributes.status])
  return (event: SupervisorEvent): void => {
    switch (event._tag) {
      case "ConnectionRestarting":
        Metrics.restarts.unsafeUpdate(1, bySlot(String(event.slot)))
        return
      case "ConnectionLost":
        Metrics.losses.unsafeUpdate(1, byReason(event.reason._tag))
        return
      case "ItemFinished": {
        const exit = event.exit
        const status = Exit.isSuccess(exit) ? exit.value.status : exit.cause._tag === "Fail" ? exit.cause.error.reason : Exit.isInterrupted(exit) ? "interrupted" : "defect"
        Metrics.workItems.unsafeUpdate(1, byStatus(status))
        return
      }
      default:
        return
    }
  }
}

/**
 * Card metrics (telemetry on), counted by a fiber of their own from the approval events, never on
 * the read loop: the open cards by method, and each settlement's latency and count by method,
 * outcome and source.
 */
const countCards = (approvals: ApprovalsTypes.ApprovalsShape): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function*() {
    const queue = yield* approvals.subscribe
    const open = new Map<string, number>()
    const byMethod = labelsOf([Attributes.method])
    const bySettlement = labelsOf([Attributes.method, Attributes.outcome, Attributes.source])
    const gauge = (method: string, delta: number) => {
      const now = Math.max(0, (open.get(method) ?? 0) + delta)
      open.set(method, now)
      Metrics.openCards.unsafeUpdate(now, byMethod(method))
    }
    const count = (event: ApprovalEvent.ApprovalEvent) => {
      if (event._tag === "CardOpened") gauge(event.card.method, 1)
      else if (event._tag === "CardSettled") {
        const { card, outcome, source, latencyMs } = event.settlement
        gauge(card.method, -1)
        const labels = bySettlement(card.method, outcome, CardNs.describeSource(source))
        Metrics.cardsSettled.unsafeUpdate(1, labels)
        Metrics.cardLatency.unsafeUpdate(latencyMs, labels)
      }
    }
    const drain = Effect.flatMap(Queue.takeAll(queue), (batch) => Effect.sync(() => { for (const event of batch) count(event) }))
    yield* Queue.take(queue).pipe(
      Effect.flatMap((first) => Effect.zipRight(Effect.sync(() => count(first)), drain)),
      Effect.forever,
      // The supervisor's close settles the cards still open (shutdown) just before: count them too.
      Effect.onInterrupt(() => drain),
      Effect.interruptible,
      Effect.forkScoped
    )
  })

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
