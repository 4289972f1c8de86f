/**
 * Recording a scripted run into a real SQLite file and reading it back: runs, work items, threads
 * and their generations, turns, every card with its one settlement, late decisions; what a closing
 * scope flushes; a write failure reported while the recorder goes on.
 */
import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Effect, Exit, Layer, Logger, Queue, Scope, TestClock } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Ledger, LedgerEvent } from "../src/index.js"
import * as AnswerJournal from "../src/internal/AnswerJournal.js"
import * as JournalFile from "../src/internal/JournalFile.js"
import {
  commandParams,
  denyCmd,
  allowCmd,
  fileChangeParams,
  journalKind,
  journalEntries,
  journalFile,
  journalSize,
  mcpToolCallParams,
  rules,
  script,
  tempDir
} from "./support.js"

const init = { userAgent: "fake/0.171.0", codexHome: "/tmp/codex-home" }

const command = "item/commandExecution/requestApproval"

describe("recording", () => {
  it.scoped("a scripted run is read back whole: items, threads, turns, cards, settlements, late decisions", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "state", "ledger.db")
      const s = yield* script({ rules: rules(denyCmd("no-rm", "rm"), allowCmd("git-status", "git", "status")) })

      const runId = yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const run = yield* ledger.beginRun({ label: "scripted", info: { argv: ["warden", "run", "fix it"] } })
        yield* run.attach(s.source)
        run.record(
          LedgerEvent.itemSubmitted({
            id: 1,
            prompt: "fix the failing test",
            followUps: ["update the docs"],
            cwd: "/repo",
            model: "gpt-x"
          })
        )
        run.record(LedgerEvent.itemSubmitted({ id: 2, prompt: "tidy the README", cwd: "/repo" }))
        s.publish({ _tag: "ConnectionReady", slot: 0, connection: 7, init })

        s.work({ _tag: "ThreadReady", item: 1, threadId: "thr_1", resumed: false })
        s.work({ _tag: "TurnStarted", item: 1, threadId: "thr_1", turnId: "turn_1", prompt: "fix the failing test" })
        s.work({
          _tag: "Notification",
          item: 1,
          threadId: "thr_1",
          turnId: "turn_1",
          method: "item/agentMessage/delta",
          params: { delta: "hi" }
        })

        // A rule's deny, a rule's allow, a person's accept (then a late decline), an MCP tool call
        // a person declines, a file change refused when its thread stops, one left open.
        const denied = yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'rm -rf build'"))
        const allowed = yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'git status'"))
        const asked = yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'make test'"))
        const accepted = yield* s.approvals.answer(asked.id, Decision.Accept)
        assert.strictEqual(accepted._tag, "Settled")
        const late = yield* s.approvals.answer(asked.id, Decision.Decline)
        assert.strictEqual(late._tag, "AlreadySettled")
        const mcp = yield* s.open(
          "mcpServer/elicitation/request",
          mcpToolCallParams("thr_1", "turn_1", "probe", "poke", { depth: 2 })
        )
        yield* s.approvals.answer(mcp.id, Decision.Decline)
        const thread = yield* s.thread
        const stopped = yield* s.open("item/fileChange/requestApproval", fileChangeParams("thr_1", "turn_1"), {
          parent: thread,
          context: { fileChanges: [{ path: "/repo/src/a.ts", kind: "update", diff: "-a\n+b" }] }
        })
        yield* Scope.close(thread, Exit.void)
        const open = yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'npm publish'"))

        s.work({
          _tag: "TurnCompleted",
          item: 1,
          threadId: "thr_1",
          turn: {
            turnId: "turn_1",
            status: "completed",
            finalMessage: "fixed",
            items: [],
            error: undefined,
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
        s.publish({ _tag: "ConnectionReady", slot: 0, connection: 8, init })
        s.work({ _tag: "Resumed", item: 1, threadId: "thr_1", attempt: 1 })
        s.work({ _tag: "TurnStarted", item: 1, threadId: "thr_1", turnId: "turn_2", prompt: "update the docs" })
        s.work({
          _tag: "TurnCompleted",
          item: 1,
          threadId: "thr_1",
          turn: {
            turnId: "turn_2",
            status: "completed",
            finalMessage: "docs updated",
            items: [],
            error: undefined,
            errors: []
          }
        })
        s.finished(1, { threadId: "thr_1", finalMessage: "docs updated", resumes: 1 })

        s.work({ _tag: "ThreadReady", item: 2, threadId: "thr_2", resumed: false })
        s.work({ _tag: "TurnStarted", item: 2, threadId: "thr_2", turnId: "turn_3", prompt: "tidy the README" })

        const stats = yield* ledger.flush
        assert.strictEqual(stats.pending, 0)
        assert.strictEqual(stats.failed, 0)
        assert.strictEqual(stats.dropped, 0)
        assert.deepStrictEqual(
          [denied.id, allowed.id, asked.id, mcp.id, stopped.id, open.id],
          ["c1", "c2", "c3", "c4", "c5", "c6"]
        )
        return run.id
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

      // A second ledger on the same file reads what the first wrote.
      yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const [run] = yield* ledger.runs()
        assert.strictEqual(run!.runId, runId)
        assert.strictEqual(run!.status, "ended")
        assert.strictEqual(run!.label, "scripted")
        assert.deepStrictEqual(run!.info, { argv: ["warden", "run", "fix it"] })
        assert.strictEqual(run!.pid, process.pid)

        const items = yield* ledger.workItems(runId)
        assert.deepStrictEqual(
          items.map((i) => [i.item, i.status, i.threadId, i.turnsDone, i.resumes]),
          [
            ["1", "finished", "thr_1", 2, 1],
            ["2", "running", "thr_2", 0, 0]
          ]
        )
        assert.strictEqual(items[0]!.prompt, "fix the failing test")
        assert.deepStrictEqual(items[0]!.followUps, ["update the docs"])
        assert.deepStrictEqual(items[0]!.options, { cwd: "/repo", model: "gpt-x" })
        assert.strictEqual(items[0]!.resultStatus, "completed")
        assert.strictEqual(items[0]!.finalMessage, "docs updated")
        assert.strictEqual(items[0]!.promptsMasked, false)

        const threads = yield* ledger.threads(runId)
        assert.deepStrictEqual(
          threads.map((t) => [t.threadId, t.item, t.generation, t.resumed, t.lostAt]),
          [
            ["thr_1", "1", 1, false, undefined],
            ["thr_2", "2", 0, false, undefined]
          ]
        )
        const turns = yield* ledger.turns(runId)
        assert.deepStrictEqual(
          turns.map((t) => [t.turnId, t.status, t.prompt, t.finalMessage]),
          [
            ["turn_1", "completed", "fix the failing test", "fixed"],
            ["turn_2", "completed", "update the docs", "docs updated"],
            ["turn_3", "inProgress", "tidy the README", undefined]
          ]
        )

        const cards = yield* ledger.cards({ runId })
        assert.deepStrictEqual(
          cards.map((c) => [c.cardId, c.method, c.settlement?.outcome, c.settlement?.source, c.settlement?.written]),
          [
            ["c1", command, "declined", "rule:no-rm", true],
            ["c2", command, "accepted", "rule:git-status", true],
            ["c3", command, "accepted", "person", true],
            ["c4", "mcpServer/elicitation/request", "declined", "person", true],
            ["c5", "item/fileChange/requestApproval", "refused", "thread-stopped", true],
            ["c6", command, undefined, undefined, undefined]
          ]
        )
        const c1 = cards[0]!
        assert.strictEqual(c1.threadId, "thr_1")
        assert.strictEqual(c1.turnId, "turn_1")
        assert.strictEqual(c1.workItem, "1")
        assert.strictEqual(c1.requestId, 0)
        assert.strictEqual(c1.title, "run: rm -rf build (in /repo)")
        assert.deepStrictEqual(c1.facts, {
          kind: "command",
          command: "rm -rf build",
          argv: ["rm", "-rf", "build"],
          simple: true,
          cwd: "/repo",
          complete: true,
          masked: false
        })
        assert.deepStrictEqual(cards[3]!.facts.mcp, {
          server: "probe",
          tool: "poke",
          toolCall: true,
          noFields: true,
          mode: "form"
        })
        assert.deepStrictEqual(cards[4]!.facts.paths, [{ path: "/repo/src/a.ts", kind: "update" }])
        assert.strictEqual(cards[2]!.settlement!.decision, "accept")
        assert.strictEqual(cards[2]!.settlement!.sourceKind, "person")

        const late = yield* ledger.lateDecisions({ runId })
        assert.deepStrictEqual(
          late.map((l) => [l.cardId, l.decision, l.source, l.outcome]),
          [["c3", "Decline", "person", "accepted"]]
        )

        const accounting = yield* ledger.accounting(runId)
        assert.deepStrictEqual(accounting, {
          cards: 6,
          open: 1,
          settled: 5,
          stranded: 0,
          byOutcome: { accepted: 2, declined: 2, refused: 1 },
          lateDecisions: 1
        })

        // The audit filters.
        const ids = (cs: ReadonlyArray<Ledger.CardRecord>) => cs.map((c) => c.cardId)
        assert.deepStrictEqual(ids(yield* ledger.cards({ source: "rule" })), ["c1", "c2"])
        assert.deepStrictEqual(ids(yield* ledger.cards({ source: "rule:no-rm" })), ["c1"])
        assert.deepStrictEqual(ids(yield* ledger.cards({ outcome: "accepted" })), ["c2", "c3"])
        assert.deepStrictEqual(ids(yield* ledger.cards({ outcome: "open" })), ["c6"])
        assert.deepStrictEqual(ids(yield* ledger.cards({ method: "item/fileChange/requestApproval" })), ["c5"])
        assert.deepStrictEqual(ids(yield* ledger.cards({ item: 1, limit: 2 })), ["c1", "c2"])
        assert.deepStrictEqual(ids(yield* ledger.cards({ item: 2 })), [])
        assert.deepStrictEqual(ids(yield* ledger.cards({ from: 1 })), [])
        assert.deepStrictEqual(ids(yield* ledger.openCards(runId)), ["c6"])
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
    })
  )

  it.scoped(
    "with an audit file, each card event is one JSONL line rendered from the record its rows were written from",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const filename = Path.join(dir, "ledger.db")
        const audit = Path.join(dir, "audit.jsonl")
        const secret = "sk-live-9f8e7d6c5b4a39281726354abcdef"
        const s = yield* script({
          rules: rules(denyCmd("no-rm", "rm")),
          handler: (card) =>
            card.title.includes("deploy")
              ? Effect.fail(new Error(`the deploy service said no (token ${secret})`))
              : Effect.succeed(undefined)
        })
        const runId = yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const run = yield* ledger.beginRun({ label: "audited" })
          yield* run.attach(s.source)
          yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'rm -rf build'"))
          const asked = yield* s.open(
            command,
            commandParams("thr_1", "turn_1", `/bin/bash -lc 'curl -H "Authorization: Bearer ${secret}" https://x'`)
          )
          yield* s.approvals.answer(asked.id, Decision.Accept, "web")
          yield* s.approvals.answer(asked.id, Decision.Decline, "link") // late
          yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc './deploy.sh'"))
          yield* s.open(command, commandParams("thr_1", "turn_1", "/bin/bash -lc 'npm publish'")) // left open
          yield* ledger.flush
          return run.id
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename, audit })))

        const text = Fs.readFileSync(audit, "utf8")
        assert.notInclude(text, secret)
        assert.notInclude(text, "9f8e7d6c5b4a")
        const lines = text
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
        // Each card's lines in order (the handler's refusal of c3 runs in its own fiber: it may follow c4's opening).
        const perCard = (id: string) => lines.filter((l) => l.cardId === id).map((l) => l.type)
        assert.strictEqual(lines.length, 8)
        assert.deepStrictEqual(["c1", "c2", "c3", "c4"].map(perCard), [
          ["card.opened", "card.settled"],
          ["card.opened", "card.settled", "card.late"],
          ["card.opened", "card.settled"],
          ["card.opened"]
        ])
        const { cards, late } = yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          return { cards: yield* ledger.cards({ runId }), late: yield* ledger.lateDecisions({ runId }) }
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
        const byId = new Map(cards.map((c) => [c.cardId, c]))
        for (const line of lines) {
          const card = byId.get(line.cardId)!
          assert.deepStrictEqual(
            [line.method, line.threadId, line.turnId, line.requestId, line.summary],
            [card.method, card.threadId, card.turnId, card.requestId, card.title]
          )
          if (line.type === "card.opened") assert.strictEqual(line.ts, new Date(card.openedAt).toISOString())
          if (line.type === "card.settled") {
            const st = card.settlement!
            assert.deepStrictEqual(
              [
                line.outcome,
                line.source,
                line.channel,
                line.decision,
                line.written,
                line.detail,
                line.latencyMs,
                line.ts
              ],
              [
                st.outcome,
                st.source,
                st.channel ?? null,
                st.decision ?? null,
                st.written,
                st.detail ?? null,
                st.latencyMs ?? null,
                new Date(st.settledAt).toISOString()
              ]
            )
          }
          if (line.type === "card.late") {
            assert.deepStrictEqual(
              [line.decision, line.source, line.channel, line.outcome],
              [late[0]!.decision, late[0]!.source, late[0]!.channel ?? null, late[0]!.outcome]
            )
          }
        }
        // Who decided, and through which channel (the person's answer on the page, the late one by a link).
        assert.deepStrictEqual(
          [byId.get("c2")!.settlement!.source, byId.get("c2")!.settlement!.channel],
          ["person", "web"]
        )
        assert.deepStrictEqual([late[0]!.source, late[0]!.channel], ["person", "link"])
        assert.isUndefined(byId.get("c1")!.settlement!.channel)
        // The handler's refusal quotes its error, masked the same way in both.
        assert.match(byId.get("c3")!.settlement!.detail ?? "", /the deploy service said no \(token •••\)/)
        assert.include(byId.get("c2")!.title, "Authorization: •••")
      })
  )

  it.scoped("closing the scope writes what was queued, without a flush", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      const s = yield* script()
      const n = 500
      const runId = yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const run = yield* ledger.beginRun()
        yield* run.attach(s.source)
        for (let i = 0; i < n; i++) run.record(LedgerEvent.itemSubmitted({ id: i, prompt: `item ${i}` }))
        // Published to the attached source and never pumped before the close: drained by it.
        for (let i = 0; i < n; i++) s.work({ _tag: "ThreadReady", item: i, threadId: `thr_${i}`, resumed: false })
        const card = yield* s.open(command, commandParams("thr_0", "turn_0", "ls"))
        yield* s.approvals.answer(card.id, Decision.Decline)
        return run.id
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

      yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const items = yield* ledger.workItems(runId)
        assert.strictEqual(items.length, n)
        assert.isTrue(items.every((i) => i.status === "running" && i.threadId === `thr_${i.item}`))
        const cards = yield* ledger.cards({ runId })
        assert.deepStrictEqual(
          cards.map((c) => c.settlement?.outcome),
          ["declined"]
        )
        const [run] = yield* ledger.runs()
        assert.strictEqual(run!.status, "ended")
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
    })
  )

  it.scoped("a supervisor's events published while it shuts down are recorded: the ledger outlives it", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      const runId = yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const run = yield* ledger.beginRun()
        // The approvals engine in a scope of its own, closed before the ledger: its finalizer
        // refuses the open card (outcome shutdown) as the supervisor's does. The card's thread
        // outlives the engine (the supervisor refuses open cards before its threads stop).
        const thread = yield* Scope.make()
        const engineScope = yield* Scope.make()
        const s = yield* script().pipe(Scope.extend(engineScope))
        yield* run.attach(s.source)
        yield* s.open(command, commandParams("thr_1", "turn_1", "make deploy"), { parent: thread })
        yield* Scope.close(engineScope, Exit.void)
        yield* Scope.close(thread, Exit.void)
        return run.id
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

      yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const cards = yield* ledger.cards({ runId })
        assert.deepStrictEqual(
          cards.map((c) => [c.settlement?.outcome, c.settlement?.source]),
          [["shutdown", "shutdown"]]
        )
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
    })
  )

  it.scoped(
    "a flush right after a publish records the event: a pump's take is never interrupted (an interrupted take lost the chunk it had been handed)",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const s = yield* script()
          const run = yield* ledger.beginRun()
          yield* run.attach(s.source)
          yield* ledger.flush
          // Each item's submission is recorded directly; its thread's readiness comes through the
          // attached source, published in the same step as the flush that follows it (the pump
          // has been handed the event, and has not run yet).
          const n = 200
          for (let i = 1; i <= n; i++) {
            run.record(LedgerEvent.itemSubmitted({ id: i, prompt: `p${i}` }))
            s.work({ _tag: "ThreadReady", item: i, threadId: `thr_${i}`, resumed: false })
            yield* ledger.flush
          }
          const items = yield* ledger.workItems(run.id)
          assert.strictEqual(items.length, n)
          const notRunning = items.filter((i) => i.status !== "running" || i.threadId === undefined)
          assert.deepStrictEqual(
            notRunning.map((i) => i.item),
            [],
            "every thread's readiness recorded"
          )
          assert.strictEqual((yield* ledger.stats).dropped, 0)
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
      })
  )

  it.scoped("a write failure is reported and counted; recording goes on and the rest is written", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const failures = yield* ledger.subscribeFailures
        const s = yield* script()
        const run = yield* ledger.beginRun()
        yield* run.attach(s.source)
        yield* ledger.flush
        // The schema breaks under the ledger: turns can no longer be written.
        const sql = yield* SqlClient.SqlClient
        yield* sql`DROP TABLE ledger_turns`

        run.record(LedgerEvent.itemSubmitted({ id: 1, prompt: "still recorded" }))
        s.work({ _tag: "ThreadReady", item: 1, threadId: "thr_1", resumed: false })
        s.work({ _tag: "TurnStarted", item: 1, threadId: "thr_1", turnId: "turn_1", prompt: "still recorded" })
        const card = yield* s.open(command, commandParams("thr_1", "turn_1", "ls"))
        yield* s.approvals.answer(card.id, Decision.Accept)
        const stats = yield* ledger.flush
        assert.strictEqual(stats.failed, 1)
        assert.strictEqual(stats.pending, 0)

        const failure = yield* Queue.take(failures)
        assert.strictEqual(failure._tag, "LedgerWriteFailed")
        assert.deepStrictEqual(failure.kinds, ["TurnStarted"])
        assert.include(failure.message, "no such table: ledger_turns")

        // The batch it was in was written op by op: everything else is there.
        const cards = yield* ledger.cards({ runId: run.id })
        assert.deepStrictEqual(
          cards.map((c) => c.settlement?.outcome),
          ["accepted"]
        )
        const items = yield* ledger.workItems(run.id)
        assert.deepStrictEqual(
          items.map((i) => [i.prompt, i.status, i.threadId]),
          [["still recorded", "running", "thr_1"]]
        )
        // `Ledger.layer` on a client of the caller's (as a Postgres client would be given).
      }).pipe(Effect.provide(Layer.provideMerge(Ledger.layer(), SqliteClient.layer({ filename }))))
    })
  )

  it.scoped("a bounded queue drops what does not fit, counts it, and the run says so", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      const runId = yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const run = yield* ledger.beginRun()
        // Recorded in one synchronous step: at most 10 wait (the run's own row among them).
        const kept = Array.from({ length: 20 }, (_, i) =>
          run.record(LedgerEvent.itemSubmitted({ id: i, prompt: `p${i}` }))
        )
        const dropped = kept.filter((k) => !k).length
        assert.isAtLeast(dropped, 10)
        const stats = yield* ledger.flush
        assert.strictEqual(stats.dropped, dropped)
        return { runId: run.id, dropped }
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename, capacity: 10 })))

      yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const [run] = yield* ledger.runs()
        assert.strictEqual(run!.droppedEvents, runId.dropped)
        assert.strictEqual((yield* ledger.workItems(runId.runId)).length, 20 - runId.dropped)
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
    })
  )

  it.scoped("a file that is not a database fails to open with a typed error", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "not-a-db")
      Fs.writeFileSync(
        filename,
        "this is not a SQLite database, just text that is long enough to be read as a header".repeat(20)
      )
      const error = yield* Effect.flip(Effect.provide(Ledger.Ledger, Ledger.layerSqlite({ filename })))
      assert.strictEqual(error._tag, "LedgerError")
      assert.strictEqual(error.reason, "Open")
      assert.include(error.message, "not a database")
    })
  )

  it.scoped(
    "a path that cannot hold a file fails to open with a typed error, and returns (no recursive mkdir under /proc)",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const aFile = Path.join(dir, "a-file")
        Fs.writeFileSync(aFile, "")
        const cases: ReadonlyArray<[string, RegExp]> = [
          // Node's recursive mkdirSync never returns here (mkdir answers ENOENT under /proc).
          ["/proc/warden-ledger-test/state/ledger.db", /cannot make the directory \/proc\/warden-ledger-test/],
          [Path.join(aFile, "sub", "ledger.db"), /a-file is not a directory/],
          [dir, /exists and is not a regular file/]
        ]
        for (const [filename, expected] of cases) {
          const error = yield* Effect.flip(Effect.provide(Ledger.Ledger, Ledger.layerSqlite({ filename })))
          assert.strictEqual(error.reason, "Open", filename)
          assert.match(error.message, expected)
        }
      })
  )

  it.scoped("the database file is private to its owner", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const filename = Path.join(dir, "state", "ledger.db")
      yield* Effect.provide(Ledger.Ledger, Ledger.layerSqlite({ filename }))
      assert.strictEqual(Fs.statSync(filename).mode & 0o777, 0o600)
      assert.strictEqual(Fs.statSync(Path.dirname(filename)).mode & 0o777, 0o700)
    })
  )
})

