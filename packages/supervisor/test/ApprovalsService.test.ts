/**
 * The supervisor over the `Approvals` service of its context (`makeWithApprovals`,
 * `layerWithApprovals`): its cards are that engine's, answered through it; its shutdown still
 * refuses its open cards while the child can hear it; and `approvals` in its configuration, which
 * would be ignored, is a ConfigError.
 */
import { assert, describe, it } from "@effect/vitest"
import { Approvals } from "@warden/approvals"
import type { ApprovalEvent, Card } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import { FakeAppServer } from "@warden/testkit"
import { Context, Effect, Exit, Layer, Queue, Scope } from "effect"
import { Supervisor } from "../src/index.js"
import { commandApproval } from "./support.js"

const item = { prompt: "x", cwd: "/tmp/ws" }

const nextOpened = (events: Queue.Dequeue<ApprovalEvent.ApprovalEvent>): Effect.Effect<Card.CardView> =>
  Effect.flatMap(Queue.take(events), (event) =>
    event._tag === "CardOpened" ? Effect.succeed(event.card) : nextOpened(events)
  )

describe("Supervisor over the Approvals service of its context", () => {
  it.scoped("its cards are the service's: opened there, answered through it, written once", () =>
    Effect.gen(function* () {
      const fake = FakeAppServer.make({ turns: "manual" })
      const approvals = yield* Approvals.make({ deadlines: { default: "1 hour" } })
      const events = yield* approvals.subscribe
      const supervisor = yield* Supervisor.makeWithApprovals({}).pipe(
        Effect.provide(fake.layer),
        Effect.provideService(Approvals.Approvals, approvals)
      )
      assert.strictEqual(supervisor.approvals, approvals)
      const handle = yield* supervisor.start(item)
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      const id = yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
      const card = yield* nextOpened(events)
      assert.deepStrictEqual(
        (yield* approvals.openCards).map((c) => c.id),
        [card.id]
      )
      const answered = yield* approvals.answer(card.id, Decision.Accept)
      assert.strictEqual(answered._tag, "Settled")
      assert.deepStrictEqual((yield* fake.answerTo(id))["result"], { decision: "accept" })
      yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "ran it" })
      assert.strictEqual((yield* handle.await).status, "completed")
      assert.strictEqual(fake.answersSoFar().filter((a) => a["id"] === id).length, 1)
    })
  )

  it.scoped("layerWithApprovals: releasing it refuses its open cards while the child can hear it (shutdown)", () =>
    Effect.gen(function* () {
      const fake = FakeAppServer.make({ turns: "manual" })
      const approvals = yield* Approvals.make()
      const events = yield* approvals.subscribe
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        Supervisor.layerWithApprovals({}).pipe(
          Layer.provide(fake.layer),
          Layer.provide(Layer.succeed(Approvals.Approvals, approvals))
        ),
        scope
      )
      const supervisor = Context.get(context, Supervisor.Supervisor)
      const handle = yield* supervisor.start(item)
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      const id = yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
      yield* nextOpened(events)
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual((yield* fake.answerTo(id))["result"], { decision: "decline" })
      assert.deepStrictEqual(yield* approvals.openCards, [])
      const settled = Array.from(yield* Queue.takeAll(events)).find((e) => e._tag === "CardSettled")
      assert.strictEqual(settled?._tag === "CardSettled" ? settled.settlement.outcome : undefined, "shutdown")
    })
  )

  it.scoped("approvals in its configuration is a ConfigError, before anything starts", () =>
    Effect.gen(function* () {
      const fake = FakeAppServer.make()
      const approvals = yield* Approvals.make()
      const error = yield* Effect.flip(
        Supervisor.makeWithApprovals({ approvals: { deadlines: { default: "1 minute" } } }).pipe(
          Effect.provide(fake.layer),
          Effect.provideService(Approvals.Approvals, approvals)
        )
      )
      assert.strictEqual(error._tag, "ConfigError")
      assert.include(error.message, "approvals: this supervisor uses the Approvals service of its context")
      assert.strictEqual(fake.connections(), 0, "nothing was started")
    })
  )
})
