/**
 * The ledger's schema, as `@effect/sql` migrations kept in code (`Migrator.fromRecord`), run when
 * a ledger opens. Portable SQL on purpose (SQLite now, `@effect/sql-pg` later): `text`, `integer`
 * and `bigint` columns only (times are epoch milliseconds in `bigint`, booleans 0/1 in `integer`,
 * JSON as `text`), composite primary keys instead of autoincrement, `ON CONFLICT` upserts and
 * `NOT EXISTS` sub-queries in the statements, no dialect functions.
 *
 * A migration, once released, is never edited: a change is a new entry.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/** The table `@effect/sql`'s migrator keeps its bookkeeping in. */
export const MigrationsTable = "ledger_migrations"

const initial = Effect.gen(function*() {
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
const channel = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE ledger_settlements ADD COLUMN channel text`
  yield* sql`ALTER TABLE ledger_late_decisions ADD COLUMN channel text`
})

/** The worktree a work item ran in (`WorkItem.worktree`), so that `warden resume` takes it up again. */
const worktree = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE ledger_work_items ADD COLUMN worktree_branch text`
  yield* sql`ALTER TABLE ledger_work_items ADD COLUMN worktree_path text`
})

/** Every migration, by `<id>_<name>`. */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "1_initial": initial,
  "2_channel": channel,
  "3_worktree": worktree
}

/**
 * Bring a database to the current schema (idempotent; concurrent openers wait on the migrator's lock).
 *
 * Needs a `SqlClient`; returns the migrations it ran. Fails with `@effect/sql`'s `MigrationError`
 * or `SqlError` (the ledger's layers turn either into `LedgerError` of reason `Migration`).
 */
export const run = Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: MigrationsTable })
