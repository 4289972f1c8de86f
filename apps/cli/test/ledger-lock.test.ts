/**
 * `warden run --state` while another process holds the ledger's write lock (a `sqlite3` shell in
 * a transaction, a backup, a second run): past `WARDEN_LEDGER_LOCK_TIMEOUT` the records waiting
 * are given up, the run exits 4 saying how many and why, the count is written on the run once
 * the lock is released, and `warden audit` lists the run. The lock holder is a child process told
 * on stdin when to release; the run waits on a card answered on stdin: no sleeps. A run whose
 * answer journal cannot be written (the answers counted on the run, `warden audit` says so). And a
 * ledger with a damaged page, refused by every command that opens it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as LockHolder from "@warden/test-support/LockHolder"
import { Effect, Queue, Schedule } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as readline from "node:readline"
import * as CliProcess from "./support/CliProcess.js"
import { readLedger, recordedRunArgs, resumeArgs, writeFakeCodex } from "./support/LedgerCodex.js"

const lockHolder = LockHolder.script

/** A process holding `filename`'s write lock (`BEGIN IMMEDIATE`) until `release`; killed with the scope. */
const holdLock = (filename: string) =>
  Effect.gen(function* () {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, [lockHolder, filename], { stdio: ["pipe", "pipe", "inherit"] })
      ),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    const lines = yield* Queue.unbounded<string>()
    readline.createInterface({ input: child.stdout! }).on("line", (line) => lines.unsafeOffer(line))
    child.on("exit", (code, signal) => lines.unsafeOffer(`exited ${code ?? signal}`))
    assert.strictEqual(yield* Queue.take(lines), "locked")
    return {
      release: Effect.gen(function* () {
        child.stdin!.write("release\n")
        assert.strictEqual(yield* Queue.take(lines), "released")
      })
    }
  })

/** `holdLock` once the ledger's writer is not in a transaction (BEGIN IMMEDIATE fails while it is). */
const holdLockWhenFree = (filename: string) =>
  Effect.suspend(() => holdLock(filename)).pipe(
    Effect.catchAllDefect(() => Effect.fail("busy" as const)),
    Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.compose(Schedule.recurs(250)))),
    Effect.orDie
  )

