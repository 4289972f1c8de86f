/**
 * `warden resume` after a `warden run --state` was SIGKILLed while one item had an open card and
 * another was mid-turn: both items run again on their threads (`thread/resume`) and complete, the
 * open card is recorded `stranded` once, and a second resume finds nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import { crashedRun, readLedger, recordedRunArgs, resumeArgs, writeFakeCodex } from "./support/LedgerCodex.js"

describe("warden resume", () => {
  it.scopedLive(
    "resumes a SIGKILLed run's unfinished items; its open card is stranded exactly once",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "ledger.db")

        const { runId: crashed, signal } = yield* crashedRun({
          args: [...recordedRunArgs(codex, db), "echo hi", "hang"],
          env: { LEDGER_FAKE_HANG: "1" },
          db,
          recorded: { cards: 1, turns: 2 },
          until: (cli) =>
            Effect.zipRight(
              cli.waitForJson("the card", (l) => l.type === "card.opened" && l.item === 0),
              cli.waitForJson("item 1's turn", (l) => l.type === "turn.started" && l.item === 1)
            )
        })
        assert.strictEqual(signal, "SIGKILL")

        const answers = Path.join(dir, "answers.jsonl")
        const resumed = yield* CliProcess.runToEnd(
          ["resume", "--codex", codex, "--json", "--approvals", "deny", "--state", db, "--restarts", "0"],
          { env: { LEDGER_FAKE_ANSWERS: answers } }
        )
        assert.deepStrictEqual(resumed.exited, { code: 0, signal: null }, resumed.stderr)
        assert.include(resumed.stderr, `resuming run ${crashed} as `)
        assert.include(resumed.stderr, "2 item(s) to run again, 1 open card(s) recorded stranded")
        const finished = resumed
          .json()
          .filter((l) => l.type === "item.finished")
          .map((l) => [l.item, l.threadId, l.status])
          .sort()
        assert.deepStrictEqual(finished, [
          [0, "thr_1", "completed"],
          [1, "thr_2", "completed"]
        ])
        const wire = Fs.readFileSync(answers, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
        assert.deepStrictEqual(
          wire
            .filter((w) => w.method === "thread/resume")
            .map((w) => w.threadId)
            .sort(),
          ["thr_1", "thr_2"]
        )
        assert.deepStrictEqual(
          wire.filter((w) => w.command !== undefined).map((w) => [w.command, w.result?.decision]),
          [["echo hi", "decline"]]
        )

        const ledger = yield* readLedger(db, (ledger) =>
          Effect.gen(function* () {
            const runs = yield* ledger.runs()
            const next = runs.find((r) => r.resumedFrom === crashed)!
            return {
              runs,
              next,
              old: yield* ledger.accounting(crashed),
              oldCards: yield* ledger.cards({ runId: crashed }),
              oldItems: yield* ledger.workItems(crashed),
              nextAccounting: yield* ledger.accounting(next.runId),
              nextItems: yield* ledger.workItems(next.runId)
            }
          })
        )
        assert.strictEqual(ledger.runs.find((r) => r.runId === crashed)?.status, "crashed")
        assert.strictEqual(ledger.next.status, "ended")
        assert.deepStrictEqual(
          [ledger.old.cards, ledger.old.stranded, ledger.old.settled, ledger.old.open],
          [1, 1, 0, 0]
        )
        assert.strictEqual(ledger.oldCards[0]!.settlement?.outcome, "stranded")
        assert.deepStrictEqual(ledger.oldItems.map((i) => [i.item, i.status, i.handedTo]).sort(), [
          ["0", "handed-over", ledger.next.runId],
          ["1", "handed-over", ledger.next.runId]
        ])
        assert.deepStrictEqual(ledger.nextItems.map((i) => [i.item, i.status, i.from?.runId, i.from?.item]).sort(), [
          ["0", "finished", crashed, "0"],
          ["1", "finished", crashed, "1"]
        ])
        assert.deepStrictEqual(
          [ledger.nextAccounting.cards, ledger.nextAccounting.settled, ledger.nextAccounting.open],
          [1, 1, 0]
        )

        const again = yield* CliProcess.runToEnd([
          "resume",
          "--codex",
          codex,
          "--json",
          "--approvals",
          "deny",
          "--state",
          db
        ])
        assert.strictEqual(again.exited.code, 0, again.stderr)
        assert.include(again.stderr, "no dead run to resume")
        assert.deepStrictEqual(again.stdout, [])
      }),
    120_000
  )
  it.scopedLive(
    "an item whose thread codex never saved starts on a new thread, and says so",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "ledger.db")
        yield* crashedRun({
          args: [...recordedRunArgs(codex, db), "hang"],
          env: { LEDGER_FAKE_HANG: "1" },
          db,
          recorded: { cards: 0, turns: 1 },
          until: (cli) => cli.waitForJson("the turn", (l) => l.type === "turn.started" && l.item === 0)
        })
        const answers = Path.join(dir, "answers.jsonl")
        const resumed = yield* CliProcess.runToEnd(
          ["resume", "--codex", codex, "--json", "--approvals", "deny", "--state", db, "--restarts", "0"],
          { env: { LEDGER_FAKE_ANSWERS: answers, LEDGER_FAKE_LOST: "thr_1" } }
        )
        assert.deepStrictEqual(resumed.exited, { code: 0, signal: null }, resumed.stderr)
        const lines = resumed.json()
        assert.deepInclude(
          lines.find((l) => l.type === "item.thread_missing"),
          { item: 0, missingThreadId: "thr_1" }
        )
        assert.deepStrictEqual(
          lines.filter((l) => l.type === "item.finished").map((l) => [l.item, l.threadId, l.status]),
          [[0, "fresh_1", "completed"]]
        )
        const wire = Fs.readFileSync(answers, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
        assert.deepStrictEqual(
          wire.filter((w) => w.method === "thread/resume").map((w) => w.threadId),
          ["thr_1"]
        )
      }),
    120_000
  )

  it.scopedLive(
    "a resumed item keeps what it was started with (cwd, model, sandbox, approval policy) and codex gets the dead run's -c/--enable/--disable",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "ledger.db")
        const work = Path.join(dir, "work")
        Fs.mkdirSync(work)
        const argv1 = Path.join(dir, "argv1.jsonl")
        yield* crashedRun({
          args: [
            ...recordedRunArgs(codex, db),
            "--cwd",
            work,
            "--model",
            "gpt-test",
            "--sandbox",
            "read-only",
            "--approval-policy",
            "untrusted",
            "-c",
            'model_reasoning_effort="low"',
            "--enable",
            "feature_a",
            "--disable",
            "feature_b",
            "hang"
          ],
          env: { LEDGER_FAKE_HANG: "1", LEDGER_FAKE_ARGV: argv1 },
          db,
          recorded: { cards: 0, turns: 1 },
          until: (cli) => cli.waitForJson("the turn", (l) => l.type === "turn.started" && l.item === 0)
        })
        const answers = Path.join(dir, "answers.jsonl")
        const argv2 = Path.join(dir, "argv2.jsonl")
        // No -c, --enable, --disable, --model, --sandbox or --cwd on the resume line: all come from the ledger.
        const resumed = yield* CliProcess.runToEnd(
          ["resume", "--codex", codex, "--json", "--approvals", "deny", "--state", db, "--restarts", "0"],
          { env: { LEDGER_FAKE_ANSWERS: answers, LEDGER_FAKE_ARGV: argv2 } }
        )
        assert.deepStrictEqual(resumed.exited, { code: 0, signal: null }, resumed.stderr)
        const argvOf = (file: string) =>
          JSON.parse(Fs.readFileSync(file, "utf8").trim().split("\n")[0]!) as ReadonlyArray<string>
        assert.deepStrictEqual(argvOf(argv2), argvOf(argv1), "the resumed app-server got the dead run's flags")
        assert.includeMembers([...argvOf(argv2)], ['model_reasoning_effort="low"', "feature_a", "feature_b"])
        const wire = Fs.readFileSync(answers, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
        const resume = wire.find((w) => w.method === "thread/resume")
        assert.deepInclude(resume.params, {
          threadId: "thr_1",
          cwd: work,
          model: "gpt-test",
          sandbox: "read-only",
          approvalPolicy: "untrusted"
        })
      }),
    120_000
  )

  it.scopedLive(
    "a resumed run that dies is resumed again with the flags the first run was started with",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "ledger.db")
        const argv = (n: number) => Path.join(dir, `argv${n}.jsonl`)
        const flags = ["-c", 'model_provider="mock"', "--enable", "feature_a", "--disable", "feature_b"]
        // Dies once as `warden run`, then once as `warden resume` (given no flags), each mid-turn.
        const crash = (args: ReadonlyArray<string>, n: number) =>
          Effect.map(
            crashedRun({
              args,
              env: { LEDGER_FAKE_HANG: "1", LEDGER_FAKE_ARGV: argv(n) },
              db,
              recorded: { cards: 0, turns: 1 },
              until: (cli) => cli.waitForJson("the turn", (l) => l.type === "turn.started" && l.item === 0)
            }),
            (crashed) => crashed.runId
          )
        const first = yield* crash(
          [
            "run",
            "--codex",
            codex,
            "--json",
            "--approvals",
            "deny",
            "--state",
            db,
            "--restarts",
            "0",
            ...flags,
            "hang"
          ],
          1
        )
        const second = yield* crash(
          ["resume", "--codex", codex, "--json", "--approvals", "deny", "--state", db, "--restarts", "0"],
          2
        )
        const resumed = yield* CliProcess.runToEnd(
          ["resume", "--codex", codex, "--json", "--approvals", "deny", "--state", db, "--restarts", "0"],
          { env: { LEDGER_FAKE_ARGV: argv(3) } }
        )
        assert.deepStrictEqual(resumed.exited, { code: 0, signal: null }, resumed.stderr)
        assert.include(resumed.stderr, `resuming run ${second} as `)
        assert.deepStrictEqual(
          resumed
            .json()
            .filter((l) => l.type === "item.finished")
            .map((l) => [l.threadId, l.status]),
          [["thr_1", "completed"]]
        )
        const argvOf = (file: string) =>
          JSON.parse(Fs.readFileSync(file, "utf8").trim().split("\n")[0]!) as ReadonlyArray<string>
        assert.deepStrictEqual(argvOf(argv(2)), argvOf(argv(1)))
        assert.deepStrictEqual(
          argvOf(argv(3)),
          argvOf(argv(1)),
          "the second resume got the flags of the run the first resume inherited them from"
        )
        // Each resume's run records the flags it used.
        const runs = yield* readLedger(db, (ledger) => ledger.runs())
        const codexOf = (runId: string) =>
          (runs.find((r) => r.runId === runId)?.info as { codex?: unknown } | undefined)?.codex
        const used = { config: ['model_provider="mock"'], enable: ["feature_a"], disable: ["feature_b"] }
        assert.deepStrictEqual(codexOf(first), used)
        assert.deepStrictEqual(codexOf(second), used)
        assert.deepStrictEqual(codexOf(runs.find((r) => r.resumedFrom === second)!.runId), used)
      }),
    120_000
  )

  it.scopedLive(
    "an item that cannot be resumed as asked is recorded not-resumed (not handed over), said, and resume exits 1; the dead run's turns are closed as crashed",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "ledger.db")
        // Item 1's prompt holds a secret: it is stored masked, so resuming it would not send what was asked.
        const secret = "echo sk-proj-Zq3vB7xK9mT2wR5nL8pD4fH6jY1cA0sE"
        const { runId: crashed } = yield* crashedRun({
          args: [...recordedRunArgs(codex, db), "hang", secret],
          env: { LEDGER_FAKE_HANG: "1" },
          db,
          recorded: { cards: 1, turns: 2 },
          until: (cli) => cli.waitForJson("item 1's card", (l) => l.type === "card.opened" && l.item === 1)
        })
        const resumed = yield* CliProcess.runToEnd(resumeArgs(codex, db))
        assert.deepStrictEqual(resumed.exited, { code: 1, signal: null }, resumed.stderr)
        assert.include(resumed.stderr, "1 item(s) to run again")
        assert.include(resumed.stderr, `item 1 of run ${crashed} not resumed (prompt-masked)`)
        const lines = resumed.json()
        assert.deepInclude(
          lines.find((l) => l.type === "item.not_resumed"),
          { fromRunId: crashed, fromItem: "1", reason: "prompt-masked" }
        )
        assert.deepStrictEqual(
          lines.filter((l) => l.type === "item.finished").map((l) => [l.item, l.status]),
          [[0, "completed"]]
        )
        assert.strictEqual(lines.at(-1)?.type, "run.finished")
        assert.strictEqual(lines.at(-1)?.exitCode, 1)

        const ledger = yield* readLedger(db, (ledger) =>
          Effect.all({ items: ledger.workItems(crashed), turns: ledger.turns(crashed), runs: ledger.runs() })
        )
        const next = ledger.runs.find((r) => r.resumedFrom === crashed)!
        assert.deepStrictEqual(
          ledger.items.map((i) => [i.item, i.status, i.handedTo, i.failureReason]),
          [
            ["0", "handed-over", next.runId, undefined],
            ["1", "not-resumed", undefined, "prompt-masked"]
          ]
        )
        assert.deepStrictEqual(
          ledger.turns.map((t) => t.status),
          ["crashed", "crashed"],
          "no turn of a dead run stays inProgress"
        )
      }),
    120_000
  )
})
