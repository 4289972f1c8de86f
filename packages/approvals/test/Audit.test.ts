import { assert, describe, it } from "@effect/vitest"
import { Decision, ServerRequests } from "@warden/protocol"
import { Effect, Scope, TestClock } from "effect"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Approvals, Audit } from "../src/index.js"
import type { ApprovalEvent } from "../src/index.js"
import { captured, recordingLine } from "./support.js"

const secret = "sk-live-9f8e7d6c5b4a39281726354abcdef"

describe("audit trail", () => {
  it.scoped("every opening, settling and late decision is one JSON line; secret values never appear", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "warden-audit-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const path = join(dir, "audit.jsonl")
      const layer = Approvals.layer({ deadlines: { default: "1 minute" } })
      yield* Effect.gen(function* () {
        const approvals = yield* Approvals.Approvals
        yield* Audit.jsonlSink(path)
        const wire = recordingLine()
        const connectionCards = approvals.cardsFor(wire.line)
        const thread = yield* Scope.make()
        // An MCP tool call whose inputs carry a secret, and a command whose line carries one.
        const mcp = captured("mcpServer/elicitation/request", (p) => p._meta?.codex_approval_kind === "mcp_tool_call")
        const params = {
          ...(mcp.params as any),
          _meta: { ...(mcp.params as any)._meta, tool_params: { api_key: secret, why: "probe" } }
        }
        const opened = yield* connectionCards.open(ServerRequests.decode(1, mcp.method, params), { parent: thread })
        const cmd = captured("item/commandExecution/requestApproval")
        const cmdParams = {
          ...(cmd.params as any),
          command: `/bin/bash -lc 'curl -H "Authorization: Bearer ${secret}" https://x'`
        }
        yield* connectionCards.open(ServerRequests.decode(2, cmd.method, cmdParams), { parent: thread })
        const cardId = opened._tag === "Opened" ? opened.card.id : ""
        yield* approvals.answer(cardId, Decision.Accept)
        yield* approvals.answer(cardId, Decision.Decline) // late
        yield* TestClock.adjust("1 minute") // the command card times out
        yield* Effect.yieldNow()
      }).pipe(Effect.provide(layer), Effect.scoped)
      const text = readFileSync(path, "utf8")
      const lines = text
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l))
      assert.deepStrictEqual(
        lines.map((l) => l.type),
        ["card.opened", "card.opened", "card.settled", "card.late", "card.settled"]
      )
      assert.deepStrictEqual(
        lines.filter((l) => l.type === "card.settled").map((l) => [l.outcome, l.source]),
        [
          ["accepted", "person"],
          ["timeout", "deadline"]
        ]
      )
      assert.strictEqual(lines[3].outcome, "accepted")
      for (const line of lines) {
        for (const key of ["ts", "cardId", "method", "threadId", "summary"]) assert.property(line, key)
      }
      assert.notInclude(text, secret)
      assert.notInclude(text, "9f8e7d6c5b4a")
    })
  )

  it.scoped(
    "decisionOf is the record's decision, source, channel, outcome, written, latency and detail, for every event",
    () =>
      Effect.gen(function* () {
        const events: Array<ApprovalEvent.ApprovalEvent> = []
        yield* Effect.gen(function* () {
          const approvals = yield* Approvals.Approvals
          yield* approvals.observeEvents((e) => events.push(e))
          const connectionCards = approvals.cardsFor(recordingLine().line)
          const thread = yield* Scope.make()
          const cmd = captured("item/commandExecution/requestApproval")
          const open = (id: number) =>
            connectionCards.open(
              ServerRequests.decode(id, cmd.method, { ...(cmd.params as any), command: `echo ${secret}` }),
              { parent: thread }
            )
          const first = yield* open(1)
          yield* open(2)
          const cardId = first._tag === "Opened" ? first.card.id : ""
          yield* approvals.answer(cardId, Decision.Accept, "web")
          yield* approvals.answer(cardId, Decision.Decline) // late
          yield* TestClock.adjust("1 minute") // the second card times out
          yield* Effect.yieldNow()
        }).pipe(Effect.provide(Approvals.layer({ deadlines: { default: "1 minute" } })), Effect.scoped)
        assert.deepStrictEqual(
          events.map((e) => e._tag),
          ["CardOpened", "CardOpened", "CardSettled", "LateDecision", "CardSettled"]
        )
        for (const event of events) {
          const r = Audit.record(event)
          const { decision, source, channel, outcome, written, latencyMs, detail } = r
          assert.deepStrictEqual(Audit.decisionOf(event), {
            decision,
            source,
            channel,
            outcome,
            written,
            latencyMs,
            detail
          })
        }
        const web = Audit.decisionOf(events[2]!)
        assert.deepInclude(web, {
          decision: "accept",
          source: "person",
          channel: "web",
          outcome: "accepted",
          written: true
        })
        assert.strictEqual(Audit.decisionOf(events[0]!).outcome, null)
        assert.strictEqual(Audit.decisionOf(events[4]!).source, "deadline")
        assert.notInclude(JSON.stringify(events.map(Audit.decisionOf)), secret)
      })
  )
})
