/**
 * One answer for many cards on the terminal (tmux): three work items ask to run `pnpm test`, a
 * fourth something else; the board shows the three as one line with their count, the prompt offers
 * `[g] accept all 3`, one keypress answers the three (each written once, fake app-server's log),
 * and the fourth card is asked about on its own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import { writeFakeCodex } from "./support/LedgerCodex.js"
import * as Tmux from "./support/Tmux.js"

describe("warden in a terminal (tmux): card groups", () => {
  it.scopedLive(
    "the board groups cards asking the same thing; [g] answers them all with one key",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const answersFile = Path.join(dir, "answers.jsonl")
        const pane = yield* Tmux.run(
          [
            "run",
            "--codex",
            codex,
            "--no-state",
            "--restarts",
            "0",
            "--concurrency",
            "4",
            "pnpm test",
            "pnpm test",
            "make lint",
            "pnpm test"
          ],
          { env: { LEDGER_FAKE_ANSWERS: answersFile } }
        )
        const board = yield* pane.waitFor(
          "four open cards, three in one line",
          (s) => s.includes("open cards (4)") && /3 items \(/.test(s) && s.includes("[g] accept all 3")
        )
        assert.match(
          board,
          /^ c\d +3 items command +closes in +\d+:\d\d +run: pnpm test \(in \/tmp\) — 3 items \([0-3], [0-3], [0-3]\)$/m
        )
        assert.match(board, /^ c\d +item 2 +command +closes in .*run: make lint \(in \/tmp\)$/m)
        yield* pane.sendKeys("g")
        yield* pane.waitFor("the group answered", (s) => s.includes("3 card(s) asking the same as"))
        yield* pane.waitFor(
          "the lint card asked on its own",
          (s) => /── card c\d · item 2 · command ──/.test(s) && !s.includes("[g] accept all")
        )
        yield* pane.sendKeys("d")
        assert.strictEqual(yield* pane.exitStatus(), 0, yield* pane.history)
        const answers = Fs.readFileSync(answersFile, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
        assert.deepStrictEqual(
          answers.map((a) => [a.command, a.result]).sort((x, y) => String(x[0]).localeCompare(String(y[0]))),
          [
            ["make lint", { decision: "decline" }],
            ["pnpm test", { decision: "accept" }],
            ["pnpm test", { decision: "accept" }],
            ["pnpm test", { decision: "accept" }]
          ]
        )
      }),
    120_000
  )
})
