/**
 * The fleet's SQL client from a `--cluster` URL: `postgres://...` (or `postgresql://...`) for
 * many hosts, through `@effect/sql-pg`. The engine's message and runner tables, and Warden's item
 * and card rows, all live in this one database.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Layer, Redacted } from "effect"

/**
 * A `SqlClient` layer for `url`. A URL that is not a PostgreSQL one dies at build time with a
 * message naming the accepted forms. Node-postgres reads a unix-socket directory from `host`
 * (`postgres://user@/db?host=/run/postgresql&port=5432`).
 *
 * @example
 * ```ts
 * const sql = Storage.layer("postgres://warden@db.internal/warden")
 * ```
 */
export const layer = (url: string): Layer.Layer<SqlClient.SqlClient, SqlError> => {
  if (!/^postgres(ql)?:\/\//.test(url)) {
    return Layer.die(new Error(`--cluster takes a PostgreSQL URL (postgres://USER@HOST/DB), not ${JSON.stringify(url.slice(0, 20))}`))
  }
  return PgClient.layer({ url: Redacted.make(url), maxConnections: 8, applicationName: "warden" }).pipe(
    Layer.map((context) => context)
  ) as Layer.Layer<SqlClient.SqlClient, SqlError>
}