describe("warden run --state, the ledger locked by another process", () => {
  it.scopedLive(
    "killed after an answer was written and before its settlement could be recorded: warden resume records the card with that answer, never accepted",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "state", "ledger.db")
        const cli = yield* CliProcess.spawn([...recordedRunArgs(codex, db), "make deploy"])
        const opened = yield* cli.waitForJson("the card", (l) => l.type === "card.opened", "60 seconds")
        // The card's opening is written; then another process takes the lock: nothing more can be.
        const runId = yield* readLedger(db, (ledger) =>
          Effect.gen(function* () {
            const run = (yield* ledger.runs("running"))[0]
            if (run === undefined || (yield* ledger.openCards(run.runId)).length === 0)
              return yield* Effect.fail("not written yet")
            return run.runId
          })
        ).pipe(Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.compose(Schedule.recurs(400)))), Effect.orDie)
        const holder = yield* holdLockWhenFree(db)
        yield* cli.write(JSON.stringify({ cardId: opened.cardId, decision: "accept" }) + "\n")
        // The answer went to codex; its settlement waits for the lock.
        yield* cli.waitForJson(
          "the settlement",
          (l) => l.type === "card.settled" && l.outcome === "accepted" && l.written === true,
          "60 seconds"
        )
        // The answer journal's file (its records name their strings in UTF-16 units).
        const journal = Path.join(`${db}.answers`, `${runId}.journal`)
        assert.include(Fs.readFileSync(journal).toString("utf16le"), "accepted")
        process.kill(-cli.pid, "SIGKILL")
        assert.strictEqual((yield* cli.exited("60 seconds")).signal, "SIGKILL")
        yield* holder.release

        const resumed = yield* CliProcess.runToEnd(resumeArgs(codex, db))
        assert.deepStrictEqual(resumed.exited, { code: 0, signal: null }, resumed.stderr)
        assert.include(resumed.stderr, "1 open card(s) recorded stranded")
        const card = yield* readLedger(db, (ledger) => ledger.cards({ runId }))
        assert.deepStrictEqual(
          card.map((c) => [c.cardId, c.settlement?.outcome, c.settlement?.decision, c.settlement?.written]),
          [[opened.cardId, "stranded", "accept", false]]
        )
        assert.match(card[0]!.settlement!.detail ?? "", /codex may have received it/)
        assert.isFalse(Fs.existsSync(journal), "the journal is gone once its card is recorded")
      }),
    120_000
  )

  it.scopedLive(
    "past the lock timeout: exit 4, how many records were lost and why, and warden audit lists the run",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "state", "ledger.db")
        // An existing ledger (made, migrated): the run opens it under the lock without writing.
        yield* readLedger(db, () => Effect.void)
        const holder = yield* holdLock(db)
        const cli = yield* CliProcess.spawn(
          ["run", "--codex", codex, "--json", "--approvals", "stdin", "--state", db, "--restarts", "0", "echo hi"],
          { env: { WARDEN_LEDGER_LOCK_TIMEOUT: "300ms" } }
        )
        const opened = yield* cli.waitForJson("the card", (l) => l.type === "card.opened", "60 seconds")
        // Warden says it waits, then gives the records up once the bound has passed.
        yield* cli.waitForStderr(
          "the wait",
          (text) => /locked by another process.*waiting up to 300ms/.test(text),
          "60 seconds"
        )
        yield* cli.waitForStderr("the records given up", (text) => text.includes("could not record"), "60 seconds")
        yield* holder.release
        yield* cli.write(JSON.stringify({ cardId: opened.cardId, decision: "accept" }) + "\n")
        const exited = yield* cli.exited("60 seconds")
        const stderr = cli.stderr()
        assert.deepStrictEqual(exited, { code: 4, signal: null }, stderr)
        const said =
          /warden: the ledger lost (\d+) records? of this run \((\d+) because another process held the database's lock for longer than 300ms/.exec(
            stderr
          )
        assert.isNotNull(said, stderr)
        const lost = Number(said![1])
        assert.isAbove(lost, 0)
        assert.strictEqual(Number(said![2]), lost)
        // The item itself completed: the run's outcome is not what failed.
        const finished = cli.json().find((l) => l.type === "run.finished")!
        assert.deepStrictEqual(finished["items"], [{ item: 0, status: "completed" }])
        // Counted on the run once the lock was released (its own row, lost too, written again).
        const runs = yield* readLedger(db, (ledger) => ledger.runs())
        assert.strictEqual(runs.length, 1)
        assert.strictEqual(runs[0]!.lostEvents, lost)
        const audit = yield* CliProcess.runToEnd(["audit", "--state", db])
        assert.deepStrictEqual(audit.exited, { code: 0, signal: null }, audit.stderr)
        assert.match(
          audit.stdout.join("\n"),
          new RegExp(`run ${runs[0]!.runId} \\(warden run, started .*\\): ${lost} records? lost \\(never written`)
        )
        const json = yield* CliProcess.runToEnd(["audit", "--state", db, "--json"])
        const gaps = json.json().filter((l) => l.type === "run.gaps")
        assert.deepStrictEqual(
          gaps.map((g) => [g["runId"], g["lostEvents"], g["droppedEvents"]]),
          [[runs[0]!.runId, lost, 0]]
        )
      }),
    120_000
  )
})

