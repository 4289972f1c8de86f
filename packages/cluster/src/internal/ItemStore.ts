/**
 * The fleet's own durable rows, beside the engine's tables and on the same SQL client: one row per
 * work item (which incarnation holds it, its thread, turns done, its end) and one per card (which
 * incarnation opened it, for which item, and its one settlement). Every write is awaited by the
 * runner before the event it describes is published, so whatever a client saw is in storage.
 *
 * A card settles once: every settling UPDATE carries `outcome IS NULL`; `strand` settles the open
 * cards of an item's earlier incarnations `stranded` and returns how many it settled (0 the
 * second time).
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer, Schedule } from "effect"

/** A stored item row. */
export interface ItemRow {
  readonly id: string
  readonly incarnation: string | null
  readonly runner: string | null
  /** The host and codex home of the incarnation that holds (or last held) the item: where its thread lives. */
  readonly host: string | null
  readonly codexHome: string | null
  readonly threadId: string | null
  readonly turnsDone: number
  readonly moves: number
  readonly status: string
  readonly result: string | null
}

/** A stored card row. */
export interface CardRow {
  readonly id: string
  readonly itemId: string
  readonly incarnation: string
  readonly method: string
  readonly outcome: string | null
  readonly source: string | null
}

export interface ItemStoreShape {
  readonly get: (id: string) => Effect.Effect<ItemRow | undefined>
  /**
   * Take the item for this incarnation (creates the row); `moved` counts one more move. Returns
   * the row as it was before.
   */
  readonly claim: (
    id: string,
    holder: { readonly incarnation: string; readonly runner: string; readonly host: string; readonly codexHome: string },
    moved: boolean
  ) => Effect.Effect<ItemRow | undefined>
  readonly setThread: (id: string, threadId: string) => Effect.Effect<void>
  readonly turnDone: (id: string) => Effect.Effect<void>
  readonly finish: (id: string, status: string, result: string) => Effect.Effect<void>
  readonly requestStop: (id: string) => Effect.Effect<void>
  readonly cardOpened: (card: { readonly id: string; readonly itemId: string; readonly incarnation: string; readonly method: string }) => Effect.Effect<void>
  /** Settle a card once; false when it had already settled. */
  readonly cardSettled: (id: string, outcome: string, source: string) => Effect.Effect<boolean>
  readonly card: (id: string) => Effect.Effect<CardRow | undefined>
  /** Settle `stranded` the open cards of `itemId` opened by any incarnation but `current`; returns their ids. */
  readonly strand: (itemId: string, current: string) => Effect.Effect<ReadonlyArray<string>>
  readonly cards: (filter?: { readonly itemId?: string }) => Effect.Effect<ReadonlyArray<CardRow>>
  readonly items: Effect.Effect<ReadonlyArray<ItemRow>>
}

export class ItemStore extends Context.Tag("@warden/cluster/ItemStore")<ItemStore, ItemStoreShape>() {}

const num = (v: unknown): number => (typeof v === "number" ? v : Number(v ?? 0))
const str = (v: unknown): string | null => (v === null || v === undefined ? null : String(v))

const toItem = (r: Record<string, unknown>): ItemRow => ({
  id: String(r["id"]),
  incarnation: str(r["incarnation"]),
  runner: str(r["runner"]),
  host: str(r["host"]),
  codexHome: str(r["codex_home"]),
  threadId: str(r["thread_id"]),
  turnsDone: num(r["turns_done"]),
  moves: num(r["moves"]),
  status: String(r["status"]),
  result: str(r["result"])
})

const toCard = (r: Record<string, unknown>): CardRow => ({
  id: String(r["id"]),
  itemId: String(r["item_id"]),
  incarnation: String(r["incarnation"]),
  method: String(r["method"]),
  outcome: str(r["outcome"]),
  source: str(r["source"])
})

/** Create the tables if missing (several runners may start at once: retried on a conflict). */
const migrate = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
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
  }).pipe(Effect.retry({ times: 5, schedule: Schedule.spaced("200 millis") }))

