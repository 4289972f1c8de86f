/**
 * The thread actor: runs one work item's thread on one connection. It registers the thread's
 * route (synchronously, in the read loop, when thread/start's response is read; up front for a
 * resume, rolled back if the server refuses), runs turns one after another, consumes the thread's
 * signals in order, and ends each turn on `turn/completed`.
 *
 * Its scope is the thread scope: closing it (the work item ends or is stopped) unregisters the
 * route, refuses the thread's open cards and unsubscribes from the thread, so that the app-server
 * unloads it and releases its writer lock; an interrupt mid-turn sends turn/interrupt first.
 */
import { Duration, Effect, Mailbox, Metric, MetricLabel, Option, Schedule, Scope } from "effect"
import type { AppServer } from "./AppServerConnection.js"
import { afterQueuedMicrotasks } from "./AppServerConnection.js"
import { ConnectionLost, UnexpectedResult, WorkItemFailed } from "../Errors.js"
import type { RemoteError, RequestError } from "../Errors.js"
import type { ThreadRoute, ThreadSignal } from "./ThreadRoute.js"
import type { TurnError, TurnResult, WorkEvent, WorkItem } from "../WorkItem.js"
import { Json } from "@warden/protocol"
import { Metrics } from "../Telemetry.js"

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
    ...(e["codexErrorInfo"] !== undefined && e["codexErrorInfo"] !== null ? { codexErrorInfo: e["codexErrorInfo"] } : {})
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
const releaseThread = (server: AppServer, threadId: string, timeout: Duration.Duration): Effect.Effect<void> =>
  server.request("thread/unsubscribe", { threadId }, { timeout }).pipe(
    Effect.asVoid,
    Effect.catchAll((error) => Effect.logDebug(`thread/unsubscribe of ${threadId} failed: ${error.message}`))
  )

/**
 * Run `prompts` on the item's thread on `server`. `resumeThreadId` resumes instead of starting.
 * Fails with ConnectionLost when the connection ends under it (the caller may restart+resume),
 * or with WorkItemFailed for what no restart fixes.
 */
