import { FakeAppServer } from "@warden/testkit"
import { Effect, Layer, Queue } from "effect"
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
  { readonly fake: FakeAppServer.FakeAppServer; readonly supervisor: Supervisor.SupervisorShape; readonly events: Queue.Dequeue<Supervisor.SupervisorEvent> },
  never,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const fake = FakeAppServer.make(fakeOptions)
    const supervisor = yield* Supervisor.make(config).pipe(Effect.provide(Layer.merge(fake.layer, Layer.empty)))
    const events = yield* supervisor.subscribe
    return { fake, supervisor, events }
  })

/** Wait for the first supervisor event matching `predicate`. */
export const waitFor = <A extends Supervisor.SupervisorEvent>(
  events: Queue.Dequeue<Supervisor.SupervisorEvent>,
  predicate: (event: Supervisor.SupervisorEvent) => event is A
): Effect.Effect<A> =>
  Effect.gen(function*() {
    while (true) {
      const event = yield* Queue.take(events)
      if (predicate(event)) return event
    }
  })
