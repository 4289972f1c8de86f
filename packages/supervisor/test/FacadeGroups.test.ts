/**
 * The promise facade answers a group of cards at once (`answerGroup`), with the group read from the
 * cards it shows (`CardGroup.groupOf`): each card of the group is written once.
 */
import { CardGroup } from "@warden/approvals"
import { FakeAppServer } from "@warden/testkit"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { createSupervisor } from "../src/index.js"
import { commandApproval } from "./support.js"

describe("promise facade: one answer for many cards", () => {
  it("answerGroup answers every open card of the group once; a card of another group stays open", async () => {
    const fake = FakeAppServer.make({ turns: "manual" })
    const warden = await createSupervisor({ transport: fake.layer, restart: { maxAttempts: 0 } })
    try {
      const handle = await warden.start({ prompt: "x" })
      const threadId = await handle.threadId
      await Effect.runPromise(fake.nextRequest("turn/start"))
      const updates = warden.cards()[Symbol.asyncIterator]()
      expect((await updates.next()).value).toMatchObject({ _tag: "Snapshot", cards: [] })
      const ask = (itemId: string, command: string) =>
        Effect.runPromise(
          fake.request("item/commandExecution/requestApproval", {
            ...commandApproval(threadId, "turn_1", itemId),
            command
          })
        )
      const ids = [await ask("a", "pnpm test"), await ask("b", "pnpm test"), await ask("c", "make lint")]
      const opened = []
      for (let i = 0; i < 3; i++) opened.push((await updates.next()).value.card)
      await updates.return?.()
      const [a, b, c] = opened
      const group = CardGroup.groupOf(a!)!
      expect(CardGroup.groupOf(b!)).toBe(group)
      expect(CardGroup.groupOf(c!)).not.toBe(group)
      const result = await warden.answerGroup(group, "accept")
      expect(result.answered.map((r) => r.result._tag)).toEqual(["Settled", "Settled"])
      expect((await Effect.runPromise(fake.answerTo(ids[0]!)))["result"]).toEqual({ decision: "accept" })
      expect((await Effect.runPromise(fake.answerTo(ids[1]!)))["result"]).toEqual({ decision: "accept" })
      expect((await warden.openCards()).map((card) => card.id)).toEqual([c!.id])
      expect(fake.answersSoFar().length).toBe(2)
      await expect(warden.answerGroup(group, "not a word" as never)).rejects.toThrow(/not a decision/)
    } finally {
      await warden.close()
    }
  })
})
