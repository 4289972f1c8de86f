/**
 * The fleet's SQL client from a `--cluster` URL: `postgres://...` (or `postgresql://...`) for
 * many hosts, through `@effect/sql-pg`; `sqlite:PATH` for one host, through
 * `@effect/sql-sqlite-node`. The engine's message and runner tables, and Warden's item and card
 * rows, all live in this one database.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Effect, Layer, Redacted } from "effect"
import type { Duration } from "effect"

/**
 * The prefix of the engine's own tables (`cluster_runners`, `cluster_locks`, `cluster_messages`,
 * ...): the runners create them with it, and whatever reads them (`warden fleet`) names them with
 * `engineTable`. Warden's own rows are in the `warden_cluster_*` tables.
 */
export const ENGINE_TABLE_PREFIX = "cluster"

/** The name of the engine's table `name` (`runners`, `locks`, ...): `cluster_runners`. */
export const engineTable = (name: "runners" | "locks" | "messages" | "replies"): string =>
  `${ENGINE_TABLE_PREFIX}_${name}`

/** The seconds since `column` (a timestamp the database wrote), by the database's clock. */
const secondsSince = (sql: SqlClient.SqlClient, column: string) =>
  sql.onDialectOrElse({
    pg: () => sql.literal(`EXTRACT(EPOCH FROM (NOW() - ${column}))`),
    orElse: () => sql.literal(`((julianday('now') - julianday(${column})) * 86400.0)`)
  })

/** One runner as the engine's runners table has it (`runnerHeartbeats`). */
export interface RunnerHeartbeat {
  readonly address: string
  /** Whether the other runners' health checks last found it reachable. */
  readonly healthy: boolean
  /** The runner's last heartbeat (every lock refresh of its own writes one), as stored. */
  readonly lastHeartbeat: string
  /** Seconds since then, by the database's clock (no clock of a runner's involved). */
  readonly ageSeconds: number
}

/** Every runner in the engine's runners table, by address, with its heartbeat's age. */
export const runnerHeartbeats: Effect.Effect<
  ReadonlyArray<RunnerHeartbeat>,
  SqlError,
  SqlClient.SqlClient
> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ address: string; healthy: unknown; last_heartbeat: unknown; age: unknown }>`
      SELECT address, healthy, last_heartbeat, ${secondsSince(sql, "last_heartbeat")} AS age
      FROM ${sql(engineTable("runners"))} ORDER BY address`
  return rows.map((r) => ({
    address: r.address,
    healthy: Boolean(r.healthy),
    lastHeartbeat: String(r.last_heartbeat),
    ageSeconds: Number(r.age)
  }))
})

/**
 * Every shard lock row of the engine's locks table (table locks only: `shardLockDisableAdvisory`,
 * or SQLite), with the seconds since it was last acquired or refreshed. Fails with `SqlError` when
 * the table does not exist (advisory locks keep no rows).
 */
export const shardLocks: Effect.Effect<
  ReadonlyArray<{ readonly address: string; readonly ageSeconds: number }>,
  SqlError,
  SqlClient.SqlClient
> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ address: string; age: unknown }>`
    SELECT address, ${secondsSince(sql, "acquired_at")} AS age FROM ${sql(engineTable("locks"))}`
  return rows.map((r) => ({ address: r.address, ageSeconds: Number(r.age) }))
})

/** How long a PostgreSQL connection may take to be made (see `layer`). */
export const DEFAULT_CONNECT_TIMEOUT: Duration.DurationInput = "5 seconds"

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
 * of 8) must be made within `connectTimeout`, 5 seconds unless given (the driver's default). A
 * longer one suits a client on a machine busy enough to hold its event loop for seconds (the
 * fleet's tests give 60 s); a runner keeps the default, so that, cut from its store, it does not
 * wait longer on each attempt to reach it again.
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
