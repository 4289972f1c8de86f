/**
 * The fibers that run a connection's handlers, and what a handler's return means.
 *
 * A handler is never called on the connection's read loop: it is called after the loop's step (a
 * task of the loop's scheduler), and what it returns runs in a fiber of its own, interrupted when
 * its card settles without it. So a handler that throws, returns something that is not an Effect
 * or a Promise, dies, blocks or never returns costs only its card (refused, or settled by its
 * deadline or its parent's close), never the loop.
 */
import type { Decision as DecisionNs } from "@warden/protocol"
import { Effect, Exit, FiberId, Runtime } from "effect"
import type { Clock, Fiber, Scheduler, Tracer } from "effect"
import type { Handler } from "../Approvals.js"
import type { PendingCard } from "./PendingCard.js"
import { untilInterrupted } from "./UntilInterrupted.js"

/** What runs a handler for a card: the job is the handler's effect; the card learns how it ended. */
export type RunHandler = (card: PendingCard, job: Effect.Effect<DecisionNs.Decision | undefined, unknown>) => void

/**
 * The handlers of the cards opened by one fiber (a connection's `handlerPool`): `call` calls a handler
 * after the caller's step, `run` runs an effect in a handler fiber.
 */
export interface HandlerRunner {
  /** Run the handler's effect in a fiber of the pool (woken or started after the caller's step). */
  readonly run: RunHandler
  /**
   * Call `handler` with the card's view after the caller's step (a task of the caller's
   * scheduler, as a fiber's start is: never on its stack). What it returns decides as if run in a fiber (`decisionOf`): an Effect that is
   * already its own result (`Effect.succeed(…)`, `Effect.fail(…)`, an `Exit`: nothing left to
   * run) settles the card right there, without a fiber; any other is run by `run`. A throw is a
   * defect of the handler (its card is refused).
   */
  readonly call: (card: PendingCard, handler: Handler, span?: HandlerSpan) => void
}

/**
 * The span a handler runs in (`warden.card.handler`, a child of its card's), made when the handler
 * is called: an effect already its own result ends it at once; any other runs in it, and ends it.
 */
export interface HandlerSpan {
  readonly open: () => Tracer.Span
  /** The handler answered at once (no fiber): its span says how, now or with its card's (telemetry). */
  readonly answered: (exit: Exit.Exit<unknown, unknown>) => void
  readonly clock: Clock.Clock
}

/** How many handler fibers of a connection wait for the next card at most; more end when done. */
export const MaxIdleHandlerFibers = 8

/** A handler fiber: its card while it runs one, its wake-up while it waits for the next. */
interface HandlerFiber {
  fiber: Fiber.RuntimeFiber<void, never> | undefined
  card: PendingCard | undefined
  job: Effect.Effect<DecisionNs.Decision | undefined, unknown> | undefined
  wake: ((effect: Effect.Effect<void>) => void) | undefined
}

/**
 * The fibers that run a connection's handlers. A handler is called after the loop's step (`call`:
 * a task of the loop's scheduler, never on its stack); one that returns an Effect already settled
 * (`Effect.succeed`) decides its card right there, without a fiber (a fiber's wake-up and its
 * FiberRefs' reset were ~4–5 µs of a 30 µs round trip). Everything else runs in a fiber of its
 * own, never the read loop's, started or woken after the loop's step: a root fiber from the
 * runtime of the fiber that opens the card (the read loop's: its services, clock and tracer), in
 * no scope, so that no scope's close waits for a handler (see `ConnectionCards`' `startHandler`).
 * A fiber whose handler has returned waits for the connection's next card instead of ending (at
 * most `MaxIdleHandlerFibers` wait), its FiberRefs put back as they were before the handler ran:
 * a card a handler decides at once does not pay for a new fiber (~5 µs of its round trip). A
 * handler still running
 * when its card settles is interrupted, and its fiber with it (the next card gets a new one). The
 * waiting fibers are interrupted when `owner` closes (the connection's scope).
 */
