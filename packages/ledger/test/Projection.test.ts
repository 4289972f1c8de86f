/**
 * What a card costs the writer in statements, on the writer thread's target (`WorkerSql`) over a
 * real SQLite file (the schema made by a ledger opened on it first): a card opened and settled in
 * one transaction is inserted once (its settlement does not insert it again), a settlement makes
 * no late-decision statement unless its card already has a settlement, and a transaction that was
 * rolled back leaves nothing taken for written (its settlement, written again, inserts its card).
 * A ROLLBACK that failed leaves the connection in its transaction: the next one rolls it back
 * before its BEGIN, so one failure does not fail every transaction after it. And the writer's
 * `offerAll` on that target: written in the step that offers when nothing waits, behind what is
 * queued otherwise, and a slice that fails there left to the writer's fiber (rolled back first).
 */
import { assert, describe, it } from "@effect/vitest"
import type { ApprovalEvent } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import { Effect } from "effect"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { Ledger } from "../src/index.js"
import * as Projection from "../src/internal/Projection.js"
import * as WorkerSql from "../src/internal/WorkerSql.js"
import * as Writer from "../src/internal/Writer.js"
import { commandParams, script, tempDir } from "./support.js"

interface Database {
  readonly prepare: (source: string) => WorkerSql.Statement & { get: (...params: ReadonlyArray<unknown>) => unknown }
  readonly exec: (source: string) => unknown
  readonly inTransaction: boolean
  readonly close: () => void
}

const here = createRequire(import.meta.url)
const Driver = createRequire(here.resolve("@effect/sql-sqlite-node/SqliteClient"))("better-sqlite3") as new (
  filename: string
) => Database

/**
 * A connection whose statements are counted by their first words (`INSERT INTO ledger_cards`, ...);
 * `failNext()`: the next statement run throws (and is not counted); `failRollback()`: the next
 * ROLLBACK throws without rolling back (the transaction stays open); `failFor(value)`: every
 * statement given `value` throws, from now on.
 */
