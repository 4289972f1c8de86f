/**
 * A work item's lifecycle, from admission to `ItemFinished`: set up in its item scope
 * (admission, span, worktree, budget, slot), then its attempts at the thread (one per connection:
 * a connection lost under it, with `restart.policy` resume, resumes the thread on the slot's next
 * one), then its result (its budget checked, its worktree finished).
 *
 * Scope and fibers: `run` runs the item in the caller's fiber; `start` forks that fiber in the
 * caller's scope (closing it stops the item) and returns its handle. The item scope is made when
 * the item starts and closed, with the item's exit, however it ends: what the item holds is a
 * finalizer of that scope (the admission permit, the running count, its span, its worktree, its
 * budget's fibers, its slot's count, the attempt in flight), never a wrapper around its program.
 * An attempt's thread scope (ThreadRunner) is closed by the attempt's end, or by the item scope if
 * the item ends during it (the turn interrupted, the route unregistered, the thread's cards
 * refused).
 */
import { Cause, type Context, Effect, Exit, FiberRef, Metric, Option, Scope } from "effect"
import type { Tracer } from "effect"
import { WorkItemFailed } from "../Errors.js"
import type { SupervisorEvent, WorkHandle } from "../Supervisor.js"
import { Metrics } from "../Telemetry.js"
import type { TurnResult, WorkEvent, WorkItem, WorkResult } from "../WorkItem.js"
import type { WorktreeSummary } from "../Worktree.js"
import * as Admission from "./Admission.js"
import type * as Budget from "./Budget.js"
import type * as ItemWorktree from "./ItemWorktree.js"
import type * as SlotPool from "./SlotPool.js"
import * as StartedItem from "./StartedItem.js"
import * as ThreadRunner from "./ThreadRunner.js"

/** What a work item's set-up starts from, and the caller's context to put back when it ends. */
interface AdmittedItem {
  readonly given: WorkItem
  readonly liveThread: ThreadRunner.LiveThread
  readonly emitOuter: (event: WorkEvent) => void
  readonly scope: Scope.CloseableScope
  callerContext: Context.Context<never> | undefined
}

/** A running work item's state between its steps (see `runWith`). */
interface ItemRun {
  readonly item: WorkItem
  readonly liveThread: ThreadRunner.LiveThread
  readonly emit: (event: WorkEvent) => void
  readonly exhausted: () => string | undefined
  readonly finish: Effect.Effect<WorktreeSummary | undefined>
  readonly slot: SlotPool.Slot
  readonly span: Tracer.Span | undefined
  readonly traced: boolean
  attempt: ThreadRunner.Attempt | undefined
  readonly turns: Array<TurnResult>
  remaining: ReadonlyArray<string>
  threadId: string | undefined
  resumes: number
  deadServer: number | undefined
}

export interface WorkItems {
  /** Run a work item to its result, in the caller's fiber. */
  readonly run: (item: WorkItem) => Effect.Effect<WorkResult, WorkItemFailed>
  /** Start a work item in a fiber of the caller's scope and return its handle at once. */
  readonly start: (item: WorkItem) => Effect.Effect<WorkHandle, never, Scope.Scope>
}

export interface Options {
  readonly admission: Admission.Admission
  readonly budgets: Budget.Budgets
  readonly worktrees: ItemWorktree.ItemWorktrees
  readonly slots: SlotPool.SlotPool
  readonly publish: (event: SupervisorEvent) => void
  readonly runnerConfig: ThreadRunner.RunnerConfig
  /** What an item whose connection was lost does: resume its thread on the next one, or fail. */
  readonly restartPolicy: "resume" | "fail"
}

/** An event on the current span (the work item's), at the clock's time (its message already masked). */
const spanEvent = (name: string, attributes: Record<string, unknown>): Effect.Effect<void> =>
  Effect.flatMap(Effect.option(Effect.currentSpan), (span) =>
    Option.isNone(span)
      ? Effect.void
      : Effect.clockWith((clock) =>
          Effect.sync(() => span.value.event(name, clock.unsafeCurrentTimeNanos(), attributes))
        )
  )

/** Map a runner failure to the work item's typed failure; `ready` says whether the thread existed. */
const toWorkFailure = (error: unknown, item: WorkItem, liveThread: ThreadRunner.LiveThread): WorkItemFailed => {
  if (error instanceof WorkItemFailed) return error
  const e = error as { readonly _tag?: string; readonly message?: string }
  const threadId = liveThread.threadId ?? item.threadId
  if (e._tag === "ConnectionLost") {
    return new WorkItemFailed({
      reason: "connection-lost",
      detail: e.message ?? "connection lost",
      threadId,
      cause: error
    })
  }
  return new WorkItemFailed({
    reason:
      liveThread.threadId !== undefined
        ? "turn-failed-to-start"
        : item.threadId !== undefined
          ? "resume-failed"
          : "start-failed",
    detail: e.message ?? String(error),
    threadId,
    cause: error
  })
}