export const run = (
  server: AppServer,
  item: WorkItem,
  prompts: ReadonlyArray<string>,
  resumeThreadId: string | undefined,
  session: Session,
  emit: (event: WorkEvent) => void,
  config: RunnerConfig,
  onTurn: (turn: TurnResult) => void
): Effect.Effect<void, ConnectionLost | WorkItemFailed | RequestError> =>
  Effect.scoped(
    Effect.gen(function*() {
      const threadScope = yield* Effect.scope
      const signals = yield* Mailbox.make<ThreadSignal>()
      const route: ThreadRoute = {
        threadId: undefined,
        signals,
        cardScope: threadScope,
        workItem: item.id,
        fileChanges: new Map(),
        runningCommands: new Set(),
        traceParent: undefined,
        routed: 0
      }
      const threadSpan = config.telemetry ? yield* Effect.currentSpan.pipe(Effect.option) : Option.none()
      if (Option.isSome(threadSpan)) route.traceParent = threadSpan.value
      let model = item.model
      session.server = server
      /** The app-server runs the thread for us (thread/start or thread/resume answered). */
      let subscribed = false
      // Thread scope close: unregister, refuse what is still open for this thread, then let go of
      // the thread on a connection that is still open (after a running turn was interrupted:
      // that happened in the body). A plain scope finalizer: `Effect.addFinalizer` would also put
      // back this fiber's FiberRefs around it (two diffs and a patch of every FiberRef per work
      // item on a connection loss).
      yield* Scope.addFinalizer(threadScope,
        Effect.suspend(() => {
          route.closed = true
          server.unregisterThread(route)
          if (route.threadId === undefined) return Effect.void
          const threadId = route.threadId
          server.desk.closeWhere((card) => card.threadId === threadId, { _tag: "ThreadStopped" })
          return subscribed && server.isOpen() ? releaseThread(server, threadId, config.interruptTimeout) : Effect.void
        })
      )

      let threadId: string | undefined
      let resumed = false
      if (resumeThreadId !== undefined) {
        // One thread, one work item: a second one would steal the first one's route (its events
        // and cards), so it is refused instead.
        if (server.hasThread(resumeThreadId)) {
          return yield* Effect.fail(
            new WorkItemFailed({ reason: "resume-failed", detail: `thread ${resumeThreadId} is already run by another work item`, threadId: resumeThreadId })
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
            return yield* Effect.fail(new UnexpectedResult({ method: "thread/resume", detail: "result.thread.id is not the resumed thread" }))
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
      yield* Effect.annotateCurrentSpan("warden.thread_id", threadId)
      emit({ _tag: "ThreadReady", item: item.id, threadId, resumed })

      if (config.telemetry) yield* Effect.annotateCurrentSpan("warden.model", model ?? "")
      for (const prompt of prompts) {
        const turn = yield* runTurn(server, route, threadId, prompt, item, session, emit, config, model ?? "").pipe(
          // No call-site stack trace: formatting it (through source maps under tsx) when the span
          // ends failed was a tenth of what 1,000 work items cost to unwind on a connection loss.
          Effect.withSpan("warden.turn", { attributes: { "warden.thread_id": threadId, ...itemAttribute(item) }, captureStackTrace: false }),
          Effect.annotateLogs({ threadId })
        )
        if (Option.isSome(threadSpan)) route.traceParent = threadSpan.value
        if (config.telemetry) yield* Metric.increment(Metric.tagged(Metrics.turns, "warden.status", turn.status))
        onTurn(turn)
        if (turn.status !== "completed") break
      }
    })
  ).pipe(Effect.withSpan("warden.thread", {
    attributes: { "warden.connection": server.id, "warden.resume": resumeThreadId !== undefined, ...itemAttribute(item) },
    captureStackTrace: false
  }))

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
const countTokens = (tokenUsage: unknown, model: string, turn: TurnTokens): Effect.Effect<void> => {
  const last = record(record(tokenUsage)?.["last"])
  if (!last) return Effect.void
  const count = (type: keyof TurnTokens, value: unknown) => {
    if (typeof value !== "number" || !(value > 0)) return Effect.void
    turn[type] += value
    return Metric.incrementBy(Metric.taggedWithLabels(Metrics.tokens, [MetricLabel.make("warden.token.type", type), MetricLabel.make("warden.model", model)]), value)
  }
  return Effect.all([count("input", last["inputTokens"]), count("output", last["outputTokens"]), count("cached", last["cachedInputTokens"])], { discard: true })
}

/**
 * codex 0.171.0's refusal to resume a thread another app-server process still holds (its writer
 * lock: see `releaseThread`).
 */
const isHeldElsewhere = (error: { readonly _tag: string }): boolean =>
  error._tag === "RemoteError" && (error as RemoteError).code === -32600 && /already has an active writer/i.test((error as RemoteError).detail)

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
  error._tag === "RemoteError" && (error as RemoteError).code === -32600 && /no rollout found/i.test((error as RemoteError).detail)

const runTurn = (
  server: AppServer,
  route: ThreadRoute,
  threadId: string,
  prompt: string,
  item: WorkItem,
  session: Session,
  emit: (event: WorkEvent) => void,
  config: RunnerConfig,
  model: string
): Effect.Effect<TurnResult, ConnectionLost | WorkItemFailed | RequestError> =>
  // turn/start runs uninterruptibly (bounded by its request deadline): a stop that lands while it
  // is in flight must still learn the turn's id, or the turn would run on with nobody to stop it.
  Effect.uninterruptibleMask((restore) => Effect.gen(function*() {
    // Before turn/start: the server sends the turn's first approval right behind its answer.
    if (config.telemetry) {
      const span = yield* Effect.option(Effect.currentSpan)
      if (Option.isSome(span)) route.traceParent = span.value
    }
    const started = yield* server.request("turn/start", { threadId, input: [{ type: "text", text: prompt }] })
    const turnId = started.turn.id
    session.turnId = turnId
    yield* Effect.annotateCurrentSpan("warden.turn_id", turnId)
    if (config.telemetry) yield* Effect.logInfo("turn started").pipe(Effect.annotateLogs({ turnId }))
    emit({ _tag: "TurnStarted", item: item.id, threadId, turnId, prompt })

    const items: Array<Record<string, unknown>> = []
    const tokens: TurnTokens = { input: 0, output: 0, cached: 0 }
    const errors: Array<TurnError> = []
    let finalMessage: string | undefined

    const idle = () => route.runningCommands.size === 0 && !server.desk.openCards().some((c) => c.threadId === threadId)

    // The stall watchdog: one deadline per turn on the connection's timer, not a timeout (a fiber
    // and a timer) per event. The runner notes when it last took a signal; when the deadline
    // passes, the check below re-arms it for the time left (rounded up to a sixteenth of the
    // timeout, so the timer keeps a few deadline lengths), or for a whole timeout while a card is
    // open or a command runs (waiting is not stalling), or tells the runner through the mailbox.
    const clock = yield* Effect.clock
    const stallMs = Duration.toMillis(config.stallTimeout)
    const step = stallMs / 16
    const token = {}
    const stallCheck: ThreadSignal = { _tag: "StallCheck", turn: token }
    let lastTaken = clock.unsafeCurrentTimeMillis()
    let cancelWatchdog: (() => void) | undefined
    let watching = true
    const watch = (ms: number) => {
      if (watching) cancelWatchdog = server.after(Duration.millis(ms), check)
    }
    const check = () => {
      cancelWatchdog = undefined
      const quiet = clock.unsafeCurrentTimeMillis() - lastTaken
      const queued = route.signals.unsafeSize()
      if (queued._tag === "Some" && queued.value > 0) return watch(stallMs) // the runner is behind, not stalled
      if (quiet < stallMs) return watch(Math.min(stallMs, Math.ceil(Math.ceil((stallMs - quiet) / step) * step)))
      if (!idle()) return watch(stallMs)
      route.signals.unsafeOffer(stallCheck)
    }
    const stopWatching = Effect.sync(() => {
      watching = false
      cancelWatchdog?.()
      cancelWatchdog = undefined
    })

    const body = Effect.gen(function*() {
      if (Duration.isFinite(config.stallTimeout)) watch(stallMs)
      while (true) {
        const signal = yield* Effect.catchAll(route.signals.take, () => Effect.succeed(stallCheck))
        if (signal._tag === "StallCheck") {
          if (signal.turn !== token) continue // a check of an earlier turn, left in the mailbox
          if (!idle()) {
            watch(stallMs)
            continue // a card opened or a command started meanwhile
          }
          emit({ _tag: "Stalled", item: item.id, threadId, turnId })
          yield* interruptTurn(server, threadId, turnId, config.interruptTimeout)
          return yield* Effect.fail(
            new WorkItemFailed({
              reason: "stalled",
              detail: `no event for ${Duration.format(config.stallTimeout)} while no card was open and no command ran`,
              threadId
            })
          )
        }
        lastTaken = clock.unsafeCurrentTimeMillis()
        if (signal._tag === "ConnectionLost") {
          // Every runner of the connection wakes in the same wave (the connection tells the
          // routes once the failed callers' microtasks have run: `tellRoutesLater`), each fiber
          // in a microtask of its own; unwinding a work item is long, and a Promise's caller
          // (`runPromise`, the facade) hears of anything a microtask or two after its fiber
          // ended, behind whatever was queued meanwhile. So the runner steps aside until the
          // microtasks queued now have run (a macrotask on the live clock) before unwinding.
          yield* afterQueuedMicrotasks
          return yield* Effect.fail(signal.error)
        }
        const { method, params } = signal
        const p = record(params)
        const eventTurnId = typeof p?.["turnId"] === "string" ? (p["turnId"] as string) : undefined
        emit({ _tag: "Notification", item: item.id, threadId, turnId: eventTurnId, method, params })
        switch (method) {
          case "item/completed": {
            const completed = record(p?.["item"])
            if (completed && (eventTurnId === undefined || eventTurnId === turnId)) {
              items.push(completed)
              if (completed["type"] === "agentMessage" && typeof completed["text"] === "string") finalMessage = completed["text"]
            }
            break
          }
          case "thread/tokenUsage/updated":
            session.usage = p?.["tokenUsage"]
            if (config.telemetry) yield* countTokens(p?.["tokenUsage"], model, tokens)
            break
          case "error": {
            const error = turnErrorOf(p?.["error"])
            if (error) errors.push({ ...error, willRetry: p?.["willRetry"] === true })
            break
          }
          case "turn/completed": {
            const turn = record(p?.["turn"])
            if (turn?.["id"] !== turnId) break
            const status = typeof turn["status"] === "string" ? turn["status"] : "failed"
            const result: TurnResult = {
              turnId,
              status,
              finalMessage,
              items,
              error: turnErrorOf(turn["error"]),
              errors
            }
            session.turnId = undefined
            if (config.telemetry) {
              yield* Effect.annotateCurrentSpan({
                "warden.status": status,
                "warden.tokens.input": tokens.input,
                "warden.tokens.output": tokens.output,
                "warden.tokens.cached": tokens.cached
              })
              yield* Effect.logInfo(`turn ${status}`).pipe(Effect.annotateLogs({ turnId }))
            }
            emit({ _tag: "TurnCompleted", item: item.id, threadId, turn: result })
            return result
          }
        }
      }
    })

    // Stopping the work item mid-turn: interrupt the turn best-effort, bounded; the thread scope
    // then refuses the cards still open.
    return yield* restore(body).pipe(
      Effect.ensuring(stopWatching),
      Effect.onInterrupt(() =>
        session.turnId === turnId && server.isOpen() ? interruptTurn(server, threadId, turnId, config.interruptTimeout) : Effect.void
      )
    )
  }))

