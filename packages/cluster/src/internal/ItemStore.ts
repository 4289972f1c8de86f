/**
 * The fleet's own durable rows, beside the engine's tables and on the same SQL client: one row per
 * work item (which incarnation holds it under which epoch, its thread, turns done, its end), one
 * per card (which incarnation opened it under which epoch, for which item, and its one
 * settlement: what, by whom, under which epoch), and one per taking of an item (`claims`: who took
 * it from whom, and why). Every write is awaited by the runner before the event it describes is
 * published, so whatever a client saw is in storage.
 *
 * Fencing: an item's `epoch` is raised by one by each runner that takes it (`claim`, a
 * compare-and-set on the epoch it read). Every later write of that runner for the item carries
 * the epoch (`Fence`) and is conditional on it: once another runner has taken the item, the
 * write changes nothing and says so (`false`, or `Lost`), and the runner stops driving the item.
 *
 * A card settles once: every settling UPDATE carries `outcome IS NULL`; `strand` settles the open
 * cards of the item's earlier epochs `stranded` and returns their ids (none the second time).
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import * as Migrations from "./Migrations.js"
import { OwnershipChecks } from "./OwnershipChecks.js"
import type * as ThreadState from "./ThreadState.js"

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
  /** The fencing token: raised by one each time a runner takes the item. */
  readonly epoch: number
}

/** A stored card row. */
export interface CardRow {
  readonly id: string
  readonly itemId: string
  readonly incarnation: string
  readonly method: string
  readonly outcome: string | null
  readonly source: string | null
  /** The item's epoch the card was opened under (null for a card stored before epochs were kept). */
  readonly epoch: number | null
  /** The incarnation that settled it, and under which of the item's epochs. */
  readonly settledBy: string | null
  readonly settledEpoch: number | null
  readonly openedAt: number
  readonly settledAt: number | null
  /** The masked card as a person decides on it (JSON of a `Card.CardView`), when stored. */
  readonly view: string | null
}

/** One taking of an item: the first (`reason` null) or a move. */
export interface ClaimRow {
  readonly itemId: string
  readonly epoch: number
  readonly incarnation: string
  readonly runner: string
  readonly fromIncarnation: string | null
  readonly fromRunner: string | null
  readonly reason: string | null
}

/** The runner process taking an item: its incarnation, address, host and codex home. */
export interface Holder {
  readonly incarnation: string
  readonly runner: string
  readonly host: string
  readonly codexHome: string
}

/** What a runner's writes for an item carry: its incarnation and the epoch it took the item at. */
export interface Fence {
  readonly incarnation: string
  readonly epoch: number
}

/** What settling a card did. */
export type SettleResult =
  /** This write settled it. */
  | { readonly _tag: "Settled" }
  /** It had already settled (the row as it is now). */
  | { readonly _tag: "Already"; readonly row: CardRow }
  /** It is open, but the item is held under another epoch now: nothing was written. */
  | { readonly _tag: "Lost" }

