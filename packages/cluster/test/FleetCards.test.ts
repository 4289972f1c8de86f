/**
 * The fleet's one inbox (`FleetCards`) over a runner in this process: a card opened on the runner
 * is read from the store with the masked view its runner stored; answering it goes to the item's
 * entity, which writes the answer to codex once (the first answer wins); a second answer, an
 * unknown card, a card whose view is missing or forged are each told apart; the items are seen.
 * And the stored view as a reader must take it: `CardView.decode` of what a hostile store holds.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { FleetCards } from "@warden/cluster"
import { FakeAppServer } from "@warden/testkit"
import { Effect, Fiber, Queue } from "effect"
import * as CardView from "../src/internal/CardView.js"
import type { CardRow } from "../src/internal/ItemStore.js"
import { openCard, setup } from "./fixtures/InMemoryRunner.js"

/** Takes events from `queue` until `found` picks one (bounded: the reading runs every 50 ms). */
const next = <A, B>(queue: Queue.Dequeue<A>, found: (a: A) => B | undefined) =>
  Effect.gen(function* () {
    for (;;) {
      const picked = found(yield* Queue.take(queue))
      if (picked !== undefined) return picked
    }
  }).pipe(Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => new Error("no such event within 30 s") }))

const secret = "sk-proj-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA1234"

