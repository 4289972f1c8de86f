import { FakeAppServer } from "@warden/testkit"
import { Chunk, Clock, Duration, Effect, Fiber, Layer, Queue, TestClock } from "effect"
import type { Scope } from "effect"
import { Supervisor } from "../src/index.js"

export const commandApproval = (threadId: string, turnId: string, itemId = "call_1") => ({
  threadId,
  turnId,
  itemId,
  startedAtMs: 0,
  reason: "needs to run outside the sandbox",
  command: "/bin/bash -lc 'echo hi'",
  cwd: "/tmp/ws",
  availableDecisions: ["accept", "cancel"]
})

/** A supervisor over a fake app-server, built in the test's scope. */
export const supervise = (
  config: Supervisor.SupervisorConfig = {},
  fakeOptions: FakeAppServer.Options = {}
): Effect.Effect<
  {
    readonly fake: FakeAppServer.FakeAppServer
    readonly supervisor: Supervisor.SupervisorShape
    readonly events: Queue.Dequeue<Supervisor.SupervisorEvent>
  },
  never,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const fake = FakeAppServer.make(fakeOptions)
    const supervisor = yield* Supervisor.make(config).pipe(
      Effect.provide(Layer.merge(fake.layer, Layer.empty)),
      Effect.orDie
    )
    const events = yield* supervisor.subscribe
    return { fake, supervisor, events }
  })

/** Wait for the first supervisor event matching `predicate`. */
export const waitFor = <A extends Supervisor.SupervisorEvent>(
  events: Queue.Dequeue<Supervisor.SupervisorEvent>,
  predicate: (event: Supervisor.SupervisorEvent) => event is A
): Effect.Effect<A> =>
  Effect.gen(function* () {
    while (true) {
      const event = yield* Queue.take(events)
      if (predicate(event)) return event
    }
  })

/**
 * Advance the TestClock by `duration`, but only once some fiber is actually sleeping on a
 * deadline that this advance reaches (a sleep registered after the advance would never fire).
 */
export const advance = (duration: import("effect").Duration.DurationInput) =>
  Effect.gen(function* () {
    const millis = Duration.toMillis(Duration.decode(duration))
    for (let spins = 0; ; spins++) {
      const now = yield* Clock.currentTimeMillis
      const sleeps = Chunk.toReadonlyArray(yield* TestClock.sleeps())
      if (sleeps.some((at) => at <= now + millis)) break
      if (spins > 100_000) return yield* Effect.dieMessage(`nothing sleeps within ${millis} ms`)
      yield* Effect.yieldNow()
    }
    yield* TestClock.adjust(duration)
  })

/** Move the TestClock forward in steps until `fiber` is done (bounded), for schedules with jitter. */
export const advanceUntilDone = <A, E>(
  fiber: import("effect").Fiber.Fiber<A, E>,
  step: import("effect").Duration.DurationInput,
  maxSteps = 1_000
) =>
  Effect.gen(function* () {
    for (let i = 0; i < maxSteps; i++) {
      if ((yield* Fiber.poll(fiber))._tag === "Some") return
      yield* TestClock.adjust(step)
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage(`fiber not done after ${maxSteps} steps`)
  })
