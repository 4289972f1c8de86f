/**
 * The thread actor: runs one work item's thread on one connection. It registers the thread's
 * route (synchronously, in the read loop, when thread/start's response is read; up front for a
 * resume, rolled back if the server refuses), runs turns one after another, takes the thread's
 * signals in order (on the read loop, through the route: see `run`), and ends each turn on
 * `turn/completed`.
 *
 * Its scope is the thread scope: closing it (the work item ends or is stopped) unregisters the
 * route, refuses the thread's open cards and unsubscribes from the thread, so that the app-server
 * unloads it and releases its writer lock; an interrupt mid-turn sends turn/interrupt first.
 */
import { Cause, type Clock, Context, Duration, Effect, Exit, FiberRef, Schedule, Scope, Tracer } from "effect"
import type { AppServer } from "./AppServerConnection.js"
import { afterQueuedMicrotasks } from "./ConnectionEnd.js"
import { type ConnectionLost, UnexpectedResult, WorkItemFailed } from "../Errors.js"
import type { RemoteError, RequestError } from "../Errors.js"
import type { ThreadRoute, ThreadSignal } from "./ThreadRoute.js"
import type { TurnError, TurnResult, WorkEvent, WorkItem } from "../WorkItem.js"
import { Json } from "@warden/protocol"
import { Attributes, labelsOf, Metrics } from "../Telemetry.js"

export interface RunnerConfig {
  /** No event for this long, while no card is open and no command runs: the turn is stalled. */
  readonly stallTimeout: Duration.Duration
  /** How long turn/interrupt may take before the connection is suspect and recycled. */
  readonly interruptTimeout: Duration.Duration
  /** Telemetry on (`Telemetry`): cards are parented to their turn's span, turns and tokens counted. */
  readonly telemetry: boolean
}

/** What the work item's handle can reach while the runner works (steer, interrupt). */
export interface Session {
  server: AppServer | undefined
  threadId: string | undefined
  turnId: string | undefined
  usage: unknown
}

const record = Json.asRecord

const turnErrorOf = (value: unknown): TurnError | undefined => {
  const e = record(value)
  if (!e || typeof e["message"] !== "string") return undefined
  return {
    message: e["message"],
    ...(e["codexErrorInfo"] !== undefined && e["codexErrorInfo"] !== null
      ? { codexErrorInfo: e["codexErrorInfo"] }
      : {})
  }
}

/**
 * Every thread's config starts with `thread_unload_delay_secs = 0` (an item's own `config`, or
 * `threadParams.config`, may set it otherwise): once Warden has unsubscribed from the thread
 * (`releaseThread`, when its work item ends) and the thread is idle, codex unloads it at once
 * instead of after 30 minutes, and so releases its writer lock for another app-server process.
 */
const unloadWhenReleased = { thread_unload_delay_secs: 0 }

export const threadParams = (item: WorkItem): Record<string, unknown> => ({
  ...(item.threadParams ?? {}),
  ...(item.cwd !== undefined ? { cwd: item.cwd } : {}),
  ...(item.model !== undefined ? { model: item.model } : {}),
  approvalPolicy: item.approvalPolicy ?? "on-request",
  ...(item.sandbox !== undefined ? { sandbox: item.sandbox } : {}),
  config: { ...unloadWhenReleased, ...record(item.threadParams?.["config"]), ...item.config }
})

/**
 * The thread id of a raw thread/start result, read on the read loop (no Schema there) to register
 * the route before the next frame. Strict, as the schema the caller decodes with: the id is at
 * result.thread.id (not result.threadId); a wrong guess would be silent.
 */
const threadIdOfResult = (result: unknown): string | undefined => {
  const id = record(record(result)?.["thread"])?.["id"]
  return typeof id === "string" && id.length > 0 ? id : undefined
}

/**
 * Interrupt the current turn, bounded. A missed deadline makes the connection suspect: it is
 * aborted so the supervisor recycles it (the turn's cards settle as connection-lost).
 */
