/**
 * The ledger's schema, as migrations kept in code (`Effect`s on `@effect/sql`'s `SqlClient`), run
 * when a ledger opens, under the database's write lock (see `run`). Portable SQL on purpose (SQLite now, `@effect/sql-pg` later): `text`, `integer`
 * and `bigint` columns only (times are epoch milliseconds in `bigint`, booleans 0/1 in `integer`,
 * JSON as `text`), composite primary keys instead of autoincrement, `ON CONFLICT` upserts and
 * `NOT EXISTS` sub-queries in the statements, no dialect functions.
 *
 * A migration, once released, is never edited: a change is a new entry.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Data, type Duration, Effect } from "effect"
import * as Busy from "./internal/Busy.js"

/**
 * The table the migrations' bookkeeping is kept in (`migration_id`, `name`, `created_at`: the
 * layout of `@effect/sql`'s migrator, which kept it before).
 */
export const MigrationsTable = "ledger_migrations"

const initial = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE ledger_runs (
    run_id text PRIMARY KEY,
    started_at bigint NOT NULL,
    ended_at bigint,
    status text NOT NULL,
    label text,
    info text NOT NULL,
    pid integer,
    host text,
    resumed_from text,
    dropped_events integer NOT NULL DEFAULT 0
  )`
  yield* sql`CREATE TABLE ledger_connections (
    run_id text NOT NULL,
    connection integer NOT NULL,
    slot integer NOT NULL,
    ready_at bigint,
    lost_at bigint,
    end_reason text,
    message text,
    PRIMARY KEY (run_id, connection)
  )`
  yield* sql`CREATE TABLE ledger_work_items (
    run_id text NOT NULL,
    item_key text NOT NULL,
    prompt text NOT NULL,
    follow_ups text NOT NULL,
    options text NOT NULL,
    prompts_masked integer NOT NULL,
    status text NOT NULL,
    thread_id text,
    turns_done integer NOT NULL DEFAULT 0,
    resumes integer NOT NULL DEFAULT 0,
    submitted_at bigint NOT NULL,
    started_at bigint,
    finished_at bigint,
    result_status text,
    final_message text,
    failure_reason text,
    failure_detail text,
    from_run_id text,
    from_item_key text,
    handed_to text,
    PRIMARY KEY (run_id, item_key)
  )`
  yield* sql`CREATE TABLE ledger_threads (
    run_id text NOT NULL,
    thread_id text NOT NULL,
    item_key text NOT NULL,
    generation integer NOT NULL,
    resumed integer NOT NULL,
    ready_at bigint NOT NULL,
    lost_at bigint,
    PRIMARY KEY (run_id, thread_id)
  )`
  yield* sql`CREATE TABLE ledger_turns (
    run_id text NOT NULL,
    thread_id text NOT NULL,
    turn_id text NOT NULL,
    item_key text NOT NULL,
    prompt text NOT NULL,
    status text NOT NULL,
    started_at bigint NOT NULL,
    completed_at bigint,
    final_message text,
    error text,
    PRIMARY KEY (run_id, thread_id, turn_id)
  )`
  yield* sql`CREATE TABLE ledger_cards (
    run_id text NOT NULL,
    card_id text NOT NULL,
    request_id text NOT NULL,
    method text NOT NULL,
    thread_id text,
    turn_id text,
    item_key text,
    kind text NOT NULL,
    title text NOT NULL,
    summary text NOT NULL,
    facts text NOT NULL,
    offers text NOT NULL,
    opened_at bigint NOT NULL,
    deadline_at bigint NOT NULL,
    PRIMARY KEY (run_id, card_id)
  )`
  yield* sql`CREATE TABLE ledger_settlements (
    run_id text NOT NULL,
    card_id text NOT NULL,
    outcome text NOT NULL,
    source text NOT NULL,
    source_kind text NOT NULL,
    decision text,
    written integer NOT NULL,
    detail text,
    settled_at bigint NOT NULL,
    latency_ms bigint,
    PRIMARY KEY (run_id, card_id)
  )`
  yield* sql`CREATE TABLE ledger_late_decisions (
    late_id text PRIMARY KEY,
    run_id text NOT NULL,
    card_id text NOT NULL,
    decision text NOT NULL,
    source text NOT NULL,
    outcome text NOT NULL,
    at bigint NOT NULL
  )`
  yield* sql`CREATE TABLE ledger_remembered_rules (
    rule_id text PRIMARY KEY,
    scope_kind text NOT NULL,
    argv text,
    exact integer,
    path_root text,
    path_target text,
    mcp_server text,
    mcp_tool text,
    author text NOT NULL,
    created_at bigint NOT NULL,
    expires_at bigint,
    from_run_id text,
    from_card_id text,
    note text,
    revoked_at bigint,
    revoked_by text
  )`
  yield* sql`CREATE INDEX ledger_cards_opened ON ledger_cards (opened_at)`
  yield* sql`CREATE INDEX ledger_cards_item ON ledger_cards (run_id, item_key)`
  yield* sql`CREATE INDEX ledger_settlements_outcome ON ledger_settlements (outcome)`
  yield* sql`CREATE INDEX ledger_work_items_status ON ledger_work_items (status)`
  yield* sql`CREATE INDEX ledger_late_card ON ledger_late_decisions (run_id, card_id)`
})

/** Where a person's decision came from (`terminal`, `stdin`, `web`, `link`), beside its source. */
const channel = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE ledger_settlements ADD COLUMN channel text`
  yield* sql`ALTER TABLE ledger_late_decisions ADD COLUMN channel text`
})

