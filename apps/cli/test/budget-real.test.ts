/**
 * Budgets against the real pinned codex (0.171.0): an item whose thread goes past `--max-tokens`
 * (the scripted model reports 5,000 tokens, then keeps the turn going) gets a card of Warden's own
 * ("continue for another 1000?"); nobody answers (stdin is empty), its deadline refuses it, the turn
 * is interrupted and the item ends `budget-exhausted`; nothing of the card reached codex.
 */
import { assert, describe, it } from "@effect/vitest"
import { Step } from "@warden/testkit"
import { Effect } from "effect"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"

describe("warden run --max-tokens (real codex 0.171.0)", () => {
  it.scopedLive(
    "an item past its token budget asks, is refused by the deadline, and ends budget-exhausted",
    () =>
      Effect.gen(function* () {
        // A tool call codex does not know: codex answers the model and samples again, which stalls.
        const costly = {
          ...Step.functionCall("no_such_tool", {}),
          usage: { input_tokens: 4000, output_tokens: 1000, total_tokens: 5000 }
        }
        const codex = yield* Codex.setup([costly, Step.stall()])
        const run = yield* CliProcess.runToEnd(
          [
            "run",
            ...codex.flags,
            "--json",
            "--approvals",
            "stdin",
            "--no-state",
            "--approval-timeout",
            "2s",
            "--max-tokens",
            "1000",
            "think a lot"
          ],
          { env: codex.env }
        )
        const lines = run.json()
        const opened = lines.filter((l) => l.type === "card.opened")
        assert.strictEqual(opened.length, 1, run.stderr)
        const card = opened[0]!
        assert.deepStrictEqual([card.method, card.kind, card.item], ["mcpServer/elicitation/request", "elicitation", 0])
        assert.match(card.summary, /item 0 reached 5000 tokens \(budget 1000\): continue for another 1000\?/)
        const settled = lines.filter((l) => l.type === "card.settled")
        assert.deepStrictEqual(
          settled.map((l) => [l.cardId, l.outcome, l.source]),
          [[card.cardId, "timeout", "deadline"]]
        )
        assert.deepStrictEqual(
          lines.filter((l) => l.type === "turn.completed").map((l) => l.status),
          ["interrupted"]
        )
        const finished = lines.filter((l) => l.type === "item.finished")
        assert.deepStrictEqual(
          finished.map((l) => l.status),
          ["budget-exhausted"],
          run.stderr
        )
        assert.include(finished[0]!.error, "reached 5000 tokens (budget 1000)")
        assert.strictEqual(run.exited.code, 1)
      }),
    180_000
  )
})
