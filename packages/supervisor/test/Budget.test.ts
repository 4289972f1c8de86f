/**
 * Budgets on the fake app-server, on the TestClock: reaching an item's token or turn-time budget
 * opens a card of Warden's own (an elicitation from server `warden`, never written to codex),
 * decided like any card; yes raises the allowance, anything else (a decline, the deadline, a rule)
 * interrupts the turn and fails the item `budget-exhausted`. The run's budget holds admission while
 * it asks; refused, the items not yet started fail `budget-exhausted` and the running ones go on.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ApprovalEvent, Card } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import { Effect, Exit, Fiber, Queue } from "effect"
import { advance, supervise } from "./support.js"

const usage = (threadId: string, totalTokens: number) => ({
  threadId,
  turnId: "turn_1",
  tokenUsage: {
    total: { totalTokens, inputTokens: totalTokens, cachedInputTokens: 0, outputTokens: 0, reasoningOutputTokens: 0 },
    last: { totalTokens, inputTokens: totalTokens, cachedInputTokens: 0, outputTokens: 0, reasoningOutputTokens: 0 },
    modelContextWindow: null
  }
})

/** The next card that opens. */
const nextCard = (cards: Queue.Dequeue<ApprovalEvent.ApprovalEvent>) =>
  Effect.gen(function* () {
    while (true) {
      const event = yield* Queue.take(cards)
      if (event._tag === "CardOpened") return event.card
    }
  })

const nextSettled = (cards: Queue.Dequeue<ApprovalEvent.ApprovalEvent>) =>
  Effect.gen(function* () {
    while (true) {
      const event = yield* Queue.take(cards)
      if (event._tag === "CardSettled") return event.settlement
    }
  })

const failureOf = <A, E>(exit: Exit.Exit<A, E>) =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined

const assertWardenCard = (card: Card.CardView, message: RegExp) => {
  assert.strictEqual(card.method, "mcpServer/elicitation/request")
  assert.strictEqual(card.summary.kind, "elicitation")
  if (card.summary.kind === "elicitation") {
    assert.strictEqual(card.summary.server, "warden")
    assert.match(card.summary.message, message)
  }
}