/** The worktree a work item ran in (`WorkItem.worktree`), so that `warden resume` takes it up again. */
const worktree = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE ledger_work_items ADD COLUMN worktree_branch text`
  yield* sql`ALTER TABLE ledger_work_items ADD COLUMN worktree_path text`
})

/**
 * Records that could not be written (the database stayed locked, or the write failed), counted on
 * their run once it can be written again, beside `dropped_events` (a full queue).
 */
const lostEvents = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE ledger_runs ADD COLUMN lost_events integer NOT NULL DEFAULT 0`
})

/**
 * Answers whose line the answer journal could not write (`RunRecord.unjournaledAnswers`): each was
 * written to codex all the same, and recorded by the writer; a crash before its settlement was
 * committed would record it as never answered. Counted on their run, as the other gaps are.
 */
const unjournaledAnswers = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE ledger_runs ADD COLUMN unjournaled_answers integer NOT NULL DEFAULT 0`
})

/** Every migration, by `<id>_<name>`. */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "1_initial": initial,
  "2_channel": channel,
  "3_worktree": worktree,
  "4_lost_events": lostEvents,
  "5_unjournaled_answers": unjournaledAnswers
}

/** A migration that failed (its transaction was rolled back: the schema is as it was). */
export class MigrationFailed extends Data.TaggedError("MigrationFailed")<{
  readonly id: number
  readonly name: string
  readonly cause: unknown
}> {
  override get message(): string {
    const cause = this.cause as { readonly message?: unknown } | undefined
    return `migration ${this.id}_${this.name} failed${typeof cause?.message === "string" ? `: ${cause.message}` : ""}`
  }
}

const ordered = Object.entries(migrations)
  .map(([key, effect]) => {
    const [, id, name] = /^(\d+)_(.+)$/.exec(key)!
    return { id: Number(id), name: name!, effect }
  })
  .sort((a, b) => a.id - b.id)

/** The newest migration applied (0: none). */
const latest = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ readonly m: number | null }>`SELECT MAX(migration_id) AS m FROM ${sql(MigrationsTable)}`.withoutTransform,
    (rows) => Number(rows[0]?.m ?? 0)
  )

/**
 * Take the write lock at the start of the transaction, before anything is read: SQLite's `BEGIN`
 * defers it, so a no-op write is the transaction's first statement (as `BEGIN IMMEDIATE`: it
 * answers busy at once while another process writes); PostgreSQL locks the table.
 */
const lock = (sql: SqlClient.SqlClient) =>
  sql.onDialectOrElse({
    pg: () => sql`LOCK TABLE ${sql(MigrationsTable)} IN ACCESS EXCLUSIVE MODE`,
    orElse: () => sql`UPDATE ${sql(MigrationsTable)} SET name = name WHERE migration_id < 0`
  })

/**
 * Bring a database to the current schema (idempotent), safe when several processes open a new
 * ledger at once: the migrations run in one transaction that holds the write lock from its first
 * statement, and the applied version is read inside it, so each runs exactly once and nobody goes
 * on before the schema is committed. While another process holds the lock, it waits (an
 * asynchronous backoff, up to `timeout`, default 5 minutes).
 *
 * Needs a `SqlClient`; returns the migrations it ran. Fails with `MigrationFailed` (that
 * migration's statement failed; nothing was changed) or `SqlError` (the database could not be
 * read or stayed locked); the ledger's layers turn either into `LedgerError` of reason `Migration`.
 */
export const run = (
  options: { readonly timeout?: Duration.DurationInput } = {}
): Effect.Effect<ReadonlyArray<readonly [id: number, name: string]>, MigrationFailed | SqlError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const timeout = options.timeout ?? Busy.DefaultTimeout
    yield* Busy.retry(
      sql.onDialectOrElse({
        pg: () =>
          sql`CREATE TABLE IF NOT EXISTS ${sql(MigrationsTable)} (
  migration_id integer primary key,
  created_at timestamp with time zone not null default now(),
  name text not null
)`,
        orElse: () =>
          sql`CREATE TABLE IF NOT EXISTS ${sql(MigrationsTable)} (
  migration_id integer PRIMARY KEY NOT NULL,
  created_at datetime NOT NULL DEFAULT current_timestamp,
  name VARCHAR(255) NOT NULL
)`
      }),
      timeout
    )
    // Already current (every later opening): read without taking the lock.
    const newest = ordered[ordered.length - 1]?.id ?? 0
    if ((yield* latest(sql)) >= newest) return []
    return yield* Busy.retry(
      sql.withTransaction(
        Effect.gen(function* () {
          yield* lock(sql)
          const applied = yield* latest(sql)
          const ran: Array<readonly [number, string]> = []
          for (const m of ordered) {
            if (m.id <= applied) continue
            yield* Effect.mapError(m.effect, (cause) => new MigrationFailed({ id: m.id, name: m.name, cause }))
            yield* sql`INSERT INTO ${sql(MigrationsTable)} (migration_id, name) VALUES (${m.id}, ${m.name})`
              .withoutTransform
            ran.push([m.id, m.name])
          }
          return ran
        })
      ),
      timeout
    )
  })