describe("warden run --state, its answer journal not writable", () => {
  it.scopedLive(
    "the answer is written and recorded all the same; warned once; warden audit lists the run with the answer not journaled",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "state", "ledger.db")
        // Where the journal's directory goes, a file: no line can be written.
        Fs.mkdirSync(Path.dirname(db), { recursive: true })
        Fs.writeFileSync(`${db}.answers`, "not a directory")
        const cli = yield* CliProcess.spawn([...recordedRunArgs(codex, db), "make deploy"])
        const opened = yield* cli.waitForJson("the card", (l) => l.type === "card.opened", "60 seconds")
        yield* cli.write(JSON.stringify({ cardId: opened.cardId, decision: "accept" }) + "\n")
        const exited = yield* cli.exited("60 seconds")
        const stderr = cli.stderr()
        assert.deepStrictEqual(exited, { code: 0, signal: null }, stderr)
        assert.isTrue(
          cli.json().some((l) => l.type === "card.settled" && l.outcome === "accepted" && l.written === true),
          "the answer went to codex"
        )
        assert.strictEqual(stderr.match(/answer journal of run \S+ cannot be written/g)?.length, 1, stderr)
        const runs = yield* readLedger(db, (ledger) => ledger.runs())
        assert.deepStrictEqual(
          runs.map((r) => [r.unjournaledAnswers, r.lostEvents, r.droppedEvents]),
          [[1, 0, 0]]
        )
        const cards = yield* readLedger(db, (ledger) => ledger.cards({ runId: runs[0]!.runId }))
        assert.deepStrictEqual(
          cards.map((c) => [c.cardId, c.settlement?.outcome]),
          [[opened.cardId, "accepted"]]
        )
        const audit = yield* CliProcess.runToEnd(["audit", "--state", db])
        assert.deepStrictEqual(audit.exited, { code: 0, signal: null }, audit.stderr)
        assert.match(
          audit.stdout.join("\n"),
          new RegExp(
            `run ${runs[0]!.runId} \\(.*\\): 1 answer not in the answer journal \\(its file could not be written`
          )
        )
        const json = yield* CliProcess.runToEnd(["audit", "--state", db, "--json"])
        assert.deepStrictEqual(
          json
            .json()
            .filter((l) => l.type === "run.gaps")
            .map((g) => [g["runId"], g["lostEvents"], g["droppedEvents"], g["unjournaledAnswers"]]),
          [[runs[0]!.runId, 0, 0, 1]]
        )
      }),
    120_000
  )
})

describe("a damaged ledger", () => {
  it.scopedLive(
    "every command that opens it refuses it, saying so (exit 1), and runs nothing",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "state", "ledger.db")
        yield* readLedger(db, (ledger) => Effect.zipRight(ledger.beginRun({ label: "soon damaged" }), ledger.flush))
        // Closed (the WAL checkpointed into the file): damage the last page's b-tree header.
        const bytes = Fs.readFileSync(db)
        const pageSize = bytes.readUInt16BE(16) === 1 ? 65536 : bytes.readUInt16BE(16)
        const fd = Fs.openSync(db, "r+")
        Fs.writeSync(fd, Buffer.alloc(64, 0xee), 0, 64, (bytes.length / pageSize - 1) * pageSize)
        Fs.closeSync(fd)
        const commands: ReadonlyArray<ReadonlyArray<string>> = [
          ["run", "--codex", codex, "--json", "--approvals", "deny", "--state", db, "--restarts", "0", "echo hi"],
          ["resume", "--codex", codex, "--approvals", "deny", "--state", db],
          ["audit", "--state", db],
          ["rules", "list", "--state", db]
        ]
        for (const args of commands) {
          const result = yield* CliProcess.runToEnd(args)
          assert.deepStrictEqual(result.exited, { code: 1, signal: null }, `${args[0]}: ${result.stderr}`)
          assert.isFalse(
            result.stdout.some((line) => line.includes("item.started")),
            args[0]
          )
          assert.match(
            result.stderr,
            /warden: --state .*ledger\.db: ledger: the ledger .*ledger\.db is damaged \(.*\); nothing was read from it or written to it: move it aside/s,
            args[0]
          )
        }
      }),
    120_000
  )
})