export interface ItemStoreShape {
  readonly get: (id: string) => Effect.Effect<ItemRow | undefined>
  /**
   * Take the item: raise its epoch from the one in `before` (the row as read; `undefined`: no row
   * yet), name `holder` its holder, and record the taking (a move when `reason` is given, counted
   * in `moves`). Returns the new epoch and the item's moves, or `undefined` when the row changed
   * since `before` was read (another runner took it first; nothing was written).
   */
  readonly claim: (
    id: string,
    holder: Holder,
    options: { readonly before: ItemRow | undefined; readonly reason?: string | undefined }
  ) => Effect.Effect<{ readonly epoch: number; readonly moves: number } | undefined>
  /** Conditional on `fence` (false: another runner holds the item; nothing written). */
  readonly setThread: (id: string, threadId: string, fence: Fence) => Effect.Effect<boolean>
  readonly turnDone: (id: string, fence: Fence) => Effect.Effect<boolean>
  /** Record the item's end under `fence` (false: held under another epoch), and drop its thread state. */
  readonly finish: (id: string, status: string, result: string, fence: Fence) => Effect.Effect<boolean>
  /** A client's Stop for an item not running here: a redelivered `Run` then ends `Stopped`. */
  readonly requestStop: (id: string) => Effect.Effect<void>
  /** Record a card opened by `fence`'s incarnation (false: the item is held under another epoch; nothing written). */
  readonly cardOpened: (
    card: { readonly id: string; readonly itemId: string; readonly method: string; readonly view?: string },
    fence: Fence
  ) => Effect.Effect<boolean>
  /** Settle a card once, if its item is still held under `fence`'s epoch. */
  readonly settleCard: (id: string, outcome: string, source: string, fence: Fence) => Effect.Effect<SettleResult>
  /**
   * Put right a settlement this incarnation recorded for a person's decision before writing it
   * (`settleCard` with source `person`) when the card's own race had settled it otherwise in the
   * meantime (a deadline, the item's stop): the row then says what was written. Touches only a
   * row settled `from` by `fence`; false otherwise.
   */
  readonly correctCard: (
    id: string,
    change: { readonly from: string; readonly to: string; readonly source: string },
    fence: Fence
  ) => Effect.Effect<boolean>
  readonly card: (id: string) => Effect.Effect<CardRow | undefined>
  /**
   * Settle `stranded` the open cards of `itemId` opened under an earlier epoch than `fence`'s,
   * if the item is held under `fence`; returns their ids.
   */
  readonly strand: (itemId: string, fence: Fence) => Effect.Effect<ReadonlyArray<string>>
  readonly cards: (filter?: { readonly itemId?: string }) => Effect.Effect<ReadonlyArray<CardRow>>
  readonly items: Effect.Effect<ReadonlyArray<ItemRow>>
  /** Every taking of the item, oldest first. */
  readonly claims: (itemId: string) => Effect.Effect<ReadonlyArray<ClaimRow>>
  /**
   * Keep the item's thread state as of `turns` completed turns, replacing what was kept, if the
   * item is still held under `fence` (false: nothing written).
   */
  readonly saveThreadState: (
    itemId: string,
    state: ThreadState.Snapshot & { readonly turns: number },
    fence: Fence
  ) => Effect.Effect<boolean>
  /** The item's kept thread state, and how many completed turns it covers. */
  readonly threadState: (
    itemId: string
  ) => Effect.Effect<(ThreadState.Snapshot & { readonly turns: number; readonly epoch: number }) | undefined>
}

export class ItemStore extends Context.Tag("@warden/cluster/ItemStore")<ItemStore, ItemStoreShape>() {}

const num = (v: unknown): number => (typeof v === "number" ? v : Number(v ?? 0))
const str = (v: unknown): string | null => (v === null || v === undefined ? null : String(v))
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : num(v))

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
  result: str(r["result"]),
  epoch: num(r["epoch"])
})

/** A card row as read (every column). */
export const toCard = (r: Record<string, unknown>): CardRow => ({
  id: String(r["id"]),
  itemId: String(r["item_id"]),
  incarnation: String(r["incarnation"]),
  method: String(r["method"]),
  outcome: str(r["outcome"]),
  source: str(r["source"]),
  epoch: numOrNull(r["epoch"]),
  settledBy: str(r["settled_by"]),
  settledEpoch: numOrNull(r["settled_epoch"]),
  openedAt: num(r["opened_at"]),
  settledAt: numOrNull(r["settled_at"]),
  view: str(r["view"])
})

const toClaim = (r: Record<string, unknown>): ClaimRow => ({
  itemId: String(r["item_id"]),
  epoch: num(r["epoch"]),
  incarnation: String(r["incarnation"]),
  runner: String(r["runner"]),
  fromIncarnation: str(r["from_incarnation"]),
  fromRunner: str(r["from_runner"]),
  reason: str(r["reason"])
})

