import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, FiberSet, TestClock } from "effect"
import * as DeadlineTimer from "../src/DeadlineTimer.js"

/** A timer whose fiber runs in the test's scope, on the TestClock. */
const setup = Effect.gen(function*() {
  const clock = yield* Effect.clock
  const runFork = yield* FiberSet.makeRuntime<never, void, never>()
  const timer = DeadlineTimer.make({
    nanos: () => clock.unsafeCurrentTimeNanos(),
    spawn: (effect) => runFork(effect, { immediate: false }),
    fork: (effect) => void runFork(effect, { immediate: false })
  })
  const expired: Array<string> = []
  const add = (name: string, after: Duration.DurationInput) => timer.add(Duration.decode(after), () => expired.push(name))
  return { timer, expired, add }
})

describe("DeadlineTimer", () => {
  it.scoped("entries expire at their deadlines, in order, whatever their lengths", () =>
    Effect.gen(function*() {
      const { add, expired, timer } = yield* setup
      add("ten", "10 seconds")
      add("three", "3 seconds") // earlier than what the timer sleeps for: it re-arms
      yield* TestClock.adjust("1 second")
      add("five", "5 seconds") // due at 6 s
      yield* TestClock.adjust("1999 millis")
      assert.deepStrictEqual(expired, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(expired, ["three"])
      yield* TestClock.adjust("3 seconds")
      assert.deepStrictEqual(expired, ["three", "five"])
      yield* TestClock.adjust("4 seconds")
      assert.deepStrictEqual(expired, ["three", "five", "ten"])
      assert.strictEqual(timer.size(), 0)
    }))

  it.scoped("a removed entry never expires; the timer keeps the others", () =>
    Effect.gen(function*() {
      const { add, expired, timer } = yield* setup
      const removeFirst = add("first", "2 seconds")
      add("second", "2 seconds")
      removeFirst()
      removeFirst() // twice is harmless
      assert.strictEqual(timer.size(), 1)
      yield* TestClock.adjust("2 seconds")
      assert.deepStrictEqual(expired, ["second"])
    }))

  it.scoped("when every entry is gone the timer stops; a later entry starts it again", () =>
    Effect.gen(function*() {
      const { add, expired, timer } = yield* setup
      add("gone", "1 minute")()
      assert.strictEqual(timer.size(), 0)
      yield* TestClock.adjust("2 minutes")
      assert.deepStrictEqual(expired, [])
      add("later", "1 second")
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(expired, ["later"])
    }))

  it.scoped("an infinite deadline never expires and holds no entry", () =>
    Effect.gen(function*() {
      const { expired, timer } = yield* setup
      timer.add(Duration.infinity, () => expired.push("never"))
      assert.strictEqual(timer.size(), 0)
      yield* TestClock.adjust("1 day")
      assert.deepStrictEqual(expired, [])
    }))
})
