/**
 * One answer for many cards: cards asking the same thing share a group (same method, same
 * decision-relevant facts, whatever the cwd or the model's reason), and `answerGroup` answers each
 * open card of the group once, in its own method's vocabulary; the others stay open.
 */
import { assert, describe, it } from "@effect/vitest"
import { Decision, ServerRequests } from "@warden/protocol"
import { Effect } from "effect"
import { CardGroup } from "../src/index.js"
import type { Card } from "../src/index.js"
import { captured, deskSetup } from "./support.js"

const command = (id: number, text: string, extra: Record<string, unknown> = {}) =>
  ServerRequests.decode(id, "item/commandExecution/requestApproval", {
    threadId: "thr_1",
    turnId: "turn_1",
    itemId: `call_${id}`,
    command: text,
    cwd: `/work/item-${id}`,
    reason: `reason ${id}`,
    ...extra
  })

const opened = (
  setup: Effect.Effect.Success<ReturnType<typeof deskSetup>>,
  requests: ReadonlyArray<ServerRequests.DecodedRequest>
) =>
  Effect.gen(function* () {
    const cards: Array<Card.CardView> = []
    for (const request of requests) {
      const result = yield* setup.connectionCards.open(request, { parent: setup.thread })
      assert.strictEqual(result._tag, "Opened")
      if (result._tag === "Opened") cards.push(result.card)
    }
    return cards
  })

describe("CardGroup", () => {
  it.scoped("the same command in other places, for other reasons, is one group; other words, another", () =>
    Effect.gen(function* () {
      const setup = yield* deskSetup()
      const [a, b, c, d] = yield* opened(setup, [
        command(1, "/bin/bash -lc 'pnpm test'"),
        command(2, "/bin/bash -lc 'pnpm test'"),
        command(3, "/bin/bash -lc 'pnpm test --watch'"),
        command(4, "pnpm test")
      ])
      const group = CardGroup.groupOf(a!)
      assert.match(group!, /^g[0-9a-f]{16}$/)
      assert.strictEqual(CardGroup.groupOf(b!), group)
      assert.notStrictEqual(CardGroup.groupOf(c!), group)
      // The same words however the command line is written: `bash -lc 'pnpm test'` runs `pnpm test`.
      assert.deepStrictEqual(
        a!.summary.kind === "command" && a!.summary.argv,
        d!.summary.kind === "command" && d!.summary.argv
      )
      assert.strictEqual(CardGroup.groupOf(d!), group)
    })
  )

  it.scoped("file changes group only when every path, kind and diff agree; forms and questions never group", () =>
    Effect.gen(function* () {
      const setup = yield* deskSetup()
      const patch = captured("item/fileChange/requestApproval")
      const withChanges = (id: number, diff: string) =>
        setup.connectionCards.open(ServerRequests.decode(id, patch.method, patch.params as never), {
          parent: setup.thread,
          context: { fileChanges: [{ path: "/repo/a.ts", kind: "update", diff }] }
        })
      const one = yield* withChanges(1, "+x")
      const same = yield* withChanges(2, "+x")
      const other = yield* withChanges(3, "+y")
      const view = (r: typeof one) => (r._tag === "Opened" ? r.card : undefined)!
      assert.strictEqual(CardGroup.groupOf(view(one)), CardGroup.groupOf(view(same)))
      assert.notStrictEqual(CardGroup.groupOf(view(one)), CardGroup.groupOf(view(other)))
      const questions = yield* setup.connectionCards.open(
        captured("item/tool/requestUserInput", () => true, 9),
        { parent: setup.thread }
      )
      assert.isUndefined(CardGroup.groupOf(view(questions)))
    })
  )

  it.scoped(
    "answerGroup answers every open card of the group once; other cards, and cards not offering the decision, stay open",
    () =>
      Effect.gen(function* () {
        const setup = yield* deskSetup()
        const cards = yield* opened(setup, [
          command(1, "pnpm test"),
          command(2, "pnpm test"),
          command(3, "pnpm test", { availableDecisions: ["decline", "cancel"] }),
          command(4, "rm -rf build"),
          command(5, "pnpm test")
        ])
        const group = CardGroup.groupOf(cards[0]!)!
        assert.strictEqual(CardGroup.groupOf(cards[2]!), group)
        const result = yield* setup.approvals.answerGroup(group, Decision.Accept)
        assert.deepStrictEqual(
          result.answered.map((a) => [a.cardId, a.result._tag]),
          [
            [cards[0]!.id, "Settled"],
            [cards[1]!.id, "Settled"],
            [cards[4]!.id, "Settled"]
          ]
        )
        assert.deepStrictEqual(result.notOffered, [cards[2]!.id])
        // Each request answered once, in its method's words, and only those.
        assert.deepStrictEqual(
          setup.wire.written,
          [1, 2, 5].map((id) => ({ jsonrpc: "2.0", id, result: { decision: "accept" } }))
        )
        assert.deepStrictEqual(
          (yield* setup.approvals.openCards).map((c) => c.id),
          [cards[2]!.id, cards[3]!.id]
        )
        // Again: nothing left to answer in the group but the card that does not offer it; nothing written.
        const again = yield* setup.approvals.answerGroup(group, Decision.Accept)
        assert.deepStrictEqual([again.answered.length, again.notOffered], [0, [cards[2]!.id]])
        assert.strictEqual(setup.wire.written.length, 3)
        const settled = (yield* setup.drained()).filter((e) => e._tag === "CardSettled")
        assert.deepStrictEqual(
          settled.map(
            (e) => e._tag === "CardSettled" && [e.settlement.card.id, e.settlement.outcome, e.settlement.source._tag]
          ),
          [
            [cards[0]!.id, "accepted", "Person"],
            [cards[1]!.id, "accepted", "Person"],
            [cards[4]!.id, "accepted", "Person"]
          ]
        )
      })
  )
})
