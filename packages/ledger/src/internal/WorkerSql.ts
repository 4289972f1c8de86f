/**
 * What the writer's thread writes with: the two things `Projection` and `Writer` use of a
 * `SqlClient` (its tagged template, whose rows are those of a statement that returns some, as
 * `RETURNING` does, and `withTransaction`), straight on one better-sqlite3 connection, each
 * statement prepared once.
 *
 * The same driver and the same SQL as the main thread's client (`SqliteFile`), without what each
 * statement cost there on top of SQLite's own work: its compilation into a statement object, the
 * prepared-statement cache's lookup (a hash of the text), the connection's semaphore, a span and
 * a few fibers' worth of steps. That was most of the writer thread's time (measured on the frame
 * pipeline's cards). Errors are the client's (`SqlError` wrapping the driver's), so a locked
 * database is told apart the same way (`Busy`). WorkerWriter.test.ts checks that both write the
 * same rows.
 */
import { SqlError } from "@effect/sql/SqlError"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Exit } from "effect"

/** The part of a better-sqlite3 statement used here: `reader` when it returns rows (`RETURNING`). */
export interface Statement {
  readonly reader: boolean
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

/** Roll back what is open; a rollback that fails leaves nothing to do but say so on the next BEGIN. */
const rollback = (db: Connection) => {
  try {
    if (db.inTransaction) db.exec("ROLLBACK")
  } catch {
    // the next BEGIN fails ("within a transaction") and is reported as that transaction's failure
  }
}

export const make = (db: Connection): SqlClient.SqlClient => {
  const prepared = new Map<string, Statement>()
  const statement = (strings: TemplateStringsArray, ...values: ReadonlyArray<unknown>) => {
    const text = strings.join("?")
    return Effect.try({
      try: () => {
        let s = prepared.get(text)
        if (s === undefined) {
          s = db.prepare(text)
          prepared.set(text, s)
        }
        if (s.reader) return s.all(...values)
        s.run(...values)
        return [] as ReadonlyArray<never>
      },
      catch: failed("Failed to execute statement")
    })
  }
  // One level: the writer never nests transactions (a nested one would fail at its BEGIN).
  const withTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Effect.try({ try: () => db.exec("BEGIN"), catch: failed("Failed to begin a transaction") }), () =>
        Effect.flatMap(Effect.exit(restore(effect)), (exit): Effect.Effect<A, E | SqlError> => {
          if (Exit.isSuccess(exit))
            return Effect.try({
              try: () => {
                db.exec("COMMIT")
                return exit.value
              },
              catch: (cause) => {
                // A COMMIT that could not be made (the database locked): nothing of it stays.
                rollback(db)
                return failed("Failed to commit a transaction")(cause)
              }
            })
          return Effect.zipRight(
            Effect.sync(() => rollback(db)),
            exit as Exit.Exit<A, E | SqlError>
          )
        })
      )
    )
  return Object.assign(statement, { withTransaction }) as unknown as SqlClient.SqlClient
}
