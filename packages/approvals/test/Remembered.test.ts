/**
 * The connection cards' `remembered` lookup (remembered allows, "always"): consulted only after the rules
 * (a deny rule always wins, an allow rule decides as itself) and the safety filter, before the
 * handler and the person; a lookup that throws never accepts.
 */
import { assert, describe, it } from "@effect/vitest"
import { ServerRequests } from "@warden/protocol"
import { Effect, TestClock } from "effect"
import { allowCmd, denyCmd, rules } from "@warden/test-support/PolicyRules"
import type { Approvals } from "../src/index.js"
import type { Settlement } from "../src/Card.js"
import { deskSetup } from "./support.js"

const commandRequest = (command: string, id = 0) =>
  ServerRequests.decode(id, "item/commandExecution/requestApproval", {
    threadId: "thr_1",
    turnId: "turn_1",
    itemId: "call_1",
    command: `/bin/bash -lc '${command}'`,
    cwd: "/repo",
    reason: "needs it",
    availableDecisions: ["accept", "cancel"]
  })

const setup = (config: Approvals.ApprovalsConfig) =>
  Effect.map(deskSetup(config), ({ connectionCards, drained, thread, wire }) => ({
    connectionCards,
    thread,
    wire,
    settlements: () =>
      Effect.map(drained(), (events) => events.flatMap((e) => (e._tag === "CardSettled" ? [e.settlement] : [])))
  }))

/** A remembered allow for `pnpm test` (argv prefix), as a ledger snapshot would answer it. */
const rememberPnpmTest: Approvals.DeskConfig["remembered"] = (request) =>
  request._tag === "Known" &&
  request.method === "item/commandExecution/requestApproval" &&
  /'pnpm test'$/.test(request.params.command ?? "")
    ? { ruleId: "r1" }
    : undefined

const only = (list: ReadonlyArray<Settlement>): Settlement => {
  assert.strictEqual(list.length, 1)
  return list[0]!
}

describe("remembered allows", () => {
  it.scoped("a matching remembered allow accepts at once, source remembered:<id>, written once", () =>
    Effect.gen(function* () {
      const { connectionCards, settlements, thread, wire } = yield* setup({ remembered: rememberPnpmTest })
      const opened = yield* connectionCards.open(commandRequest("pnpm test"), { parent: thread })
      assert.strictEqual(opened._tag, "Settled")
      const s = only(yield* settlements())
      assert.strictEqual(s.outcome, "accepted")
      assert.deepStrictEqual(s.source, { _tag: "Remembered", ruleId: "r1" })
      assert.deepStrictEqual(wire.written, [{ jsonrpc: "2.0", id: 0, result: { decision: "accept" } }])
    })
  )

  it.scoped("a deny rule wins over a remembered allow", () =>
    Effect.gen(function* () {
      const { connectionCards, settlements, thread, wire } = yield* setup({
        rules: rules(denyCmd("no-pnpm", "pnpm")),
        remembered: rememberPnpmTest
      })
      yield* connectionCards.open(commandRequest("pnpm test"), { parent: thread })
      const s = only(yield* settlements())
      assert.strictEqual(s.outcome, "declined")
      assert.deepStrictEqual(s.source, { _tag: "Rule", ruleId: "no-pnpm" })
      assert.deepStrictEqual(wire.written, [{ jsonrpc: "2.0", id: 0, result: { decision: "decline" } }])
    })
  )

  it.scoped("an allow rule decides as itself; the lookup is not asked", () =>
    Effect.gen(function* () {
      let asked = 0
      const { connectionCards, settlements, thread } = yield* setup({
        rules: rules(allowCmd("pnpm-ok", "pnpm", "test")),
        remembered: (request, context) => {
          asked++
          return rememberPnpmTest!(request, context)
        }
      })
      yield* connectionCards.open(commandRequest("pnpm test"), { parent: thread })
      assert.deepStrictEqual(only(yield* settlements()).source, { _tag: "Rule", ruleId: "pnpm-ok" })
      assert.strictEqual(asked, 0)
    })
  )

  it.scoped("no match: the card waits, and its deadline refuses it", () =>
    Effect.gen(function* () {
      const { connectionCards, settlements, thread, wire } = yield* setup({
        remembered: rememberPnpmTest,
        deadlines: { default: "1 minute" }
      })
      const opened = yield* connectionCards.open(commandRequest("rm -rf /"), { parent: thread })
      assert.strictEqual(opened._tag, "Opened")
      assert.deepStrictEqual(wire.written, [])
      yield* TestClock.adjust("1 minute")
      const s = only(yield* settlements())
      assert.strictEqual(s.outcome, "timeout")
      assert.deepStrictEqual(wire.written, [{ jsonrpc: "2.0", id: 0, result: { decision: "decline" } }])
    })
  )

  it.scoped("a lookup that throws never accepts: the card waits for its deadline, the connection's cards goes on", () =>
    Effect.gen(function* () {
      const { connectionCards, settlements, thread, wire } = yield* setup({
        remembered: () => {
          throw new Error("the snapshot broke")
        },
        deadlines: { default: "1 minute" }
      })
      const opened = yield* connectionCards.open(commandRequest("pnpm test"), { parent: thread })
      assert.strictEqual(opened._tag, "Opened")
      const second = yield* connectionCards.open(commandRequest("pnpm test", 1), { parent: thread })
      assert.strictEqual(second._tag, "Opened")
      yield* TestClock.adjust("1 minute")
      const all = yield* settlements()
      assert.deepStrictEqual(
        all.map((s) => s.outcome),
        ["timeout", "timeout"]
      )
      assert.isTrue(wire.written.every((f) => (f as { result?: { decision?: string } }).result?.decision === "decline"))
    })
  )

  it.scoped("a lookup answering nonsense (no rule id) is no match", () =>
    Effect.gen(function* () {
      const { connectionCards, thread } = yield* setup({ remembered: () => ({ ruleId: 42 }) as never })
      assert.strictEqual((yield* connectionCards.open(commandRequest("pnpm test"), { parent: thread }))._tag, "Opened")
    })
  )
})
