import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, FiberSet, Logger, TestClock } from "effect"
import * as DeadlineTimer from "../src/DeadlineTimer.js"

/** A timer whose fiber runs in the test's scope, on the TestClock. */
const setup = Effect.gen(function* () {
  const clock = yield* Effect.clock
  const runFork = yield* FiberSet.makeRuntime<never, void, never>()
  const timer = DeadlineTimer.make({
    nanos: () => clock.unsafeCurrentTimeNanos(),
    spawn: (effect) => runFork(effect, { immediate: false }),
    fork: (effect) => void runFork(effect, { immediate: false })
  })
  const expired: Array<string> = []
  const add = (name: string, after: Duration.DurationInput) =>
    timer.add(Duration.decode(after), () => expired.push(name))
  return { timer, expired, add }
})

describe("DeadlineTimer", () => {
  it.scoped("entries expire at their deadlines, in order, whatever their lengths", () =>
    Effect.gen(function* () {
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
    })
  )

  it.scoped("a removed entry never expires; the timer keeps the others", () =>
    Effect.gen(function* () {
      const { add, expired, timer } = yield* setup
      const removeFirst = add("first", "2 seconds")
      add("second", "2 seconds")
      removeFirst()
      removeFirst() // twice is harmless
      assert.strictEqual(timer.size(), 1)
      yield* TestClock.adjust("2 seconds")
      assert.deepStrictEqual(expired, ["second"])
    })
  )

  it.scoped("when every entry is gone the timer stops; a later entry starts it again", () =>
    Effect.gen(function* () {
      const { add, expired, timer } = yield* setup
      add("gone", "1 minute")()
      assert.strictEqual(timer.size(), 0)
      yield* TestClock.adjust("2 minutes")
      assert.deepStrictEqual(expired, [])
      add("later", "1 second")
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(expired, ["later"])
    })
  )

  it.scoped(
    "an entry that carries its own links (schedule, cancel): rescheduling moves it, cancelling twice is harmless",
    () =>
      Effect.gen(function* () {
        const { expired, timer } = yield* setup
        class Card extends DeadlineTimer.Timed {
          constructor(readonly name: string) {
            super()
          }
          override onDeadline() {
            expired.push(this.name)
            // A callback may schedule more (here: the next card, due later).
            if (this.name === "a") timer.schedule(new Card("from a"), Duration.seconds(1))
          }
        }
        const a = new Card("a")
        const b = new Card("b")
        const c = new Card("c")
        assert.isTrue(timer.schedule(a, Duration.seconds(2)))
        assert.isTrue(timer.schedule(b, Duration.seconds(2)))
        assert.isTrue(timer.schedule(c, Duration.seconds(2)))
        assert.isFalse(timer.schedule(new Card("never"), Duration.infinity))
        timer.cancel(b)
        timer.cancel(b)
        yield* TestClock.adjust("1 second")
        assert.isTrue(timer.schedule(c, Duration.seconds(5)), "moved: now due at 6 s")
        assert.strictEqual(timer.size(), 2)
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(expired, ["a"])
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(expired, ["a", "from a"])
        yield* TestClock.adjust("2999 millis")
        assert.deepStrictEqual(expired, ["a", "from a"])
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(expired, ["a", "from a", "c"])
        assert.strictEqual(timer.size(), 0)
        timer.cancel(c) // no longer scheduled: nothing
        assert.strictEqual(timer.size(), 0)
      })
  )

  it.scoped("an infinite deadline never expires and holds no entry", () =>
    Effect.gen(function* () {
      const { expired, timer } = yield* setup
      timer.add(Duration.infinity, () => expired.push("never"))
      assert.strictEqual(timer.size(), 0)
      yield* TestClock.adjust("1 day")
      assert.deepStrictEqual(expired, [])
    })
  )

  it.scoped("a callback that throws is reported; the others due then and every later deadline still fire", () =>
    Effect.gen(function* () {
      const clock = yield* Effect.clock
      const runFork = yield* FiberSet.makeRuntime<never, void, never>()
      const defects: Array<unknown> = []
      const timer = DeadlineTimer.make({
        nanos: () => clock.unsafeCurrentTimeNanos(),
        spawn: (effect) => runFork(effect, { immediate: false }),
        fork: (effect) => void runFork(effect, { immediate: false }),
        onDefect: (defect) => defects.push(defect)
      })
      const expired: Array<string> = []
      timer.add(Duration.seconds(1), () => expired.push("a"))
      timer.add(Duration.seconds(1), () => {
        throw new Error("boom")
      })
      timer.add(Duration.seconds(1), () => expired.push("c"))
      timer.add(Duration.seconds(2), () => expired.push("d"))
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(expired, ["a", "c"])
      assert.strictEqual(defects.length, 1)
      assert.include(String(defects[0]), "boom")
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(expired, ["a", "c", "d"])
      // Added after the throw, long after: the timer is still alive.
      timer.add(Duration.seconds(5), () => expired.push("e"))
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(expired, ["a", "c", "d", "e"])
      assert.strictEqual(timer.size(), 0)
    })
  )

  it.scoped("without a reporter, a throwing callback is logged at error level and the timer lives on", () =>
    Effect.gen(function* () {
      const logs: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => logs.push(`${logLevel.label} ${String(message)}`))
      yield* Effect.gen(function* () {
        const { add, expired, timer } = yield* setup
        timer.add(Duration.seconds(1), () => {
          throw new Error("boom")
        })
        add("after", "2 seconds")
        yield* TestClock.adjust("2 seconds")
        assert.deepStrictEqual(expired, ["after"])
      }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      assert.isTrue(
        logs.some((l) => l.startsWith("ERROR") && l.includes("a deadline callback threw")),
        logs.join("\n")
      )
    })
  )

  it.scoped("a timer whose fiber was interrupted from outside re-arms on the next add", () =>
    Effect.gen(function* () {
      const clock = yield* Effect.clock
      const fibers: Array<Fiber.RuntimeFiber<void>> = []
      const runFork = yield* FiberSet.makeRuntime<never, void, never>()
      const timer = DeadlineTimer.make({
        nanos: () => clock.unsafeCurrentTimeNanos(),
        spawn: (effect) => {
          const fiber = runFork(effect, { immediate: false })
          fibers.push(fiber)
          return fiber
        },
        fork: (effect) => void runFork(effect, { immediate: false })
      })
      const expired: Array<string> = []
      timer.add(Duration.seconds(1), () => expired.push("lost"))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(fibers[0]!)
      timer.add(Duration.seconds(3), () => expired.push("later"))
      assert.strictEqual(fibers.length, 2, "a new fiber was started")
      yield* TestClock.adjust("3 seconds")
      assert.deepStrictEqual(expired, ["lost", "later"], "the new fiber expires what the old one left")
    })
  )
})
