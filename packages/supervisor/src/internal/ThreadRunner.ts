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

import { type Duration, Effect, type Exit, Schedule, Scope } from "effect"
import { Json } from "@warden/protocol"
import type { ConnectionLost, RemoteError, RequestError } from "../Errors.js"
import { UnexpectedResult, WorkItemFailed } from "../Errors.js"
import { Attributes, labelsOf, Metrics } from "../Telemetry.js"
import type { TurnResult, WorkEvent, WorkItem } from "../WorkItem.js"
import type { AppServer } from "./AppServerConnection.js"
import { enterSpan, spanIn } from "./ItemSpans.js"
import type { ThreadRoute } from "./ThreadRoute.js"
import {
  itemAttribute,
  type RunnerConfig,
  runTurn,
  type LiveThread,
  ThreadSignalBuffer,
  type ThreadContext,
  type TurnSlot
} from "./Turn.js"

export { enterSpan, spanIn, tracesVisibly } from "./ItemSpans.js"
export { interruptTurn, type RunnerConfig, type LiveThread, type TurnSlot } from "./Turn.js"

const record = Json.asRecord

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
  liveThread: LiveThread,
  emit: (event: WorkEvent) => void,
  config: RunnerConfig,
  onTurn: (turn: TurnResult) => void,
  attempt: Attempt,
  traced: boolean
): Effect.Effect<void, ConnectionLost | WorkItemFailed | RequestError> =>
  Effect.flatMap(openThread(server, item, resumeThreadId, liveThread, emit, config, attempt, traced), (thread) =>
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
  liveThread: LiveThread,
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
    const signals = new ThreadSignalBuffer()
    const route: ThreadRoute = {
      threadId: undefined,
      receive: (signal) => signals.receive(signal),
      cardScope: threadScope,
      workItem: item.id,
      traceParent: config.telemetry ? threadSpan : undefined,
      routed: 0
    }
    let model = item.model
    liveThread.server = server
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
        server.connectionCards.closeWhere((card) => card.threadId === threadId, { _tag: "ThreadStopped" })
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
    liveThread.threadId = threadId
    threadSpan?.attribute("warden.thread_id", threadId)
    emit({ _tag: "ThreadReady", item: item.id, threadId, resumed })

    if (config.telemetry) threadSpan?.attribute("warden.model", model ?? "")
    const thread: ThreadContext = {
      server,
      route,
      signals,
      turnSlot,
      traced,
      threadSpan,
      threadId,
      item,
      liveThread,
      emit,
      config,
      model: model ?? ""
    }
    return thread
  })

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