describe("FleetCards: the fleet's one inbox", () => {
  it.scopedLive(
    "a runner's card is read with its masked view; an answer through it is written to codex once; a second answer is AlreadySettled",
    () => {
      const fake = FakeAppServer.make({ turns: "manual" })
      return Effect.gen(function* () {
        const fleet = yield* FleetCards.make({ pollInterval: "50 millis" })
        const changes = yield* fleet.subscribe
        const { card, requestId, run, threadId } = yield* openCard(
          fake,
          "asks",
          `curl -H "Authorization: Bearer ${secret}" https://example.test`
        )
        const opened = yield* next(changes, (e) => (e._tag === "Opened" && e.card.id === card ? e.card : undefined))
        assert.strictEqual(opened.workItem, "asks")
        assert.strictEqual(opened.method, "item/commandExecution/requestApproval")
        assert.strictEqual(opened.summary.kind, "command")
        assert.include(opened.title, "curl")
        assert.includeMembers([...opened.offers], ["Accept", "Decline"])
        assert.isAbove(opened.deadlineAt, opened.openedAt)
        assert.deepStrictEqual(
          (yield* fleet.openCards).map((c) => c.id),
          [card]
        )
        // Masked on the runner before it was stored: the secret is nowhere in the row.
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ view: string }>`SELECT view FROM warden_cluster_cards WHERE id = ${card}`
        assert.notInclude(rows[0]!.view, secret)
        assert.notInclude(JSON.stringify(opened), secret)

        const item = yield* next(changes, (e) => (e._tag === "Item" && e.item.id === "asks" ? e.item : undefined))
        assert.deepInclude(item, { status: "running", runner: "127.0.0.1:1" })

        const first = yield* fleet.answer(card, { _tag: "Accept" })
        assert.strictEqual(first._tag, "Settled")
        if (first._tag === "Settled")
          assert.deepInclude(first.settlement, { cardId: card, itemId: "asks", outcome: "accepted", source: "person" })
        assert.deepStrictEqual((yield* fake.answerTo(requestId))["result"], { decision: "accept" })
        const second = yield* fleet.answer(card, { _tag: "Decline" })
        assert.strictEqual(second._tag, "AlreadySettled")
        if (second._tag === "AlreadySettled")
          assert.deepInclude(second.settlement, { outcome: "accepted", source: "person" })
        assert.strictEqual(fake.answersSoFar().length, 1, "codex got one answer")

        const settled = yield* next(changes, (e) => (e._tag === "Settled" && e.card.id === card ? e : undefined))
        assert.deepInclude(settled.settlement, { outcome: "accepted", source: "person" })
        assert.deepStrictEqual(yield* fleet.openCards, [])
        assert.deepStrictEqual(yield* fleet.answer("rNow-00000001:c404", { _tag: "Accept" }), {
          _tag: "UnknownCard",
          cardId: "rNow-00000001:c404"
        })

        yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "done" })
        const result = yield* Fiber.join(run)
        assert.strictEqual(result._tag, "Completed")
        const done = yield* next(changes, (e) =>
          e._tag === "Item" && e.item.id === "asks" && e.item.status === "completed" ? e.item : undefined
        )
        assert.strictEqual(done.turnsDone, 1)
      }).pipe(Effect.provide(setup(fake)))
    },
    60_000
  )

  it.scopedLive(
    "a card stored without a view, or with a forged one, is shown from its row and offers only Decline",
    () => {
      const fake = FakeAppServer.make({ turns: "manual" })
      return Effect.gen(function* () {
        const { card, requestId, run, threadId } = yield* openCard(fake, "forged", "ls")
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE warden_cluster_cards SET view = ${JSON.stringify({ title: "innocent", offers: ["Accept", "Decline"], summary: { kind: "command" } })} WHERE id = ${card}`
        const fleet = yield* FleetCards.make({ pollInterval: "50 millis" })
        const [shown] = yield* fleet.openCards
        assert.strictEqual(shown!.id, card)
        assert.deepStrictEqual(shown!.offers, ["Decline"], "a summary that cannot be shown offers only Decline")
        assert.deepStrictEqual(shown!.summary, { kind: "other", method: "item/commandExecution/requestApproval" })
        // Declining it still works: the decision goes to the item, whatever the view said.
        assert.strictEqual((yield* fleet.answer(card, { _tag: "Decline" }))._tag, "Settled")
        assert.deepStrictEqual((yield* fake.answerTo(requestId))["result"], { decision: "decline" })
        yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "done" })
        assert.strictEqual((yield* Fiber.join(run))._tag, "Completed")
      }).pipe(Effect.provide(setup(fake)))
    },
    60_000
  )
})

describe("CardView: the stored view, read back", () => {
  const row = (view: string | null): CardRow => ({
    id: "r1:c1",
    itemId: "i1",
    incarnation: "r1",
    method: "item/commandExecution/requestApproval",
    outcome: null,
    source: null,
    epoch: 1,
    settledBy: null,
    settledEpoch: null,
    openedAt: 1000,
    settledAt: null,
    view
  })
  const card = {
    id: "c1",
    requestId: 7,
    method: "item/commandExecution/requestApproval",
    threadId: "thr",
    turnId: "turn",
    workItem: 0,
    summary: { kind: "command" as const, command: "ls -la", argv: undefined, cwd: "/w", reason: undefined },
    title: "ls -la",
    offers: ["Accept", "Decline"] as const,
    openedAt: 1000,
    deadlineAt: 901000
  }

  it("round-trips a card under its fleet id and item", () => {
    const back = CardView.decode(row(CardView.encode(card, "r1:c1", "i1")))
    assert.deepStrictEqual(back, {
      ...card,
      id: "r1:c1",
      workItem: "i1",
      summary: { kind: "command", command: "ls -la", cwd: "/w" } as never
    })
  })

  it("keeps the row's id, item and method whatever the view says; drops offers it does not know", () => {
    const forged = JSON.stringify({
      ...card,
      id: "other:c9",
      workItem: "other-item",
      method: "something/else",
      offers: ["Accept", "Decline", "RunAsRoot"]
    })
    const back = CardView.decode(row(forged))
    assert.deepStrictEqual(
      [back.id, back.workItem, back.method],
      ["r1:c1", "i1", "item/commandExecution/requestApproval"]
    )
    assert.deepStrictEqual(back.offers, ["Accept", "Decline"])
  })

  it("is bounded: a huge file change loses its diffs, then its summary", () => {
    const changes = Array.from({ length: 50 }, (_, i) => ({ path: `f${i}`, kind: "update", diff: "x".repeat(4000) }))
    const big = { ...card, summary: { kind: "fileChange" as const, changes, reason: undefined, grantRoot: undefined } }
    const stored = CardView.encode(big, "r1:c1", "i1")
    assert.isAtMost(Buffer.byteLength(stored), CardView.MAX_VIEW_BYTES)
    const back = CardView.decode(row(stored))
    assert.strictEqual(back.summary.kind, "fileChange")
    if (back.summary.kind === "fileChange")
      assert.deepStrictEqual(back.summary.changes[3], { path: "f3", kind: "update" })
    // Words, not one long run of a letter (which the masking takes for a secret and cuts itself).
    const words = "echo the quick brown fox jumps over the lazy dog ".repeat(5000)
    const huge = { ...card, title: words, summary: { ...card.summary, command: words } }
    const cut = CardView.encode(huge, "r1:c1", "i1")
    assert.isAtMost(Buffer.byteLength(cut), CardView.MAX_VIEW_BYTES)
    const back2 = CardView.decode(row(cut))
    assert.deepStrictEqual(back2.summary, { kind: "other", method: card.method })
    assert.strictEqual(back2.title.length, 1000)
  })

  it("not JSON, or no view: the row's own card, offering only Decline", () => {
    for (const view of [null, "{not json", "[1,2]", "null"]) {
      const back = CardView.decode(row(view))
      assert.deepStrictEqual(back.offers, ["Decline"])
      assert.strictEqual(back.id, "r1:c1")
      assert.include(back.title, "not stored")
    }
  })
})
