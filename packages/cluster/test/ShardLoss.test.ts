/**
 * A runner that stays alive loses its shards and gets them back (issue 27, item 2). The engine
 * refreshes a runner's shard locks every `min(shardLockRefreshInterval, shardLockExpiration / 3)`
 * and gives each refresh that long: a refresh slower than that (a loaded host, a slow database)
 * marks the runner's lock storage unhealthy, and the runner lets go of every shard it holds
 * (interrupting their entities), then takes them back once a refresh succeeds again. Here the
 * refresh is made slow on purpose: the test holds the runner's `cluster_runners` row locked
 * (`SELECT ... FOR UPDATE`), so the heartbeat `UPDATE` each refresh starts with waits, until the
 * item's open card has been refused; then it lets go.
 *
 * What a user must see: the item is stopped and restarted on the same runner, and that restart is
 * a move like any other (`item.moved` from the runner to itself, reason `shard-lost`; the stored
 * row and the result count it), every line of the restarted run reaches the submitter, and the
 * refused card corresponds to that move.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { ClusterClient, Invariants, Storage } from "@warden/cluster"
import type { Wire } from "@warden/cluster"
import { Context, Deferred, Effect, Fiber, Layer, Stream } from "effect"
import * as Path from "node:path"
import { untilEffect } from "@warden/test-support/Polling"
import * as Postgres from "@warden/test-support/Postgres"
import { shardingTimings } from "@warden/test-support/ShardingTimings"
import { killedAfterAll } from "@warden/test-support/KilledAfterAll"
import { spawnListening } from "@warden/test-support/Processes"

const runnerScript = Path.join("packages", "cluster", "test", "fixtures", "runner.ts")

/**
 * The tests' timings, but a heartbeat that stays valid for 60 s: the refresh still gets 3 s
 * (`shardLockRefreshInterval`), and the runner stays in the ring while its row is held, so its
 * shards come back to it (not to another runner) once the refresh succeeds again.
 */
const timings = { ...shardingTimings, shardLockExpiration: "60 seconds" } as const

const started = killedAfterAll()