export const interruptTurn = (server: AppServer, threadId: string, turnId: string, timeout: Duration.Duration) =>
  server.request("turn/interrupt", { threadId, turnId }, { timeout }).pipe(
    Effect.asVoid,
    Effect.catchTag("RequestTimeout", () =>
      server.abort(`turn/interrupt got no answer within ${Duration.format(timeout)}; recycling the app-server`)
    ),
    Effect.catchAll(() => Effect.void)
  )

/**
 * Let go of the thread on this app-server: `thread/unsubscribe`, bounded, best-effort (the work
 * item has ended either way). An app-server keeps every thread it has loaded, and the thread's
 * writer lock (a `flock` on `$CODEX_HOME/thread-writer-locks/<id>.lock`), until the thread has had
 * no subscriber and no activity for its `thread_unload_delay_secs`; while it does, every other
 * app-server process on that codex home is refused `thread/resume` ("thread … already has an
 * active writer"). With the delay at 0 (`threadParams`), codex 0.171.0 unloads the thread and
 * releases the lock within milliseconds of the unsubscribe, once no turn runs (measured).
 */
const releaseThread = (
  server: AppServer,
  threadId: string,
  workItem: string,
  timeout: Duration.Duration
): Effect.Effect<void> =>
  server.request("thread/unsubscribe", { threadId }, { timeout }).pipe(
    Effect.asVoid,
    Effect.catchAll((error) =>
      Effect.logDebug(`thread/unsubscribe of ${threadId} failed: ${error.message}`).pipe(
        Effect.annotateLogs({ workItem, threadId })
      )
    )
  )

/**
 * The fiber's current span (what `Effect.withSpan` would provide), set for the rest of the
 * fiber's run instead of around an effect: a work item idles in a turn with no wrapper of its own
 * on its stack (see `run`). The supervisor puts the caller's back when the item ends.
 */
export const enterSpan = (span: Tracer.AnySpan | undefined): Effect.Effect<void> =>
  span === undefined ? Effect.void : FiberRef.update(FiberRef.currentContext, Context.add(Tracer.ParentSpan, span))

/** Effect's own tracer, whose spans nobody sees (as the approvals engine's card spans tell it). */
const nativeTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/**
 * Whether a work item makes its spans: with telemetry, or under a tracer somebody sees (an
 * embedder's). Under Effect's own tracer they would go nowhere (~0.6 KiB each, three per idle
 * item), so there are none, as for cards.
 */
export const tracesVisibly = (telemetry: boolean): Effect.Effect<boolean> =>
  telemetry ? Effect.succeed(true) : Effect.map(Effect.tracer, (tracer) => tracer !== nativeTracer)

/** A span child of the current one, ended with the exit `scope` closes with; none when not `traced`. */
export const spanIn = (
  traced: boolean,
  scope: Scope.Scope,
  name: string,
  options: Tracer.SpanOptions
): Effect.Effect<Tracer.Span | undefined> =>
  traced ? Effect.makeSpanScoped(name, options).pipe(Scope.extend(scope)) : Effect.succeed(undefined)

/**
 * One attempt at running the item's thread on a connection (a resume is a new attempt): its
 * thread scope and the turn in flight. The supervisor closes it once, with the attempt's exit, or
 * its item scope does (stopped, failed): the turn first (its turn/interrupt goes out before
 * anything else), then the thread scope (the route unregistered, the open cards refused, the
 * thread's span ended).
 */
export interface Attempt {
  readonly scope: Scope.CloseableScope
  readonly turn: TurnSlot
}

export const openAttempt: Effect.Effect<Attempt> = Effect.map(Scope.make(), (scope) => ({
  scope,
  turn: { current: undefined }
}))

export const closeAttempt = (attempt: Attempt, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const turn = attempt.turn.current
    attempt.turn.current = undefined
    // The thread scope closes however the turn's end ends (a second stop interrupts a turn/interrupt in flight).
    return turn === undefined
      ? Scope.close(attempt.scope, exit)
      : Effect.ensuring(turn.close(exit), Scope.close(attempt.scope, exit))
  })

