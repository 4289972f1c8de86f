/**
 * One turn of a work item's thread: turn/start, then the turn takes the thread's signals (on the
 * read loop, through the thread's signal buffer) until `turn/completed`, the connection's loss or its stall
 * watchdog ends it, and wakes its fiber once. What a thread's turns share is its `ThreadContext`.
 */
import { Cause, type Clock, Duration, Effect, Exit, type Tracer } from "effect"
import { Json } from "@warden/protocol"
import type { ConnectionLost, RequestError } from "../Errors.js"
import { WorkItemFailed } from "../Errors.js"
import { Attributes, labelsOf, Metrics } from "../Telemetry.js"
import type { TurnError, TurnResult, WorkEvent, WorkItem } from "../WorkItem.js"
import type { AppServer } from "./AppServerConnection.js"
import { afterQueuedMicrotasks } from "./ConnectionEnd.js"
import { endSpan, enterSpan } from "./ItemSpans.js"
import type { ThreadRoute, ThreadSignal } from "./ThreadRoute.js"

export interface RunnerConfig {
  /** No event for this long, while no card is open and no command runs: the turn is stalled. */
  readonly stallTimeout: Duration.Duration
  /** How long turn/interrupt may take before the connection is suspect and recycled. */
  readonly interruptTimeout: Duration.Duration
  /** Telemetry on (`Telemetry`): cards are parented to their turn's span, turns and tokens counted. */
  readonly telemetry: boolean
}

/** What the work item's handle can reach while the runner works (steer, interrupt). */
export interface LiveThread {
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
 * Interrupt the current turn, bounded. A missed deadline makes the connection suspect: it is
 * aborted so the supervisor recycles it (the turn's cards settle as connection-lost). A connection
 * whose end is already decided (the child exited) is not aborted: it is ending anyway, and an
 * abort would stop the read loop before the child's last frames (a turn/completed of another
 * thread) were read, which the transport still delivers after an exit.
 */
export const interruptTurn = (server: AppServer, threadId: string, turnId: string, timeout: Duration.Duration) =>
  server.request("turn/interrupt", { threadId, turnId }, { timeout }).pipe(
    Effect.asVoid,
    Effect.catchTag("RequestTimeout", () =>
      server.isOpen()
        ? server.abort(`turn/interrupt got no answer within ${Duration.format(timeout)}; recycling the app-server`)
        : Effect.void
    ),
    Effect.catchAll(() => Effect.void)
  )

export const itemAttribute = (item: WorkItem) => (item.id !== undefined ? { "warden.item": String(item.id) } : {})

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

/** What a thread's turns share (see `run`). */
export interface ThreadContext {
  readonly server: AppServer
  readonly route: ThreadRoute
  readonly signals: ThreadSignalBuffer
  readonly turnSlot: TurnSlot
  readonly traced: boolean
  readonly threadSpan: Tracer.Span | undefined
  readonly threadId: string
  readonly item: WorkItem
  readonly liveThread: LiveThread
  readonly emit: (event: WorkEvent) => void
  readonly config: RunnerConfig
  readonly model: string
}

/** The thread's turn in flight, and how to end it when its attempt closes under it. */
export interface TurnSlot {
  current: { readonly close: (exit: Exit.Exit<unknown, unknown>) => Effect.Effect<void> } | undefined
}

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
export class ThreadSignalBuffer {
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
export const runTurn = (
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
    const { config, emit, item, route, server, liveThread, threadId } = thread
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
        (started) => (turn.id = liveThread.turnId = started.turn.id)
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
 * wake-up. It takes the thread's signals on the read loop (`take`, through the thread's signal buffer),
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
    this.thread.signals.endWith(this, { _tag: "Stalled" })
  }

  private idle(): boolean {
    const { route, server, threadId } = this.thread
    return (
      (route.runningCommands?.size ?? 0) === 0 &&
      !server.connectionCards.openCards().some((c) => c.threadId === threadId)
    )
  }

  private stopWatching(): void {
    this.watching = false
    this.cancelWatchdog?.()
    this.cancelWatchdog = undefined
  }

  /** The fiber waits: `resume` is called once, when the turn ends. What was kept is taken now (it may end the turn at once). */
  await(resume: (end: Effect.Effect<TurnEnd>) => void): void {
    this.resume = resume
    this.thread.signals.watch(this)
  }

  wake(end: TurnEnd): void {
    const resume = this.resume
    this.resume = undefined
    resume?.(Effect.succeed(end))
  }

  /** The attempt closes under the turn (stopped mid-turn): interrupt it best-effort, bounded, then end the span. */
  close(exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> {
    this.stopWatching()
    const { config, signals, server, liveThread, threadId } = this.thread
    signals.unwatch(this)
    const id = this.id
    const interrupt =
      Exit.isFailure(exit) &&
      Cause.isInterrupted(exit.cause) &&
      id !== undefined &&
      liveThread.turnId === id &&
      server.isOpen()
        ? interruptTurn(server, threadId, id, config.interruptTimeout)
        : Effect.void
    return this.span === undefined ? interrupt : Effect.ensuring(interrupt, endSpan(this.span, exit))
  }

  take(signal: ThreadSignal): TurnEnd | undefined {
    this.lastTaken = this.clock.unsafeCurrentTimeMillis()
    if (signal._tag === "ConnectionLost") return signal
    const { config, emit, item, liveThread, threadId } = this.thread
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
        liveThread.usage = p?.["tokenUsage"]
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
        liveThread.turnId = undefined
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
