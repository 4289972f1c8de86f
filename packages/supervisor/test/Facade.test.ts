import { FakeAppServer } from "@warden/testkit"
import { Card } from "@warden/approvals"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { createSupervisor } from "../src/index.js"
import { commandApproval } from "./support.js"

describe("promise facade", () => {
  it("runs a work item and resolves with its result", async () => {
    const fake = FakeAppServer.make({ finalMessage: "from the facade" })
    const warden = await createSupervisor({ transport: fake.layer })
    try {
      const result = await warden.run({ prompt: "hello", id: "a" })
      expect(result.status).toBe("completed")
      expect(result.finalMessage).toBe("from the facade")
      expect(result.id).toBe("a")
    } finally {
      await warden.close()
    }
    expect(fake.peer.stdinEnded()).toBe(true)
  })

  it("start gives async iterables, answers cards by word, and rejects with the typed failure", async () => {
    const fake = FakeAppServer.make({ turns: "manual" })
    const warden = await createSupervisor({ transport: fake.layer, restart: { maxAttempts: 0 } })
    try {
      const handle = await warden.start({ prompt: "x" })
      const threadId = await handle.threadId
      await Effect.runPromise(fake.nextRequest("turn/start"))
      const cards = warden.cards()[Symbol.asyncIterator]()
      expect((await cards.next()).value).toMatchObject({ _tag: "Snapshot" })
      const id = await Effect.runPromise(
        fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
      )
      const opened = (await cards.next()).value
      expect(opened._tag).toBe("Opened")
      const answered = await warden.answer(opened.card.id, "accept")
      expect(answered._tag).toBe("Settled")
      expect((await Effect.runPromise(fake.answerTo(id)))["result"]).toEqual({ decision: "accept" })
      await expect(warden.answer(opened.card.id, "not a word" as never)).rejects.toThrow(/not a decision/)
      await cards.return?.()
      await Effect.runPromise(fake.peer.exit(1))
      await expect(handle.result).rejects.toMatchObject({ _tag: "WorkItemFailed", reason: "connection-lost" })
      const seen: Array<string> = []
      for await (const event of handle.events) seen.push(event._tag)
      expect(seen).toContain("ThreadReady")
      expect(seen).toContain("ConnectionLost")
    } finally {
      await warden.close()
    }
  })
})

describe("promise facade: plain async handlers and checked configuration", () => {
  it("an async handler decides cards off the read loop; a throwing one refuses only its card; the item completes", async () => {
    const fake = FakeAppServer.make({ turns: "manual" })
    let calls = 0
    const warden = await createSupervisor({
      transport: fake.layer,
      approvals: {
        handler: async (card) => {
          calls++
          await new Promise((resolve) => setTimeout(resolve, 5))
          if (card.summary.kind === "command" && calls === 2) throw new Error("the embedder's handler broke")
          return "accept" as const
        }
      }
    })
    try {
      const handle = await warden.start({ prompt: "x" })
      const threadId = await handle.threadId
      await Effect.runPromise(fake.nextRequest("turn/start"))
      const first = await Effect.runPromise(
        fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
      )
      expect((await Effect.runPromise(fake.answerTo(first)))["result"]).toEqual({ decision: "accept" })
      const second = await Effect.runPromise(
        fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1", "call_2"))
      )
      expect((await Effect.runPromise(fake.answerTo(second)))["result"]).toEqual({ decision: "decline" })
      await Effect.runPromise(fake.completeTurn(threadId, "turn_1", "completed", { message: "done" }))
      expect((await handle.result).status).toBe("completed")
    } finally {
      await warden.close()
    }
  })

  it("a handler that never answers: the card refuses itself at its deadline and the handler's signal aborts", async () => {
    const fake = FakeAppServer.make({ turns: "manual" })
    let aborted: Promise<void> | undefined
    const warden = await createSupervisor({
      transport: fake.layer,
      approvals: {
        deadlines: { default: "200 millis" },
        handler: (_card, signal) => {
          aborted = new Promise((resolve) => signal.addEventListener("abort", () => resolve()))
          return new Promise(() => {})
        }
      }
    })
    try {
      const handle = await warden.start({ prompt: "x" })
      const threadId = await handle.threadId
      await Effect.runPromise(fake.nextRequest("turn/start"))
      const id = await Effect.runPromise(
        fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
      )
      expect((await Effect.runPromise(fake.answerTo(id)))["result"]).toEqual({ decision: "decline" })
      await aborted
      const open = await warden.openCards()
      expect(open).toEqual([])
    } finally {
      await warden.close()
    }
  })

  it("a bad configuration rejects with a ConfigError naming each field, and starts nothing", async () => {
    const fake = FakeAppServer.make()
    const error = await createSupervisor({
      transport: fake.layer,
      approvals: { deadlines: { default: "5m", perMethod: { "item/tool/call": "soon" } } },
      concurrency: 0,
      stallTimout: "1 minute"
    } as never).then(
      () => undefined,
      (e: unknown) => e
    )
    expect(error).toMatchObject({ _tag: "ConfigError" })
    const message = (error as Error).message
    expect(message).toContain("approvals.deadlines.default: expected a duration")
    expect(message).toContain('"5m"')
    expect(message).toContain("approvals.deadlines.perMethod.item/tool/call")
    expect(message).toContain("concurrency: expected a whole number of at least 1, not 0")
    expect(message).toContain("stallTimout: unknown setting")
    expect(fake.connections()).toBe(0)
    const notAFunction = await createSupervisor({
      transport: fake.layer,
      approvals: { handler: "accept" as never }
    }).then(
      () => undefined,
      (e: unknown) => e
    )
    expect((notAFunction as Error).message).toContain("approvals.handler: expected a function")
  })

  it("a remember hook that is not a function is a ConfigError; without a hook, always rejects with a TypeError", async () => {
    const fake = FakeAppServer.make()
    const bad = await createSupervisor({ transport: fake.layer, approvals: { remember: "yes" as never } }).then(
      () => undefined,
      (e: unknown) => e
    )
    expect(bad).toMatchObject({ _tag: "ConfigError" })
    expect((bad as Error).message).toContain("approvals.remember: expected a function")
    expect(fake.connections()).toBe(0)
    const warden = await createSupervisor({ transport: fake.layer })
    try {
      await expect(warden.always("c1")).rejects.toThrow(/needs a remember hook/)
    } finally {
      await warden.close()
    }
  })
})

