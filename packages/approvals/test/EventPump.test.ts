/**
 * `EventPump`: a subscription read by its own fiber without ever losing an event. The naive
 * reader (interrupt it, then drain the rest) loses the event a publisher had just handed it; the
 * ledger's `Recording.test.ts` shows that loss in the ledger's flush.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Logger, PubSub, Queue, Scope } from "effect"
import { EventPump } from "../src/index.js"

describe("EventPump", () => {
  it.scopedLive("an event published just before settle is handled when settle returns, every time", () =>
    Effect.gen(function* () {
      const hub = yield* PubSub.unbounded<number>()
      const handled: Array<number> = []
      const pump = yield* EventPump.make(yield* PubSub.subscribe(hub), (n) => Effect.sync(() => handled.push(n)))
      for (let i = 0; i < 500; i++) {
        hub.unsafeOffer(i)
        yield* pump.settle
        assert.strictEqual(handled.length, i + 1, `event ${i} handled by the time settle returned`)
      }
      assert.deepStrictEqual(
        handled,
        Array.from({ length: 500 }, (_, i) => i)
      )
    })
  )

  it.scopedLive("events are handled in the order published, by the pump and by settle alike", () =>
    Effect.gen(function* () {
      const hub = yield* PubSub.unbounded<number>()
      const handled: Array<number> = []
      // An asynchronous handler: the pump is often busy when settle comes.
      const pump = yield* EventPump.make(yield* PubSub.subscribe(hub), (n) =>
        Effect.zipRight(
          n % 7 === 0 ? Effect.sleep("1 millis") : Effect.yieldNow(),
          Effect.sync(() => handled.push(n))
        )
      )
      let next = 0
      for (let round = 0; round < 100; round++) {
        for (let k = 0; k < (round % 5) + 1; k++) hub.unsafeOffer(next++)
        if (round % 3 === 0) yield* Effect.yieldNow()
        yield* pump.settle
        assert.strictEqual(handled.length, next)
      }
      assert.deepStrictEqual(
        handled,
        Array.from({ length: next }, (_, i) => i)
      )
    })
  )

  it.scopedLive("events published while settle yields keep their order: the pump is the only reader", () =>
    Effect.gen(function* () {
      const hub = yield* PubSub.unbounded<string>()
      const handled: Array<string> = []
      const pump = yield* EventPump.make(yield* PubSub.subscribe(hub), (e) => Effect.sync(() => handled.push(e)))
      for (let round = 0; round < 200; round++) {
        // Runs while settle yields: the first event goes to the parked pump directly, the second
        // waits in the subscription. A settle that took the second itself would handle it first.
        yield* Effect.fork(
          Effect.sync(() => {
            hub.unsafeOffer(`a${round}`)
            hub.unsafeOffer(`b${round}`)
          })
        )
        yield* pump.settle
      }
      yield* pump.settle
      assert.deepStrictEqual(handled, Array.from({ length: 200 }, (_, i) => [`a${i}`, `b${i}`]).flat())
    })
  )

  it.live("closing its scope ends the pump once it has handled the chunk it holds; nothing waits forever", () =>
    Effect.gen(function* () {
      const hub = yield* PubSub.unbounded<number>()
      const handled: Array<number> = []
      const scope = yield* Scope.make()
      const pump = yield* Scope.extend(
        Effect.flatMap(PubSub.subscribe(hub), (queue) =>
          EventPump.make(queue, (n) =>
            Effect.zipRight(
              Effect.sleep("5 millis"),
              Effect.sync(() => handled.push(n))
            )
          )
        ),
        scope
      )
      for (let i = 0; i < 3; i++) hub.unsafeOffer(i)
      yield* pump.settle
      hub.unsafeOffer(3)
      // Handed to the pump (or left waiting): closing lets it finish what it holds, then it ends.
      yield* Effect.yieldNow()
      yield* Scope.close(scope, Exit.void).pipe(Effect.timeout("10 seconds"))
      assert.deepStrictEqual(handled.slice(0, 3), [0, 1, 2])
      // Settling after the end does nothing and does not fail.
      yield* pump.settle
    })
  )

  it.scopedLive(
    "a handler that fails loses that event only (said in the log, without its cause) and the pump goes on",
    () =>
      Effect.gen(function* () {
        const logged: Array<string> = []
        const logger = Logger.make(({ message }) => void logged.push(String(message)))
        const hub = yield* PubSub.unbounded<number>()
        const handled: Array<number> = []
        const pump = yield* EventPump.make(yield* PubSub.subscribe(hub), (n) =>
          n === 2 ? Effect.die(new Error("secret-token-in-the-cause")) : Effect.sync(() => handled.push(n))
        ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
        for (let i = 0; i < 5; i++) hub.unsafeOffer(i)
        yield* pump.settle
        assert.deepStrictEqual(handled, [0, 1, 3, 4])
        assert.deepStrictEqual(logged, ["an event pump's handler failed: that event is lost"])
        assert.isFalse(logged.some((l) => l.includes("secret-token")))
        // The pump still reads.
        hub.unsafeOffer(5)
        yield* pump.settle
        assert.deepStrictEqual(handled, [0, 1, 3, 4, 5])
      })
  )

  it.scopedLive(
    "a reader of the same subscription stopped by an interrupt loses the event it had just been handed (why the pump is never interrupted)",
    () =>
      Effect.gen(function* () {
        const hub = yield* PubSub.unbounded<number>()
        const handled: Array<number> = []
        const queue = yield* PubSub.subscribe(hub)
        let lost = 0
        for (let i = 0; i < 50; i++) {
          const reader = yield* Queue.take(queue).pipe(
            Effect.flatMap((n) => Effect.sync(() => handled.push(n))),
            Effect.forever,
            Effect.fork
          )
          yield* Effect.yieldNow()
          hub.unsafeOffer(i)
          yield* Fiber.interrupt(reader)
          for (const n of yield* Queue.takeAll(queue)) handled.push(n)
          if (!handled.includes(i)) lost++
        }
        assert.isAbove(lost, 0, "the naive reader lost none: Effect's queues changed, and the pump's reason with them")
      })
  )
})
