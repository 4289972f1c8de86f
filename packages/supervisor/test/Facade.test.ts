import { FakeAppServer } from "@warden/testkit"
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
      const id = await Effect.runPromise(fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1")))
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