const newLiveThread = (): ThreadRunner.LiveThread => ({
  server: undefined,
  threadId: undefined,
  turnId: undefined,
  usage: undefined
})

export const make = (options: Options): WorkItems => {
  const { admission, budgets, publish, restartPolicy, runnerConfig, slots, worktrees } = options
  const telemetry = runnerConfig.telemetry

  let running = 0
  const countRunning = (delta: number) => Effect.suspend(() => Metric.set(Metrics.workItemsRunning, (running += delta)))

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
      Effect.flatMap(slots.serverOf(run.slot, run.deadServer), (server) =>
        Effect.flatMap(ThreadRunner.openAttempt, (current) => {
          run.attempt = current
          const exited = (exit: Exit.Exit<void, unknown>) => afterAttempt(run, server.id, current, exit)
          return Effect.matchCauseEffect(
            Effect.suspend(() =>
              ThreadRunner.run(
                server,
                run.item,
                run.remaining,
                run.threadId,
                run.liveThread,
                run.emit,
                runnerConfig,
                (turn) => {
                  run.turns.push(turn)
                  run.remaining = run.remaining.slice(1)
                },
                current,
                run.traced
              )
            ),
            { onFailure: (cause) => exited(Exit.failCause(cause)), onSuccess: () => exited(Exit.void) }
          )
        })
      )
    )

  /** An attempt ended: closed; true to resume on a new connection, or how the item fails. */
  const afterAttempt = (
    run: ItemRun,
    serverId: number,
    attempt: ThreadRunner.Attempt,
    exit: Exit.Exit<void, unknown>
  ) =>
    Effect.gen(function* () {
      const { emit, item, liveThread } = run
      run.attempt = undefined
      yield* ThreadRunner.closeAttempt(attempt, exit)
      yield* ThreadRunner.enterSpan(run.span)
      if (Exit.isSuccess(exit)) return false
      const failure =
        exit.cause._tag === "Fail"
          ? (exit.cause.error as { readonly _tag: string; readonly message: string })
          : undefined
      run.threadId = liveThread.threadId ?? run.threadId
      const threadId = run.threadId
      if (failure === undefined) {
        return yield* Effect.failCause(Cause.map(exit.cause, (e) => toWorkFailure(e, item, liveThread)))
      }
      if (failure._tag !== "ConnectionLost") return yield* Effect.fail(toWorkFailure(failure, item, liveThread))
      emit({ _tag: "ConnectionLost", item: item.id, threadId, detail: failure.message })
      if (telemetry) yield* spanEvent("warden.connection_lost", { "warden.detail": failure.message })
      const lastTurn = run.turns[run.turns.length - 1]
      const unfinished = run.remaining.length > 0 && !(lastTurn && lastTurn.status !== "completed")
      if (restartPolicy !== "resume" || !unfinished) return yield* Effect.fail(toWorkFailure(failure, item, liveThread))
      run.deadServer = serverId
      run.resumes++
      if (threadId !== undefined) emit({ _tag: "Resumed", item: item.id, threadId, attempt: run.resumes })
      if (telemetry)
        yield* spanEvent("warden.resume", { "warden.attempt": run.resumes, "warden.thread_id": threadId ?? "" })
      return true
    })

  /** The item's result once its turns ran (its budget checked, its worktree finished). */
  const finishItem = (run: ItemRun) =>
    Effect.gen(function* () {
      const { liveThread, turns } = run
      const spent = run.exhausted()
      if (spent !== undefined) {
        return yield* Effect.fail(
          new WorkItemFailed({ reason: "budget-exhausted", detail: spent, threadId: liveThread.threadId })
        )
      }
      const last = turns[turns.length - 1]
      if (!last || liveThread.threadId === undefined) {
        return yield* Effect.fail(
          new WorkItemFailed({ reason: "start-failed", detail: "no turn ran", threadId: liveThread.threadId })
        )
      }
      const worktree = yield* run.finish
      const result: WorkResult = {
        ...(worktree !== undefined ? { worktree } : {}),
        id: run.item.id,
        threadId: liveThread.threadId,
        status: last.status,
        finalMessage: [...turns].reverse().find((t) => t.finalMessage !== undefined)?.finalMessage,
        items: turns.flatMap((t) => t.items),
        usage: liveThread.usage,
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
    liveThread: ThreadRunner.LiveThread,
    emitOuter: (event: WorkEvent) => void,
    ended?: (exit: Exit.Exit<WorkResult, WorkItemFailed>) => void
  ): Effect.Effect<WorkResult, WorkItemFailed> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Scope.make(), (scope) => {
        const itemStart: AdmittedItem = { given, liveThread, emitOuter, scope, callerContext: undefined }
        const end = (exit: Exit.Exit<WorkResult, WorkItemFailed>) => endItem(itemStart, exit, ended)
        // Made when it runs (`suspend`): the frames kept while the item idles hold this, not the set-up's program.
        return Effect.matchCauseEffect(restore(Effect.suspend(() => Effect.flatMap(setUp(itemStart), attempts))), {
          onFailure: (cause) => end(Exit.failCause(cause)),
          onSuccess: (result) => end(Exit.succeed(result))
        })
      })
    )

  /** The item's set-up in its scope: admission, span, worktree, budget, slot; what its attempts share. */
  const setUp = (itemStart: AdmittedItem) =>
    Effect.gen(function* () {
      const { emitOuter, given, scope, liveThread } = itemStart
      itemStart.callerContext = yield* FiberRef.get(FiberRef.currentContext)
      yield* admission.acquire(scope)
      if (telemetry) {
        yield* countRunning(1)
        yield* Scope.addFinalizer(scope, countRunning(-1))
      }
      const traced = yield* ThreadRunner.tracesVisibly(telemetry)
      // With telemetry on, a work item is a trace of its own (root), linked to the caller's span if any.
      const caller = telemetry ? yield* Effect.option(Effect.currentSpan) : Option.none()
      const span = yield* ThreadRunner.spanIn(traced, scope, "warden.workItem", {
        attributes: { "warden.item": String(given.id ?? "") },
        captureStackTrace: false,
        ...(telemetry
          ? {
              root: true,
              links: Option.isSome(caller) ? [{ _tag: "SpanLink" as const, span: caller.value, attributes: {} }] : []
            }
          : {})
      })
      yield* ThreadRunner.enterSpan(span)
      yield* budgets.gate
      const { finish, work: item } = yield* Scope.extend(worktrees.forItem(given, emitOuter), scope)
      const { emit, exhausted } = yield* Scope.extend(budgets.forItem(item, liveThread, emitOuter), scope)
      const slot = yield* slots.pick
      slot.threads++
      yield* Scope.addFinalizer(scope, slot.leave)
      const run: ItemRun = {
        item,
        liveThread,
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
  const endItem = (
    itemStart: AdmittedItem,
    exit: Exit.Exit<WorkResult, WorkItemFailed>,
    ended: ((exit: Exit.Exit<WorkResult, WorkItemFailed>) => void) | undefined
  ) =>
    Effect.gen(function* () {
      const closed = yield* Effect.exit(Scope.close(itemStart.scope, exit))
      const final: Exit.Exit<WorkResult, WorkItemFailed> = Exit.isSuccess(closed)
        ? exit
        : Exit.failCause(Exit.isFailure(exit) ? Cause.sequential(exit.cause, closed.cause) : closed.cause)
      if (itemStart.callerContext !== undefined) yield* FiberRef.set(FiberRef.currentContext, itemStart.callerContext)
      publish({ _tag: "ItemFinished", item: itemStart.given.id, exit: final })
      ended?.(final)
      return yield* final
    })

  /** Every event of an item: pressure for adaptive admission, published, then the item's own `extra`. */
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

  const run = (item: WorkItem) => runWith(item, newLiveThread(), emitter())

  const start = (item: WorkItem): Effect.Effect<WorkHandle, never, Scope.Scope> =>
    Effect.suspend(() => {
      const events = new StartedItem.ItemEvents()
      const threadId = new StartedItem.ThreadIdLatch()
      const liveThread = newLiveThread()
      const emit = emitter((event) => {
        events.offer(event)
        if (event._tag === "ThreadReady") threadId.done(Exit.succeed(event.threadId))
      })
      const ended = (exit: Exit.Exit<WorkResult, WorkItemFailed>) => {
        events.end()
        if (Exit.isFailure(exit)) {
          const failure =
            exit.cause._tag === "Fail"
              ? exit.cause.error
              : new WorkItemFailed({ reason: "start-failed", detail: "the work item was stopped", threadId: undefined })
          threadId.done(Exit.fail(failure))
        }
      }
      return Effect.map(
        Effect.forkScoped(runWith(item, liveThread, emit, ended)),
        (fiber) => new StartedItem.Handle(fiber, liveThread, events, threadId, runnerConfig.interruptTimeout)
      )
    })

  return { run, start }
}