describe("a runner whose shard lock refresh is too slow (PostgreSQL)", () => {
  it.live(
    "loses its shards and gets them back: the item's restart is a recorded move, its refused card matches it, the submitter sees every line",
    () =>
      Effect.gen(function* () {
        const pg = yield* Postgres.start()
        started.add(pg.pid)
        const { proc: runner, ready } = yield* spawnListening(
          runnerScript,
          { WARDEN_CLUSTER_URL: pg.url, WARDEN_RUNNER_NAME: "only", WARDEN_RUNNER_SHARDING: JSON.stringify(timings) },
          {
            portVariable: "WARDEN_RUNNER_PORT",
            what: "the runner ready",
            ready: (l) => l.type === "runner.ready",
            timeout: "120 seconds",
            spawned: (pid) => started.add(pid)
          }
        )
        const address = String(ready["address"])
        yield* runner.waitForJson(
          "the runner holds every shard",
          (l) => l.type === "runner.shards" && l.count === 300,
          "120 seconds"
        )

        const context = yield* Layer.build(
          ClusterClient.layer({ sharding: timings }).pipe(Layer.provideMerge(Storage.layer(pg.url)))
        )
        const client = Context.get(context, ClusterClient.ClusterClient)
        const sql = Context.get(context, SqlClient.SqlClient)

        // What the submitter sees (`ClusterClient.follow`, as `warden submit` reads it).
        const lines: Array<Wire.ItemEvent["line"]> = []
        const decisions = new Map<string, string>()
        let answering = false
        const answer = (card: string) =>
          Effect.gen(function* () {
            if (decisions.has(card)) return
            decisions.set(card, "Accept")
            yield* client.answer("held", card, { _tag: "Accept" })
          })
        const follower = yield* client.follow("held").pipe(
          Stream.runForEach((e) =>
            Effect.gen(function* () {
              lines.push({ ...e.line, runner: e.runner, incarnation: e.incarnation })
              if (answering && e.line["type"] === "card.opened") yield* answer(String(e.line["card"]))
            })
          ),
          Effect.fork
        )
        const run = yield* client.run("held", { prompt: "do it" }).pipe(Effect.fork)
        const describeState = () =>
          `lines: ${JSON.stringify(lines)}\n--- runner stdout:\n${runner.lines().slice(-20).join("\n")}\n--- stderr:\n${runner.stderr().slice(-3000)}`
        const cardRows = sql<{ id: string; outcome: string | null; source: string | null }>`
        SELECT id, outcome, source FROM warden_cluster_cards WHERE item_id = 'held' ORDER BY opened_at, id`
        yield* untilEffect(
          "the item's first card open",
          Effect.sync(() => lines.some((l) => l["type"] === "card.opened")),
          { timeout: "120 seconds", context: describeState }
        )
        const firstCard = String(lines.find((l) => l["type"] === "card.opened")!["card"])

        // The runner's heartbeat row held: its next shard lock refresh waits past its 3 s.
        const locked = yield* Deferred.make<number>()
        const release = yield* Deferred.make<void>()
        const holder = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql`SELECT address FROM cluster_runners WHERE address = ${address} FOR UPDATE`
              yield* Deferred.succeed(locked, rows.length)
              yield* Deferred.await(release)
            })
          )
          .pipe(Effect.fork)
        expect(yield* Deferred.await(locked)).toBe(1)
        // The runner lets go of its shards: the running item is stopped, its open card refused.
        yield* untilEffect(
          "the open card refused while the refresh waits",
          Effect.map(cardRows.pipe(Effect.orDie), (rows) => rows.some((r) => r.id === firstCard && r.outcome !== null)),
          { timeout: "120 seconds", context: describeState }
        )
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)

        // The shards come back to the same runner; the item runs again there. Every card is accepted now.
        answering = true
        for (const l of lines.filter((l) => l["type"] === "card.opened" && String(l["card"]) !== firstCard))
          yield* answer(String(l["card"]))
        yield* untilEffect(
          "the restarted run's card seen by the submitter",
          Effect.sync(() => lines.some((l) => l["type"] === "card.opened" && String(l["card"]) !== firstCard)),
          { timeout: "120 seconds", context: describeState }
        )
        const result = yield* Fiber.join(run).pipe(
          Effect.timeoutFail({
            duration: "120 seconds",
            onTimeout: () => new Error(`the item did not end\n${describeState()}`)
          })
        )
        yield* Fiber.join(follower).pipe(
          Effect.timeoutFail({
            duration: "60 seconds",
            onTimeout: () => new Error(`the item's lines did not end\n${describeState()}`)
          })
        )

        // The runner never went away: one incarnation, one address.
        expect(new Set(lines.map((l) => l["incarnation"]))).toEqual(new Set([String(ready["runId"])]))
        const rows = yield* cardRows
        const first = rows.find((r) => r.id === firstCard)!
        expect(first.outcome, JSON.stringify(rows)).toBe("refused")
        // Refused by the supervisor as the run stopped: its turn interrupted (TurnEnded) or its thread stopped (ThreadStopped).
        expect(["ThreadStopped", "TurnEnded"]).toContain(first.source)
        // The refused card corresponds to a recorded move, from this runner back to itself.
        const moved = lines.filter((l) => l["type"] === "item.moved")
        expect(
          moved.map((l) => ({ from: l["from"], to: l["to"], reason: l["reason"], stranded: l["stranded"] })),
          describeState()
        ).toEqual([{ from: address, to: address, reason: "shard-lost", stranded: [] }])
        expect(lines.filter((l) => l["type"] === "item.placed").length).toBe(2)
        expect(result._tag, JSON.stringify(result)).toBe("Completed")
        if (result._tag === "Completed") {
          expect(result.moves).toBe(1)
          // The restart resumed the item's thread.
          expect(result.threadId).toBe(String(lines.find((l) => l["type"] === "thread.ready")!["threadId"]))
        }
        expect(lines.some((l) => l["type"] === "thread.resumed")).toBe(true)
        const item = yield* sql<{
          status: string
          moves: number
        }>`SELECT status, moves FROM warden_cluster_items WHERE id = 'held'`
        expect(item.map((r) => ({ status: r.status, moves: Number(r.moves) }))).toEqual([
          { status: "completed", moves: 1 }
        ])
        // The refusal reached the submitter (told again by the restarted run if the first line was
        // cut off with the stream); the restarted run's card was answered.
        expect(
          new Set(lines.filter((l) => l["type"] === "card.settled" && l["card"] === firstCard).map((l) => l["outcome"]))
        ).toEqual(new Set(["refused"]))
        expect(rows.filter((r) => r.id !== firstCard).map((r) => r.outcome)).toEqual(["accepted"])
        expect(Invariants.check({ lines, decisions, dead: [], items: ["held"] })).toEqual([])
        yield* runner.stop
      }).pipe(Effect.scoped),
    300_000
  )
})
