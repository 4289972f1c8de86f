/**
 * Another process on the same ledger file: one holding the database's write lock (a `sqlite3`
 * shell in a transaction, a backup, a second run), two opening a new file at once, and a file
 * with damaged pages. The lock holder and the openers are real child processes, told what to do
 * on stdin and answering on stdout: no sleeps, no timing assertions.
 */
import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import * as LockHolder from "@warden/test-support/LockHolder"
import { Chunk, Deferred, Effect, Logger, Queue } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as readline from "node:readline"
import { Ledger, LedgerEvent } from "../src/index.js"
import { commandParams, script, tempDir } from "./support.js"

const root = Path.resolve(__dirname, "../../..")
const lockHolder = LockHolder.script
const openRuns = Path.join(__dirname, "fixtures", "open-runs.ts")

/** A child process spoken to in lines: `line` waits for the next line on its stdout; killed with the scope. */
const lineChild = (args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, [...args], { cwd: root, stdio: ["pipe", "pipe", "pipe"] })
      ),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    const lines = yield* Queue.unbounded<string>()
    let stderr = ""
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    // Its log lines (Effect's default logger writes to stdout) are not answers.
    readline.createInterface({ input: child.stdout! }).on("line", (line) => {
      if (!line.startsWith("timestamp=")) lines.unsafeOffer(line)
    })
    child.on("exit", (code, signal) => lines.unsafeOffer(`exited ${code ?? signal}: ${stderr}`))
    return {
      line: Queue.take(lines),
      send: (line: string) => Effect.sync(() => child.stdin!.write(`${line}\n`))
    }
  })

/** A process holding `filename`'s write lock (`BEGIN IMMEDIATE`) until `release`. */
const holdLock = (filename: string) =>
  Effect.gen(function* () {
    const holder = yield* lineChild([lockHolder, filename])
    assert.strictEqual(yield* holder.line, "locked")
    return {
      release: Effect.gen(function* () {
        yield* holder.send("release")
        assert.strictEqual(yield* holder.line, "released")
      })
    }
  })

/** Log lines, for waiting on the writer's "locked" warning. */
const capturingLogger = (onLine: (line: string) => void) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message }) => onLine(Array.isArray(message) ? message.join(" ") : String(message)))
  )

/** What a run records here: an item, its thread and turn, and two cards (one answered, one left open). */
const recordSome = (run: Ledger.Run, s: Effect.Effect.Success<ReturnType<typeof script>>) =>
  Effect.gen(function* () {
    const command = "item/commandExecution/requestApproval"
    run.record(LedgerEvent.itemSubmitted({ id: 1, prompt: "fix the build" }))
    s.work({ _tag: "ThreadReady", item: 1, threadId: "thr_1", resumed: false })
    s.work({ _tag: "TurnStarted", item: 1, threadId: "thr_1", turnId: "turn_1", prompt: "fix the build" })
    const asked = yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'make test'"))
    yield* s.approvals.answer(asked.id, Decision.Accept)
    yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'npm publish'"))
  })

