/**
 * The fleet's SQL client from a `--cluster` URL: `postgres://...` (or `postgresql://...`) for
 * many hosts, through `@effect/sql-pg`; `sqlite:PATH` for one host, through
 * `@effect/sql-sqlite-node`. The engine's message and runner tables, and Warden's item and card
 * rows, all live in this one database.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Layer, Redacted } from "effect"
import type { Duration } from "effect"

/** How long a PostgreSQL connection may take to be made (see `layer`). */
export const DEFAULT_CONNECT_TIMEOUT: Duration.DurationInput = "15 seconds"

/**
 * A `SqlClient` layer for `url`. Any other URL dies at build time with a message naming the
 * accepted forms. Node-postgres reads a unix-socket directory from `host`
 * (`postgres://user@/db?host=/run/postgresql&port=5432`).
 *
 * `sqlite:PATH` is for one host, and best for one runner: the engine's SQLite dialect keeps shard
 * locks in a table with expiry (a restarted runner takes its shards back once the old locks
 * expire), and `better-sqlite3` waits for a busy database synchronously, blocking the runner's
 * event loop, which card deadlines share.
 *
 * PostgreSQL: a connection (the first one, when the layer is built, and each new one of the pool
 * of 8) must be made within `connectTimeout`, 15 seconds unless given. The driver's default of 5
 * seconds failed runners and clients on a busy machine whose event loop was held that long, though
 * the server was up; an unreachable server is still reported, 15 seconds later.
 *
 * @example
 * ```ts
 * const sql = Storage.layer("postgres://warden@db.internal/warden")
 * ```
 */
export const layer = (
  url: string,
  options: { readonly connectTimeout?: Duration.DurationInput | undefined } = {}
): Layer.Layer<SqlClient.SqlClient, SqlError> => {
  if (url.startsWith("sqlite:")) {
    return SqliteClient.layer({ filename: url.slice("sqlite:".length) }).pipe(Layer.orDie)
  }
  if (!/^postgres(ql)?:\/\//.test(url)) {
    return Layer.die(
      new Error(
        `--cluster takes a PostgreSQL URL (postgres://USER@HOST/DB) or sqlite:PATH, not ${JSON.stringify(url.slice(0, 20))}`
      )
    )
  }
  return PgClient.layer({
    url: Redacted.make(url),
    maxConnections: 8,
    applicationName: "warden",
    connectTimeout: options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT
  }).pipe(Layer.map((context) => context)) as Layer.Layer<SqlClient.SqlClient, SqlError>
}
