/**
 * The schema of the fleet's own rows (`warden_cluster_*`), as migrations kept in code and run
 * when a runner or client opens the store. A migration, once released, is never edited: a change
 * is a new entry. The first one is the schema as it was created before migrations were kept
 * (`CREATE TABLE IF NOT EXISTS`), so a database made then passes through it unchanged.
 *
 * Several runners start at once: the migrations run in one transaction that takes the write lock
 * first (PostgreSQL: the bookkeeping table locked; SQLite: a no-op write), and read the applied
 * version inside it, so each runs exactly once.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Schedule } from "effect"

const MigrationsTable = "warden_cluster_migrations"

const initial = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS warden_cluster_items (
      id VARCHAR(255) PRIMARY KEY,
      incarnation VARCHAR(255),
      runner VARCHAR(255),
      host VARCHAR(255),
      codex_home TEXT,
      thread_id VARCHAR(255),
      turns_done INTEGER NOT NULL DEFAULT 0,
      moves INTEGER NOT NULL DEFAULT 0,
      status VARCHAR(32) NOT NULL,
      result TEXT,
      updated_at BIGINT NOT NULL
    )`
  yield* sql`CREATE TABLE IF NOT EXISTS warden_cluster_cards (
      id VARCHAR(512) PRIMARY KEY,
      item_id VARCHAR(255) NOT NULL,
      incarnation VARCHAR(255) NOT NULL,
      method VARCHAR(255) NOT NULL,
      opened_at BIGINT NOT NULL,
      outcome VARCHAR(32),
      source VARCHAR(255),
      settled_at BIGINT
    )`
  yield* sql`CREATE INDEX IF NOT EXISTS warden_cluster_cards_item ON warden_cluster_cards (item_id)`
})

/**
 * Fencing: at most one runner drives an item. `epoch` is the item's fencing token, raised by one
 * by every runner that takes the item (a conditional UPDATE on the epoch it read); every later
 * write of that runner for the item names its epoch and changes nothing once another runner has
 * raised it. A card records the epoch it was opened under, and who settled it under which epoch.
 * `warden_cluster_claims` keeps every taking of an item: who, from whom, why (a move's reason;
 * none for the first), so an item's moves can be read back and counted.
 */
const fencing = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE warden_cluster_items ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE warden_cluster_cards ADD COLUMN epoch INTEGER`
  yield* sql`ALTER TABLE warden_cluster_cards ADD COLUMN settled_by VARCHAR(255)`
  yield* sql`ALTER TABLE warden_cluster_cards ADD COLUMN settled_epoch INTEGER`
  yield* sql`CREATE TABLE warden_cluster_claims (
      item_id VARCHAR(255) NOT NULL,
      epoch INTEGER NOT NULL,
      incarnation VARCHAR(255) NOT NULL,
      runner VARCHAR(255) NOT NULL,
      from_incarnation VARCHAR(255),
      from_runner VARCHAR(255),
      reason VARCHAR(32),
      claimed_at BIGINT NOT NULL,
      PRIMARY KEY (item_id, epoch)
    )`
})

/**
 * A thread's durable state (`ThreadState`): the item's rollout as of its last completed turn
 * (`turns`), gzipped and base64 (text in both dialects), with its size and SHA-256, written under
 * the item's epoch. One row per item, replaced as turns complete.
 */
const threadState = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE warden_cluster_thread_state (
      item_id VARCHAR(255) PRIMARY KEY,
      thread_id VARCHAR(255) NOT NULL,
      path TEXT NOT NULL,
      turns INTEGER NOT NULL,
      bytes INTEGER NOT NULL,
      sha256 VARCHAR(64) NOT NULL,
      content TEXT NOT NULL,
      saved_at BIGINT NOT NULL,
      epoch INTEGER NOT NULL
    )`
})

/**
 * The fleet's one inbox (`FleetCards`): each card keeps the masked view a person decides on (its
 * title, summary and offers, as JSON, bounded), and the open cards are found by a partial index
 * (both dialects have them), so reading them does not scan the settled history.
 */
const cardViews = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE warden_cluster_cards ADD COLUMN view TEXT`
  yield* sql`CREATE INDEX warden_cluster_cards_open ON warden_cluster_cards (opened_at) WHERE outcome IS NULL`
})

/** Every migration, by `<id>_<name>`, in order. */
const migrations: ReadonlyArray<
  readonly [id: number, name: string, effect: Effect.Effect<void, unknown, SqlClient.SqlClient>]
> = [
  [1, "initial", initial],
  [2, "fencing", fencing],
  [3, "thread_state", threadState],
  [4, "card_views", cardViews]
]

const latest = (sql: SqlClient.SqlClient) =>
  Effect.map(sql<{ readonly m: unknown }>`SELECT MAX(migration_id) AS m FROM warden_cluster_migrations`, (rows) =>
    Number(rows[0]?.m ?? 0)
  )

/**
 * Bring the store to the current schema (idempotent). A conflict with another process doing the
 * same (PostgreSQL's `CREATE TABLE IF NOT EXISTS` can collide; a busy SQLite file) is retried.
 */
export const run: Effect.Effect<void, unknown, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS ${sql(MigrationsTable)} (
      migration_id INTEGER PRIMARY KEY NOT NULL,
      name VARCHAR(255) NOT NULL,
      created_at BIGINT NOT NULL
    )`
  const newest = migrations[migrations.length - 1]![0]
  // Already current (every opening but the first): read without taking the lock.
  if ((yield* latest(sql)) >= newest) return
  yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql.onDialectOrElse({
        pg: () => sql`LOCK TABLE ${sql(MigrationsTable)} IN ACCESS EXCLUSIVE MODE`,
        orElse: () => sql`UPDATE ${sql(MigrationsTable)} SET name = name WHERE migration_id < 0`
      })
      const applied = yield* latest(sql)
      for (const [id, name, effect] of migrations) {
        if (id <= applied) continue
        yield* effect
        yield* sql`INSERT INTO ${sql(MigrationsTable)} (migration_id, name, created_at) VALUES (${id}, ${name}, ${Date.now()})`
      }
    })
  )
}).pipe(Effect.retry({ times: 10, schedule: Schedule.spaced("200 millis") }))