describe("another process holds the write lock", () => {
  it.live(
    "the writer waits for it, off the event loop, and writes everything once it is released",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const filename = Path.join(yield* tempDir, "ledger.db")
          const waiting = yield* Deferred.make<string>()
          yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            const holder = yield* holdLock(filename)
            const s = yield* script()
            const run = yield* ledger.beginRun({ label: "patient" })
            yield* run.attach(s.source)
            yield* recordSome(run, s)
            const flushing = yield* Effect.fork(ledger.flush)
            // The writer found the lock and says it waits (better-sqlite3 would have waited 5 s on the
            // event loop, then lost the records).
            assert.match(yield* Deferred.await(waiting), /locked by another process.*waiting up to 5m/)
            // The event loop is free meanwhile: timers fire, again and again, while the flush waits.
            for (let i = 0; i < 5; i++)
              yield* Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 1)))
            assert.isNull(flushing.unsafePoll())
            yield* holder.release
            const stats = yield* Effect.flatMap(flushing.await, (exit) => exit)
            assert.strictEqual(stats.failed, 0)
            assert.strictEqual(stats.written, stats.recorded)
            const [written] = yield* ledger.runs()
            assert.strictEqual(written!.runId, run.id)
            assert.strictEqual(written!.lostEvents, 0)
            assert.strictEqual((yield* ledger.workItems(run.id)).length, 1)
            assert.strictEqual((yield* ledger.turns(run.id)).length, 1)
            const accounting = yield* ledger.accounting(run.id)
            assert.strictEqual(accounting.cards, 2)
            assert.strictEqual(accounting.open, 1)
            assert.strictEqual(accounting.settled, 1)
          }).pipe(
            Effect.provide(Ledger.layerSqlite({ filename })),
            Effect.provide(
              capturingLogger((line) => {
                if (line.includes("locked by another process")) Deferred.unsafeDone(waiting, Effect.succeed(line))
              })
            )
          )
        })
      ),
    120_000
  )

  it.live(
    "past a short bound the records are given up, reported, and counted on the run once the lock is released",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const filename = Path.join(yield* tempDir, "ledger.db")
          const lost = yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            const failures = yield* ledger.subscribeFailures
            const holder = yield* holdLock(filename)
            const s = yield* script()
            const run = yield* ledger.beginRun({ label: "impatient" })
            yield* run.attach(s.source)
            yield* recordSome(run, s)
            const stats = yield* ledger.flush
            assert.isAbove(stats.failed, 0)
            assert.strictEqual(stats.written, 0)
            const reported = Chunk.toReadonlyArray(yield* Queue.takeAll(failures))
            assert.isAbove(reported.length, 0)
            for (const failure of reported) {
              assert.strictEqual(failure.reason, "Locked")
              assert.match(failure.message, /stayed locked by another process/)
            }
            assert.strictEqual(
              reported.reduce((n, f) => n + f.events, 0),
              stats.failed
            )
            yield* holder.release
            return { runId: run.id, failed: stats.failed }
          }).pipe(Effect.provide(Ledger.layerSqlite({ filename, lockTimeout: "50 millis" })))
          // Closed after the release: the count (and the run's own row, itself lost) written then.
          yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            const [run] = yield* ledger.runs()
            assert.strictEqual(run!.runId, lost.runId)
            assert.strictEqual(run!.lostEvents, lost.failed)
            assert.strictEqual(run!.droppedEvents, 0)
          }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
        })
      ),
    120_000
  )
})

describe("two processes open a new ledger at once", () => {
  it.live(
    "the schema is made once, neither fails, and both runs are recorded (several pairs)",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const a = yield* lineChild(["--import", "tsx", openRuns])
          const b = yield* lineChild(["--import", "tsx", openRuns])
          assert.strictEqual(yield* a.line, "ready")
          assert.strictEqual(yield* b.line, "ready")
          for (let pair = 0; pair < 10; pair++) {
            const filename = Path.join(dir, `new-${pair}.db`)
            yield* Effect.all([a.send(`open ${filename} a${pair}`), b.send(`open ${filename} b${pair}`)])
            const answers = yield* Effect.all([a.line, b.line])
            for (const answer of answers) assert.match(answer, /^ok /, `pair ${pair}: ${answer}`)
            const runIds = answers.map((answer) => answer.split(" ")[2]!).sort()
            yield* Effect.gen(function* () {
              const ledger = yield* Ledger.Ledger
              const runs = yield* ledger.runs()
              assert.deepStrictEqual(runs.map((r) => r.runId).sort(), runIds, `pair ${pair}`)
            }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
          }
        })
      ),
    180_000
  )
})

describe("a damaged file", () => {
  it.scoped("is refused when the ledger opens, with a typed error saying so", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const s = yield* script()
        const run = yield* ledger.beginRun({ label: "soon damaged" })
        yield* run.attach(s.source)
        yield* recordSome(run, s)
        yield* ledger.flush
      }).pipe(Effect.scoped, Effect.provide(Ledger.layerSqlite({ filename })))
      // Closed: the WAL was checkpointed into the file. Damage the last page's b-tree header.
      assert.isFalse(Fs.existsSync(`${filename}-wal`))
      const bytes = Fs.readFileSync(filename)
      const pageSize = bytes.readUInt16BE(16) === 1 ? 65536 : bytes.readUInt16BE(16)
      const lastPage = bytes.length / pageSize - 1
      assert.isAbove(lastPage, 1)
      const fd = Fs.openSync(filename, "r+")
      Fs.writeSync(fd, Buffer.alloc(64, 0xee), 0, 64, lastPage * pageSize)
      Fs.closeSync(fd)
      const error = yield* Effect.flip(Effect.provide(Ledger.Ledger, Ledger.layerSqlite({ filename })))
      assert.strictEqual(error._tag, "LedgerError")
      assert.strictEqual(error.reason, "Corrupt")
      assert.match(error.message, /is damaged \(.*\); nothing was read from it or written to it: move it aside/s)
    })
  )
})
