/**
 * The ledger's writer on a thread of its own (`Ledger.layerSqlite` when the worker's script is
 * there: a build, or `WARDEN_LEDGER_WORKER`, which the suite's set-up points at a bundle of the
 * sources, scripts/test-bundle.mjs): the same rows as the writer on the main thread for every kind
 * of record, and when the thread cannot start or dies, the main thread takes over with nothing
 * lost and says so.
 */
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Reactivity from "@effect/experimental/Reactivity"
import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import { Errors } from "@warden/supervisor"
import { Cause, Chunk, Duration, Effect, Exit, FiberId, Logger, Queue, Scope } from "effect"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"
import { Ledger, LedgerEvent } from "../src/index.js"
import { HandOverMs } from "../src/internal/WorkerWriter.js"
import {
  allowCmd,
  commandParams,
  denyCmd,
  fileChangeParams,
  mcpToolCallParams,
  permissionsParams,
  rules,
  script,
  tempDir
} from "./support.js"

const command = "item/commandExecution/requestApproval"
const init = { userAgent: "fake/0.171.0", codexHome: "/tmp/codex-home" }
const realWorker = process.env["WARDEN_LEDGER_WORKER"]
const dyingWriter = fileURLToPath(new URL("./fixtures/dying-writer.mjs", import.meta.url))

/** Run `effect` with `WARDEN_LEDGER_WORKER` set to `value` (restored after: files share their worker). */
const withWorker = <A, E, R>(value: string, effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const before = process.env["WARDEN_LEDGER_WORKER"]
      process.env["WARDEN_LEDGER_WORKER"] = value
      return before
    }),
    () => effect,
    (before) =>
      Effect.sync(() => {
        if (before === undefined) delete process.env["WARDEN_LEDGER_WORKER"]
        else process.env["WARDEN_LEDGER_WORKER"] = before
      })
  )

/** `effect` with a ledger on `filename`, its log lines collected in `lines`, the ledger closed after it. */
const recording = <A, E>(
  filename: string,
  lines: Array<string>,
  effect: Effect.Effect<A, E, Ledger.Ledger | Scope.Scope>,
  options: Ledger.LedgerOptions = {}
) =>
  Effect.scoped(effect).pipe(
    Effect.provide(Ledger.layerSqlite({ ...options, filename })),
    Effect.provide(
      Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ message }) => lines.push(String(message)))
      )
    )
  )

/** `body` on a new run of a ledger on `filename` whose writer is `worker` (`withWorker`, `recording`). */
const inRun = <A, E>(
  worker: string,
  filename: string,
  lines: Array<string>,
  body: (ledger: Ledger.LedgerShape, run: Ledger.Run) => Effect.Effect<A, E, Ledger.Ledger | Scope.Scope>,
  options: Ledger.LedgerOptions = {}
) =>
  withWorker(
    worker,
    recording(
      filename,
      lines,
      Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        return yield* body(ledger, yield* ledger.beginRun())
      }),
      options
    )
  )

/**
 * The messages of records handed to the writer's thread (every ledger's of this process) while
 * the scope is open: when each was posted, and how many records it carried.
 */
const handOvers = Effect.gen(function* () {
  const messages: Array<{ readonly at: number; readonly ops: number }> = []
  const post = Worker.prototype.postMessage
  yield* Effect.acquireRelease(
    Effect.sync(() => {
      Worker.prototype.postMessage = function (this: Worker, message: unknown, ...rest: Array<never>) {
        const m = message as { _tag?: unknown; ops?: ReadonlyArray<string> }
        if (m._tag === "Ops")
          messages.push({
            at: performance.now(),
            ops: (m.ops ?? []).reduce((n, text) => n + (JSON.parse(text) as ReadonlyArray<unknown>).length, 0)
          })
        return post.call(this, message, ...rest)
      }
    }),
    () =>
      Effect.sync(() => {
        Worker.prototype.postMessage = post
      })
  )
  return messages
})

