/**
 * The work item entity's handlers in one process: the engine's in-memory `TestRunner` (in-memory
 * message storage, no sockets), a supervisor over the fake app-server, and the item and card rows
 * in an in-memory SQLite database. Storage rows of an earlier incarnation are seeded by hand to
 * stand for a runner that died.
 */
import { TestRunner } from "@effect/cluster"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import { ClusterClient, Runner, Wire } from "@warden/cluster"
import { Ledger } from "@warden/ledger"
import { Supervisor } from "@warden/supervisor"
import { FakeAppServer } from "@warden/testkit"
import { Deferred, Effect, Exit, Fiber, Layer, Queue, Schema, Stream } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import * as Handlers from "../src/internal/Handlers.js"
import * as ItemStore from "../src/internal/ItemStore.js"
import { OwnershipChecks } from "../src/internal/OwnershipChecks.js"
import { openCard, setup } from "./fixtures/InMemoryRunner.js"

/** `setup` with the runner recording a ledger run (as `Runner.layer({ ledger: true })`) in the same database. */
const setupWithLedger = (fake: FakeAppServer.FakeAppServer) =>
  Layer.mergeAll(Layer.effect(ClusterClient.ClusterClient, ClusterClient.make), ItemStore.layer).pipe(
    Layer.provideMerge(
      Runner.entityLayer({ runId: "rNow-00000001", address: "127.0.0.1:1", host: "host-a", codexHome: "/codex" })
    ),
    Layer.provideMerge(
      Layer.scoped(
        Handlers.LedgerRecording,
        Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const run = yield* ledger.beginRun({ id: "rNow-00000001" })
          yield* run.attach(yield* Supervisor.Supervisor)
          return { ledger, run }
        })
      )
    ),
    Layer.provideMerge(Supervisor.layer({}).pipe(Layer.provide(fake.layer))),
    Layer.provideMerge(Layer.orDie(Ledger.layer())),
    Layer.provideMerge(TestRunner.layer),
    Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" }))
  )

/** Take `item` for `incarnation` (a runner that is not this test's), as its `Run` would: returns the fence its writes carry. */
const takeFor = (item: string, incarnation: string, host: string) =>
  Effect.gen(function* () {
    const store = yield* ItemStore.ItemStore
    const before = yield* store.get(item)
    const taken = yield* store.claim(
      item,
      {
        incarnation,
        runner: incarnation === "rNow-00000001" ? "127.0.0.1:1" : "127.0.0.1:2",
        host,
        codexHome: "/codex"
      },
      { before }
    )
    assert.isDefined(taken)
    return { incarnation, epoch: taken!.epoch }
  })

/** An item left behind by incarnation `rOld-…` on `host`, with its thread and two cards: c1 open, c2 declined. */
const seedDeadIncarnation = (item: string, host: string) =>
  Effect.gen(function* () {
    const store = yield* ItemStore.ItemStore
    const sql = yield* SqlClient.SqlClient
    const fence = yield* takeFor(item, "rOld-00000002", host)
    yield* store.setThread(item, "thr_old", fence)
    yield* store.cardOpened(
      { id: "rOld-00000002:c1", itemId: item, method: "item/commandExecution/requestApproval" },
      fence
    )
    yield* store.cardOpened(
      { id: "rOld-00000002:c2", itemId: item, method: "item/commandExecution/requestApproval" },
      fence
    )
    yield* store.settleCard("rOld-00000002:c2", "declined", "person", fence)
    const other = yield* takeFor("someone-else", "rOld-00000002", host)
    yield* store.cardOpened(
      { id: "rOld-00000002:c3", itemId: "someone-else", method: "item/commandExecution/requestApproval" },
      other
    )
    yield* store.settleCard("rOld-00000002:c3", "accepted", "person", other)
    return sql
  })

/**
 * Item `item` runs on the runner under test until its card is open; then another runner takes it
 * (its claim raises the epoch) and, with `strand`, strands the card.
 */
