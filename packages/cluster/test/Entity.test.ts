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
import { Supervisor } from "@warden/supervisor"
import { FakeAppServer } from "@warden/testkit"
import { Deferred, Effect, Layer, Stream } from "effect"
import * as Handlers from "../src/internal/Handlers.js"
import * as ItemStore from "../src/internal/ItemStore.js"

const setup = (fake: FakeAppServer.FakeAppServer, host = "host-a") =>
  Layer.mergeAll(Layer.effect(ClusterClient.ClusterClient, ClusterClient.make), ItemStore.layer).pipe(
    Layer.provideMerge(Runner.entityLayer({ runId: "rNow-00000001", address: "127.0.0.1:1", host, codexHome: "/codex" })),
    Layer.provideMerge(Supervisor.layer({}).pipe(Layer.provide(fake.layer))),
    Layer.provideMerge(TestRunner.layer),
    Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" }))
  )

/** An item left behind by incarnation `rOld-…` on `host`, with its thread and two cards: c1 open, c2 declined. */
const seedDeadIncarnation = (item: string, host: string) =>
  Effect.gen(function*() {
    const store = yield* ItemStore.ItemStore
    const sql = yield* SqlClient.SqlClient
    yield* store.claim(item, { incarnation: "rOld-00000002", runner: "127.0.0.1:2", host, codexHome: "/codex" }, false)
    yield* store.setThread(item, "thr_old")
    yield* store.cardOpened({ id: "rOld-00000002:c1", itemId: item, incarnation: "rOld-00000002", method: "item/commandExecution/requestApproval" })
    yield* store.cardOpened({ id: "rOld-00000002:c2", itemId: item, incarnation: "rOld-00000002", method: "item/commandExecution/requestApproval" })
    yield* store.cardSettled("rOld-00000002:c2", "declined", "person")
    yield* store.cardOpened({ id: "rOld-00000002:c3", itemId: "someone-else", incarnation: "rOld-00000002", method: "item/commandExecution/requestApproval" })
    yield* store.cardSettled("rOld-00000002:c3", "accepted", "person")
    return sql
  })