const counting = (db: Database) => {
  const counts = new Map<string, number>()
  let failing = false
  let rollbackFails = false
  const poisoned = new Set<unknown>()
  const failFor = (value: string) => {
    poisoned.add(value)
  }
  const failNext = () => {
    failing = true
  }
  const failRollback = () => {
    rollbackFails = true
  }
  const connection: WorkerSql.Connection = {
    exec: (source) => {
      if (rollbackFails && source === "ROLLBACK") {
        rollbackFails = false
        throw new Error("the rollback failed")
      }
      return db.exec(source)
    },
    get inTransaction() {
      return db.inTransaction
    },
    prepare: (source) => {
      const statement = db.prepare(source)
      const key = source.trim().split(/\s+/).slice(0, 3).join(" ").replace(/\(.*$/, "")
      const count = (params: ReadonlyArray<unknown>) => {
        if (failing || params.some((p) => poisoned.has(p))) {
          failing = false
          throw new Error("the statement failed")
        }
        counts.set(key, (counts.get(key) ?? 0) + 1)
      }
      return {
        run: (...params) => (count(params), statement.run(...params)),
        all: (...params) => (count(params), statement.all(...params))
      }
    }
  }
  return { connection, counts, failNext, failRollback, failFor }
}

/**
 * A ledger file with its schema and a run (made by a ledger opened on it first), open on a counting
 * connection (closed with the scope), the writer thread's target on it, and a row counter.
 */
const ledgerFile = Effect.gen(function* () {
  const filename = Path.join(yield* tempDir, "ledger.db")
  const runId = yield* Effect.scoped(
    Effect.flatMap(Ledger.Ledger, (ledger) => Effect.map(ledger.beginRun(), (run) => run.id))
  ).pipe(Effect.provide(Ledger.layerSqlite({ filename, answerJournal: false })))
  const db = new Driver(filename)
  yield* Effect.addFinalizer(() => Effect.sync(() => db.close()))
  const counted = counting(db)
  const rows = (query: string) => (db.prepare(query).get() as { readonly n: number }).n
  return { runId, db, ...counted, target: WorkerSql.target(counted.connection), rows }
})

/** Opened and settled events of three command cards, each accepted. */
const cardEvents = Effect.gen(function* () {
  const s = yield* script()
  const events: Array<ApprovalEvent.ApprovalEvent> = []
  yield* s.approvals.observeEvents((e) => events.push(e))
  for (const line of ["make one", "make two", "make three"]) {
    const card = yield* s.open("item/commandExecution/requestApproval", commandParams("thr_1", "turn_1", line))
    yield* s.approvals.answer(card.id, Decision.Accept)
  }
  return events
})

const op = (runId: string, event: ApprovalEvent.ApprovalEvent): Projection.Op => ({
  _tag: "Event",
  runId,
  at: 1,
  event: { _tag: "Approval", event }
})

describe("the projection's statements", () => {
  it.scoped(
    "a card opened and settled in one transaction costs two statements; a rolled-back try is never taken for written",
    () =>
      Effect.gen(function* () {
        const { runId, counts, failNext, target, rows } = yield* ledgerFile
        const write = (...ops: ReadonlyArray<Projection.Op>) => target.transaction(ops, 0, () => true)
        const taken = () => {
          const out = Object.fromEntries(counts)
          counts.clear()
          return out
        }
        const events = yield* cardEvents
        const [open1, settled1, open2, settled2, open3, settled3] = events.map((e) => op(runId, e))
        assert.deepStrictEqual(
          events.map((e) => e._tag),
          ["CardOpened", "CardSettled", "CardOpened", "CardSettled", "CardOpened", "CardSettled"]
        )

        // 1. Opened and settled in one transaction: the card once, the settlement once.
        yield* write(open1!, settled1!)
        assert.deepStrictEqual(taken(), { "INSERT INTO ledger_cards": 1, "INSERT INTO ledger_settlements": 1 })

        // 2. Opened in a transaction that was rolled back (its settlement's statement failed): the
        //    settlement, in a try of its own, inserts the card (what the rolled-back try wrote is
        //    not there).
        const failed = yield* Effect.exit(
          target.transaction([open2!, settled2!], 0, () => {
            if (counts.size > 0) failNext()
            return true
          })
        )
        assert.isTrue(failed._tag === "Failure")
        assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_cards`), 1)
        yield* write(settled2!)
        assert.deepStrictEqual(taken(), { "INSERT INTO ledger_cards": 2, "INSERT INTO ledger_settlements": 1 })

        // 3. Opened in a committed transaction the writer was told of: its settlement alone.
        yield* write(open3!)
        Projection.committed(target, [open3!], () => true)
        yield* write(settled3!)
        assert.deepStrictEqual(taken(), { "INSERT INTO ledger_cards": 1, "INSERT INTO ledger_settlements": 1 })

        // 4. A settlement recorded twice: the second finds the first and keeps nothing more (its
        //    late-decision statement keeps one only when the first was `stranded`).
        yield* write(settled3!)
        assert.deepStrictEqual(taken(), { "INSERT INTO ledger_settlements": 1, "INSERT INTO ledger_late_decisions": 1 })

        assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_cards`), 3)
        assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_settlements WHERE outcome = 'accepted'`), 3)
        assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_late_decisions`), 0)
      })
  )

  it.scoped("a ROLLBACK that failed: the next transaction rolls back what is still open, then writes", () =>
    Effect.gen(function* () {
      const { runId, db, counts, failNext, failRollback, target, rows } = yield* ledgerFile
      const [open1, settled1] = (yield* cardEvents).map((e) => op(runId, e))

      // The settlement's statement fails, and so does the ROLLBACK: the card's row is written but
      // not committed, and the connection is still in the transaction.
      failRollback()
      const failed = yield* Effect.exit(
        target.transaction([open1!, settled1!], 0, () => {
          if (counts.size > 0) failNext()
          return true
        })
      )
      assert.isTrue(failed._tag === "Failure")
      assert.isTrue(db.inTransaction, "the failed ROLLBACK left the transaction open")

      // The next transaction rolls that back first, then writes both, once.
      counts.clear()
      yield* target.transaction([open1!, settled1!], 0, () => true)
      assert.isFalse(db.inTransaction)
      assert.deepStrictEqual(Object.fromEntries(counts), {
        "INSERT INTO ledger_cards": 1,
        "INSERT INTO ledger_settlements": 1
      })
      assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_cards`), 1)
      assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_settlements`), 1)
    })
  )
})