export const handlerPool = (owner: { readonly fork: (effect: Effect.Effect<void>) => void }) => {
  let runtimeOf: unknown
  let runner: HandlerRunner | undefined
  let idle: Array<HandlerFiber> = []
  let closed = false
  let watching = false
  /** Handlers to call in the scheduler's next task (`HandlerRunner.call`), in the order their cards opened. */
  let calls: Array<QueuedCall> = []

  const retire = (workers: Array<HandlerFiber>) => {
    for (const w of workers) w.fiber?.unsafeInterruptAsFork(FiberId.none)
  }

  const start = (
    w: HandlerFiber,
    run: (effect: Effect.Effect<void>, options: { readonly immediate: false }) => Fiber.RuntimeFiber<void, never>
  ): void => {
    const mine = idle
    const park = Effect.async<void>((resume) => {
      w.wake = resume
      mine.push(w)
      return Effect.sync(() => {
        w.wake = undefined
        const at = mine.indexOf(w)
        if (at >= 0) mine.splice(at, 1)
      })
    })
    const next: Effect.Effect<void> = Effect.suspend(() =>
      closed || mine !== idle || mine.length >= MaxIdleHandlerFibers ? Effect.void : Effect.zipRight(park, step)
    )
    const step: Effect.Effect<void> = Effect.flatMap(Effect.getFiberRefs, (saved) =>
      Effect.flatMap(Effect.exit(Effect.suspend(() => w.job!)), (exit) => {
        const card = w.card!
        w.card = undefined
        w.job = undefined
        card.handlerEnded(exit)
        // What the handler changed in the fiber's FiberRefs is not the next card's.
        // (All of them, also those it set for the first time: `setFiberRefs` would keep those.)
        return Effect.zipRight(
          Effect.updateFiberRefs(() => saved),
          next
        )
      })
    )
    const fiber = run(step, { immediate: false })
    w.fiber = fiber
    // However it ends (interrupted with its card, or from outside), a card it still ran learns it.
    fiber.addObserver((exit) => {
      const at = mine.indexOf(w)
      if (at >= 0) mine.splice(at, 1)
      const card = w.card
      w.card = undefined
      w.job = undefined
      if (card !== undefined && Exit.isFailure(exit)) card.handlerEnded(Exit.failCause(exit.cause))
    })
  }

  const callQueued = (): void => {
    const batch = calls
    calls = []
    for (const queued of batch) callOne(queued)
  }
  const callOne = ({ card, handler, run, span }: QueuedCall): void => {
    if (card.settlement || closed) return
    try {
      let job: Effect.Effect<DecisionNs.Decision | undefined, unknown>
      try {
        job = decisionOf(handler(card.view))
      } catch (defect) {
        job = Exit.die(defect) // as a throw inside the handler's fiber would end it
      }
      if (Exit.isExit(job)) {
        const exit = job as Exit.Exit<DecisionNs.Decision | undefined, unknown>
        // Its span says how it ended, at once (an embedder's tracer that throws making it: a
        // defect of this card's handler).
        if (span !== undefined) span.answered(exit)
        card.handlerEnded(exit)
      } else if (span === undefined) run(card, Effect.interruptible(job))
      else {
        // The span is made when the job starts: a card settled before its fiber ran has none left open.
        const clock = span.clock
        const inSpan = job
        run(
          card,
          Effect.interruptible(
            Effect.suspend(() => {
              const handlerSpan = span.open()
              return Effect.onExit(Effect.withParentSpan(inSpan, handlerSpan), (exit) =>
                Effect.sync(() => handlerSpan.end(clock.unsafeCurrentTimeNanos(), exit))
              )
            })
          )
        )
      }
    } catch (defect) {
      // Ours, and it does not throw; if it did, the card is refused rather than left to wait.
      card.handlerEnded(Exit.die(defect))
    }
  }

  /** A runner for handlers opened from `fiber` (its runtime is made once per calling fiber). */
  return (fiber: Fiber.RuntimeFiber<unknown, unknown>, runtime: () => Runtime.Runtime<never>): HandlerRunner => {
    if (runtimeOf !== fiber || runner === undefined) {
      retire(idle.splice(0)) // another caller's fibers: not this one's
      idle = []
      const fork = Runtime.runFork(runtime())
      runtimeOf = fiber
      runner = runnerOf((effect, options) => fork(effect, options), fiber.currentScheduler)
    }
    return runner
  }

  function runnerOf(
    runFork: (effect: Effect.Effect<void>, options: { readonly immediate: false }) => Fiber.RuntimeFiber<void, never>,
    /** The opener's scheduler: a call is a task of it, as a handler fiber's start or wake-up is. */
    scheduler: Scheduler.Scheduler
  ): HandlerRunner {
    const run: RunHandler = (card, job) => {
      if (card.settlement || closed) return
      if (!watching) {
        watching = true
        // When the owner closes, the waiting fibers end (the busy ones end after their card). No
        // timer holds the process meanwhile (`untilInterrupted`).
        owner.fork(
          Effect.onInterrupt(untilInterrupted, () =>
            Effect.sync(() => {
              closed = true
              retire(idle.splice(0))
            })
          )
        )
      }
      const w = idle.pop()
      if (w !== undefined && w.wake !== undefined) {
        w.card = card
        w.job = job
        card.attachHandler(w.fiber!)
        const wake = w.wake
        w.wake = undefined
        wake(Effect.void) // resumes it after this step, on its own scheduler
        return
      }
      const fresh: HandlerFiber = { fiber: undefined, card, job, wake: undefined }
      start(fresh, runFork)
      card.attachHandler(fresh.fiber!)
    }
    const call = (card: PendingCard, handler: Handler, span?: HandlerSpan): void => {
      if (card.settlement || closed) return
      if (calls.length === 0) scheduler.scheduleTask(callQueued, 0)
      calls.push({ card, handler, run, span })
    }
    return { run, call }
  }
}

/** A handler to call after the opener's step, and the runner for what it returns. */
interface QueuedCall {
  readonly card: PendingCard
  readonly handler: Handler
  readonly run: RunHandler
  readonly span: HandlerSpan | undefined
}

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function"

/**
 * What a handler returned, as an effect: an Effect as it is, a Promise awaited (its rejection is
 * a failure); anything else is a failure that names what came back (a refusal, never a hang).
 */
export const decisionOf = (returned: unknown): Effect.Effect<DecisionNs.Decision | undefined, unknown> => {
  if (Effect.isEffect(returned)) return returned as Effect.Effect<DecisionNs.Decision | undefined, unknown>
  if (isPromiseLike(returned)) {
    return Effect.tryPromise({
      try: () => Promise.resolve(returned) as Promise<DecisionNs.Decision | undefined>,
      catch: (error) => error
    })
  }
  return Effect.fail(`the handler returned ${returned === null ? "null" : typeof returned}, not an Effect or a Promise`)
}