/**
 * Keep the event loop saturated: turn after turn (`setImmediate`), each calling `turn` and then
 * busy for half a millisecond, until `done` says so; fails after `limitMs` (under the test's
 * timeout). Succeeds with the turns taken.
 */
const saturating = (turn: (i: number) => void, done: (i: number) => boolean, limitMs = 15_000) =>
  Effect.async<number, Error>((resume) => {
    const started = performance.now()
    let i = 0
    let stopped = false
    const step = () => {
      if (stopped) return
      if (done(i)) return resume(Effect.succeed(i))
      if (performance.now() - started > limitMs)
        return resume(Effect.fail(new Error(`still not done after ${limitMs} ms of a saturated loop (${i} turns)`)))
      turn(i++)
      const until = performance.now() + 0.5
      while (performance.now() < until) {
        // busy: the turn's work
      }
      setImmediate(step)
    }
    setImmediate(step)
    return Effect.sync(() => {
      stopped = true
    })
  })

/** What a second ledger on the file reads of the run. */
const readBack = (filename: string, runId: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const ledger = yield* Ledger.Ledger
      return { items: yield* ledger.workItems(runId), runs: yield* ledger.runs() }
    }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
  )

/** Every kind of record: items (one with a budget and options), threads, turns, every kind of card and settlement, a late decision, every way an item ends. */
const recordEverything = (filename: string, lines: Array<string> = []) =>
  Effect.scoped(
    Effect.gen(function* () {
      const s = yield* script({
        rules: rules(denyCmd("no-rm", "rm"), allowCmd("git-status", "git", "status")),
        // A deadline and a duration JSON has no number for (infinite): the same rows all the same.
        deadlines: { perMethod: { "item/permissions/requestApproval": Duration.infinity } }
      })
      const ledger = yield* Ledger.Ledger
      const run = yield* ledger.beginRun({ label: "everything", info: { argv: ["warden", "run"] } })
      yield* run.attach(s.source)
      run.record(
        LedgerEvent.itemSubmitted({
          id: 1,
          prompt: "fix it with OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
          followUps: ["and the docs"],
          cwd: "/repo",
          model: "gpt-x",
          config: { nested: { token: "ghp_abcdefghijklmnopqrstuvwxyz0123456789" } },
          worktree: { branch: "fix" },
          budget: { maxTokens: 1000, maxTurnTime: Duration.minutes(5) }
        })
      )
      run.record(
        LedgerEvent.itemSubmitted(
          { id: "two", prompt: "tidy", budget: { maxTurnTime: Duration.infinity } },
          { runId: "r-old", item: "7" }
        )
      )
      s.publish({ _tag: "ConnectionReady", slot: 0, connection: 7, init })
      s.work({ _tag: "ThreadReady", item: 1, threadId: "thr_1", resumed: false })
      s.work({ _tag: "TurnStarted", item: 1, threadId: "thr_1", turnId: "turn_1", prompt: "fix it" })
      s.work({ _tag: "WorktreeReady", item: 1, path: "/wt/fix", branch: "fix", base: "main", reused: false })
      yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'rm -rf build'"))
      yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'git status'"))
      const asked = yield* s.open(
        command,
        commandParams(
          "thr_1",
          "turn_1",
          "/bin/bash -lc 'curl -H \"Authorization: Bearer sk-abcdefghijklmnop1234567890\" x'"
        )
      )
      yield* s.approvals.answer(asked.id, Decision.Accept, "web")
      yield* s.approvals.answer(asked.id, Decision.Decline, "link")
      const mcp = yield* s.open(
        "mcpServer/elicitation/request",
        mcpToolCallParams("thr_1", "turn_1", "probe", "poke", { depth: 2 })
      )
      yield* s.approvals.answer(mcp.id, Decision.Decline)
      const perm = yield* s.open(
        "item/permissions/requestApproval",
        permissionsParams("thr_1", "turn_1", { network: { enabled: true } })
      )
      yield* s.approvals.answer(perm.id, Decision.Accept)
      const thread = yield* s.thread
      yield* s.open("item/fileChange/requestApproval", fileChangeParams("thr_1", "turn_1"), {
        parent: thread,
        context: { fileChanges: [{ path: "/repo/src/a.ts", kind: "update", diff: "-a\n+b" }] }
      })
      yield* Scope.close(thread, Exit.void)
      yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'npm publish'")) // left open
      s.work({
        _tag: "TurnCompleted",
        item: 1,
        threadId: "thr_1",
        turn: {
          turnId: "turn_1",
          status: "failed",
          finalMessage: undefined,
          items: [],
          error: { message: "the model gave up" },
          errors: []
        }
      })
      s.work({ _tag: "ConnectionLost", item: 1, threadId: "thr_1", detail: "the app-server exited" })
      s.publish({
        _tag: "ConnectionLost",
        slot: 0,
        connection: 7,
        reason: { _tag: "Exited", code: 1, signal: null },
        message: "exited with code 1",
        stderrTail: ""
      })
      s.work({ _tag: "Resumed", item: 1, threadId: "thr_1", attempt: 1 })
      s.finished(1, { threadId: "thr_1", finalMessage: "done at last", resumes: 1 })
      s.publish({
        _tag: "ItemFinished",
        item: "two",
        exit: Exit.fail(
          new Errors.WorkItemFailed({ reason: "stalled", detail: "no event for 10 minutes", threadId: "thr_2" })
        )
      })
      s.publish({ _tag: "ItemFinished", item: 3, exit: Exit.die(new Error("a bug")) })
      s.publish({ _tag: "ItemFinished", item: 4, exit: Exit.failCause(Cause.interrupt(FiberId.none)) })
      const stats = yield* ledger.flush
      assert.strictEqual(stats.failed, 0)
      assert.strictEqual(stats.pending, 0)
      return run.id
    })
  ).pipe(
    Effect.provide(Ledger.layerSqlite({ filename })),
    Effect.provide(
      Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ message }) => lines.push(Array.isArray(message) ? message.join(" ") : String(message)))
      )
    )
  )