/** Storage failures are defects here: a runner that cannot write its rows must not go on answering. */
export const make: Effect.Effect<ItemStoreShape, never, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* migrate(sql).pipe(Effect.orDie)
  const now = () => Date.now()
  const get = (id: string) =>
    sql`SELECT * FROM warden_cluster_items WHERE id = ${id}`.pipe(
      Effect.map((rows) => (rows[0] === undefined ? undefined : toItem(rows[0]))),
      Effect.orDie
    )
  const shape: ItemStoreShape = {
    get,
    claim: (id, { codexHome, host, incarnation, runner }, moved) =>
      sql.withTransaction(
        Effect.gen(function*() {
          const before = yield* get(id)
          if (before === undefined) {
            yield* sql`INSERT INTO warden_cluster_items (id, incarnation, runner, host, codex_home, status, updated_at)
              VALUES (${id}, ${incarnation}, ${runner}, ${host}, ${codexHome}, 'running', ${now()})`
          } else {
            yield* sql`UPDATE warden_cluster_items SET incarnation = ${incarnation}, runner = ${runner}, host = ${host},
              codex_home = ${codexHome}, moves = moves + ${moved ? 1 : 0}, updated_at = ${now()} WHERE id = ${id}`
          }
          return before
        })
      ).pipe(Effect.orDie),
    setThread: (id, threadId) =>
      sql`UPDATE warden_cluster_items SET thread_id = ${threadId}, updated_at = ${now()} WHERE id = ${id}`.pipe(Effect.asVoid, Effect.orDie),
    turnDone: (id) =>
      sql`UPDATE warden_cluster_items SET turns_done = turns_done + 1, updated_at = ${now()} WHERE id = ${id}`.pipe(Effect.asVoid, Effect.orDie),
    finish: (id, status, result) =>
      sql`UPDATE warden_cluster_items SET status = ${status}, result = ${result}, updated_at = ${now()} WHERE id = ${id}`.pipe(
        Effect.asVoid,
        Effect.orDie
      ),
    requestStop: (id) =>
      sql`UPDATE warden_cluster_items SET status = 'stop-requested', updated_at = ${now()} WHERE id = ${id} AND status = 'running'`.pipe(
        Effect.asVoid,
        Effect.orDie
      ),
    cardOpened: (card) =>
      sql`INSERT INTO warden_cluster_cards (id, item_id, incarnation, method, opened_at)
        VALUES (${card.id}, ${card.itemId}, ${card.incarnation}, ${card.method}, ${now()})
        ON CONFLICT (id) DO NOTHING`.pipe(Effect.asVoid, Effect.orDie),
    cardSettled: (id, outcome, source) =>
      sql`UPDATE warden_cluster_cards SET outcome = ${outcome}, source = ${source}, settled_at = ${now()}
        WHERE id = ${id} AND outcome IS NULL RETURNING id`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),
    card: (id) =>
      sql`SELECT * FROM warden_cluster_cards WHERE id = ${id}`.pipe(
        Effect.map((rows) => (rows[0] === undefined ? undefined : toCard(rows[0]))),
        Effect.orDie
      ),
    strand: (itemId, current) =>
      sql`UPDATE warden_cluster_cards SET outcome = 'stranded', source = 'stranded', settled_at = ${now()}
        WHERE item_id = ${itemId} AND incarnation <> ${current} AND outcome IS NULL RETURNING id`.pipe(
        Effect.map((rows) => rows.map((r) => String(r["id"]))),
        Effect.orDie
      ),
    cards: (filter) =>
      (filter?.itemId === undefined
        ? sql`SELECT * FROM warden_cluster_cards ORDER BY opened_at, id`
        : sql`SELECT * FROM warden_cluster_cards WHERE item_id = ${filter.itemId} ORDER BY opened_at, id`).pipe(
          Effect.map((rows) => rows.map(toCard)),
          Effect.orDie
        ),
    items: sql`SELECT * FROM warden_cluster_items ORDER BY id`.pipe(Effect.map((rows) => rows.map(toItem)), Effect.orDie)
  }
  return shape
})

export const layer: Layer.Layer<ItemStore, never, SqlClient.SqlClient> = Layer.effect(ItemStore, make)