/**
 * Run `prompts` on the item's thread on `server`, in `threadScope` (the caller opens it and closes
 * it with the run's exit: that unregisters the route, refuses the thread's open cards, ends the
 * thread's and the turn's spans and, when the run was interrupted mid-turn, interrupts the turn
 * first). `resumeThreadId` resumes instead of starting. Fails with ConnectionLost when the
 * connection ends under it (the caller may restart+resume), or with WorkItemFailed for what no
 * restart fixes.
 *
 * While a turn runs, the fiber waits on one callback and holds nothing else: the read loop hands
 * the thread's notifications to the route (`receive`), which does the turn's bookkeeping there
 * and wakes the fiber once, when the turn ends (completed, the connection lost, stalled). What
 * arrives between turns is kept for the next turn, in order. The spans are set on the fiber
 * (`enterSpan`), not wrapped around the turn, and the few log records of a work item are annotated
 * where they are written (no log annotation on the fiber: its own copy of the fiber's FiberRefs,
 * ~1.4 KiB per item). An idle work item is a parked fiber with a shallow stack (a frame per
 * level, no suspended generator), its scopes, spans and turn plain objects.
 */
export const run = (
  server: AppServer,
  item: WorkItem,
  prompts: ReadonlyArray<string>,
  resumeThreadId: string | undefined,
  session: Session,
  emit: (event: WorkEvent) => void,
  config: RunnerConfig,
  onTurn: (turn: TurnResult) => void,
  attempt: Attempt,
  traced: boolean
): Effect.Effect<void, ConnectionLost | WorkItemFailed | RequestError> =>
  Effect.flatMap(openThread(server, item, resumeThreadId, session, emit, config, attempt, traced), (thread) =>
    turnsFrom(thread, prompts, 0, onTurn)
  )

/**
 * The thread's turns from `prompts[index]` on, one after another, until one does not complete. A
 * loop of `flatMap`s, not a generator: an idle item's stack keeps one frame here (the turn, then
 * what follows it) and no suspended generator.
 */
const turnsFrom = (
  thread: ThreadContext,
  prompts: ReadonlyArray<string>,
  index: number,
  onTurn: (turn: TurnResult) => void
): Effect.Effect<void, ConnectionLost | WorkItemFailed | RequestError> =>
  index >= prompts.length
    ? Effect.void
    : Effect.flatMap(runTurn(thread, prompts[index]!), (turn) => {
        if (thread.config.telemetry) {
          thread.route.traceParent = thread.threadSpan
          Metrics.turns.unsafeUpdate(1, turnLabels(turn.status))
        }
        onTurn(turn)
        const next = turn.status === "completed" ? turnsFrom(thread, prompts, index + 1, onTurn) : Effect.void
        return thread.threadSpan === undefined ? next : Effect.zipRight(enterSpan(thread.threadSpan), next)
      })

const turnLabels = labelsOf([Attributes.status])