describe("promise facade: always", () => {
  it("always stores through the hook, then accepts; a later card is allowed by the lookup; a deny rule still wins; a refusing hook answers nothing", async () => {
    const fake = FakeAppServer.make({ turns: "manual" })
    // The embedder's store: a remembered "rule" here allows every command (as wide as can be), so
    // only the configured deny can stop one.
    let rules: Array<string> = []
    const hookCalls: Array<[string, string, number | undefined]> = []
    let refuseNext = true
    const warden = await createSupervisor({
      transport: fake.layer,
      approvals: {
        rules: { rules: [{ id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } }] },
        remembered: (request) =>
          request._tag === "Known" && request.method === "item/commandExecution/requestApproval" && rules.length > 0
            ? { ruleId: rules[0]! }
            : undefined,
        remember: async (card, options) => {
          hookCalls.push([card.id, options.author, options.expiresAt])
          if (refuseNext) {
            refuseNext = false
            throw new Error("only a simple command can be remembered")
          }
          rules = [...rules, "m1"]
          return { ruleId: "m1" }
        }
      }
    })
    try {
      const settled = (async () => {
        const out: Array<[string, string]> = []
        for await (const event of warden.approvalEvents()) {
          if (event._tag === "CardSettled")
            out.push([event.settlement.card.id, Card.describeSource(event.settlement.source)])
          if (out.length === 3) return out
        }
        return out
      })()
      const handle = await warden.start({ prompt: "x" })
      const threadId = await handle.threadId
      await Effect.runPromise(fake.nextRequest("turn/start"))
      const cards = warden.cards()[Symbol.asyncIterator]()
      expect((await cards.next()).value).toMatchObject({ _tag: "Snapshot" })
      const first = await Effect.runPromise(
        fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
      )
      const opened = (await cards.next()).value
      expect(opened._tag).toBe("Opened")
      const cardId: string = opened.card.id

      // The hook refuses: nothing is answered, the card stays open.
      const refused = await warden.always(cardId, { author: "alice" })
      expect(refused).toEqual({ _tag: "NotRemembered", cardId, reason: "only a simple command can be remembered" })
      expect((await warden.openCards()).map((c) => c.id)).toEqual([cardId])

      // Stored, then accepted.
      const expiresAt = Date.now() + 60_000
      const remembered = await warden.always(cardId, { author: "alice", expiresAt })
      expect(remembered).toMatchObject({ _tag: "Remembered", cardId, ruleId: "m1", answer: { _tag: "Settled" } })
      expect((await Effect.runPromise(fake.answerTo(first)))["result"]).toEqual({ decision: "accept" })
      expect(hookCalls).toEqual([
        [cardId, "alice", undefined],
        [cardId, "alice", expiresAt]
      ])

      // The next command is allowed by the remembered rule; `rm` is declined by the deny rule.
      const second = await Effect.runPromise(
        fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1", "call_2"))
      )
      expect((await Effect.runPromise(fake.answerTo(second)))["result"]).toEqual({ decision: "accept" })
      const rm = await Effect.runPromise(
        fake.request("item/commandExecution/requestApproval", {
          ...commandApproval(threadId, "turn_1", "call_3"),
          command: "rm -rf /tmp/ws/x"
        })
      )
      expect((await Effect.runPromise(fake.answerTo(rm)))["result"]).toEqual({ decision: "decline" })
      const sources = await settled
      expect(sources.map(([, source]) => source)).toEqual(["person", "remembered:m1", "rule:no-rm"])
      expect(sources[0]![0]).toBe(cardId)

      // A card no longer open: nothing is stored.
      expect(await warden.always(cardId)).toEqual({ _tag: "NotRemembered", cardId, reason: `no open card ${cardId}` })
      expect(hookCalls.length).toBe(2)
      await cards.return?.()
    } finally {
      await warden.close()
    }
  })
})