describe("the writer's offerAll on the thread's target (writes at once when nothing waits)", () => {
  /** A writer on `target` whose slices are kept, in order, as what `afterSlice` was told. */
  const writerOn = (target: Writer.Target, options: Writer.WriterOptions = {}) =>
    Effect.gen(function* () {
      const slices: Array<ReadonlyArray<string>> = []
      const reported: Array<Writer.LedgerWriteFailed> = []
      const writer = yield* Writer.make(
        target,
        options,
        (ops, written) =>
          void slices.push(ops.map((o) => `${Projection.describe(o)}${written(o) ? "" : " (not written)"}`)),
        undefined,
        (failure) => void reported.push(failure)
      )
      return { writer, slices, reported }
    })

  it.scoped(
    "nothing waits: the first slice is committed and told in the step that offers it; the rest is the fiber's",
    () =>
      Effect.gen(function* () {
        const { runId, target, rows } = yield* ledgerFile
        const [open1, settled1, open2, settled2] = (yield* cardEvents).map((e) => op(runId, e))
        // A slice's time far away: the slice ends by its count alone (a loaded machine cannot cut it).
        const { writer, slices } = yield* writerOn(target, { sliceMs: 60_000 })
        yield* Effect.yieldNow() // the writer's fiber waits for ops

        // No yield between the offer and the reads: the fiber could not have written them.
        assert.strictEqual(writer.offerAll([open1!, settled1!, open2!]), 0)
        assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_cards`), 2)
        assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_settlements`), 1)
        assert.deepStrictEqual(slices, [["CardOpened", "CardSettled", "CardOpened"]])
        assert.deepInclude(writer.stats(), { recorded: 3, written: 3, failed: 0, pending: 0, batches: 1 })

        // More than a slice (`maxBatch` 1 here): the first at once, the next by the fiber, in order.
        const small = yield* writerOn(target, { sliceMs: 60_000, maxBatch: 1 })
        yield* Effect.yieldNow()
        assert.strictEqual(small.writer.offerAll([settled2!, open1!]), 0)
        assert.deepStrictEqual(small.slices, [["CardSettled"]])
        assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_settlements`), 2)
        assert.strictEqual(small.writer.stats().pending, 1)
        yield* small.writer.flush
        assert.deepStrictEqual(small.slices, [["CardSettled"], ["CardOpened"]])
        assert.deepInclude(small.writer.stats(), { recorded: 2, written: 2, failed: 0, pending: 0 })
      })
  )

  it.scoped("ops queued before them: they wait their turn behind them, in order, for the fiber", () =>
    Effect.gen(function* () {
      const { runId, target, rows } = yield* ledgerFile
      const [open1, settled1, open2, settled2] = (yield* cardEvents).map((e) => op(runId, e))
      const { writer, slices } = yield* writerOn(target)
      yield* Effect.yieldNow()

      assert.isTrue(writer.offer(open1!))
      assert.strictEqual(writer.offerAll([settled1!, open2!, settled2!]), 0)
      assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_cards`), 0, "nothing written ahead of the queued op")
      assert.strictEqual(writer.stats().pending, 4)

      yield* writer.flush
      assert.deepStrictEqual(slices.flat(), ["CardOpened", "CardSettled", "CardOpened", "CardSettled"])
      assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_settlements`), 2)
      assert.deepInclude(writer.stats(), { written: 4, failed: 0, pending: 0 })
    })
  )

  it.scoped(
    "a slice that fails here is rolled back and left to the fiber: a passing failure is written whole, a lasting one costs its op alone",
    () =>
      Effect.gen(function* () {
        const { runId, target, rows, failNext, failFor } = yield* ledgerFile
        const events = yield* cardEvents
        const [open1, settled1, open2, settled2, open3, settled3] = events.map((e) => op(runId, e))
        const { writer, slices, reported } = yield* writerOn(target)
        yield* Effect.yieldNow()

        // 1. One statement fails once: nothing of the slice stays, and the fiber writes it all.
        failNext()
        assert.strictEqual(writer.offerAll([open1!, settled1!]), 0)
        assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_cards`), 0, "the failed slice was rolled back")
        assert.deepStrictEqual(slices, [])
        yield* writer.flush
        assert.deepStrictEqual(slices.flat(), ["CardOpened", "CardSettled"])
        assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_settlements`), 1)

        // 2. The second card's statements always fail: the fiber writes op by op, and only its two
        //    ops are lost (reported, counted); the third card is written.
        const second = events[2]!
        assert.isTrue(second._tag === "CardOpened")
        if (second._tag === "CardOpened") failFor(second.card.id)
        assert.strictEqual(writer.offerAll([open2!, settled2!, open3!, settled3!]), 0)
        yield* writer.flush
        assert.deepStrictEqual(slices.flat().slice(2), [
          "CardOpened (not written)",
          "CardSettled (not written)",
          "CardOpened",
          "CardSettled"
        ])
        assert.strictEqual(rows(`SELECT count(*) AS n FROM ledger_settlements`), 2)
        assert.deepStrictEqual(
          reported.map((f) => [f.reason, f.events]),
          [
            ["Failed", 1],
            ["Failed", 1]
          ]
        )
        assert.deepInclude(writer.stats(), { recorded: 6, written: 4, failed: 2, pending: 0 })
        // Counted on the run after the batch (written by the time the writer has closed).
        yield* writer.close
        assert.strictEqual(rows(`SELECT lost_events AS n FROM ledger_runs WHERE run_id = '${runId}'`), 2)
      })
  )
})