/** The thread started or resumed on `server`, its route registered: what its turns share. */
const openThread = (
  server: AppServer,
  item: WorkItem,
  resumeThreadId: string | undefined,
  session: Session,
  emit: (event: WorkEvent) => void,
  config: RunnerConfig,
  attempt: Attempt,
  traced: boolean
): Effect.Effect<ThreadContext, ConnectionLost | WorkItemFailed | RequestError> =>
  Effect.gen(function* () {
    const threadScope = attempt.scope
    const threadSpan = yield* spanIn(traced, threadScope, "warden.thread", {
      attributes: {
        "warden.connection": server.id,
        "warden.resume": resumeThreadId !== undefined,
        ...itemAttribute(item)
      },
      captureStackTrace: false
    })
    yield* enterSpan(threadSpan)
    const inbox = new ThreadInbox()
    const route: ThreadRoute = {
      threadId: undefined,
      receive: (signal) => inbox.receive(signal),
      cardScope: threadScope,
      workItem: item.id,
      traceParent: config.telemetry ? threadSpan : undefined,
      routed: 0
    }
    let model = item.model
    session.server = server
    /** The app-server runs the thread for us (thread/start or thread/resume answered). */
    let subscribed = false
    // Thread scope close: unregister, refuse what is still open for this thread, then let go of
    // the thread on a connection that is still open (after a running turn was interrupted: the
    // attempt's close does that first). A plain scope finalizer: `Effect.addFinalizer` would also
    // put back this fiber's FiberRefs around it (two diffs and a patch of every FiberRef per work
    // item on a connection loss).
    yield* Scope.addFinalizer(
      threadScope,
      Effect.suspend(() => {
        route.closed = true
        server.unregisterThread(route)
        if (route.threadId === undefined) return Effect.void
        const threadId = route.threadId
        server.desk.closeWhere((card) => card.threadId === threadId, { _tag: "ThreadStopped" })
        return subscribed && server.isOpen()
          ? releaseThread(server, threadId, String(item.id ?? ""), config.interruptTimeout)
          : Effect.void
      })
    )

    const turnSlot = attempt.turn

    let threadId: string | undefined
    let resumed = false
    if (resumeThreadId !== undefined) {
      // One thread, one work item: a second one would steal the first one's route (its events
      // and cards), so it is refused instead.
      if (server.hasThread(resumeThreadId)) {
        return yield* Effect.fail(
          new WorkItemFailed({
            reason: "resume-failed",
            detail: `thread ${resumeThreadId} is already run by another work item`,
            threadId: resumeThreadId
          })
        )
      }
      // Watch first: the server replays pending requests right behind the resume response.
      route.threadId = resumeThreadId
      server.registerThread(route)
      const outcome = yield* server.request("thread/resume", { ...threadParams(item), threadId: resumeThreadId }).pipe(
        // Another app-server process on the same codex home still holds the thread: one of a
        // runner or a run that just died (until it exits), or a live one whose work item on it
        // just ended (until it has unloaded the thread): asked again for a while, then refused.
        Effect.retry({ while: isHeldElsewhere, schedule: heldElsewhereRetries }),
        Effect.tapError(() => Effect.sync(() => server.unregisterThread(route))),
        Effect.map((result) => ({ _tag: "Resumed" as const, result })),
        // A thread codex never persisted: start a new one, if the item asked for that.
        Effect.catchIf(
          (error) => item.ifThreadMissing === "start" && isMissingThread(error),
          (error) => Effect.succeed({ _tag: "Missing" as const, detail: error.message })
        )
      )
      if (outcome._tag === "Resumed") {
        if (outcome.result.thread.id !== resumeThreadId) {
          server.unregisterThread(route)
          return yield* Effect.fail(
            new UnexpectedResult({ method: "thread/resume", detail: "result.thread.id is not the resumed thread" })
          )
        }
        threadId = resumeThreadId
        resumed = true
        subscribed = true
        model = outcome.result.model ?? model
      } else {
        route.threadId = undefined
        emit({ _tag: "ThreadStartedFresh", item: item.id, missingThreadId: resumeThreadId, detail: outcome.detail })
      }
    }
    if (threadId === undefined) {
      const started = yield* server.request("thread/start", threadParams(item), {
        onResult: (result) => {
          const id = threadIdOfResult(result)
          if (id !== undefined) {
            route.threadId = id
            subscribed = true
            server.registerThread(route)
          }
        }
      })
      // Decoded: result.thread.id is a non-empty string (the route was registered from it above).
      threadId = started.thread.id
      model = started.model ?? model
    }
    session.threadId = threadId
    threadSpan?.attribute("warden.thread_id", threadId)
    emit({ _tag: "ThreadReady", item: item.id, threadId, resumed })

    if (config.telemetry) threadSpan?.attribute("warden.model", model ?? "")
    const thread: ThreadContext = {
      server,
      route,
      inbox,
      turnSlot,
      traced,
      threadSpan,
      threadId,
      item,
      session,
      emit,
      config,
      model: model ?? ""
    }
    return thread
  })

const itemAttribute = (item: WorkItem) => (item.id !== undefined ? { "warden.item": String(item.id) } : {})

/** Tokens of one turn, summed from its `thread/tokenUsage/updated` (each update's `last`). */
interface TurnTokens {
  input: number
  output: number
  cached: number
}

/**
 * `thread/tokenUsage/updated`'s latest usage into `warden.tokens` (input, output, cached), by
 * model, and into the turn's sums (the turn span's `warden.tokens.*`: which item burns tokens).
 */
