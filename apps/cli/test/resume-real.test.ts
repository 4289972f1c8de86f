/**
 * `warden resume` against the real pinned codex (0.171.0) and a ScriptedModel: a `warden run
 * --state` is SIGKILLed while one item has an open card and the other is mid-turn (its model
 * stream stalled); `warden resume` resumes both threads on a new app-server (`thread/resume`),
 * runs the unfinished turns again and completes both items; the open card is recorded `stranded`
 * exactly once and every card of both runs is accounted for.
 */
import { assert, describe, it } from "@effect/vitest"
import { ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"
import { crashedRun, readLedger, recordedRunArgs } from "./support/LedgerCodex.js"

const exec = Step.execCommand({ cmd: "echo warden-resume-check", escalated: true, justification: "test resume" })

describe("warden resume (real codex 0.171.0)", () => {
  it.scopedLive(
    "after a SIGKILL with a card open and a turn in progress, both items complete on their threads; the card is stranded once",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({
          lanes: {
            cmd: [exec, exec, Step.message("cmd done")],
            slow: [Step.stall(), Step.message("slow done")]
          }
        })
        const db = Path.join(codex.launch.home, "ledger.db")
        const prompts = [
          `${ScriptedModel.laneMarker("cmd")} run the command`,
          `${ScriptedModel.laneMarker("slow")} think slowly`
        ]

        const { runId: crashed, signal } = yield* crashedRun({
          args: [...recordedRunArgs(codex.flags, db), ...prompts],
          env: codex.env,
          db,
          recorded: { cards: 1, turns: 2 },
          until: (cli) =>
            Effect.gen(function* () {
              yield* cli.waitForJson("the card", (l) => l.type === "card.opened" && l.item === 0, "60 seconds")
              yield* cli.waitForJson("item 1's turn", (l) => l.type === "turn.started" && l.item === 1, "60 seconds")
              yield* codex.model.awaitRequests(1, "slow")
            })
        })
        assert.strictEqual(signal, "SIGKILL")

        const resumed = yield* CliProcess.runToEnd(
          ["resume", ...codex.flags, "--json", "--approvals", "deny", "--state", db, "--restarts", "0"],
          { env: codex.env }
        )
        assert.deepStrictEqual(resumed.exited, { code: 0, signal: null }, resumed.stderr)
        assert.include(resumed.stderr, "2 item(s) to run again, 1 open card(s) recorded stranded")
        const lines = resumed.json()
        const finished = lines.filter((l) => l.type === "item.finished")
        assert.deepStrictEqual(
          finished.map((l) => [l.item, l.status]).sort(),
          [
            [0, "completed"],
            [1, "completed"]
          ],
          resumed.stderr
        )
        assert.deepStrictEqual(finished.map((l) => l.finalMessage).sort(), ["cmd done", "slow done"])
        // Each item resumed its thread (`item.resumed`), none started a new one.
        assert.strictEqual(lines.filter((l) => l.type === "item.started").length, 0)
        assert.strictEqual(lines.filter((l) => l.type === "item.resumed").length, 2)
        assert.deepStrictEqual(
          lines.filter((l) => l.type === "card.settled").map((l) => [l.item, l.outcome, l.source]),
          [[0, "declined", "handler"]]
        )

        const ledger = yield* readLedger(db, (ledger) =>
          Effect.gen(function* () {
            const runs = yield* ledger.runs()
            const next = runs.find((r) => r.resumedFrom === crashed)!
            return {
              runs,
              next,
              old: yield* ledger.accounting(crashed),
              oldThreads: yield* ledger.threads(crashed),
              nextThreads: yield* ledger.threads(next.runId),
              nextAccounting: yield* ledger.accounting(next.runId),
              nextItems: yield* ledger.workItems(next.runId)
            }
          })
        )
        assert.strictEqual(ledger.runs.find((r) => r.runId === crashed)?.status, "crashed")
        assert.deepStrictEqual(
          [ledger.old.cards, ledger.old.stranded, ledger.old.settled, ledger.old.open],
          [1, 1, 0, 0]
        )
        assert.deepStrictEqual(
          [
            ledger.nextAccounting.cards,
            ledger.nextAccounting.settled,
            ledger.nextAccounting.open,
            ledger.nextAccounting.stranded
          ],
          [1, 1, 0, 0]
        )
        // The same threads, resumed.
        assert.deepStrictEqual(
          ledger.nextThreads.map((t) => t.threadId).sort(),
          ledger.oldThreads.map((t) => t.threadId).sort()
        )
        assert.isTrue(ledger.nextThreads.every((t) => t.resumed))
        assert.deepStrictEqual(
          ledger.nextItems.map((i) => [i.status, i.resultStatus, i.from?.runId]),
          [
            ["finished", "completed", crashed],
            ["finished", "completed", crashed]
          ]
        )
      }),
    180_000
  )
})
