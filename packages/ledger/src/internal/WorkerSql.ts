/**
 * What the writer's thread writes with (`Writer.Target`): a transaction as one synchronous run of
 * plain code on one better-sqlite3 connection (BEGIN, each op's `Projection` statements, COMMIT),
 * each statement prepared once (by its template: `Projection.Statement`).
 *
 * The same driver and the same SQL as the main thread's client (`SqliteFile`), without what each
 * statement cost there on top of SQLite's own work: its compilation into a statement object, the
 * prepared-statement cache's lookup (a hash of the text), the connection's semaphore, a span and
 * a few fibers' worth of steps for each statement (measured on the frame pipeline's cards), and
 * then the effects around each statement (the CLI's fleet: code that runs a few hundred times a
 * run never gets past V8's interpreter, where each step of an effect is dear). Errors are the
 * client's (`SqlError` wrapping the driver's), so a locked database is told apart the same way
 * (`Busy`). WorkerWriter.test.ts checks that both write the same rows.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import * as Projection from "./Projection.js"
import type * as Writer from "./Writer.js"

/** The part of a better-sqlite3 statement used here (`all` for one that returns rows: `RETURNING`). */
export interface Statement {
  readonly run: (...params: ReadonlyArray<unknown>) => unknown
  readonly all: (...params: ReadonlyArray<unknown>) => ReadonlyArray<unknown>
}

/** The part of a better-sqlite3 connection used here. */
export interface Connection {
  readonly prepare: (source: string) => Statement
  readonly exec: (source: string) => unknown
  readonly inTransaction: boolean
}

const failed = (message: string) => (cause: unknown) => new SqlError({ cause, message })

/**
 * Roll back what is open. A rollback that fails leaves the transaction open: the next
 * transaction rolls it back before its BEGIN (or, failing again, fails its BEGIN, "within a
 * transaction", reported and counted as that transaction's failure).
 */
const rollback = (db: Connection) => {
  try {
    if (db.inTransaction) db.exec("ROLLBACK")
  } catch {
    // said by the next BEGIN, if the next rollback fails too
  }
}

/** What failed: the statement, the BEGIN or the COMMIT (the client's words for each). */
type Stage = "statement" | "begin" | "commit"

const messages: Record<Stage, string> = {
  statement: "Failed to execute statement",
  begin: "Failed to begin a transaction",
  commit: "Failed to commit a transaction"
}

/**
 * The writer's target on `db`: a transaction is one synchronous run (BEGIN, each op's statements,
 * COMMIT; ROLLBACK when any of it throws), each statement prepared once per template; as an
 * effect (`transaction`) or now (`runNow`: `Writer.offerAll` writes at once with it).
 */
export const target = (db: Connection): Writer.Target => {
  const prepared = new Map<TemplateStringsArray, Statement>()
  const run = (statements: ReadonlyArray<Projection.Statement>): void => {
    for (const s of statements) {
      let p = prepared.get(s.strings)
      if (p === undefined) {
        p = db.prepare(s.strings.join("?"))
        prepared.set(s.strings, p)
      }
      if (s.followUp !== undefined) run(s.followUp(p.all(...s.values)))
      else p.run(...s.values)
    }
  }
  const runNow = (ops: ReadonlyArray<Projection.Op>, from: number, take: () => boolean): SqlError | undefined => {
    let stage: Stage = "begin"
    try {
      // What a failed ROLLBACK left open: not this transaction's, and never committed with it.
      rollback(db)
      db.exec("BEGIN")
      try {
        stage = "statement"
        const tx = Projection.transaction(target)
        for (let at = from; at < ops.length && take(); at++) run(Projection.apply(ops[at]!, tx))
        stage = "commit"
        db.exec("COMMIT")
      } catch (error) {
        // A COMMIT that could not be made (the database locked) too: nothing of it stays.
        rollback(db)
        throw error
      }
      return undefined
    } catch (cause) {
      return failed(messages[stage])(cause)
    }
  }
  const target: Writer.Target = {
    transaction: (ops, from, take) =>
      Effect.suspend(() => {
        const error = runNow(ops, from, take)
        return error === undefined ? Effect.void : Effect.fail(error)
      }),
    runNow
  }
  return target
}
