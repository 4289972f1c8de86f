/**
 * A damaged ledger is refused when it is opened, for writing (`Ledger.layerSqlite`) and for
 * reading (`LedgerReader.layerSqlite`) alike: `PRAGMA quick_check` (every page's structure, not
 * the indexes' contents), and any `SQLITE_CORRUPT` answer on the way, is `LedgerError` `Corrupt`.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import * as Busy from "./Busy.js"
import { describeCause, LedgerError } from "./LedgerError.js"

/** Whether a driver error says the file is damaged (`SQLITE_CORRUPT`, and its extended codes). */
export const isCorrupt = (error: unknown): boolean => Busy.hasCode(error, (code) => code.startsWith("SQLITE_CORRUPT"))

const corruptDetail = (filename: string, found: string) =>
  `the ledger ${filename} is damaged (${found}); nothing was read from it or written to it: move it aside (or restore a backup) and a new one is made`

/** The `Corrupt` error for `filename`. */
export const corrupt = (filename: string, cause: unknown): LedgerError =>
  new LedgerError({ reason: "Corrupt", detail: corruptDetail(filename, describeCause(cause)), cause })

/** `PRAGMA quick_check` on `client`: `Corrupt` when it finds anything. */
export const quickCheck = (
  client: SqlClient.SqlClient,
  filename: string,
  lockTimeout: Parameters<typeof Busy.retry>[1]
): Effect.Effect<void, LedgerError | SqlError> =>
  Effect.flatMap(Busy.retry(client<Record<string, unknown>>`PRAGMA quick_check`.unprepared, lockTimeout), (rows) => {
    const problems = rows.map((row) => String(Object.values(row)[0])).filter((line) => line !== "ok")
    return problems.length === 0
      ? Effect.void
      : Effect.fail(corrupt(filename, new Error(problems.slice(0, 3).join("; "))))
  })