const openThenTaken = (fake: FakeAppServer.FakeAppServer, item: string, strand: boolean) =>
  Effect.gen(function* () {
    const store = yield* ItemStore.ItemStore
    const { run, card, requestId } = yield* openCard(fake, item, "rm -rf /tmp/x")
    const before = yield* store.get(item)
    const taken = yield* store.claim(
      item,
      { incarnation: "rNew-00000003", runner: "127.0.0.1:3", host: "host-a", codexHome: "/codex" },
      { before, reason: "shard-moved" }
    )
    assert.deepStrictEqual(taken, { epoch: 2, moves: 1 })
    if (strand) assert.deepStrictEqual(yield* store.strand(item, { incarnation: "rNew-00000003", epoch: 2 }), [card])
    return { run, card, requestId, taken: yield* store.get(item) }
  })

describe("WorkItemEntity on an in-memory runner", () => {
  it.scopedLive(
    "an item that ended elsewhere: a subscription here is told how every card and the item ended, from storage, marked replayed",
    () => {
      const fake = FakeAppServer.make({})
      return Effect.gen(function* () {
        const store = yield* ItemStore.ItemStore
        // Run and ended by another runner, which stranded the card of the runner before it.
        const fence = yield* takeFor("ended", "rOld-00000002", "host-b")
        yield* store.cardOpened(
          { id: "rOld-00000002:c9", itemId: "ended", method: "item/commandExecution/requestApproval" },
          fence
        )
        assert.deepStrictEqual(yield* store.strand("ended", { ...fence, epoch: fence.epoch + 1 }), [])
        yield* store.settleCard("rOld-00000002:c9", "stranded", "stranded", fence)
        const result = new Wire.Completed({
          threadId: "thr_e",
          status: "completed",
          finalMessage: "done",
          turns: 1,
          moves: 1
        })
        assert.isTrue(
          yield* store.finish("ended", "completed", Schema.encodeSync(Schema.parseJson(Wire.RunResult))(result), fence)
        )
        const client = yield* ClusterClient.ClusterClient
        const lines = [...(yield* client.events("ended").pipe(Stream.runCollect))]
        assert.deepStrictEqual(
          lines.map((e) => e.line),
          [
            { type: "item.snapshot", item: "ended", status: "completed", threadId: null, openCards: [] },
            {
              type: "card.settled",
              card: "rOld-00000002:c9",
              outcome: "stranded",
              source: "stranded",
              replayed: true,
              item: "ended"
            },
            {
              type: "item.finished",
              status: "completed",
              result: Schema.encodeSync(Wire.RunResult)(result),
              replayed: true,
              item: "ended"
            }
          ]
        )
        // Told once per activation: a second subscription gets the same lines (the same seqs).
        const again = [...(yield* client.events("ended").pipe(Stream.runCollect))]
        assert.deepStrictEqual(
          again.slice(1).map((e) => e.seq),
          lines.slice(1).map((e) => e.seq)
        )
        // And a follower passes them on, then ends.
        const followed = [...(yield* client.follow("ended").pipe(Stream.runCollect))]
        assert.deepStrictEqual(
          followed.map((e) => e.line["type"]),
          ["card.settled", "item.finished"]
        )
        assert.strictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/start").length, 0)
      }).pipe(Effect.provide(setup(fake)))
    },
    60_000
  )

  it.scopedLive(
    "a move strands in the earlier incarnation's ledger run only the cards storage stranded; one it settled itself is left to its own writer",
    () => {
      const fake = FakeAppServer.make({
        behaviour: { "thread/resume": (params) => ({ result: { thread: { id: params.threadId } } }) }
      })
      return Effect.gen(function* () {
        const sql = yield* seedDeadIncarnation("moved", "host-a")
        // The earlier runner's ledger run holds both of its cards of the item open: c2's decline is
        // in storage but its own writer had not recorded it yet (a live runner that let the item go).
        yield* sql`INSERT INTO ledger_runs (run_id, started_at, status, info) VALUES ('rOld-00000002', 1, 'running', '{}')`
        for (const card of ["c1", "c2"]) {
          yield* sql`INSERT INTO ledger_cards (run_id, card_id, request_id, method, item_key, kind, title, summary, facts, offers, opened_at, deadline_at)
            VALUES ('rOld-00000002', ${card}, '0', 'item/commandExecution/requestApproval', 'moved', 'command', 't', '{}', '{}', '[]', 1, 2)`
        }
        const client = yield* ClusterClient.ClusterClient
        const result = yield* client.run("moved", { prompt: "go on" })
        assert.strictEqual(result._tag, "Completed")
        const ledger = yield* Ledger.Ledger
        assert.deepStrictEqual(
          (yield* ledger.cards({ runId: "rOld-00000002" })).map((c) => [c.cardId, c.settlement?.outcome]),
          [
            ["c1", "stranded"],
            ["c2", undefined]
          ]
        )
      }).pipe(Effect.provide(setupWithLedger(fake)))
    },
    60_000
  )

  it.scopedLive(
    "Run completes the item and is de-duplicated by its id: a second Run returns the stored result",
    () => {
      const fake = FakeAppServer.make({ finalMessage: "all good" })
      return Effect.gen(function* () {
        const client = yield* ClusterClient.ClusterClient
        const first = yield* client.run("one", { prompt: "hello" })
        assert.strictEqual(first._tag, "Completed")
        if (first._tag === "Completed")
          assert.deepStrictEqual([first.finalMessage, first.turns, first.moves], ["all good", 1, 0])
        const again = yield* client.run("one", { prompt: "hello" })
        assert.deepStrictEqual(again, first)
        assert.strictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/start").length, 1)
        const status = yield* client.status("one")
        assert.deepStrictEqual(
          [status.status, status.threadId, status.turnsDone],
          ["completed", first._tag === "Completed" ? first.threadId : "", 1]
        )
        // Events of a finished item: the snapshot, then the lines of this activation, then the end.
        const lines = yield* client.events("one").pipe(Stream.runCollect)
        const types = [...lines].map((e) => e.line["type"])
        assert.strictEqual(types[0], "item.snapshot")
        assert.includeMembers(types, ["item.placed", "thread.ready", "turn.started", "turn.completed", "item.finished"])
      }).pipe(Effect.provide(setup(fake)))
    },
    60_000
  )

  it.scopedLive(
    "a move strands the earlier incarnation's open cards once and resumes its thread; decisions for them are written nowhere",
    () => {
      const fake = FakeAppServer.make({
        behaviour: { "thread/resume": (params) => ({ result: { thread: { id: params.threadId } } }) }
      })
      return Effect.gen(function* () {
        const sql = yield* seedDeadIncarnation("moved", "host-a")
        const client = yield* ClusterClient.ClusterClient
        const result = yield* client.run("moved", { prompt: "go on" })
        assert.strictEqual(result._tag, "Completed")
        if (result._tag === "Completed") assert.deepStrictEqual([result.threadId, result.moves], ["thr_old", 1])
        assert.deepStrictEqual(
          fake
            .requestsSoFar()
            .filter((r) => r.method === "thread/resume")
            .map((r) => r.params.threadId),
          ["thr_old"]
        )
        const rows = yield* sql<{
          id: string
          outcome: string
        }>`SELECT id, outcome FROM warden_cluster_cards ORDER BY id`
        assert.deepStrictEqual(
          rows.map((r) => [r.id, r.outcome]),
          [
            ["rOld-00000002:c1", "stranded"],
            ["rOld-00000002:c2", "declined"],
            ["rOld-00000002:c3", "accepted"]
          ]
        )
        // Exactly once: a second strand finds nothing.
        const store = yield* ItemStore.ItemStore
        const row = yield* store.get("moved")
        assert.deepStrictEqual(yield* store.strand("moved", { incarnation: "rNow-00000001", epoch: row!.epoch }), [])
        const lines = yield* client.events("moved").pipe(Stream.runCollect)
        const moved = [...lines].filter((e) => e.line["type"] === "item.moved")
        assert.deepStrictEqual(
          moved.map((e) => [e.line["reason"], e.line["stranded"]]),
          [["shard-moved", ["rOld-00000002:c1"]]]
        )
        // The one inbox: an earlier incarnation's card is answered from storage, nothing written.
        const answersBefore = fake.answersSoFar().length
        assert.deepStrictEqual(
          yield* client.answer("moved", "rOld-00000002:c1", { _tag: "Accept" }),
          new Wire.AlreadySettled({ outcome: "stranded" })
        )
        assert.deepStrictEqual(
          yield* client.answer("moved", "rOld-00000002:c2", { _tag: "Accept" }),
          new Wire.AlreadySettled({ outcome: "declined" })
        )
        // Another item's card, a made-up card, and a malformed id: UnknownCard.
        assert.strictEqual((yield* client.answer("moved", "rOld-00000002:c3", { _tag: "Accept" }))._tag, "UnknownCard")
        assert.strictEqual((yield* client.answer("moved", "rOld-00000002:c99", { _tag: "Accept" }))._tag, "UnknownCard")
        assert.strictEqual((yield* client.answer("moved", "no-colon", { _tag: "Accept" }))._tag, "UnknownCard")
        assert.strictEqual((yield* client.answer("moved", "rNow-00000001:c1", { _tag: "Accept" }))._tag, "UnknownCard")
        assert.strictEqual(fake.answersSoFar().length, answersBefore)
      }).pipe(Effect.provide(setup(fake)))
    },
    60_000
  )

  it.scopedLive(
    "an item this incarnation ran and did not finish (its shard let go of and taken back) is a move to itself, shard-lost",
    () => {
      const fake = FakeAppServer.make({
        behaviour: { "thread/resume": (params) => ({ result: { thread: { id: params.threadId } } }) }
      })
      return Effect.gen(function* () {
        // What the cut-off run left: the row held by this incarnation, running, its card refused.
        const store = yield* ItemStore.ItemStore
        const fence = yield* takeFor("cut", "rNow-00000001", "host-a")
        yield* store.setThread("cut", "thr_cut", fence)
        yield* store.cardOpened(
          { id: "rNow-00000001:c1", itemId: "cut", method: "item/commandExecution/requestApproval" },
          fence
        )
        yield* store.settleCard("rNow-00000001:c1", "refused", "ThreadStopped", fence)
        const client = yield* ClusterClient.ClusterClient
        const result = yield* client.run("cut", { prompt: "go on" })
        assert.strictEqual(result._tag, "Completed")
        if (result._tag === "Completed") assert.deepStrictEqual([result.threadId, result.moves], ["thr_cut", 1])
        assert.deepStrictEqual(
          fake
            .requestsSoFar()
            .filter((r) => r.method === "thread/resume")
            .map((r) => r.params.threadId),
          ["thr_cut"]
        )
        const lines = [...(yield* client.events("cut").pipe(Stream.runCollect))].map((e) => e.line)
        assert.deepStrictEqual(
          lines.filter((l) => l["type"] === "item.moved").map((l) => [l["from"], l["to"], l["reason"], l["stranded"]]),
          [["127.0.0.1:1", "127.0.0.1:1", "shard-lost", []]]
        )
        // The cut-off run's refusal is told again (it may not have reached anyone), nothing stranded.
        assert.deepStrictEqual(
          lines.filter((l) => l["type"] === "card.settled").map((l) => [l["card"], l["outcome"], l["replayed"]]),
          [["rNow-00000001:c1", "refused", true]]
        )
        assert.strictEqual((yield* store.get("cut"))?.moves, 1)
        // A finished item's Run again is no move.
        assert.deepStrictEqual(yield* client.run("cut", { prompt: "go on" }), result)
        assert.strictEqual((yield* store.get("cut"))?.moves, 1)
      }).pipe(Effect.provide(setup(fake)))
    },
    60_000
  )

  it.scopedLive(
    "a Run that joined a run cut off while stopping runs the item itself (a shard-lost move), never taking the cut as its reply",
    () => {
      const fake = FakeAppServer.make({
        behaviour: { "thread/resume": (params) => ({ result: { thread: { id: params.threadId } } }) }
      })
      return Effect.gen(function* () {
        // The run this incarnation had: its row running, and in the runner's items a run that ends
        // without a result (interrupted: its shard let go of; the Run is delivered again before it stopped).
        const store = yield* ItemStore.ItemStore
        const fence = yield* takeFor("dying", "rNow-00000001", "host-a")
        yield* store.setThread("dying", "thr_dying", fence)
        const cut = yield* Deferred.make<Wire.RunResult>()
        yield* Deferred.interrupt(cut)
        const localItems = yield* Handlers.LocalItems
        localItems.set("dying", { run: cut, nextSeq: 0 })
        const client = yield* ClusterClient.ClusterClient
        const result = yield* client.run("dying", { prompt: "go on" })
        assert.strictEqual(result._tag, "Completed")
        if (result._tag === "Completed") assert.deepStrictEqual([result.threadId, result.moves], ["thr_dying", 1])
        const lines = [...(yield* client.events("dying").pipe(Stream.runCollect))].map((e) => e.line)
        assert.deepStrictEqual(
          lines
            .filter((l) => l["type"] === "item.redelivered" || l["type"] === "item.moved")
            .map((l) => [l["type"], l["reason"]]),
          [
            ["item.redelivered", undefined],
            ["item.moved", "shard-lost"]
          ]
        )
      }).pipe(Effect.provide(setup(fake)))
    },
    60_000
  )

  it.scopedLive(
    "a thread held on another host fails the moved item thread-unreachable, with a readable reason; its open cards are stranded",
    () => {
      const fake = FakeAppServer.make({})
      return Effect.gen(function* () {
        const sql = yield* seedDeadIncarnation("far", "host-b")
        // One of its turns completed there, and nothing of its thread was kept in the store.
        yield* sql`UPDATE warden_cluster_items SET turns_done = 1 WHERE id = 'far'`
        const client = yield* ClusterClient.ClusterClient
        const result = yield* client.run("far", { prompt: "go on", followUps: ["and on"] })
        assert.strictEqual(result._tag, "Failed")
        if (result._tag === "Failed") {
          assert.strictEqual(result.reason, "thread-unreachable")
          assert.strictEqual(result.threadId, "thr_old")
          assert.include(result.detail, "host host-b")
          assert.include(result.detail, "its state was never kept in the fleet's store")
        }
        assert.strictEqual(fake.requestsSoFar().filter((r) => r.method.startsWith("thread/")).length, 0)
        const rows = yield* sql<{
          outcome: string
        }>`SELECT outcome FROM warden_cluster_cards WHERE id = 'rOld-00000002:c1'`
        assert.strictEqual(rows[0]?.outcome, "stranded")
        assert.deepStrictEqual(yield* client.run("far", { prompt: "go on", followUps: ["and on"] }), result)
      }).pipe(Effect.provide(setup(fake, "host-a")))
    },
    60_000
  )

  it.scopedLive(
    "a thread from another host is restored from the state kept in the store and resumed; one with no completed turn starts afresh, saying so; a state missing turns is refused",
    () => {
      const fake = FakeAppServer.make({
        behaviour: { "thread/resume": (params) => ({ result: { thread: { id: params.threadId } } }) }
      })
      const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-entity-home-"))
      return Effect.gen(function* () {
        yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(home, { recursive: true, force: true })))
        const store = yield* ItemStore.ItemStore
        // Another host ran one turn of each item and kept its thread's state (as its runner does).
        const rollout = '{"type":"event_msg","payload":{"type":"task_complete","turn_id":"t1"}}\n'
        const path = "sessions/2026/12/05/rollout-2026-12-05T10-00-00-thr_old.jsonl"
        const zipped = Zlib.gzipSync(Buffer.from(rollout)).toString("base64")
        const sha256 = Crypto.createHash("sha256").update(rollout).digest("hex")
        for (const [item, turns] of [
          ["far", 1],
          ["gap", 0]
        ] as const) {
          const fence = yield* takeFor(item, "rOld-00000002", "host-b")
          yield* store.setThread(item, "thr_old", fence)
          yield* store.turnDone(item, fence)
          yield* store.saveThreadState(
            item,
            { threadId: "thr_old", path, bytes: Buffer.byteLength(rollout), sha256, content: zipped, turns },
            fence
          )
        }
        const client = yield* ClusterClient.ClusterClient
        const result = yield* client.run("far", { prompt: "one", followUps: ["two"] })
        assert.strictEqual(result._tag, "Completed")
        if (result._tag === "Completed")
          assert.deepStrictEqual([result.threadId, result.turns, result.moves], ["thr_old", 2, 1])
        // The rollout is in this runner's codex home, as kept; the thread was resumed, not started.
        assert.strictEqual(Fs.readFileSync(Path.join(home, path), "utf8"), rollout)
        assert.deepStrictEqual(
          fake
            .requestsSoFar()
            .filter((r) => r.method.startsWith("thread/"))
            .map((r) => [r.method, r.params.threadId]),
          [
            ["thread/resume", "thr_old"],
            ["thread/unsubscribe", "thr_old"]
          ]
        )
        const lines = [...(yield* client.events("far").pipe(Stream.runCollect))].map((e) => e.line)
        assert.deepStrictEqual(
          lines.filter((l) => l["type"] === "thread.restored").map((l) => [l["from"], l["turns"]]),
          [["host-b", 1]]
        )
        // A thread with no completed turn and no kept state: its first turn runs again in a new
        // thread, and the item says so.
        const fence = yield* takeFor("early", "rOld-00000002", "host-b")
        yield* store.setThread("early", "thr_early", fence)
        const early = yield* client.run("early", { prompt: "one" })
        assert.strictEqual(early._tag, "Completed")
        if (early._tag === "Completed") assert.notStrictEqual(early.threadId, "thr_early")
        const earlyLines = [...(yield* client.events("early").pipe(Stream.runCollect))].map((e) => e.line)
        assert.deepStrictEqual(
          earlyLines.filter((l) => l["type"] === "thread.fresh").map((l) => l["missingThreadId"]),
          ["thr_early"]
        )
        // The kept state covers none of the item's one completed turn: resuming would lose it.
        const gap = yield* client.run("gap", { prompt: "one", followUps: ["two"] })
        assert.strictEqual(gap._tag, "Failed")
        if (gap._tag === "Failed") {
          assert.strictEqual(gap.reason, "thread-unreachable")
          assert.include(gap.detail, "covers 0 of its 1 completed turns")
        }
      }).pipe(Effect.provide(setup(fake, "host-a", home)))
    },
    60_000
  )

  it.scopedLive(
    "a card of this runner answered through the entity settles once; Stop of a finished item changes nothing",
    () => {
      const fake = FakeAppServer.make({ turns: "manual" })
      return Effect.gen(function* () {
        const client = yield* ClusterClient.ClusterClient
        const { run, card, requestId, threadId } = yield* openCard(fake, "asks", "echo hi")
        assert.isTrue(card.startsWith("rNow-00000001:"))
        assert.deepStrictEqual(
          yield* client.answer("asks", card, { _tag: "Decline" }),
          new Wire.Settled({ outcome: "declined" })
        )
        assert.deepStrictEqual((yield* fake.answerTo(requestId))["result"], { decision: "decline" })
        assert.deepStrictEqual(
          yield* client.answer("asks", card, { _tag: "Accept" }),
          new Wire.AlreadySettled({ outcome: "declined" })
        )
        yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "ok" })
        const result = yield* run.await.pipe(Effect.flatten)
        assert.strictEqual(result._tag, "Completed")
        yield* client.stop("asks")
        assert.deepStrictEqual(yield* client.run("asks", { prompt: "do it" }), result)
        assert.strictEqual(fake.answersSoFar().length, 1)
      }).pipe(Effect.provide(setup(fake)))
    },
    60_000
  )
  it.scopedLive(
    "a runner whose item another runner took answers its card from storage, writes nothing to codex or storage, stops the item and never replies",
    () => {
      const fake = FakeAppServer.make({ turns: "manual" })
      return Effect.gen(function* () {
        const client = yield* ClusterClient.ClusterClient
        const store = yield* ItemStore.ItemStore
        const supervisor = yield* Supervisor.Supervisor
        const finished = yield* supervisor.subscribe
        const stoppedHere = (item: string) =>
          Effect.gen(function* () {
            while (true) {
              const event = yield* Queue.take(finished)
              if (event._tag === "ItemFinished" && event.item === item) return event
            }
          })

        // The card stranded by the new owner: the decision is answered from storage, nothing written.
        const a = yield* openThenTaken(fake, "taken-a", true)
        // A follower subscribed here (its snapshot received) before the runner learns of the loss.
        const followed = yield* Queue.unbounded<Wire.ItemEvent>()
        const follower = yield* client.events("taken-a").pipe(
          Stream.runForEach((e) => Queue.offer(followed, e)),
          Effect.fork
        )
        assert.strictEqual((yield* Queue.take(followed)).line["type"], "item.snapshot")
        assert.deepStrictEqual(
          yield* client.answer("taken-a", a.card, { _tag: "Accept" }),
          new Wire.AlreadySettled({ outcome: "stranded" })
        )
        // The runner learnt it lost the item: it stops driving it (the turn interrupted, the card refused to codex).
        yield* stoppedHere("taken-a")
        // ... and ends its followers' subscriptions, so that they subscribe again and reach the
        // new owner (before, they stayed here, hearing nothing more); a new one ends at once.
        yield* Fiber.join(follower).pipe(Effect.timeout("30 seconds"))
        const again = yield* client.events("taken-a").pipe(Stream.runCollect, Effect.timeout("30 seconds"))
        assert.isFalse(
          [...again].some((e) => e.line["type"] === "card.settled"),
          "the lost activation says nothing about the card after the loss"
        )
        assert.deepStrictEqual((yield* fake.answerTo(a.requestId))["result"], { decision: "decline" })
        assert.deepStrictEqual(
          yield* client.answer("taken-a", a.card, { _tag: "Accept" }),
          new Wire.AlreadySettled({ outcome: "stranded" })
        )

        // The card still open in storage: the settlement is refused (the item is held under another
        // epoch), so the decision never reaches codex; the card is left to the new owner to strand.
        const b = yield* openThenTaken(fake, "taken-b", false)
        assert.deepStrictEqual(
          yield* client.answer("taken-b", b.card, { _tag: "Accept" }),
          new Wire.UnknownCard({ cardId: b.card })
        )
        yield* stoppedHere("taken-b")
        assert.deepStrictEqual((yield* fake.answerTo(b.requestId))["result"], { decision: "decline" })

        // Nothing this runner wrote after the other runner took the items: the rows are as the taking left them.
        for (const { card, item, taken } of [
          { ...a, item: "taken-a" },
          { ...b, item: "taken-b" }
        ]) {
          assert.deepStrictEqual(yield* store.get(item), taken)
          const cards = yield* store.cards({ itemId: item })
          assert.deepStrictEqual(
            cards.map((c) => [c.id, c.outcome]),
            [[card, item === "taken-a" ? "stranded" : null]]
          )
        }
        // Codex was never told to accept anything.
        assert.isFalse(fake.answersSoFar().some((answer) => JSON.stringify(answer).includes("accept")))
        // Neither run replies: they wait for the engine to close their entities (here: interrupted).
        for (const run of [a.run, b.run]) {
          assert.isNull(run.unsafePoll())
          const exit = yield* Fiber.interrupt(run)
          assert.isTrue(Exit.isInterrupted(exit))
        }
      }).pipe(Effect.provide(setup(fake)))
    },
    60_000
  )
  it.scopedLive(
    "with the ownership checks off (fence and lease), the runner whose item another runner took accepts its card to codex and writes over the new owner: the checks are what prevent it",
    () => {
      const fake = FakeAppServer.make({ turns: "manual" })
      return Effect.gen(function* () {
        const client = yield* ClusterClient.ClusterClient
        const store = yield* ItemStore.ItemStore
        // The interleaving of "taken-b" above: the card still open in storage, the item taken.
        const b = yield* openThenTaken(fake, "unfenced", false)
        const answer = yield* client.answer("unfenced", b.card, { _tag: "Accept" })
        assert.deepStrictEqual(answer, new Wire.Settled({ outcome: "accepted" }))
        // Split brain: codex told to accept on the runner that lost the item, and the card's row
        // settled by the old epoch although the new owner holds the item.
        assert.deepStrictEqual((yield* fake.answerTo(b.requestId))["result"], { decision: "accept" })
        const row = yield* store.card(b.card)
        assert.deepStrictEqual(
          [row?.outcome, row?.settledEpoch, (yield* store.get("unfenced"))?.epoch],
          ["accepted", 1, 2]
        )
        yield* Fiber.interrupt(b.run)
      }).pipe(Effect.provide(setup(fake)), Effect.provideService(OwnershipChecks, { enabled: false }))
    },
    60_000
  )
})