const countTokens = (tokenUsage: unknown, model: string, turn: TurnTokens): void => {
  const last = record(record(tokenUsage)?.["last"])
  if (!last) return
  const count = (type: keyof TurnTokens, value: unknown) => {
    if (typeof value !== "number" || !(value > 0)) return
    turn[type] += value
    Metrics.tokens.unsafeUpdate(value, tokenLabels(type, model))
  }
  count("input", last["inputTokens"])
  count("output", last["outputTokens"])
  count("cached", last["cachedInputTokens"])
}

const tokenLabels = labelsOf([Attributes.tokenType, Attributes.model])

/**
 * codex 0.171.0's refusal to resume a thread another app-server process still holds (its writer
 * lock: see `releaseThread`).
 */
const isHeldElsewhere = (error: { readonly _tag: string }): boolean =>
  error._tag === "RemoteError" &&
  (error as RemoteError).code === -32600 &&
  /already has an active writer/i.test((error as RemoteError).detail)

/**
 * Every 500 ms for up to 180 s: for a dead process's app-server to notice its stdin closed and
 * exit (codex gives itself 45 s to shut down with a turn in flight), or for a live one whose work
 * item ended to interrupt its turn and unload the thread (`releaseThread`; milliseconds). Waiting
 * costs a moved item time, failing it the item.
 */
const heldElsewhereRetries = Schedule.spaced("500 millis").pipe(Schedule.intersect(Schedule.recurs(360)))

/**
 * codex's answer to `thread/resume` for a thread it never persisted (measured on 0.171.0:
 * `-32600 "no rollout found for thread id …"`).
 */
const isMissingThread = (error: { readonly _tag: string }): boolean =>
  error._tag === "RemoteError" &&
  (error as RemoteError).code === -32600 &&
  /no rollout found/i.test((error as RemoteError).detail)

/** What a thread's turns share (see `run`). */
interface ThreadContext {
  readonly server: AppServer
  readonly route: ThreadRoute
  readonly inbox: ThreadInbox
  readonly turnSlot: TurnSlot
  readonly traced: boolean
  readonly threadSpan: Tracer.Span | undefined
  readonly threadId: string
  readonly item: WorkItem
  readonly session: Session
  readonly emit: (event: WorkEvent) => void
  readonly config: RunnerConfig
  readonly model: string
}

/** The thread's turn in flight, and how to end it when its attempt closes under it. */
export interface TurnSlot {
  current: { readonly close: (exit: Exit.Exit<unknown, unknown>) => Effect.Effect<void> } | undefined
}

/** End `span` with `exit` (as `Effect.withSpan` does), unless it already ended. */
const endSpan = (span: Tracer.Span, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(FiberRef.currentTracerTimingEnabled), (timing) =>
    Effect.clockWith((clock) =>
      Effect.sync(() => {
        if (span.status._tag !== "Ended") span.end(timing ? clock.unsafeCurrentTimeNanos() : BigInt(0), exit)
      })
    )
  )

/** How a turn ended, as the fiber learns it when it wakes. */
type TurnEnd =
  | { readonly _tag: "Completed"; readonly result: TurnResult }
  | { readonly _tag: "ConnectionLost"; readonly error: ConnectionLost }
  | { readonly _tag: "Stalled" }
  /** The turn's bookkeeping threw (a bug of Warden's): this work item dies, the connection lives on. */
  | { readonly _tag: "Defect"; readonly defect: unknown }

/** The turn being watched: it takes the thread's signals until it ends. */
interface TurnWatcher {
  /** One signal; returns how the turn ended, or undefined while it runs. */
  readonly take: (signal: ThreadSignal) => TurnEnd | undefined
  /** Called once, with the end. */
  readonly wake: (end: TurnEnd) => void
}

/**
 * A thread's signals: handed to the turn being watched, in order, or kept until the next turn
 * watches (between turns, and before a new turn's fiber is back from turn/start). Only what
 * arrives between turns is kept: an idle turn keeps nothing.
 */
class ThreadInbox {
  private kept: Array<ThreadSignal> = []
  private watcher: TurnWatcher | undefined = undefined

  receive(signal: ThreadSignal): void {
    if (this.watcher === undefined) this.kept.push(signal)
    else this.deliver(this.watcher, signal)
  }

