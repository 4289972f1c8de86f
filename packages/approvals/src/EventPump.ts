/**
 * Reading a subscription (`Supervisor.subscribe`, `subscribeApprovals`, or any `Queue.Dequeue`)
 * in a fiber of its own, without ever losing an event.
 *
 * Effect's queues hand a waiting taker its items directly: a take interrupted after a publisher
 * handed it a chunk, before its fiber ran again, loses that chunk without a word. A reader that is
 * stopped by interrupting it (to drain the rest itself, or at a scope's end) therefore drops an
 * event now and then, and always the last one published before the stop. The pump's take is never
 * interrupted: the pump ends when its subscription is shut down, after handling every chunk it
 * took, and `settle` makes sure that everything published before it was called has been handled.
 *
 * @since 0.1.0
 */
import { Chunk, Effect, Fiber, Queue } from "effect"
import type { Scope } from "effect"

/** A subscription read by its own fiber (`make`). */
export interface EventPump {
  /**
   * Everything published to the subscription before this was called is handled when it returns:
   * the pump first handles the chunk it holds (the scheduler runs it before this fiber goes on),
   * then this fiber handles what still waits in the subscription, in order, while the pump waits
   * its turn; a chunk handed to the pump meanwhile is handled after it. Never fails.
   */
  readonly settle: Effect.Effect<void>
}

/**
 * Fork the pump of `queue` in the caller's scope: it takes up to 4,096 events at a time and calls
 * `handle` on each, in order, one chunk at a time. Closing the scope handles what was published
 * (`settle`), shuts the subscription down, lets the pump finish the chunk it holds, and waits for
 * it to end: whatever ends the scope, no event published before it closed is left unhandled. `handle` must not fail (catch in it): an event it fails
 * on is lost (logged, without the cause, which may carry the event's data), and the pump goes on.
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
    // One chunk is handled at a time, by the pump or by `settle`: the permit keeps them in order.
    const turn = yield* Effect.makeSemaphore(1)
    // The handler's requirements, from the caller: the pump, forked here, has them; `settle`
    // runs in other fibers and is given them.
    const context = yield* Effect.context<R>()
    // Said, never its cause: a cause may carry the event's data.
    const lost = Effect.logError("an event pump's handler failed: that event is lost")
    const handleOne = (event: A) => Effect.catchAllCause(handle(event), () => lost)
    const handleEach = (chunk: Chunk.Chunk<A>) =>
      chunk.length === 1 ? handleOne(Chunk.unsafeHead(chunk)) : Effect.forEach(chunk, handleOne, { discard: true })
    const handleAll = (chunk: Chunk.Chunk<A>) => turn.withPermits(1)(handleEach(chunk))
    // Taken and handled while holding the turn: nothing handed to the pump meanwhile overtakes it.
    const takeWaiting = Effect.provide(turn.withPermits(1)(Effect.flatMap(Queue.takeAll(queue), handleEach)), context)
    const pump = yield* Queue.takeBetween(queue, 1, 4096).pipe(
      Effect.flatMap(handleAll),
      Effect.forever,
      Effect.uninterruptible,
      Effect.forkScoped
    )
    const settle = Effect.gen(function* () {
      yield* Effect.yieldNow()
      yield* takeWaiting
    }).pipe(Effect.catchAllCause(() => Effect.void))
    // Added after the fork, so it runs before the fork's own finalizer: what was published is
    // handled, the subscription is shut down (the pump's waiting take ends), and the pump, having
    // finished the chunk it holds, ends.
    yield* Effect.addFinalizer(() => Effect.zipRight(settle, Effect.zipRight(Queue.shutdown(queue), Fiber.await(pump))))
    return { settle }
  })
