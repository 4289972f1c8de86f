/**
 * The fleet's mechanics with real processes: a throwaway PostgreSQL, two runner processes (each a
 * supervisor over a fake app-server, `fixtures/runner.ts`), and a client in this process. Every
 * turn asks one approval. The survivor's cards are answered through the one inbox; the victim's
 * are left open, then the victim is SIGKILLed. Its items move to the survivor (persisted `Run`
 * redelivered), resume their threads, and complete; its open cards are `stranded` exactly once;
 * a decision for a stranded card is `AlreadySettled`, one for a made-up id `UnknownCard`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { ClusterClient, Invariants, Storage, Wire } from "@warden/cluster"
import * as Postgres from "@warden/test-support/Postgres"
import { ProcessTree } from "@warden/testkit"
import { Context, Effect, Fiber, Layer, Stream } from "effect"
import * as Path from "node:path"
import { shardingTimings } from "@warden/test-support/ShardingTimings"
import type { Proc } from "@warden/test-support/Processes"
import { killedAfterAll } from "@warden/test-support/KilledAfterAll"
import { freePort, spawnTsx } from "@warden/test-support/Processes"
import { until } from "@warden/test-support/Polling"

const runnerScript = Path.join("packages", "cluster", "test", "fixtures", "runner.ts")

/** Every process group this file started, SIGKILLed in afterAll whatever happened. */
const started = killedAfterAll()

const lastShards = (p: Proc) => {
  const lines = p.json().filter((l) => l.type === "runner.shards")
  return lines.length === 0 ? 0 : Number(lines[lines.length - 1]!.count)
}

/** Bounded wait on a condition over state that has no event of its own (output of two processes). */
const runner = (url: string, name: string, port: number) =>
  Effect.gen(function* () {
    const p = yield* spawnTsx(runnerScript, {
      WARDEN_CLUSTER_URL: url,
      WARDEN_RUNNER_PORT: String(port),
      WARDEN_RUNNER_NAME: name
    })
    started.add(p.pid)
    const ready = yield* p.waitForJson(`${name} ready`, (l) => l.type === "runner.ready", "120 seconds")
    return { proc: p, runId: String(ready["runId"]), address: String(ready["address"]), name }
  })