describe("retention", () => {
  it.scoped(
    "prune deletes settled cards older than the cut, and runs left empty; open cards, running runs and newer cards stay",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        const s = yield* script({ rules: rules(allowCmd("echo-ok", "echo")) })
        yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          // Run A (ended): an old settled card and an old open one, then a newer settled card.
          const a = yield* ledger.beginRun({ id: "run-a" })
          // Run B (ended): only old settled cards: pruned whole, with its work item.
          const b = yield* ledger.beginRun({ id: "run-b" })
          // Run C (still running): an old settled card, kept.
          const c = yield* ledger.beginRun({ id: "run-c" })
          b.record(LedgerEvent.itemSubmitted({ id: 1, prompt: "b's item" }))
          // Each card recorded in the run given (by hand: attaching would record it in every run).
          const cardIn = (run: typeof a, line: string) =>
            Effect.gen(function* () {
              const q = yield* s.approvals.subscribe
              const card = yield* s.open(command, commandParams("thr_1", "turn_1", line))
              for (const event of yield* Queue.takeAll(q)) run.record(LedgerEvent.approval(event))
              return card
            }).pipe(Effect.scoped)
          yield* cardIn(a, "echo old")
          yield* cardIn(a, "make old") // stays open
          yield* cardIn(b, "echo b1")
          yield* cardIn(b, "echo b2")
          yield* cardIn(c, "echo c-old")
          yield* b.end
          yield* TestClock.adjust("10 seconds")
          yield* cardIn(a, "echo new")
          yield* a.end
          yield* ledger.flush

          const pruned = yield* ledger.prune(5_000)
          assert.deepStrictEqual(pruned, { cards: 3, runs: 1 })
          const left = (yield* ledger.cards()).map((card) => [card.runId, card.facts.command, card.settlement?.outcome])
          assert.deepStrictEqual(left, [
            ["run-a", "make old", undefined],
            ["run-c", "echo c-old", "accepted"],
            ["run-a", "echo new", "accepted"]
          ])
          assert.sameMembers(
            (yield* ledger.runs()).map((r) => r.runId),
            ["run-a", "run-c"]
          )
          assert.deepStrictEqual(yield* ledger.workItems("run-b"), [])
          // Again: nothing more to prune.
          assert.deepStrictEqual(yield* ledger.prune(5_000), { cards: 0, runs: 0 })
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
      })
  )

  for (const kind of ["mapped", "appended"] as const)
    it.scoped(
      `the answer journal (${kind}) holds only the answers not yet committed: cut back once they are, removed when the run ends`,
      () =>
        Effect.gen(function* () {
          const filename = Path.join(yield* tempDir, "ledger.db")
          const s = yield* script()
          yield* journalKind(kind)
          const journal = (runId: string) => journalFile(`${filename}.answers`, runId)
          const size = journalSize
          const runId = yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            const run = yield* ledger.beginRun()
            yield* run.attach(s.source)
            // One answer: on record before it is written, until its settlement is committed.
            const first = yield* s.open(command, commandParams("thr_1", "turn_1", "make build"))
            yield* s.approvals.answer(first.id, Decision.Accept)
            const [line] = journalEntries(journal(run.id))
            // Mapped: the file is allocated ahead (zeros after the records); appended: just the records.
            assert.strictEqual(
              Fs.statSync(journal(run.id)).size,
              kind === "mapped" ? JournalFile.MappedBytes : size(journal(run.id))
            )
            assert.deepInclude(line!, {
              cardId: first.id,
              method: command,
              threadId: "thr_1",
              outcome: "accepted",
              source: "person",
              decision: "accept"
            })
            yield* ledger.flush
            // Many answers: the file is cut back once every settlement it names is committed.
            // The file read every 256 answers, not at each (it is read whole: a mapped one is 1.25 MiB).
            for (let i = 0; i % 256 !== 0 || size(journal(run.id)) <= AnswerJournal.CutAt; i++) {
              const card = yield* s.open(command, commandParams("thr_1", "turn_1", `echo ${i}`))
              yield* s.approvals.answer(card.id, Decision.Decline)
            }
            // One more settlement committed: the file is replaced by what still waits (it only grows otherwise).
            const last = yield* s.open(command, commandParams("thr_1", "turn_1", "echo last"))
            yield* s.approvals.answer(last.id, Decision.Decline)
            yield* ledger.flush
            assert.isBelow(size(journal(run.id)), AnswerJournal.CutAt)
            return run.id
          }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
          // The run ended with the ledger's close: every settlement is committed, the file is gone.
          assert.strictEqual(size(journal(runId)), -1)
          // A ledger without a journal writes none.
          const other = Path.join(Path.dirname(filename), "other.db")
          yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            const run = yield* ledger.beginRun()
            yield* run.attach(s.source)
            const card = yield* s.open(command, commandParams("thr_1", "turn_1", "make other"))
            yield* s.approvals.answer(card.id, Decision.Accept)
            yield* ledger.flush
          }).pipe(Effect.provide(Ledger.layerSqlite({ filename: other, answerJournal: false })))
          assert.isFalse(Fs.existsSync(`${other}.answers`))
        })
    )

  it.scoped(
    "answers whose journal line cannot be written are recorded all the same, counted on their run, warned once",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const filename = Path.join(dir, "ledger.db")
        // The journal's directory cannot be made: a file is where it would be.
        const answers = Path.join(dir, "answers")
        Fs.writeFileSync(answers, "not a directory")
        const warnings: Array<string> = []
        const runId = yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const s = yield* script()
          const run = yield* ledger.beginRun()
          yield* run.attach(s.source)
          for (const [i, decision] of [Decision.Accept, Decision.Decline, Decision.Accept].entries()) {
            const card = yield* s.open(command, commandParams("thr_1", "turn_1", `make ${i}`))
            yield* s.approvals.answer(card.id, decision)
          }
          yield* ledger.flush
          const settled = yield* ledger.cards({ runId: run.id, limit: 10 })
          assert.deepStrictEqual(
            settled.map((c) => c.settlement?.outcome),
            ["accepted", "declined", "accepted"]
          )
          const [row] = (yield* ledger.runs()).filter((r) => r.runId === run.id)
          assert.strictEqual(row?.unjournaledAnswers, 3)
          assert.deepStrictEqual([row?.lostEvents, row?.droppedEvents], [0, 0])
          return run.id
        }).pipe(
          Effect.provide(
            Layer.provideMerge(Ledger.layer({ answerJournal: answers }), SqliteClient.layer({ filename }))
          ),
          Effect.provide(
            Logger.replace(
              Logger.defaultLogger,
              Logger.make(({ message }) => {
                warnings.push(String(message))
              })
            )
          )
        )
        const said = warnings.filter((w) => w.includes("answer journal of run"))
        assert.strictEqual(said.length, 1, warnings.join("\n"))
        assert.include(said[0], runId)
        assert.include(said[0], "unjournaledAnswers")
        assert.strictEqual(Fs.readFileSync(answers, "utf8"), "not a directory")
      })
  )

  it.scoped("an answer whose settlement the writer could not write stays in the answer journal", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const filename = Path.join(dir, "ledger.db")
      const answers = Path.join(dir, "answers")
      yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const s = yield* script()
        const run = yield* ledger.beginRun()
        yield* run.attach(s.source)
        const first = yield* s.open(command, commandParams("thr_1", "turn_1", "make build"))
        const second = yield* s.open(command, commandParams("thr_1", "turn_1", "make deploy"))
        yield* ledger.flush
        const sql = yield* SqlClient.SqlClient
        // The first card's settlement cannot be written: given up (reported, counted).
        yield* sql.unsafe(`CREATE TRIGGER refuse_first BEFORE INSERT ON ledger_settlements
          WHEN NEW.card_id = '${first.id}' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`)
        yield* s.approvals.answer(first.id, Decision.Accept)
        yield* s.approvals.answer(second.id, Decision.Decline)
        assert.strictEqual((yield* ledger.flush).failed, 1)
        // Enough answers after it for the journal to be replaced by what still waits.
        const file = journalFile(answers, run.id)
        // The file read every 256 answers, not at each (it is read whole: a mapped one is 1.25 MiB).
        for (let i = 0; i % 256 !== 0 || journalSize(file) <= AnswerJournal.CutAt; i++) {
          const card = yield* s.open(command, commandParams("thr_2", "turn_2", `echo ${i}`))
          yield* s.approvals.answer(card.id, Decision.Decline)
        }
        const last = yield* s.open(command, commandParams("thr_2", "turn_2", "echo last"))
        yield* s.approvals.answer(last.id, Decision.Decline)
        yield* ledger.flush
        assert.isBelow(journalSize(file), AnswerJournal.CutAt, "the journal was replaced")
        const journaled = journalEntries(file).map((e) => e.cardId)
        assert.include(journaled, first.id, "the answer whose settlement was lost is still on record")
        assert.notInclude(journaled, second.id)
        const settled = yield* ledger.cards({ runId: run.id, limit: 2 })
        assert.deepStrictEqual(
          settled.map((c) => [c.cardId, c.settlement?.outcome]),
          [
            [first.id, undefined],
            [second.id, "declined"]
          ]
        )
      }).pipe(
        Effect.provide(Layer.provideMerge(Ledger.layer({ answerJournal: answers }), SqliteClient.layer({ filename })))
      )
    })
  )

  it.scoped(
    "a source without its engine (only the subscriptions) is recorded through pumps, with no answer journal",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const s = yield* script()
          const run = yield* ledger.beginRun()
          yield* run.attach({ subscribe: s.source.subscribe, subscribeApprovals: s.source.subscribeApprovals })
          const card = yield* s.open(command, commandParams("thr_1", "turn_1", "make build"))
          yield* s.approvals.answer(card.id, Decision.Accept)
          yield* ledger.flush
          const cards = yield* ledger.cards({ runId: run.id })
          assert.deepStrictEqual(
            cards.map((c) => [c.cardId, c.title, c.settlement?.outcome]),
            [[card.id, "run: make build (in /repo)", "accepted"]]
          )
          assert.isFalse(Fs.existsSync(`${filename}.answers`))
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
      })
  )
})