/** Storage failures are defects here: a runner that cannot write its rows must not go on answering. */
export const make: Effect.Effect<ItemStoreShape, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const checks = yield* OwnershipChecks
  yield* Migrations.run.pipe(Effect.orDie)
  const now = () => Date.now()
  const get = (id: string) =>
    sql`SELECT * FROM warden_cluster_items WHERE id = ${id}`.pipe(
      Effect.map((rows) => (rows[0] === undefined ? undefined : toItem(rows[0]))),
      Effect.orDie
    )
  const card = (id: string) =>
    sql`SELECT * FROM warden_cluster_cards WHERE id = ${id}`.pipe(
      Effect.map((rows) => (rows[0] === undefined ? undefined : toCard(rows[0]))),
      Effect.orDie
    )
  /** Always true: the condition of a write whose ownership checks are off (`OwnershipChecks`, tests only). */
  const unchecked = sql.literal("1 = 1")
  /** The item is held under `fence` (a sub-query every conditional write of a card carries). */
  const held = (itemId: string | ReturnType<typeof sql.literal>, fence: Fence) =>
    checks.enabled
      ? sql`EXISTS (SELECT 1 FROM warden_cluster_items WHERE warden_cluster_items.id = ${itemId} AND warden_cluster_items.epoch = ${fence.epoch})`
      : unchecked
  /** The item row's epoch is `fence`'s (the condition of every write of the item's own row). */
  const atEpoch = (fence: Fence) => (checks.enabled ? sql`epoch = ${fence.epoch}` : unchecked)
  const changed = (rows: ReadonlyArray<unknown>) => rows.length > 0
  const shape: ItemStoreShape = {
    get,
    claim: (id, { codexHome, host, incarnation, runner }, { before, reason }) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const taken =
              before === undefined
                ? yield* sql`INSERT INTO warden_cluster_items (id, incarnation, runner, host, codex_home, status, updated_at, epoch)
                VALUES (${id}, ${incarnation}, ${runner}, ${host}, ${codexHome}, 'running', ${now()}, 1)
                ON CONFLICT (id) DO NOTHING RETURNING epoch, moves`
                : yield* sql`UPDATE warden_cluster_items SET epoch = epoch + 1, incarnation = ${incarnation}, runner = ${runner},
                host = ${host}, codex_home = ${codexHome}, moves = moves + ${reason !== undefined ? 1 : 0}, updated_at = ${now()}
                WHERE id = ${id} AND epoch = ${before.epoch} RETURNING epoch, moves`
            const row = taken[0]
            if (row === undefined) return undefined
            const epoch = num(row["epoch"])
            yield* sql`INSERT INTO warden_cluster_claims (item_id, epoch, incarnation, runner, from_incarnation, from_runner, reason, claimed_at)
            VALUES (${id}, ${epoch}, ${incarnation}, ${runner}, ${before?.incarnation ?? null}, ${before?.runner ?? null}, ${reason ?? null}, ${now()})`
            return { epoch, moves: num(row["moves"]) }
          })
        )
        .pipe(Effect.orDie),
    setThread: (id, threadId, fence) =>
      sql`UPDATE warden_cluster_items SET thread_id = ${threadId}, updated_at = ${now()}
        WHERE id = ${id} AND ${atEpoch(fence)} RETURNING id`.pipe(Effect.map(changed), Effect.orDie),
    turnDone: (id, fence) =>
      sql`UPDATE warden_cluster_items SET turns_done = turns_done + 1, updated_at = ${now()}
        WHERE id = ${id} AND ${atEpoch(fence)} RETURNING id`.pipe(Effect.map(changed), Effect.orDie),
    finish: (id, status, result, fence) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const ended = changed(
              yield* sql`UPDATE warden_cluster_items SET status = ${status}, result = ${result}, updated_at = ${now()}
                WHERE id = ${id} AND ${atEpoch(fence)} RETURNING id`
            )
            // An ended item is never resumed: its conversation leaves the store with it.
            if (ended) yield* sql`DELETE FROM warden_cluster_thread_state WHERE item_id = ${id}`
            return ended
          })
        )
        .pipe(Effect.orDie),
    requestStop: (id) =>
      sql`UPDATE warden_cluster_items SET status = 'stop-requested', updated_at = ${now()} WHERE id = ${id} AND status = 'running'`.pipe(
        Effect.asVoid,
        Effect.orDie
      ),
    cardOpened: (c, fence) =>
      // INSERT ... SELECT, so that the row is written only while the item is held under the
      // fence's epoch; the casts give PostgreSQL the parameters' types (a bare SELECT has none).
      sql`INSERT INTO warden_cluster_cards (id, item_id, incarnation, method, opened_at, epoch, view)
        SELECT CAST(${c.id} AS VARCHAR(512)), CAST(${c.itemId} AS VARCHAR(255)), CAST(${fence.incarnation} AS VARCHAR(255)),
          CAST(${c.method} AS VARCHAR(255)), CAST(${now()} AS BIGINT), CAST(${fence.epoch} AS INTEGER), CAST(${c.view ?? null} AS TEXT)
        WHERE ${held(c.itemId, fence)}
        ON CONFLICT (id) DO NOTHING RETURNING id`.pipe(
        Effect.flatMap((rows) =>
          rows.length > 0
            ? Effect.succeed(true)
            : // Already there (the same event handled twice) counts as written, if it is this fence's.
              Effect.map(
                card(c.id),
                (row) => row !== undefined && row.incarnation === fence.incarnation && row.epoch === fence.epoch
              )
        ),
        Effect.orDie
      ),
    settleCard: (id, outcome, source, fence) =>
      sql`UPDATE warden_cluster_cards SET outcome = ${outcome}, source = ${source}, settled_at = ${now()},
          settled_by = ${fence.incarnation}, settled_epoch = ${fence.epoch}
        WHERE id = ${id} AND outcome IS NULL AND ${held(sql.literal("warden_cluster_cards.item_id"), fence)}
        RETURNING id`.pipe(
        Effect.flatMap((rows): Effect.Effect<SettleResult> => {
          if (rows.length > 0) return Effect.succeed({ _tag: "Settled" })
          return Effect.map(
            card(id),
            (row): SettleResult =>
              row !== undefined && row.outcome !== null ? { _tag: "Already", row } : { _tag: "Lost" }
          )
        }),
        Effect.orDie
      ),
    correctCard: (id, { from, source, to }, fence) =>
      sql`UPDATE warden_cluster_cards SET outcome = ${to}, source = ${source}, settled_at = ${now()}
        WHERE id = ${id} AND outcome = ${from} AND source = 'person'
          AND settled_by = ${fence.incarnation} AND settled_epoch = ${fence.epoch}
        RETURNING id`.pipe(Effect.map(changed), Effect.orDie),
    card,
    strand: (itemId, fence) =>
      sql`UPDATE warden_cluster_cards SET outcome = 'stranded', source = 'stranded', settled_at = ${now()},
          settled_by = ${fence.incarnation}, settled_epoch = ${fence.epoch}
        WHERE item_id = ${itemId} AND outcome IS NULL AND (epoch IS NULL OR epoch < ${fence.epoch})
          AND ${held(itemId, fence)}
        RETURNING id`.pipe(
        Effect.map((rows) => rows.map((r) => String(r["id"]))),
        Effect.orDie
      ),
    cards: (filter) =>
      (filter?.itemId === undefined
        ? sql`SELECT * FROM warden_cluster_cards ORDER BY opened_at, id`
        : sql`SELECT * FROM warden_cluster_cards WHERE item_id = ${filter.itemId} ORDER BY opened_at, id`
      ).pipe(
        Effect.map((rows) => rows.map(toCard)),
        Effect.orDie
      ),
    items: sql`SELECT * FROM warden_cluster_items ORDER BY id`.pipe(
      Effect.map((rows) => rows.map(toItem)),
      Effect.orDie
    ),
    claims: (itemId) =>
      sql`SELECT * FROM warden_cluster_claims WHERE item_id = ${itemId} ORDER BY epoch`.pipe(
        Effect.map((rows) => rows.map(toClaim)),
        Effect.orDie
      ),
    saveThreadState: (itemId, state, fence) =>
      sql`INSERT INTO warden_cluster_thread_state (item_id, thread_id, path, turns, bytes, sha256, content, saved_at, epoch)
        SELECT ${itemId}, ${state.threadId}, ${state.path}, ${state.turns}, ${state.bytes}, ${state.sha256}, ${state.content}, ${now()}, ${fence.epoch}
        WHERE ${held(itemId, fence)}
        ON CONFLICT (item_id) DO UPDATE SET thread_id = excluded.thread_id, path = excluded.path, turns = excluded.turns,
          bytes = excluded.bytes, sha256 = excluded.sha256, content = excluded.content, saved_at = excluded.saved_at,
          epoch = excluded.epoch
        RETURNING item_id`.pipe(Effect.map(changed), Effect.orDie),
    threadState: (itemId) =>
      sql`SELECT * FROM warden_cluster_thread_state WHERE item_id = ${itemId}`.pipe(
        Effect.map((rows) => {
          const r = rows[0]
          return r === undefined
            ? undefined
            : {
                threadId: String(r["thread_id"]),
                path: String(r["path"]),
                bytes: num(r["bytes"]),
                sha256: String(r["sha256"]),
                content: String(r["content"]),
                turns: num(r["turns"]),
                epoch: num(r["epoch"])
              }
        }),
        Effect.orDie
      )
  }
  return shape
})

export const layer: Layer.Layer<ItemStore, never, SqlClient.SqlClient> = Layer.effect(ItemStore, make)