describe("budgets", () => {
  it.scoped(
    "an item's token budget: yes raises it by the budget; the deadline's no interrupts the turn and fails the item budget-exhausted",
    () =>
      Effect.gen(function* () {
        const { fake, supervisor } = yield* supervise(
          { approvals: { deadlines: { default: "1 minute" } } },
          { turns: "manual" }
        )
        const cards = yield* supervisor.subscribeApprovals
        const handle = yield* supervisor.start({ id: 7, prompt: "x", budget: { maxTokens: 100 } })
        const thread = yield* handle.threadId
        yield* fake.nextRequest("turn/start")
        yield* fake.notify("thread/tokenUsage/updated", usage(thread, 60))
        yield* fake.notify("thread/tokenUsage/updated", usage(thread, 150))
        const first = yield* nextCard(cards)
        assertWardenCard(first, /^item 7 reached 150 tokens \(budget 100\): continue for another 100\?$/)
        assert.strictEqual(first.workItem, 7)
        assert.strictEqual((yield* supervisor.inbox.answer(first.id, Decision.Accept))._tag, "Settled")
        // Allowance 200 now: 180 asks nothing, 230 asks again.
        yield* fake.notify("thread/tokenUsage/updated", usage(thread, 180))
        yield* fake.notify("thread/tokenUsage/updated", usage(thread, 230))
        const second = yield* nextCard(cards)
        assertWardenCard(second, /reached 230 tokens \(budget 200\)/)
        yield* advance("1 minute")
        const refused = yield* nextSettled(cards)
        assert.deepStrictEqual([refused.card.id, refused.outcome], [second.id, "timeout"])
        // The turn is interrupted; the fake completes it interrupted; the item fails budget-exhausted.
        yield* fake.nextRequest("turn/interrupt")
        const exit = yield* Fiber.await(yield* Effect.fork(handle.await))
        const failure = failureOf(exit)
        assert.strictEqual(failure?.reason, "budget-exhausted")
        assert.include(failure?.detail, "reached 230 tokens (budget 200)")
        // Nothing of Warden's own cards was written to codex.
        assert.deepStrictEqual(fake.answersSoFar(), [])
      })
  )

  it.scoped("a turn-time budget asks after the time; a decline interrupts the turn", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({}, { turns: "manual" })
      const cards = yield* supervisor.subscribeApprovals
      const handle = yield* supervisor.start({ id: "t", prompt: "x", budget: { maxTurnTime: "5 minutes" } })
      yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      yield* advance("5 minutes")
      const card = yield* nextCard(cards)
      assertWardenCard(card, /^item t's turn has run 5m \(budget 5m per turn\): continue for another 5m\?$/)
      yield* supervisor.inbox.answer(card.id, Decision.Decline)
      yield* fake.nextRequest("turn/interrupt")
      const failure = failureOf(yield* Fiber.await(yield* Effect.fork(handle.await)))
      assert.strictEqual(failure?.reason, "budget-exhausted")
    })
  )

  it.scoped("a rule decides Warden's own question like any card (mcp server warden)", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise(
        {
          approvals: { rules: { rules: [{ id: "no-more", effect: "deny", match: { mcp: { server: "warden" } } }] } }
        },
        { turns: "manual" }
      )
      const cards = yield* supervisor.subscribeApprovals
      const handle = yield* supervisor.start({ prompt: "x", budget: { maxTokens: 10 } })
      const thread = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.notify("thread/tokenUsage/updated", usage(thread, 11))
      const settled = yield* nextSettled(cards)
      assert.deepStrictEqual([settled.outcome, settled.source], ["declined", { _tag: "Rule", ruleId: "no-more" }])
      yield* fake.nextRequest("turn/interrupt")
      assert.strictEqual(failureOf(yield* Fiber.await(yield* Effect.fork(handle.await)))?.reason, "budget-exhausted")
    })
  )

  it.scoped(
    "the run's budget holds admission while it asks; refused, waiting items fail budget-exhausted and the running one goes on",
    () =>
      Effect.gen(function* () {
        const { fake, supervisor } = yield* supervise(
          { concurrency: 1, runBudget: { maxTokens: 100 } },
          { turns: "manual" }
        )
        const cards = yield* supervisor.subscribeApprovals
        const first = yield* supervisor.start({ id: "a", prompt: "a" })
        const thread = yield* first.threadId
        yield* fake.nextRequest("turn/start")
        yield* fake.notify("thread/tokenUsage/updated", usage(thread, 120))
        const card = yield* nextCard(cards)
        assertWardenCard(card, /^the run reached 120 tokens \(budget 100\): continue for another 100\?$/)
        assert.isUndefined(card.workItem)
        // a's turn completes while the question is open: b is admitted but held at the run's gate.
        const second = yield* supervisor.start({ id: "b", prompt: "b" })
        yield* fake.completeTurn(thread, "turn_1", "completed", { message: "a done" })
        assert.strictEqual((yield* first.await).finalMessage, "a done")
        assert.strictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/start").length, 1)
        yield* supervisor.inbox.answer(card.id, Decision.Decline)
        const failure = failureOf(yield* Fiber.await(yield* Effect.fork(second.await)))
        assert.strictEqual(failure?.reason, "budget-exhausted")
        assert.strictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/start").length, 1)
        // And later ones too, at once.
        const third = yield* Effect.exit(supervisor.run({ prompt: "c" }))
        assert.strictEqual(failureOf(third)?.reason, "budget-exhausted")
      })
  )

  it.scoped("yes to the run's question admits on", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise(
        { concurrency: 1, runBudget: { maxTokens: 100 } },
        { turns: "manual" }
      )
      const cards = yield* supervisor.subscribeApprovals
      const first = yield* supervisor.start({ id: "a", prompt: "a" })
      const thread = yield* first.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.notify("thread/tokenUsage/updated", usage(thread, 120))
      const card = yield* nextCard(cards)
      const second = yield* supervisor.start({ id: "b", prompt: "b" })
      yield* fake.completeTurn(thread, "turn_1", "completed")
      yield* first.await
      yield* supervisor.inbox.answer(card.id, Decision.Accept)
      const threadB = yield* second.threadId
      assert.notStrictEqual(threadB, thread)
      assert.strictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/start").length, 2)
    })
  )
})