/** Every row of every ledger table, with what differs between two recordings (run ids, random ids) replaced. */
const dump = (filename: string, runId: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* SqliteClient.make({ filename }).pipe(Effect.provide(Reactivity.layer))
      const tables = yield* sql<{
        name: string
      }>`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ledger_%' AND name NOT LIKE '%migration%' ORDER BY name`
      const out: Record<string, unknown> = {}
      for (const { name } of tables) {
        const rows = yield* sql.unsafe<Record<string, unknown>>(`SELECT * FROM ${name}`)
        out[name] = rows
          .map((row) => {
            const { late_id: _late, ...rest } = row
            return JSON.stringify(rest).replaceAll(runId, "RUN")
          })
          .sort()
      }
      return out
    })
  )

describe("the ledger's writer on its own thread", () => {
  it.scoped(
    "an audit file that cannot take its lines (/dev/full): counted, reported as Audit, logged; the records are written (thread and main thread alike)",
    () =>
      Effect.gen(function* () {
        assert.isDefined(realWorker, "the test suite's set-up names the writer's bundle (scripts/test-bundle.mjs)")
        const dir = yield* tempDir
        const outcome = (worker: string, filename: string) => {
          const lines: Array<string> = []
          return Effect.map(
            inRun(
              worker,
              filename,
              lines,
              (ledger, run) =>
                Effect.gen(function* () {
                  const failures = yield* ledger.subscribeFailures
                  const s = yield* script({ rules: rules(denyCmd("no-rm", "rm")) })
                  yield* run.attach(s.source)
                  yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'rm -rf build'"))
                  yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'ls'")) // left open
                  const stats = yield* ledger.flush
                  const reported = yield* Queue.takeAll(failures)
                  const cards = yield* ledger.cards({ runId: run.id })
                  return { stats, reported: Chunk.toReadonlyArray(reported), cards }
                }),
              { audit: "/dev/full" }
            ),
            (result) => ({ ...result, lines })
          )
        }
        for (const [worker, file] of [
          [realWorker!, "thread.db"],
          ["off", "main.db"]
        ] as const) {
          const { stats, reported, cards, lines } = yield* outcome(worker, Path.join(dir, file))
          // Three card events (two openings, one settlement), none of their lines written.
          assert.strictEqual(stats.auditFailed, 3, `${worker}: ${JSON.stringify(stats)}`)
          assert.strictEqual(stats.failed, 0)
          assert.deepStrictEqual(
            reported.map((f) => f.reason),
            reported.map(() => "Audit")
          )
          assert.strictEqual(
            reported.reduce((n, f) => n + f.events, 0),
            3
          )
          assert.match(
            reported[0]!.message,
            /the audit file is missing \d+ lines? \(.*\): the audit file \/dev\/full could not be written: .*ENOSPC/
          )
          assert.isTrue(
            lines.some((l) => l.includes("/dev/full could not be written")),
            lines.join("\n")
          )
          // The records themselves are in the ledger.
          assert.deepStrictEqual(cards.map((c) => c.settlement?.outcome ?? "open").sort(), ["declined", "open"])
        }
      })
  )

  it.scoped("writes the same rows as the writer on the main thread, for every kind of record", () =>
    Effect.gen(function* () {
      assert.isDefined(realWorker, "the test suite's set-up names the writer's bundle (scripts/test-bundle.mjs)")
      const dir = yield* tempDir
      const onThread = Path.join(dir, "thread.db")
      const onMain = Path.join(dir, "main.db")
      const lines: Array<string> = []
      const threadRun = yield* withWorker(realWorker!, recordEverything(onThread, lines))
      // Written by the thread (it did not stop, leaving the work to the main thread).
      assert.isFalse(
        lines.some((l) => l.includes("writer thread")),
        lines.join("\n")
      )
      const mainRun = yield* withWorker("off", recordEverything(onMain))
      const a = yield* dump(onThread, threadRun)
      const b = yield* dump(onMain, mainRun)
      assert.deepStrictEqual(a, b)
      // Something was written (the comparison is not of two empty files), masked.
      const cards = a["ledger_cards"] as ReadonlyArray<string>
      assert.strictEqual(cards.length, 7)
      assert.notInclude(JSON.stringify(a), "sk-abcdefghijklmnop1234567890")
      assert.notInclude(JSON.stringify(a), "ghp_abcdefghijklmnopqrstuvwxyz0123456789")
      assert.strictEqual((a["ledger_late_decisions"] as ReadonlyArray<string>).length, 1)
    })
  )

  it.scopedLive(
    "records after a quiet spell are handed to the thread at the end of their turn, not after a timer; a burst's, one message per HandOverMs at most",
    () =>
      Effect.gen(function* () {
        assert.isDefined(realWorker, "the test suite's set-up names the writer's bundle (scripts/test-bundle.mjs)")
        const filename = Path.join(yield* tempDir, "ledger.db")
        const handedOver = yield* handOvers
        const lines: Array<string> = []
        const written = yield* inRun(realWorker!, filename, lines, (ledger, run) =>
          Effect.gen(function* () {
            yield* ledger.flush
            // The precondition, not a wait for something: no hand-over in the last `HandOverMs`.
            yield* Effect.sleep(Duration.millis(HandOverMs + 10))
            const before = handedOver.length
            run.record(LedgerEvent.itemSubmitted({ id: 1, prompt: "trickled" }))
            // The turn's end (its setImmediate), and nothing after it: the record is on its way.
            yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
            assert.strictEqual(handedOver.length, before + 1, "handed over at the turn's end")
            // A burst: a record a millisecond (well under the 4,096 records that go at once) until
            // two more messages went (by the timer): fewer messages than records, and the gaps
            // between them the `HandOverMs`, never a turn's. (At least 5 ms less: a timer is set
            // against libuv's clock, read once per turn of the loop, which can be behind
            // `performance.now()` by what that turn did before.) A timer's hand-over that armed
            // another timer sent a second message ~1 ms after the first, 1 run in 5.
            let id = 2
            while (handedOver.length < before + 3) {
              run.record(LedgerEvent.itemSubmitted({ id: id++, prompt: "burst" }))
              yield* Effect.sleep(Duration.millis(1))
            }
            const burst = handedOver.slice(before).map((m) => m.at)
            assert.isAbove(id - 2, burst.length - 1, "more records than messages in the burst")
            for (let i = 1; i < burst.length; i++)
              assert.isAtLeast(burst[i]! - burst[i - 1]!, HandOverMs - 5, `gap ${i}`)
            yield* ledger.flush
            return { runId: run.id, records: id - 1 }
          })
        )
        const prompts = (yield* readBack(filename, written.runId)).items.map((i) => i.prompt)
        assert.strictEqual(prompts[0], "trickled")
        assert.strictEqual(prompts.length, written.records, "every record written")
        assert.deepStrictEqual(new Set(prompts.slice(1)), new Set(["burst"]))
      })
  )

  /**
   * A saturated loop's records, from its second turn on (the first turn after a quiet spell goes
   * at once, as above): what was handed over meanwhile, and what the run holds in the end.
   */
  const whileSaturated = (
    options: Ledger.LedgerOptions,
    perTurn: number,
    done: (turn: number, sinceSecondTurn: number, messages: number) => boolean
  ) =>
    Effect.gen(function* () {
      assert.isDefined(realWorker, "the test suite's set-up names the writer's bundle (scripts/test-bundle.mjs)")
      const filename = Path.join(yield* tempDir, "ledger.db")
      const handedOver = yield* handOvers
      const result = yield* inRun(
        realWorker!,
        filename,
        [],
        (ledger, run) =>
          Effect.gen(function* () {
            yield* ledger.flush
            let before = 0
            let secondTurn = 0
            let records = 0
            const turns = yield* saturating(
              (turn) => {
                if (turn === 1) {
                  before = handedOver.length
                  secondTurn = performance.now()
                }
                for (let k = 0; k < perTurn; k++)
                  run.record(LedgerEvent.itemSubmitted({ id: ++records, prompt: `turn ${turn}` }))
              },
              (turn) => turn > 1 && done(turn, performance.now() - secondTurn, handedOver.length - before)
            )
            const during = handedOver.slice(before)
            // Written in the end, every one, without a flush: the loop has room now.
            while (handedOver.reduce((n, m) => n + m.ops, 0) < records + 1) yield* Effect.sleep(Duration.millis(5))
            yield* ledger.flush
            return { runId: run.id, records, turns, during, secondTurn }
          }),
        options
      )
      const items = (yield* readBack(filename, result.runId)).items
      assert.strictEqual(items.length, result.records, "every record written")
      return result
    })

  it.scopedLive(
    "while the event loop is saturated, records are held until it has room: the writer's thread works after a burst, not beside it",
    () =>
      Effect.gen(function* () {
        // A burst of three times the `HandOverMs` a record waits otherwise, one record a turn.
        const { during, turns } = yield* whileSaturated(
          { holdWhileSaturated: "60 seconds" },
          1,
          (_turn, since) => since >= 3 * HandOverMs
        )
        assert.isAbove(turns, 20)
        assert.deepStrictEqual(during, [], "nothing handed over while the loop was saturated")
      })
  )

  it.scopedLive("records held for a saturated loop wait 1 second at most (holdWhileSaturated's default)", () =>
    Effect.gen(function* () {
      // Saturated until a message goes, one record a turn (under 2,000 a second: never the 4,096).
      const { during, secondTurn, records } = yield* whileSaturated({}, 1, (_turn, _since, messages) => messages > 0)
      assert.lengthOf(during, 1)
      assert.isAtLeast(during[0]!.at - secondTurn, 1000, "held the second's length")
      assert.isBelow(records, 4096)
    })
  )

  it.scopedLive("records held for a saturated loop go once 4,096 wait", () =>
    Effect.gen(function* () {
      // 200 records a turn, saturated until a message goes: the 21st turn's end has 4,200 waiting.
      const { during } = yield* whileSaturated(
        { holdWhileSaturated: "60 seconds" },
        200,
        (_turn, _since, messages) => messages > 0
      )
      assert.lengthOf(during, 1)
      assert.isAtLeast(during[0]!.ops, 4096)
      assert.isBelow(during[0]!.ops, 4096 + 200)
    })
  )

  it.scoped("dies: the main thread writes what it had not, and everything after; the log says so", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      const lines: Array<string> = []
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          process.env["WARDEN_TEST_REAL_WORKER"] = realWorker!
        }),
        () => Effect.sync(() => delete process.env["WARDEN_TEST_REAL_WORKER"])
      )
      const runId = yield* withWorker(
        dyingWriter,
        recording(
          filename,
          lines,
          Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            const run = yield* ledger.beginRun({ label: "dying" })
            for (let i = 0; i < 5; i++) run.record(LedgerEvent.itemSubmitted({ id: i, prompt: `before ${i}` }))
            // Written by the thread: flushed.
            const first = yield* ledger.flush
            assert.strictEqual(first.written, 6)
            run.record(LedgerEvent.itemSubmitted({ id: 5, prompt: "die-now" }))
            run.record(LedgerEvent.itemSubmitted({ id: 6, prompt: "in the same batch" }))
            const second = yield* ledger.flush
            assert.strictEqual(second.pending, 0)
            run.record(LedgerEvent.itemSubmitted({ id: 7, prompt: "after" }))
            yield* run.end
            const third = yield* ledger.flush
            assert.strictEqual(third.recorded, 10)
            assert.strictEqual(third.written, 10)
            assert.strictEqual(third.failed, 0)
            return run.id
          })
        )
      )
      assert.isTrue(
        lines.some((l) => /the ledger's writer thread stopped \(it exited with code 3\)/.test(l)),
        lines.join("\n")
      )
      const read = yield* readBack(filename, runId)
      assert.deepStrictEqual(
        read.items.map((i) => i.prompt),
        ["before 0", "before 1", "before 2", "before 3", "before 4", "die-now", "in the same batch", "after"]
      )
      assert.strictEqual(read.runs[0]!.status, "ended")
    })
  )

  // A script that is not there: found at once (the first test flushes), or only while the ledger
  // closes (the second records and closes at once).
  for (const flushed of [true, false]) {
    it.scoped(
      flushed
        ? "cannot start: the main thread writes everything, and the log says why"
        : "cannot start (found missing while the ledger closes): everything is written all the same",
      () =>
        Effect.gen(function* () {
          const dir = yield* tempDir
          const filename = Path.join(dir, "ledger.db")
          const lines: Array<string> = []
          const runId = yield* inRun(Path.join(dir, "no-such-writer.mjs"), filename, lines, (ledger, run) =>
            Effect.gen(function* () {
              for (let i = 0; i < 3; i++) run.record(LedgerEvent.itemSubmitted({ id: i, prompt: `recorded ${i}` }))
              if (flushed) assert.strictEqual((yield* ledger.flush).written, 4)
              return run.id
            })
          )
          assert.isTrue(
            lines.some((l) => l.includes("the ledger's writer thread stopped") && l.includes("no-such-writer.mjs")),
            lines.join("\n")
          )
          const read = yield* readBack(filename, runId)
          assert.deepStrictEqual(
            read.items.map((i) => i.prompt),
            ["recorded 0", "recorded 1", "recorded 2"]
          )
          assert.strictEqual(read.runs[0]!.status, "ended")
        })
    )
  }
})