  /** Watch with `watcher`: what was kept is taken first, in order (it may end the turn at once). */
  watch(watcher: TurnWatcher): void {
    this.watcher = watcher
    if (this.kept.length === 0) return
    const kept = this.kept
    this.kept = []
    let i = 0
    while (i < kept.length && this.watcher === watcher) this.deliver(watcher, kept[i++]!)
    // The turn ended before all was taken: the rest waits for the next turn, ahead of anything newer.
    if (i < kept.length) this.kept = kept.slice(i).concat(this.kept)
  }

  /** Stop watching (the fiber was interrupted while it waited): later signals are kept. */
  unwatch(watcher: TurnWatcher): void {
    if (this.watcher === watcher) this.watcher = undefined
  }

  /** The watched turn ended by something else than a signal (the stall watchdog). */
  endWith(watcher: TurnWatcher, end: TurnEnd): void {
    if (this.watcher === watcher) this.end(watcher, end)
  }

  private deliver(watcher: TurnWatcher, signal: ThreadSignal): void {
    let end: TurnEnd | undefined
    try {
      end = watcher.take(signal)
    } catch (defect) {
      end = { _tag: "Defect", defect }
    }
    if (end !== undefined) this.end(watcher, end)
  }

  private end(watcher: TurnWatcher, end: TurnEnd): void {
    this.watcher = undefined
    watcher.wake(end)
  }
}

/**
 * One turn: turn/start, then the fiber waits for the turn's end while the route hands its signals
 * to the turn (see `run`). The turn is its attempt's turn slot (`Turn.close`): when the attempt
 * closes under it, it stops its stall watchdog, sends turn/interrupt (bounded) if it was
 * interrupted with the turn still running, and ends its span; the thread scope then refuses the
 * cards still open.
 *
 * An idle item is suspended here: one frame (the wait, then `finish`) over the turn's state, a
 * plain object (`Turn`). The effect is made when it runs (`suspend`): the frame above it keeps
 * only that, not turn/start's program.
 */
const runTurn = (
  thread: ThreadContext,
  prompt: string
): Effect.Effect<TurnResult, ConnectionLost | WorkItemFailed | RequestError> =>
  Effect.suspend(() => Effect.flatMap(startTurn(thread, prompt), awaitEnd))

const awaitEnd = (turn: Turn): Effect.Effect<TurnResult, ConnectionLost | WorkItemFailed> =>
  // No canceler: an interrupted wait leaves with the attempt's close, which ends the turn
  // (`Turn.close`) and stops watching; a canceler would be one more frame on every idle item's stack.
  Effect.flatMap(
    Effect.async<TurnEnd>((resume) => turn.await(resume)),
    (end) => turn.finish(end)
  )

const startTurn = (thread: ThreadContext, prompt: string): Effect.Effect<Turn, RequestError> =>
  Effect.gen(function* () {
    const { config, emit, item, route, server, session, threadId } = thread
    // No call-site stack trace: formatting it (through source maps under tsx) when the span ends
    // failed was a tenth of what 1,000 work items cost to unwind on a connection loss.
    const span = thread.traced
      ? yield* Effect.makeSpan("warden.turn", {
          attributes: { "warden.thread_id": threadId, ...itemAttribute(item) },
          captureStackTrace: false
        })
      : undefined
    yield* enterSpan(span)
    const turn = new Turn(thread, span, yield* Effect.clock)
    // Stopped mid-turn from now on: the attempt's close ends the turn (`Turn.close`).
    thread.turnSlot.current = turn
    // Before turn/start: the server sends the turn's first approval right behind its answer.
    if (config.telemetry) route.traceParent = span
    // turn/start runs uninterruptibly (bounded by its request deadline): a stop that lands while it
    // is in flight must still learn the turn's id, or the turn would run on with nobody to stop it.
    const turnId = yield* Effect.uninterruptible(
      Effect.map(
        server.request("turn/start", { threadId, input: [{ type: "text", text: prompt }] }),
        (started) => (turn.id = session.turnId = started.turn.id)
      )
    )
    span?.attribute("warden.turn_id", turnId)
    if (config.telemetry) yield* logTurn(thread, turnId, "turn started")
    emit({ _tag: "TurnStarted", item: item.id, threadId, turnId, prompt })
    turn.arm()
    return turn
  })

