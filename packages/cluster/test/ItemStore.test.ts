/**
 * The fleet's item and card rows, fenced: every write a runner makes for an item carries the
 * epoch it took the item at, and once another runner has taken the item (raised the epoch) the
 * write changes nothing and says so. The same behaviour on SQLite (in memory) and on a throwaway
 * PostgreSQL, by swapping the `SqlClient` layer.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import { Storage } from "@warden/cluster"
import * as Postgres from "@warden/test-support/Postgres"
import { Effect, Layer } from "effect"
import type { Scope } from "effect"
import * as ItemStore from "../src/internal/ItemStore.js"

const method = "item/commandExecution/requestApproval"
const a = { incarnation: "rA-00000001", runner: "127.0.0.1:1", host: "h", codexHome: "/codex" }
const b = { incarnation: "rB-00000002", runner: "127.0.0.1:2", host: "h", codexHome: "/codex" }

/** What a runner that lost its item tries to write, and what the store must answer: nothing changed, each time. */
const conditionalWrites = Effect.gen(function* () {
  const store = yield* ItemStore.ItemStore
  const sql = yield* SqlClient.SqlClient

  // A takes the item (epoch 1), records its thread, a turn done and two cards, settles one.
  const first = yield* store.claim("item", a, { before: undefined })
  assert.deepStrictEqual(first, { epoch: 1, moves: 0 })
  const fenceA = { incarnation: a.incarnation, epoch: 1 }
  assert.isTrue(yield* store.setThread("item", "thr_a", fenceA))
  assert.isTrue(yield* store.turnDone("item", fenceA))
  assert.isTrue(yield* store.cardOpened({ id: "rA-00000001:c1", itemId: "item", method }, fenceA))
  assert.isTrue(yield* store.cardOpened({ id: "rA-00000001:c2", itemId: "item", method }, fenceA))
  assert.isTrue(yield* store.cardOpened({ id: "rA-00000001:c3", itemId: "item", method }, fenceA))
  // The same card recorded twice (the event handled again) is still this fence's card.
  assert.isTrue(yield* store.cardOpened({ id: "rA-00000001:c3", itemId: "item", method }, fenceA))
  assert.deepStrictEqual(yield* store.settleCard("rA-00000001:c2", "declined", "person", fenceA), { _tag: "Settled" })
  // A keeps the thread's state as of its completed turn.
  assert.isTrue(
    yield* store.saveThreadState(
      "item",
      { threadId: "thr_a", path: "sessions/r-thr_a.jsonl", bytes: 3, sha256: "a1", content: "a1", turns: 1 },
      fenceA
    )
  )
  const asA = yield* store.get("item")

  // B takes it from A (a move): the epoch goes to 2. A second claim from the row B read before is refused.
  const second = yield* store.claim("item", b, { before: asA, reason: "shard-moved" })
  assert.deepStrictEqual(second, { epoch: 2, moves: 1 })
  assert.isUndefined(yield* store.claim("item", a, { before: asA, reason: "shard-lost" }))
  const fenceB = { incarnation: b.incarnation, epoch: 2 }

  // Everything A writes now changes nothing, and says so.
  assert.isFalse(yield* store.setThread("item", "thr_stale", fenceA))
  assert.isFalse(yield* store.turnDone("item", fenceA))
  assert.isFalse(yield* store.finish("item", "completed", '{"stale":true}', fenceA))
  assert.isFalse(yield* store.cardOpened({ id: "rA-00000001:c4", itemId: "item", method }, fenceA))
  // c1 is open, but the item is B's: A cannot settle it (not accepted, not anything).
  assert.deepStrictEqual(yield* store.settleCard("rA-00000001:c1", "accepted", "person", fenceA), { _tag: "Lost" })
  // A's thread state: not replaced (B's move restores what A kept under its epoch).
  assert.isFalse(
    yield* store.saveThreadState(
      "item",
      { threadId: "thr_a", path: "sessions/r-thr_a.jsonl", bytes: 3, sha256: "a2", content: "a2", turns: 2 },
      fenceA
    )
  )
  assert.deepStrictEqual(yield* store.threadState("item"), {
    ...{ threadId: "thr_a", path: "sessions/r-thr_a.jsonl", bytes: 3, sha256: "a1", content: "a1", turns: 1 },
    epoch: 1
  })
  // A's own strand of the earlier epoch's cards is refused too.
  assert.deepStrictEqual(yield* store.strand("item", fenceA), [])
  const afterStale = yield* store.get("item")
  assert.deepStrictEqual(
    {
      ...afterStale,
      threadId: afterStale?.threadId,
      turnsDone: afterStale?.turnsDone,
      status: afterStale?.status,
      result: afterStale?.result
    },
    { ...asA!, incarnation: b.incarnation, runner: b.runner, epoch: 2, moves: 1 }
  )
  assert.isUndefined(yield* store.card("rA-00000001:c4"))
  assert.strictEqual((yield* store.card("rA-00000001:c1"))?.outcome, null)

  // B strands the open cards of the earlier epoch, once; A's settlement of c1 comes too late.
  assert.deepStrictEqual([...(yield* store.strand("item", fenceB))].sort(), ["rA-00000001:c1", "rA-00000001:c3"])
  assert.deepStrictEqual(yield* store.strand("item", fenceB), [])
  const c1 = yield* store.settleCard("rA-00000001:c1", "accepted", "person", fenceA)
  assert.strictEqual(c1._tag, "Already")
  if (c1._tag === "Already")
    assert.deepStrictEqual([c1.row.outcome, c1.row.settledBy, c1.row.settledEpoch], ["stranded", b.incarnation, 2])
  // A correction only touches a person's settlement recorded by the same fence.
  assert.isFalse(
    yield* store.correctCard("rA-00000001:c1", { from: "stranded", to: "timeout", source: "Deadline" }, fenceA)
  )
  assert.isFalse(
    yield* store.correctCard("rA-00000001:c2", { from: "declined", to: "refused", source: "ThreadStopped" }, fenceB)
  )

  // B's own writes go through; its card settles once, its end is recorded.
  assert.isTrue(yield* store.setThread("item", "thr_a", fenceB))
  assert.isTrue(yield* store.cardOpened({ id: "rB-00000002:c1", itemId: "item", method }, fenceB))
  assert.deepStrictEqual(yield* store.settleCard("rB-00000002:c1", "accepted", "person", fenceB), { _tag: "Settled" })
  const again = yield* store.settleCard("rB-00000002:c1", "declined", "person", fenceB)
  assert.strictEqual(again._tag === "Already" ? again.row.outcome : again._tag, "accepted")
  // A person's settlement recorded first, then settled otherwise by the card's race: put right.
  assert.isTrue(yield* store.cardOpened({ id: "rB-00000002:c2", itemId: "item", method }, fenceB))
  assert.deepStrictEqual(yield* store.settleCard("rB-00000002:c2", "accepted", "person", fenceB), { _tag: "Settled" })
  assert.isTrue(
    yield* store.correctCard("rB-00000002:c2", { from: "accepted", to: "timeout", source: "Deadline" }, fenceB)
  )
  assert.isTrue(yield* store.turnDone("item", fenceB))
  assert.isTrue(
    yield* store.saveThreadState(
      "item",
      { threadId: "thr_a", path: "sessions/r-thr_a.jsonl", bytes: 3, sha256: "b2", content: "b2", turns: 2 },
      fenceB
    )
  )
  assert.deepStrictEqual(yield* store.threadState("item"), {
    ...{ threadId: "thr_a", path: "sessions/r-thr_a.jsonl", bytes: 3, sha256: "b2", content: "b2", turns: 2 },
    epoch: 2
  })
  assert.isTrue(yield* store.finish("item", "completed", '{"by":"b"}', fenceB))
  // The item ended: its conversation left the store with it.
  assert.isUndefined(yield* store.threadState("item"))

  const cards = yield* store.cards({ itemId: "item" })
  assert.deepStrictEqual(
    cards.map((c) => [c.id, c.outcome, c.source, c.epoch, c.settledBy, c.settledEpoch]),
    [
      ["rA-00000001:c1", "stranded", "stranded", 1, b.incarnation, 2],
      ["rA-00000001:c2", "declined", "person", 1, a.incarnation, 1],
      ["rA-00000001:c3", "stranded", "stranded", 1, b.incarnation, 2],
      ["rB-00000002:c1", "accepted", "person", 2, b.incarnation, 2],
      ["rB-00000002:c2", "timeout", "Deadline", 2, b.incarnation, 2]
    ]
  )
  const row = yield* store.get("item")
  assert.deepStrictEqual(
    [row?.incarnation, row?.epoch, row?.turnsDone, row?.moves, row?.status, row?.result, row?.threadId],
    [b.incarnation, 2, 2, 1, "completed", '{"by":"b"}', "thr_a"]
  )
  // Every taking is recorded, the move with its reason; the row's moves count the moves.
  const claims = yield* store.claims("item")
  assert.deepStrictEqual(
    claims.map((c) => [c.epoch, c.incarnation, c.fromIncarnation, c.reason]),
    [
      [1, a.incarnation, null, null],
      [2, b.incarnation, a.incarnation, "shard-moved"]
    ]
  )
  assert.strictEqual(claims.filter((c) => c.reason !== null).length, row?.moves)
  // Opening the store again (another runner starting) migrates nothing twice.
  yield* ItemStore.make
  const migrations = yield* sql<{
    migration_id: unknown
    name: string
  }>`SELECT migration_id, name FROM warden_cluster_migrations ORDER BY migration_id`
  assert.deepStrictEqual(
    migrations.map((m) => [Number(m.migration_id), m.name]),
    [
      [1, "initial"],
      [2, "fencing"],
      [3, "thread_state"],
      [4, "card_views"]
    ]
  )
})