describe("WorkItemEntity on an in-memory runner", () => {
  it.scopedLive("Run completes the item and is de-duplicated by its id: a second Run returns the stored result", () => {
    const fake = FakeAppServer.make({ finalMessage: "all good" })
    return Effect.gen(function*() {
      const client = yield* ClusterClient.ClusterClient
      const first = yield* client.run("one", { prompt: "hello" })
      assert.strictEqual(first._tag, "Completed")
      if (first._tag === "Completed") assert.deepStrictEqual([first.finalMessage, first.turns, first.moves], ["all good", 1, 0])
      const again = yield* client.run("one", { prompt: "hello" })
      assert.deepStrictEqual(again, first)
      assert.strictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/start").length, 1)
      const status = yield* client.status("one")
      assert.deepStrictEqual([status.status, status.threadId, status.turnsDone], ["completed", first._tag === "Completed" ? first.threadId : "", 1])
      // Events of a finished item: the snapshot, then the lines of this activation, then the end.
      const lines = yield* client.events("one").pipe(Stream.runCollect)
      const types = [...lines].map((e) => e.line["type"])
      assert.strictEqual(types[0], "item.snapshot")
      assert.includeMembers(types, ["item.placed", "thread.ready", "turn.started", "turn.completed", "item.finished"])
    }).pipe(Effect.provide(setup(fake)))
  }, 60_000)

  it.scopedLive("a move strands the earlier incarnation's open cards once and resumes its thread; decisions for them are written nowhere", () => {
    const fake = FakeAppServer.make({ behaviour: { "thread/resume": (params) => ({ result: { thread: { id: params.threadId } } }) } })
    return Effect.gen(function*() {
      const sql = yield* seedDeadIncarnation("moved", "host-a")
      const client = yield* ClusterClient.ClusterClient
      const result = yield* client.run("moved", { prompt: "go on" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag === "Completed") assert.deepStrictEqual([result.threadId, result.moves], ["thr_old", 1])
      assert.deepStrictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/resume").map((r) => r.params.threadId), ["thr_old"])
      const rows = yield* sql<{ id: string; outcome: string }>`SELECT id, outcome FROM warden_cluster_cards ORDER BY id`
      assert.deepStrictEqual(rows.map((r) => [r.id, r.outcome]), [
        ["rOld-00000002:c1", "stranded"],
        ["rOld-00000002:c2", "declined"],
        ["rOld-00000002:c3", "accepted"]
      ])
      // Exactly once: a second strand finds nothing.
      const store = yield* ItemStore.ItemStore
      assert.deepStrictEqual(yield* store.strand("moved", "rNow-00000001"), [])
      const lines = yield* client.events("moved").pipe(Stream.runCollect)
      const moved = [...lines].filter((e) => e.line["type"] === "item.moved")
      assert.deepStrictEqual(moved.map((e) => [e.line["reason"], e.line["stranded"]]), [["shard-moved", ["rOld-00000002:c1"]]])
      // The one inbox: an earlier incarnation's card is answered from storage, nothing written.
      const answersBefore = fake.answersSoFar().length
      assert.deepStrictEqual(yield* client.answer("moved", "rOld-00000002:c1", { _tag: "Accept" }), new Wire.AlreadySettled({ outcome: "stranded" }))
      assert.deepStrictEqual(yield* client.answer("moved", "rOld-00000002:c2", { _tag: "Accept" }), new Wire.AlreadySettled({ outcome: "declined" }))
      // Another item's card, a made-up card, and a malformed id: UnknownCard.
      assert.strictEqual((yield* client.answer("moved", "rOld-00000002:c3", { _tag: "Accept" }))._tag, "UnknownCard")
      assert.strictEqual((yield* client.answer("moved", "rOld-00000002:c99", { _tag: "Accept" }))._tag, "UnknownCard")
      assert.strictEqual((yield* client.answer("moved", "no-colon", { _tag: "Accept" }))._tag, "UnknownCard")
      assert.strictEqual((yield* client.answer("moved", "rNow-00000001:c1", { _tag: "Accept" }))._tag, "UnknownCard")
      assert.strictEqual(fake.answersSoFar().length, answersBefore)
    }).pipe(Effect.provide(setup(fake)))
  }, 60_000)

  it.scopedLive("an item this incarnation ran and did not finish (its shard let go of and taken back) is a move to itself, shard-lost", () => {
    const fake = FakeAppServer.make({ behaviour: { "thread/resume": (params) => ({ result: { thread: { id: params.threadId } } }) } })
    return Effect.gen(function*() {
      // What the cut-off run left: the row held by this incarnation, running, its card refused.
      const store = yield* ItemStore.ItemStore
      yield* store.claim("cut", { incarnation: "rNow-00000001", runner: "127.0.0.1:1", host: "host-a", codexHome: "/codex" }, false)
      yield* store.setThread("cut", "thr_cut")
      yield* store.cardOpened({ id: "rNow-00000001:c1", itemId: "cut", incarnation: "rNow-00000001", method: "item/commandExecution/requestApproval" })
      yield* store.cardSettled("rNow-00000001:c1", "refused", "ThreadStopped")
      const client = yield* ClusterClient.ClusterClient
      const result = yield* client.run("cut", { prompt: "go on" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag === "Completed") assert.deepStrictEqual([result.threadId, result.moves], ["thr_cut", 1])
      assert.deepStrictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/resume").map((r) => r.params.threadId), ["thr_cut"])
      const lines = [...yield* client.events("cut").pipe(Stream.runCollect)].map((e) => e.line)
      assert.deepStrictEqual(lines.filter((l) => l["type"] === "item.moved").map((l) => [l["from"], l["to"], l["reason"], l["stranded"]]), [
        ["127.0.0.1:1", "127.0.0.1:1", "shard-lost", []]
      ])
      // The cut-off run's refusal is told again (it may not have reached anyone), nothing stranded.
      assert.deepStrictEqual(lines.filter((l) => l["type"] === "card.settled").map((l) => [l["card"], l["outcome"], l["replayed"]]), [
        ["rNow-00000001:c1", "refused", true]
      ])
      assert.strictEqual((yield* store.get("cut"))?.moves, 1)
      // A finished item's Run again is no move.
      assert.deepStrictEqual(yield* client.run("cut", { prompt: "go on" }), result)
      assert.strictEqual((yield* store.get("cut"))?.moves, 1)
    }).pipe(Effect.provide(setup(fake)))
  }, 60_000)

  it.scopedLive("a Run that joined a run cut off while stopping runs the item itself (a shard-lost move), never taking the cut as its reply", () => {
    const fake = FakeAppServer.make({ behaviour: { "thread/resume": (params) => ({ result: { thread: { id: params.threadId } } }) } })
    return Effect.gen(function*() {
      // The run this incarnation had: its row running, and in the runner's items a run that ends
      // without a result (interrupted: its shard let go of; the Run is delivered again before it stopped).
      const store = yield* ItemStore.ItemStore
      yield* store.claim("dying", { incarnation: "rNow-00000001", runner: "127.0.0.1:1", host: "host-a", codexHome: "/codex" }, false)
      yield* store.setThread("dying", "thr_dying")
      const cut = yield* Deferred.make<Wire.RunResult>()
      yield* Deferred.interrupt(cut)
      const localItems = yield* Handlers.LocalItems
      localItems.set("dying", { run: cut, nextSeq: 0 })
      const client = yield* ClusterClient.ClusterClient
      const result = yield* client.run("dying", { prompt: "go on" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag === "Completed") assert.deepStrictEqual([result.threadId, result.moves], ["thr_dying", 1])
      const lines = [...yield* client.events("dying").pipe(Stream.runCollect)].map((e) => e.line)
      assert.deepStrictEqual(lines.filter((l) => l["type"] === "item.redelivered" || l["type"] === "item.moved").map((l) => [l["type"], l["reason"]]), [
        ["item.redelivered", undefined],
        ["item.moved", "shard-lost"]
      ])
    }).pipe(Effect.provide(setup(fake)))
  }, 60_000)

  it.scopedLive("a thread held on another host fails the moved item thread-unreachable, with a readable reason; its open cards are stranded", () => {
    const fake = FakeAppServer.make({})
    return Effect.gen(function*() {
      const sql = yield* seedDeadIncarnation("far", "host-b")
      const client = yield* ClusterClient.ClusterClient
      const result = yield* client.run("far", { prompt: "go on" })
      assert.strictEqual(result._tag, "Failed")
      if (result._tag === "Failed") {
        assert.strictEqual(result.reason, "thread-unreachable")
        assert.strictEqual(result.threadId, "thr_old")
        assert.include(result.detail, "host host-b")
      }
      assert.strictEqual(fake.requestsSoFar().filter((r) => r.method.startsWith("thread/")).length, 0)
      const rows = yield* sql<{ outcome: string }>`SELECT outcome FROM warden_cluster_cards WHERE id = 'rOld-00000002:c1'`
      assert.strictEqual(rows[0]?.outcome, "stranded")
      assert.deepStrictEqual(yield* client.run("far", { prompt: "go on" }), result)
    }).pipe(Effect.provide(setup(fake, "host-a")))
  }, 60_000)

  it.scopedLive("a card of this runner answered through the entity settles once; Stop of a finished item changes nothing", () => {
    const fake = FakeAppServer.make({ turns: "manual" })
    return Effect.gen(function*() {
      const client = yield* ClusterClient.ClusterClient
      const run = yield* client.run("asks", { prompt: "do it" }).pipe(Effect.fork)
      const turn = yield* fake.nextRequest("turn/start")
      const threadId = String(turn.params.threadId)
      const requestId = yield* fake.request("item/commandExecution/requestApproval", { threadId, turnId: "turn_1", itemId: "call_1", command: "echo hi", cwd: "/tmp" })
      const opened = yield* client.events("asks").pipe(
        Stream.filter((e) => e.line["type"] === "card.opened"),
        Stream.runHead,
        Effect.flatten
      )
      const card = String(opened.line["card"])
      assert.isTrue(card.startsWith("rNow-00000001:"))
      assert.deepStrictEqual(yield* client.answer("asks", card, { _tag: "Decline" }), new Wire.Settled({ outcome: "declined" }))
      assert.deepStrictEqual((yield* fake.answerTo(requestId))["result"], { decision: "decline" })
      assert.deepStrictEqual(yield* client.answer("asks", card, { _tag: "Accept" }), new Wire.AlreadySettled({ outcome: "declined" }))
      yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "ok" })
      const result = yield* run.await.pipe(Effect.flatten)
      assert.strictEqual(result._tag, "Completed")
      yield* client.stop("asks")
      assert.deepStrictEqual(yield* client.run("asks", { prompt: "do it" }), result)
      assert.strictEqual(fake.answersSoFar().length, 1)
    }).pipe(Effect.provide(setup(fake)))
  }, 60_000)
})