/** A turn's log record (telemetry on), annotated with its work item, thread and turn. */
const logTurn = (thread: ThreadContext, turnId: string, message: string): Effect.Effect<void> =>
  Effect.logInfo(message).pipe(
    Effect.annotateLogs({ workItem: String(thread.item.id ?? ""), threadId: thread.threadId, turnId })
  )

/**
 * A turn's state: what it collected (items, errors, tokens), its stall watchdog and the fiber's
 * wake-up. It takes the thread's signals on the read loop (`take`, through the thread's inbox),
 * wakes the fiber once, when the turn ends (`wake`), and is the attempt's turn slot (`close`).
 * A class, not closures over the turn's variables: an idle turn is one object, its methods shared.
 */
class Turn implements TurnWatcher {
  /** The turn's id, once turn/start answered. */
  id: string | undefined = undefined
  private watching = true
  private cancelWatchdog: (() => void) | undefined = undefined
  private expire: (() => void) | undefined = undefined
  private lastTaken = 0
  private resume: ((end: Effect.Effect<TurnEnd>) => void) | undefined = undefined
  private readonly items: Array<Record<string, unknown>> = []
  private readonly errors: Array<TurnError> = []
  /** Summed with telemetry only (the turn span's `warden.tokens.*`). */
  private tokens: TurnTokens | undefined = undefined
  private finalMessage: string | undefined = undefined

  constructor(
    private readonly thread: ThreadContext,
    private readonly span: Tracer.Span | undefined,
    private readonly clock: Clock.Clock
  ) {}

  /**
   * The stall watchdog: one deadline per turn on the connection's timer, not a timeout (a fiber
   * and a timer) per event. The turn notes when it last took a signal; when the deadline passes,
   * `check` re-arms it for the time left (rounded up to a sixteenth of the timeout, so the timer
   * keeps a few deadline lengths), or for a whole timeout while a card is open or a command runs
   * (waiting is not stalling), or ends the turn as stalled.
   */
  arm(): void {
    const timeout = this.thread.config.stallTimeout
    if (!Duration.isFinite(timeout)) return
    this.lastTaken = this.clock.unsafeCurrentTimeMillis()
    this.watch(Duration.toMillis(timeout))
  }

  private watch(ms: number): void {
    if (this.watching)
      this.cancelWatchdog = this.thread.server.after(Duration.millis(ms), (this.expire ??= () => this.check()))
  }

  private check(): void {
    this.cancelWatchdog = undefined
    const stallMs = Duration.toMillis(this.thread.config.stallTimeout)
    const step = stallMs / 16
    const quiet = this.clock.unsafeCurrentTimeMillis() - this.lastTaken
    if (quiet < stallMs) return this.watch(Math.min(stallMs, Math.ceil(Math.ceil((stallMs - quiet) / step) * step)))
    if (!this.idle()) return this.watch(stallMs)
    this.thread.inbox.endWith(this, { _tag: "Stalled" })
  }

  private idle(): boolean {
    const { route, server, threadId } = this.thread
    return (route.runningCommands?.size ?? 0) === 0 && !server.desk.openCards().some((c) => c.threadId === threadId)
  }

  private stopWatching(): void {
    this.watching = false
    this.cancelWatchdog?.()
    this.cancelWatchdog = undefined
  }

  /** The fiber waits: `resume` is called once, when the turn ends. What was kept is taken now (it may end the turn at once). */
  await(resume: (end: Effect.Effect<TurnEnd>) => void): void {
    this.resume = resume
    this.thread.inbox.watch(this)
  }

  wake(end: TurnEnd): void {
    const resume = this.resume
    this.resume = undefined
    resume?.(Effect.succeed(end))
  }