/** A database made before migrations were kept (the tables as the first release created them) is brought forward. */
const fromFirstRelease = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE warden_cluster_items (id VARCHAR(255) PRIMARY KEY, incarnation VARCHAR(255), runner VARCHAR(255), host VARCHAR(255),
    codex_home TEXT, thread_id VARCHAR(255), turns_done INTEGER NOT NULL DEFAULT 0, moves INTEGER NOT NULL DEFAULT 0,
    status VARCHAR(32) NOT NULL, result TEXT, updated_at BIGINT NOT NULL)`
  yield* sql`CREATE TABLE warden_cluster_cards (id VARCHAR(512) PRIMARY KEY, item_id VARCHAR(255) NOT NULL, incarnation VARCHAR(255) NOT NULL,
    method VARCHAR(255) NOT NULL, opened_at BIGINT NOT NULL, outcome VARCHAR(32), source VARCHAR(255), settled_at BIGINT)`
  yield* sql`INSERT INTO warden_cluster_items (id, incarnation, runner, status, updated_at) VALUES ('old', 'rOld-1', '127.0.0.1:9', 'running', 0)`
  yield* sql`INSERT INTO warden_cluster_cards (id, item_id, incarnation, method, opened_at) VALUES ('rOld-1:c1', 'old', 'rOld-1', ${method}, 0)`
  const store = yield* ItemStore.make
  const before = yield* store.get("old")
  assert.strictEqual(before?.epoch, 0)
  const taken = yield* store.claim("old", b, { before, reason: "shard-moved" })
  assert.deepStrictEqual(taken, { epoch: 1, moves: 1 })
  // A card stored before epochs were kept counts as of an earlier epoch: stranded on the move.
  assert.deepStrictEqual(yield* store.strand("old", { incarnation: b.incarnation, epoch: 1 }), ["rOld-1:c1"])
})

const onSqlite = <A, E>(effect: Effect.Effect<A, E, ItemStore.ItemStore | SqlClient.SqlClient>) =>
  effect.pipe(Effect.provide(ItemStore.layer.pipe(Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })))))

const onPostgres = <A, E>(
  effect: Effect.Effect<A, E, ItemStore.ItemStore | SqlClient.SqlClient>
): Effect.Effect<A, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const pg = yield* Postgres.start()
    return yield* effect.pipe(Effect.provide(ItemStore.layer.pipe(Layer.provideMerge(Storage.layer(pg.url)))))
  })

describe("ItemStore: conditional writes (fencing)", () => {
  it.scoped(
    "SQLite: a runner's writes for an item it lost change nothing and say so",
    () => onSqlite(conditionalWrites),
    60_000
  )
  it.scoped(
    "SQLite: a database from before migrations is brought forward",
    () => fromFirstRelease.pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" }))),
    60_000
  )
  it.scopedLive(
    "PostgreSQL: a runner's writes for an item it lost change nothing and say so",
    () => onPostgres(conditionalWrites),
    120_000
  )
  it.scopedLive(
    "PostgreSQL: a database from before migrations is brought forward",
    () =>
      Effect.gen(function* () {
        const pg = yield* Postgres.start()
        return yield* fromFirstRelease.pipe(Effect.provide(Storage.layer(pg.url)))
      }),
    120_000
  )
})
