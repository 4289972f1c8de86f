/**
 * `Remembering`: "always" wired to a connection's cards, as the promise facade's users do it (docs/embedding.md):
 * the ledger in a ManagedRuntime, `Remembering.lookup` as the connection cards' `remembered`, and
 * `Remembering.always` behind the facade's `remember` hook. A card answered "always" is stored
 * (scope, author, expiry, card) and accepted; the next matching card is accepted by it; a deny rule
 * still wins; a card no scope can be derived for is not answered.
 */
import { FakeAppServer } from "@warden/testkit"
import { createSupervisor } from "@warden/supervisor"
import { Card } from "@warden/approvals"
import { Effect, Either, ManagedRuntime } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Ledger, Remembering } from "../src/index.js"
import { commandParams } from "./support.js"

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true })
})

describe("Remembering through the promise facade", () => {
  it("always stores a scoped rule in the ledger and accepts; the next matching card is accepted by it; a deny wins; a compound command is not remembered", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-remembering-"))
    dirs.push(dir)
    const filename = Path.join(dir, "ledger.db")
    const ledgerRuntime = ManagedRuntime.make(Ledger.layerSqlite({ filename }))
    const fake = FakeAppServer.make({ turns: "manual" })
    try {
      const ledger = await ledgerRuntime.runPromise(Ledger.Ledger)
      const run = await ledgerRuntime.runPromise(ledger.beginRun({ label: "facade" }))
      const remembering = await ledgerRuntime.runPromise(Remembering.make(ledger, run.id))
      const warden = await createSupervisor({
        transport: fake.layer,
        approvals: {
          rules: { rules: [{ id: "no-push", effect: "deny", match: { command: { argvPrefix: ["git", "push"] } } }] },
          remembered: remembering.lookup,
          remember: (card, options) =>
            ledgerRuntime.runPromise(remembering.always(card, options)).then((rule) => ({ ruleId: rule.id }))
        }
      })
      try {
        const settled = (async () => {
          const out: Array<string> = []
          for await (const event of warden.approvalEvents()) {
            if (event._tag === "CardSettled")
              out.push(
                `${event.settlement.card.summary.kind === "command" ? event.settlement.card.summary.command : "?"} ${Card.describeSource(event.settlement.source)}`
              )
            if (out.length === 3) return out
          }
          return out
        })()
        const handle = await warden.start({ prompt: "x" })
        const threadId = await handle.threadId
        await Effect.runPromise(fake.nextRequest("turn/start"))
        const ask = (command: string, itemId: string) =>
          Effect.runPromise(
            fake.request("item/commandExecution/requestApproval", {
              ...commandParams(threadId, "turn_1", command),
              itemId
            })
          )
        // The inbox: a snapshot, then every change; the next card opened with this command.
        const updates = warden.cards()[Symbol.asyncIterator]()
        const openCard = async (command: string): Promise<Card.CardView> => {
          for (;;) {
            const next = await updates.next()
            if (next.done === true) throw new Error("the inbox ended")
            const update = next.value
            const cards = update._tag === "Snapshot" ? update.cards : update._tag === "Opened" ? [update.card] : []
            const card = cards.find((c) => c.summary.kind === "command" && c.summary.command === command)
            if (card !== undefined) return card
          }
        }

        // A compound command: no scope, nothing stored, the card stays open (then declined by hand).
        const compound = await ask("echo a; echo b", "call_0")
        const compoundCard = await openCard("echo a; echo b")
        const notRemembered = await warden.always(compoundCard.id, { author: "alice" })
        expect(notRemembered._tag).toBe("NotRemembered")
        expect(notRemembered._tag === "NotRemembered" && notRemembered.reason).toMatch(
          /only a simple command .* can be remembered/
        )
        expect((await warden.openCards()).map((c) => c.id)).toEqual([compoundCard.id])
        await warden.answer(compoundCard.id, "decline")
        expect((await Effect.runPromise(fake.answerTo(compound)))["result"]).toEqual({ decision: "decline" })

        // `rm -rf build`: always → stored (exact argv), accepted.
        const first = await ask("rm -rf build", "call_1")
        const card = await openCard("rm -rf build")
        expect(Either.getOrThrow(Remembering.scopeForCard(card))).toEqual({
          _tag: "Command",
          argv: ["rm", "-rf", "build"],
          exact: true
        })
        const expiresAt = Date.now() + 3_600_000
        const always = await warden.always(card.id, { author: "alice", expiresAt })
        expect(always, JSON.stringify(always)).toMatchObject({
          _tag: "Remembered",
          cardId: card.id,
          answer: { _tag: "Settled" }
        })
        expect((await Effect.runPromise(fake.answerTo(first)))["result"]).toEqual({ decision: "accept" })
        const ruleId = always._tag === "Remembered" ? always.ruleId : ""
        const stored = await ledgerRuntime.runPromise(ledger.rememberedRules())
        expect(stored.map((r) => [r.id, r.scope, r.author, r.expiresAt, r.from])).toEqual([
          [
            ruleId,
            { _tag: "Command", argv: ["rm", "-rf", "build"], exact: true },
            "alice",
            expiresAt,
            { runId: run.id, cardId: card.id }
          ]
        ])
        expect(remembering.rules().map((r) => r.id)).toEqual([ruleId])

        // The same command again: accepted by the remembered rule (no person asked).
        const again = await ask("rm -rf build", "call_2")
        expect((await Effect.runPromise(fake.answerTo(again)))["result"]).toEqual({ decision: "accept" })
        expect(await settled).toEqual([
          "echo a; echo b person",
          "rm -rf build person",
          `rm -rf build remembered:${ruleId}`
        ])
        await updates.return?.()
      } finally {
        await warden.close()
      }

      // Later connection cards with a deny rule over the same command: the deny wins over the remembered allow.
      const later = await ledgerRuntime.runPromise(Remembering.make(ledger, "r-later"))
      expect(later.rules().length).toBe(1)
      const fake2 = FakeAppServer.make({ turns: "manual" })
      const denied = await createSupervisor({
        transport: fake2.layer,
        approvals: {
          rules: { rules: [{ id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } }] },
          remembered: later.lookup
        }
      })
      try {
        const handle = await denied.start({ prompt: "y" })
        const threadId = await handle.threadId
        await Effect.runPromise(fake2.nextRequest("turn/start"))
        const id = await Effect.runPromise(
          fake2.request("item/commandExecution/requestApproval", commandParams(threadId, "turn_1", "rm -rf build"))
        )
        expect((await Effect.runPromise(fake2.answerTo(id)))["result"]).toEqual({ decision: "decline" })
      } finally {
        await denied.close()
      }
    } finally {
      await ledgerRuntime.dispose()
    }
  })
})
