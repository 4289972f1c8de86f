import { assert, describe, it } from "@effect/vitest"
import { WokenWait } from "@warden/testkit"
import { Effect, Exit, Fiber, TestClock } from "effect"

/** Lets the forked wait start (it asks its probe once when it starts). */
const started = (asked: () => number) => Effect.yieldNow().pipe(Effect.repeat({ until: () => asked() > 0, times: 100 }))

describe("WokenWait", () => {
  it.effect("a probe that holds already answers at once", () =>
    Effect.gen(function* () {
      const waits = WokenWait.make()
      assert.strictEqual(
        yield* waits.until(
          () => 42,
          "1 second",
          () => "timed out"
        ),
        42
      )
    })
  )

  it.effect("a wait is asked again at each wake, and only then, until its probe holds", () =>
    Effect.gen(function* () {
      const waits = WokenWait.make()
      const seen: Array<string> = []
      let asked = 0
      const fiber = yield* Effect.fork(
        waits.until(
          () => (asked++, seen.find((s) => s === "b")),
          "10 seconds",
          () => "timed out"
        )
      )
      yield* started(() => asked)
      assert.strictEqual(asked, 1)
      seen.push("a")
      waits.wake()
      assert.strictEqual(asked, 2)
      seen.push("b")
      waits.wake()
      assert.strictEqual(yield* Fiber.join(fiber), "b")
      waits.wake() // answered: no longer asked
      assert.strictEqual(asked, 3)
    })
  )

  it.effect("fails with onTimeout when the time passes first, and is no longer asked", () =>
    Effect.gen(function* () {
      const waits = WokenWait.make()
      let asked = 0
      const fiber = yield* Effect.fork(
        waits.until(
          () => (asked++, undefined),
          "5 seconds",
          () => "nothing came"
        )
      )
      yield* started(() => asked)
      yield* TestClock.adjust("5 seconds")
      const exit = yield* Fiber.await(fiber)
      assert.deepStrictEqual(exit, Exit.fail("nothing came"))
      const before = asked
      waits.wake()
      assert.strictEqual(asked, before)
    })
  )

  it.effect("an interrupted wait is no longer asked", () =>
    Effect.gen(function* () {
      const waits = WokenWait.make()
      let asked = 0
      const fiber = yield* Effect.fork(
        waits.until(
          () => (asked++, undefined),
          "5 seconds",
          () => "timed out"
        )
      )
      yield* started(() => asked)
      yield* Fiber.interrupt(fiber)
      const before = asked
      waits.wake()
      assert.strictEqual(asked, before)
    })
  )
})