  /** The attempt closes under the turn (stopped mid-turn): interrupt it best-effort, bounded, then end the span. */
  close(exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> {
    this.stopWatching()
    const { config, inbox, server, session, threadId } = this.thread
    inbox.unwatch(this)
    const id = this.id
    const interrupt =
      Exit.isFailure(exit) &&
      Cause.isInterrupted(exit.cause) &&
      id !== undefined &&
      session.turnId === id &&
      server.isOpen()
        ? interruptTurn(server, threadId, id, config.interruptTimeout)
        : Effect.void
    return this.span === undefined ? interrupt : Effect.ensuring(interrupt, endSpan(this.span, exit))
  }

  take(signal: ThreadSignal): TurnEnd | undefined {
    this.lastTaken = this.clock.unsafeCurrentTimeMillis()
    if (signal._tag === "ConnectionLost") return signal
    const { config, emit, item, session, threadId } = this.thread
    const turnId = this.id!
    const { method, params } = signal
    const p = record(params)
    const eventTurnId = typeof p?.["turnId"] === "string" ? (p["turnId"] as string) : undefined
    emit({ _tag: "Notification", item: item.id, threadId, turnId: eventTurnId, method, params })
    switch (method) {
      case "item/completed": {
        const completed = record(p?.["item"])
        if (completed && (eventTurnId === undefined || eventTurnId === turnId)) {
          this.items.push(completed)
          if (completed["type"] === "agentMessage" && typeof completed["text"] === "string")
            this.finalMessage = completed["text"]
        }
        return undefined
      }
      case "thread/tokenUsage/updated":
        session.usage = p?.["tokenUsage"]
        if (config.telemetry)
          countTokens(p?.["tokenUsage"], this.thread.model, (this.tokens ??= { input: 0, output: 0, cached: 0 }))
        return undefined
      case "error": {
        const error = turnErrorOf(p?.["error"])
        if (error) this.errors.push({ ...error, willRetry: p?.["willRetry"] === true })
        return undefined
      }
      case "turn/completed": {
        const turn = record(p?.["turn"])
        if (turn?.["id"] !== turnId) return undefined
        const status = typeof turn["status"] === "string" ? turn["status"] : "failed"
        const result: TurnResult = {
          turnId,
          status,
          finalMessage: this.finalMessage,
          items: this.items,
          error: turnErrorOf(turn["error"]),
          errors: this.errors
        }
        session.turnId = undefined
        const span = this.span
        if (config.telemetry && span !== undefined) {
          span.attribute("warden.status", status)
          span.attribute("warden.tokens.input", this.tokens?.input ?? 0)
          span.attribute("warden.tokens.output", this.tokens?.output ?? 0)
          span.attribute("warden.tokens.cached", this.tokens?.cached ?? 0)
        }
        emit({ _tag: "TurnCompleted", item: item.id, threadId, turn: result })
        return { _tag: "Completed", result }
      }
      default:
        return undefined
    }
  }

  /** What the fiber does once woken: the turn's result, or how the attempt fails. */
  finish(end: TurnEnd): Effect.Effect<TurnResult, ConnectionLost | WorkItemFailed> {
    const thread = this.thread
    switch (end._tag) {
      case "Completed": {
        thread.turnSlot.current = undefined
        this.stopWatching()
        const ended = this.span === undefined ? Effect.void : endSpan(this.span, Exit.succeed(end.result))
        const done = Effect.as(ended, end.result)
        return thread.config.telemetry
          ? Effect.zipRight(logTurn(thread, end.result.turnId, `turn ${end.result.status}`), done)
          : done
      }
      case "ConnectionLost":
        // Every runner of the connection wakes in the same wave (the connection tells the routes
        // once the failed callers' microtasks have run: `tellRoutesLater`), each fiber in a
        // microtask of its own; unwinding a work item is long, and a Promise's caller
        // (`runPromise`, the facade) hears of anything a microtask or two after its fiber ended,
        // behind whatever was queued meanwhile. So the runner steps aside until the microtasks
        // queued now have run (a macrotask on the live clock) before unwinding.
        return Effect.zipRight(afterQueuedMicrotasks, Effect.fail(end.error))
      case "Stalled": {
        const { config, emit, item, server, threadId } = thread
        const turnId = this.id!
        emit({ _tag: "Stalled", item: item.id, threadId, turnId })
        return Effect.zipRight(
          interruptTurn(server, threadId, turnId, config.interruptTimeout),
          Effect.fail(
            new WorkItemFailed({
              reason: "stalled",
              detail: `no event for ${Duration.format(config.stallTimeout)} while no card was open and no command ran`,
              threadId
            })
          )
        )
      }
      case "Defect":
        return Effect.die(end.defect)
    }
  }
}
