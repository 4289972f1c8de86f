/**
 * One answer for many cards, from `--approvals stdin`: twelve work items each ask to run `pnpm
 * test`; their cards share one `group` in `card.opened`, one stdin line `{"group", "decision"}`
 * answers all twelve, each written once (the fake app-server's log), and a card asking something
 * else stays open for its own answer.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import { writeFakeCodex } from "./support/LedgerCodex.js"

describe("warden run --approvals stdin: one line answers a group", () => {
  it.scopedLive(
    "twelve identical command cards answered by one stdin line, each written once; another card keeps its own answer",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const answersFile = Path.join(dir, "answers.jsonl")
        const prompts = [...Array.from({ length: 12 }, () => "pnpm test"), "make lint"]
        const cli = yield* CliProcess.spawn(
          [
            "run",
            "--codex",
            codex,
            "--json",
            "--approvals",
            "stdin",
            "--no-state",
            "--restarts",
            "0",
            "--concurrency",
            "13",
            ...prompts
          ],
          { env: { LEDGER_FAKE_ANSWERS: answersFile } }
        )
        const opened: Array<CliProcess.JsonLine> = []
        for (let i = 0; i < 13; i++) {
          opened.push(
            yield* cli.waitForJson(
              `card ${i + 1}`,
              (l) => l.type === "card.opened" && !opened.some((o) => o.cardId === l.cardId),
              "60 seconds"
            )
          )
        }
        const lint = opened.find((l) => l.item === 12)!
        const tests = opened.filter((l) => l.item !== 12)
        const group = tests[0]!.group
        assert.match(group, /^g[0-9a-f]{16}$/)
        assert.isTrue(tests.every((l) => l.group === group))
        assert.notStrictEqual(lint.group, group)

        yield* cli.write(JSON.stringify({ group, decision: "accept" }) + "\n")
        yield* cli.waitForStderr(
          "the group answer",
          (text) => text.includes(`group ${group}: 12 card(s) answered`),
          "60 seconds"
        )
        yield* cli.write(JSON.stringify({ cardId: lint.cardId, decision: "decline" }) + "\n")
        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 0, signal: null }, cli.stderr())

        const settled = cli.json().filter((l) => l.type === "card.settled")
        assert.strictEqual(settled.length, 13)
        assert.deepStrictEqual(
          settled.filter((l) => l.item !== 12).map((l) => [l.outcome, l.source]),
          Array.from({ length: 12 }, () => ["accepted", "person"])
        )
        assert.deepStrictEqual(
          settled.filter((l) => l.item === 12).map((l) => l.outcome),
          ["declined"]
        )
        // The app-server got exactly one answer per request, each in its method's words.
        const answers = Fs.readFileSync(answersFile, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
        assert.strictEqual(answers.length, 13)
        assert.deepStrictEqual(
          answers.filter((a) => a.command === "pnpm test").map((a) => a.result),
          Array.from({ length: 12 }, () => ({ decision: "accept" }))
        )
        assert.deepStrictEqual(
          answers.filter((a) => a.command === "make lint").map((a) => a.result),
          [{ decision: "decline" }]
        )
      }),
    120_000
  )
})
