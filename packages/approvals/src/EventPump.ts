/**
 * Reading a subscription (`Supervisor.subscribe`, `subscribeApprovals`, or any `Queue.Dequeue`)
 * in a fiber of its own, without ever losing an event.
 *
 * Effect's queues hand a waiting taker its items directly: a take interrupted after a publisher
 * handed it a chunk, before its fiber ran again, loses that chunk without a word. A reader that is
 * stopped by interrupting it (to drain the rest itself, or at a scope's end) therefore drops an
 * event now and then, and always the last one published before the stop. The pump's take is never
 * interrupted: the pump ends when its subscription is shut down, after handling every chunk it
 * took, and `settle` waits until everything published before it was called has been handled. The
 * pump is the subscription's only reader, so events are handled in the order published.
 *
 * @since 0.1.0
 */
import { Chunk, Deferred, Effect, Exit, Fiber, Option, Queue } from "effect"
import type { Scope } from "effect"

/** A subscription read by its own fiber (`make`). */
export interface EventPump {
  /**
   * Everything published to the subscription before this was called is handled when it returns:
   * it waits until the pump, the only reader, has nothing left to take. Never fails; returns at
   * once when the pump has ended. Not to be called from the handler itself (it would wait for
   * itself).
   */
  readonly settle: Effect.Effect<void>
}

/**
 * Fork the pump of `queue` in the caller's scope: it takes up to 4,096 events at a time and calls
 * `handle` on each, in order, one chunk at a time. Closing the scope handles what was published
 * (`settle`), shuts the subscription down, lets the pump finish the chunk it holds, and waits for
 * it to end: whatever ends the scope, no event published before it closed is left unhandled.
 * `handle` must not fail (catch in it): an event it fails on is lost (logged, without the cause,
 * which may carry the event's data), and the pump goes on.
 *
 * @example
 * ```ts
 * import { EventPump } from "@warden/approvals"
 * import { Supervisor } from "@warden/supervisor"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const supervisor = yield* Supervisor.Supervisor
 *   const approvals = yield* supervisor.subscribeApprovals
 *   const pump = yield* EventPump.make(approvals, (event) => Effect.log(event._tag))
 *   // ... later, before reading what was handled:
 *   yield* pump.settle
 * })
 * ```
 *
 * @since 0.1.0
 */
export const make = <A, R>(
  queue: Queue.Dequeue<A>,
  handle: (event: A) => Effect.Effect<void, never, R>
): Effect.Effect<EventPump, never, Scope.Scope | R> =>
  Effect.gen(function* () {
    // Said, never its cause: a cause may carry the event's data.
    const lost = Effect.logError("an event pump's handler failed: that event is lost")
    const handleOne = (event: A) => Effect.catchAllCause(handle(event), () => lost)
    const handleEach = (chunk: Chunk.Chunk<A>) =>
      chunk.length === 1 ? handleOne(Chunk.unsafeHead(chunk)) : Effect.forEach(chunk, handleOne, { discard: true })
    /**
     * The pump is the only reader: it takes what waits without blocking, and only when nothing
     * waits does it park in a blocking take, after telling whoever waits in `settle` that it has
     * handled everything so far. A publisher hands a parked pump its event directly (the queue
     * stays empty); the pump's first step when it runs again is to unpark (a fiber run again
     * starts with a fresh budget of steps: nothing yields in between).
     */
    let parked = false
    const waiting: Array<Deferred.Deferred<void>> = []
    const release = () => {
      for (const w of waiting.splice(0)) Deferred.unsafeDone(w, Exit.void)
    }
    const park = Effect.sync(() => {
      parked = true
      release()
    })
    const unpark = <B>(b: B) => {
      parked = false
      return b
    }
    const step: Effect.Effect<void, never, R> = Effect.flatMap(Queue.takeAll(queue), (ready) =>
      ready.length > 0
        ? handleEach(ready)
        : Effect.zipRight(park, Effect.flatMap(Effect.map(Queue.takeBetween(queue, 1, 4096), unpark), handleEach))
    )
    // Forked and given its finalizer in one uninterruptible step: an interrupt in between would
    // leave an uninterruptible pump whose subscription nobody shuts down.
    return yield* Effect.uninterruptible(
      Effect.gen(function* () {
        // However the pump ends, nobody waits for it to park any more.
        const pump = yield* Effect.forkScoped(
          Effect.uninterruptible(Effect.ensuring(Effect.forever(step), Effect.sync(release)))
        )
        /** Everything published before it was called has been handled when it returns. */
        const settle: Effect.Effect<void> = Effect.gen(function* () {
          // A pump handed an event before this was called runs again first (the scheduler runs
          // fibers in the order they were woken) and is then no longer parked.
          yield* Effect.yieldNow()
          const size = queue.unsafeSize()
          if (pump.unsafePoll() !== null || Option.isNone(size) || (parked && size.value <= 0)) return
          const next = Deferred.unsafeMake<void>(pump.id())
          waiting.push(next)
          yield* Deferred.await(next)
        })
        // Added after the fork, so it runs before the fork's own finalizer: what was published
        // is handled, the subscription is shut down (the parked pump's take ends), and the pump,
        // having finished the chunk it holds, ends.
        yield* Effect.addFinalizer(() =>
          Effect.zipRight(settle, Effect.zipRight(Queue.shutdown(queue), Fiber.await(pump)))
        )
        return { settle }
      })
    )
  })
