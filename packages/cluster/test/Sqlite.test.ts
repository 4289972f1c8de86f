/**
 * One host, durable, without PostgreSQL: a runner on a SQLite file (`sqlite:PATH`) is SIGKILLed
 * while an item has an open card; a new runner on the same file takes the shards back once the
 * old locks expire, and the item resumes its thread there and completes; the old card is
 * stranded once.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { ClusterClient, Invariants, Storage } from "@warden/cluster"
import type { Wire } from "@warden/cluster"
import { Context, Effect, Fiber, Layer, Stream } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { shardingTimings } from "@warden/test-support/ShardingTimings"
import { killedAfterAll } from "@warden/test-support/KilledAfterAll"
import { spawnListening } from "@warden/test-support/Processes"

const runnerScript = Path.join("packages", "cluster", "test", "fixtures", "runner.ts")

const started = killedAfterAll()

describe("a runner on SQLite (one host)", () => {
  it.live(
    "SIGKILLed with a card open: a new runner on the same file resumes the item, the card is stranded once",
    () =>
      Effect.gen(function* () {
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-sqlite-fleet-"))),
          (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
        )
        const url = `sqlite:${Path.join(dir, "fleet.db")}`
        const spawnRunner = (name: string) =>
          Effect.gen(function* () {
            const { proc: p, ready } = yield* spawnListening(
              runnerScript,
              { WARDEN_CLUSTER_URL: url, WARDEN_RUNNER_NAME: name },
              {
                portVariable: "WARDEN_RUNNER_PORT",
                what: `${name} ready`,
                ready: (l) => l.type === "runner.ready",
                timeout: "120 seconds",
                spawned: (pid) => started.add(pid)
              }
            )
            yield* p.waitForJson(
              `${name} holds every shard`,
              (l) => l.type === "runner.shards" && l.count === 300,
              "120 seconds"
            )
            return { proc: p, runId: String(ready["runId"]) }
          })
        const first = yield* spawnRunner("first")
        /** The first runner's cards are left open; every other card is accepted as it arrives. */
        const firstRunId = first.runId
        const context = yield* Layer.build(
          ClusterClient.layer({ sharding: shardingTimings }).pipe(Layer.provideMerge(Storage.layer(url)))
        )
        const client = Context.get(context, ClusterClient.ClusterClient)
        const sql = Context.get(context, SqlClient.SqlClient)

        const lines: Array<Wire.ItemEvent["line"]> = []
        const decisions = new Map<string, string>()
        let cardsOpened = 0
        let wake: (() => void) | undefined
        const follower = yield* client.follow("solo").pipe(
          Stream.runForEach((e) =>
            Effect.gen(function* () {
              lines.push(e.line)
              if (e.line["type"] !== "card.opened") return
              cardsOpened++
              wake?.()
              if (e.incarnation === firstRunId) return
              decisions.set(String(e.line["card"]), "Accept")
              yield* client.answer("solo", String(e.line["card"]), { _tag: "Accept" })
            })
          ),
          Effect.fork
        )
        const run = yield* client.run("solo", { prompt: "do it" }).pipe(Effect.fork)
        yield* Effect.async<void>((resume) => {
          wake = () => resume(Effect.void)
          if (cardsOpened > 0) resume(Effect.void)
        }).pipe(Effect.timeout("120 seconds"))
        const firstCard = String(lines.find((l) => l["type"] === "card.opened")!["card"])
        yield* first.proc.kill

        const second = yield* spawnRunner("second")
        const result = yield* Fiber.join(run).pipe(
          Effect.timeoutFail({
            duration: "180 seconds",
            onTimeout: () =>
              new Error(`the item did not end\n${JSON.stringify(lines)}\n${second.proc.stderr().slice(-2000)}`)
          })
        )
        yield* Fiber.join(follower).pipe(
          Effect.timeoutFail({
            duration: "60 seconds",
            onTimeout: () => new Error(`the item's lines did not end\n${JSON.stringify(lines)}`)
          })
        )
        expect(result._tag, JSON.stringify(result)).toBe("Completed")
        if (result._tag === "Completed") {
          expect(result.moves).toBe(1)
          expect(result.threadId).toBe(String(lines.find((l) => l["type"] === "thread.ready")!["threadId"]))
        }
        expect(lines.filter((l) => l["type"] === "item.moved").map((l) => l["stranded"])).toEqual([[firstCard]])
        expect(lines.some((l) => l["type"] === "thread.resumed")).toBe(true)
        const rows = yield* sql<{
          id: string
          outcome: string | null
        }>`SELECT id, outcome FROM warden_cluster_cards ORDER BY opened_at`
        expect(rows.map((r) => r.outcome)).toEqual(["stranded", "accepted"])
        expect(Invariants.check({ lines, decisions, dead: [first.runId], items: ["solo"] })).toEqual([])
        yield* second.proc.stop
      }).pipe(Effect.scoped),
    300_000
  )
})