describe("a fleet of two runners on PostgreSQL", () => {
  it.live(
    "SIGKILL of a runner with open cards: items move and complete, its cards are stranded once, decisions for them write nothing",
    () =>
      Effect.gen(function* () {
        const pg = yield* Postgres.start()
        started.add(pg.pid)
        const a = yield* runner(pg.url, "a", yield* freePort)
        yield* a.proc.waitForJson(
          "a holds every shard",
          (l) => l.type === "runner.shards" && l.count === 300,
          "120 seconds"
        )
        const b = yield* runner(pg.url, "b", yield* freePort)
        yield* until(
          "the shards split between a and b",
          () => lastShards(a.proc) > 0 && lastShards(b.proc) > 0 && lastShards(a.proc) + lastShards(b.proc) === 300,
          "120 seconds"
        )
        const runners = [a, b]

        // The client notices a dead runner on the runners' timings (@warden/test-support/ShardingTimings, theirs too).
        const context = yield* Layer.build(
          ClusterClient.layer({ sharding: shardingTimings }).pipe(Layer.provideMerge(Storage.layer(pg.url)))
        )
        const client = Context.get(context, ClusterClient.ClusterClient)
        const sql = Context.get(context, SqlClient.SqlClient)

        const items = Array.from({ length: 8 }, (_, i) => `item-${i}`)
        /** Every distinct event line seen, per item (de-duplicated by incarnation and seq). */
        const seen = new Map<string, Map<string, Wire.ItemEvent>>(items.map((id) => [id, new Map()]))
        const lines = (id: string) => [...seen.get(id)!.values()].map((e) => e.line)
        const all = () => items.flatMap((id) => lines(id))
        /** When each line reached this process (for the failover timeline logged at the end). */
        const arrivedAt = new Map<Wire.ItemEvent, number>()
        let answerEverything = false
        const answered = new Map<string, { decision: string; result: Wire.AnswerWire }>()
        let victimAddress: string | undefined

        const onEvent = (id: string, event: Wire.ItemEvent) =>
          Effect.gen(function* () {
            if (event.seq < 0) return // a snapshot
            const key = `${event.incarnation}/${event.seq}`
            if (seen.get(id)!.has(key)) return
            seen.get(id)!.set(key, event)
            arrivedAt.set(event, Date.now())
            const line = event.line
            if (line["type"] !== "card.opened") return
            const card = String(line["card"])
            if (!answerEverything && line["runner"] === victimAddress) return
            if (!answerEverything && victimAddress === undefined) return // answered once the victim is chosen
            yield* answer(id, card)
          })

        const answer = (id: string, card: string) =>
          Effect.gen(function* () {
            if (answered.has(card)) return
            // Accept on even items, decline on odd ones: both end the turn.
            const decision: "Accept" | "Decline" = Number(id.split("-")[1]) % 2 === 0 ? "Accept" : "Decline"
            answered.set(card, { decision, result: new Wire.UnknownCard({ cardId: card }) })
            const result = yield* client.answer(id, card, { _tag: decision })
            answered.set(card, { decision, result })
          })

        const followers = yield* Effect.forEach(items, (id) =>
          // Followed across runners: a stream cut by its runner's death is made again (the history is replayed).
          client.follow(id).pipe(
            Stream.runForEach((e) => onEvent(id, e)),
            Effect.fork
          )
        )
        const runs = yield* Effect.forEach(items, (id) => client.run(id, { prompt: `task ${id}` }).pipe(Effect.fork))

        // Every item has its first card open (the fake completes a turn only once its card is answered).
        yield* until(
          "a card open on every item",
          () => items.every((id) => lines(id).some((l) => l["type"] === "card.opened")),
          "120 seconds"
        )
        const placement = new Map(
          items.map((id) => [id, String(lines(id).find((l) => l["type"] === "card.opened")!["runner"])])
        )
        const count = (address: string) => [...placement.values()].filter((r) => r === address).length
        const victim = count(a.address) >= count(b.address) ? a : b
        const survivor = victim === a ? b : a
        victimAddress = victim.address
        const victimItems = items.filter((id) => placement.get(id) === victim.address)
        const survivorItems = items.filter((id) => placement.get(id) === survivor.address)
        expect(victimItems.length).toBeGreaterThan(0)
        // The survivor's cards are answered now, through the one inbox.
        for (const id of survivorItems) {
          for (const l of lines(id)) if (l["type"] === "card.opened") yield* answer(id, String(l["card"]))
        }
        const victimCards = victimItems.map((id) => String(lines(id).find((l) => l["type"] === "card.opened")!["card"]))
        for (const card of victimCards) expect(card.startsWith(`${victim.runId}:`)).toBe(true)

        // SIGKILL the victim while its cards are open; from now on every new card is answered.
        answerEverything = true
        const killedAt = Date.now()
        yield* victim.proc.kill
        expect(ProcessTree.isAlive(victim.proc.pid)).toBe(false)

        const results = yield* Effect.forEach(runs, (f) => Fiber.join(f))
        yield* Effect.forEach(followers, (f) => Fiber.join(f))
        const after = (type: string) =>
          [...arrivedAt]
            .filter(
              ([e]) =>
                e.line["type"] === type &&
                e.incarnation === survivor.runId &&
                victimItems.includes(String(e.line["item"]))
            )
            .map(([, t]) => t - killedAt)
        yield* Effect.log(
          `victim ${victim.name} held ${victimItems.length} of ${items.length} items; after the SIGKILL: first item.moved +${Math.min(...after("item.moved"))} ms, ` +
            `last +${Math.max(...after("item.moved"))} ms; first moved card +${Math.min(...after("card.opened"))} ms; all ended +${Date.now() - killedAt} ms`
        )

        // Every item completed; the victim's items moved once, to the survivor, and resumed their threads.
        for (const [i, result] of results.entries()) {
          const id = items[i]!
          expect(result._tag, `${id}: ${JSON.stringify(result)}`).toBe("Completed")
          if (result._tag !== "Completed") continue
          expect(result.moves).toBe(victimItems.includes(id) ? 1 : 0)
          const ls = lines(id)
          if (victimItems.includes(id)) {
            const moved = ls.filter((l) => l["type"] === "item.moved")
            expect(moved.length).toBe(1)
            expect(moved[0]!["to"]).toBe(survivor.address)
            expect(moved[0]!["stranded"]).toEqual([victimCards[victimItems.indexOf(id)]])
            const resumed = ls.filter((l) => l["type"] === "thread.resumed")
            const ready = ls.find((l) => l["type"] === "thread.ready")!
            expect(resumed.map((l) => l["threadId"])).toEqual([ready["threadId"]])
            expect(result.threadId).toBe(ready["threadId"])
          } else {
            expect(ls.some((l) => l["type"] === "item.moved")).toBe(false)
          }
        }

        // The one inbox: a decision for a stranded card is AlreadySettled (nothing written); a made-up id is UnknownCard.
        const strandedItem = victimItems[0]!
        const late = yield* client.answer(strandedItem, victimCards[0]!, { _tag: "Accept" })
        expect(late).toEqual(new Wire.AlreadySettled({ outcome: "stranded" }))
        const madeUp = yield* client.answer(strandedItem, `${victim.runId}:c9999`, { _tag: "Accept" })
        expect(madeUp._tag).toBe("UnknownCard")
        const foreign = yield* client.answer(survivorItems[0] ?? strandedItem, victimCards[0]!, { _tag: "Accept" })
        expect(foreign._tag).toBe(survivorItems.length > 0 ? "UnknownCard" : "AlreadySettled")

        // Storage: every card settled exactly once; every card the victim recorded (one it recorded
        // just before the SIGKILL may never have been seen open) is stranded, nothing else is.
        const rows = yield* sql<{
          id: string
          item_id: string
          incarnation: string
          outcome: string | null
          source: string | null
        }>`
        SELECT id, item_id, incarnation, outcome, source FROM warden_cluster_cards ORDER BY id`
        const opened = new Set(
          all()
            .filter((l) => l["type"] === "card.opened")
            .map((l) => String(l["card"]))
        )
        for (const card of opened)
          expect(
            rows.some((r) => r.id === card),
            card
          ).toBe(true)
        for (const card of victimCards) expect(rows.find((r) => r.id === card)?.outcome).toBe("stranded")
        for (const row of rows) {
          expect(row.outcome, row.id).not.toBeNull()
          if (row.incarnation === victim.runId) expect(row.outcome, row.id).toBe("stranded")
          else expect(row.outcome).toBe(answered.get(row.id)?.decision === "Accept" ? "accepted" : "declined")
        }

        // The property-test invariants over the recorded lines (1, 2, 4).
        expect(
          Invariants.check({
            lines: all(),
            decisions: new Map([...answered].map(([card, a]) => [card, a.decision])),
            dead: [victim.runId],
            items
          })
        ).toEqual([])
        for (const l of all().filter((l) => l["type"] === "card.settled" && l["outcome"] === "accepted"))
          expect(l["source"]).toBe("person")
        for (const [card, { result }] of answered) {
          if (!card.startsWith(`${victim.runId}:`)) expect(result._tag, card).toBe("Settled")
        }
        const itemRows = yield* sql<{
          id: string
          status: string
          moves: number
        }>`SELECT id, status, moves FROM warden_cluster_items ORDER BY id`
        expect(itemRows.map((r) => r.status)).toEqual(items.map(() => "completed"))

        // No process left: the survivor stops on SIGTERM; PostgreSQL stops with the scope.
        const exit = yield* survivor.proc.stop
        expect(exit.signal === null || exit.signal === "SIGTERM").toBe(true)
        for (const r of runners) expect(ProcessTree.isAlive(r.proc.pid)).toBe(false)
      }).pipe(Effect.scoped),
    300_000
  )

  it.live(
    "SIGTERM of a runner with open cards: it refuses them itself, its items move and complete, nothing is stranded",
    () =>
      Effect.gen(function* () {
        const pg = yield* Postgres.start()
        started.add(pg.pid)
        const a = yield* runner(pg.url, "a", yield* freePort)
        yield* a.proc.waitForJson(
          "a holds every shard",
          (l) => l.type === "runner.shards" && l.count === 300,
          "120 seconds"
        )
        const b = yield* runner(pg.url, "b", yield* freePort)
        yield* until(
          "the shards split between a and b",
          () => lastShards(a.proc) > 0 && lastShards(b.proc) > 0 && lastShards(a.proc) + lastShards(b.proc) === 300,
          "120 seconds"
        )
        const context = yield* Layer.build(
          ClusterClient.layer({ sharding: shardingTimings }).pipe(Layer.provideMerge(Storage.layer(pg.url)))
        )
        const client = Context.get(context, ClusterClient.ClusterClient)
        const sql = Context.get(context, SqlClient.SqlClient)

        const items = Array.from({ length: 6 }, (_, i) => `drain-${i}`)
        const seen = new Map<string, Map<string, Wire.ItemEvent>>(items.map((id) => [id, new Map()]))
        const lines = (id: string) => [...seen.get(id)!.values()].map((e) => e.line)
        const all = () => items.flatMap((id) => lines(id))
        const answered = new Map<string, string>()
        let leavingAddress: string | undefined
        let stopped = false
        const answer = (id: string, card: string) =>
          Effect.gen(function* () {
            if (answered.has(card)) return
            answered.set(card, "Accept")
            yield* client.answer(id, card, { _tag: "Accept" })
          })
        const followers = yield* Effect.forEach(items, (id) =>
          client.follow(id).pipe(
            Stream.runForEach((event) =>
              Effect.gen(function* () {
                if (event.seq < 0) return
                const key = `${event.incarnation}/${event.seq}`
                if (seen.get(id)!.has(key)) return
                seen.get(id)!.set(key, event)
                if (event.line["type"] !== "card.opened") return
                if (!stopped && (leavingAddress === undefined || event.line["runner"] === leavingAddress)) return
                yield* answer(id, String(event.line["card"]))
              })
            ),
            Effect.fork
          )
        )
        const runs = yield* Effect.forEach(items, (id) => client.run(id, { prompt: `task ${id}` }).pipe(Effect.fork))
        yield* until(
          "a card open on every item",
          () => items.every((id) => lines(id).some((l) => l["type"] === "card.opened")),
          "120 seconds"
        )
        const placement = new Map(
          items.map((id) => [id, String(lines(id).find((l) => l["type"] === "card.opened")!["runner"])])
        )
        const count = (address: string) => [...placement.values()].filter((r) => r === address).length
        const leaving = count(a.address) >= count(b.address) ? a : b
        const staying = leaving === a ? b : a
        leavingAddress = leaving.address
        const leavingItems = items.filter((id) => placement.get(id) === leaving.address)
        for (const id of items.filter((id) => placement.get(id) === staying.address)) {
          for (const l of lines(id)) if (l["type"] === "card.opened") yield* answer(id, String(l["card"]))
        }
        const leavingCards = leavingItems.map((id) =>
          String(lines(id).find((l) => l["type"] === "card.opened")!["card"])
        )

        // SIGTERM to the runner (tsx passes it on to the runner's node process once).
        stopped = true
        process.kill(leaving.proc.pid, "SIGTERM")
        const exit = yield* leaving.proc.exited("90 seconds")
        expect(exit.signal === null || exit.signal === "SIGTERM", JSON.stringify(exit)).toBe(true)

        const results = yield* Effect.forEach(runs, (f) => Fiber.join(f))
        yield* Effect.forEach(followers, (f) => Fiber.join(f))
        for (const [i, result] of results.entries()) {
          expect(result._tag, `${items[i]}: ${JSON.stringify(result)}`).toBe("Completed")
          if (result._tag === "Completed") expect(result.moves).toBe(leavingItems.includes(items[i]!) ? 1 : 0)
        }
        // The leaving runner refused its own cards before it went; the move found nothing to strand.
        const rows = yield* sql<{ id: string; outcome: string | null }>`SELECT id, outcome FROM warden_cluster_cards`
        for (const card of leavingCards) {
          const outcome = rows.find((r) => r.id === card)?.outcome
          expect(["refused", "shutdown"], `${card}: ${outcome}`).toContain(outcome)
        }
        for (const id of leavingItems) {
          const moved = lines(id).filter((l) => l["type"] === "item.moved")
          expect(moved.map((l) => l["stranded"])).toEqual([[]])
        }
        expect(rows.filter((r) => r.outcome === "stranded")).toEqual([])
        expect(Invariants.check({ lines: all(), decisions: answered, dead: [], items })).toEqual([])
        yield* staying.proc.stop
        for (const r of [a, b]) expect(ProcessTree.isAlive(r.proc.pid)).toBe(false)
      }).pipe(Effect.scoped),
    300_000
  )
})
