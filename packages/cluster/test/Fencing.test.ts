/**
 * At most one runner drives an item, also when a runner is paused past its hold on its shards
 * and wakes up still believing it owns them. Two runner processes (`fixtures/runner.ts`, a fake
 * app-server each) on a throwaway PostgreSQL; the victim's items each hold an open card; the
 * victim is stopped with SIGSTOP, a decision to accept each of its cards is sent while it sleeps,
 * and sent again right after SIGCONT.
 *
 * With table locks (`shardLockDisableAdvisory`) the survivor takes the victim's shards once their
 * locks expire, strands its open cards and runs its items; with advisory locks (held by the
 * paused process's live database session) nobody can take them, and the victim stops its items
 * itself on waking (its own lease ran out) and runs them again once its hold is confirmed.
 *
 * Either way, over every stored row and every line the submitter saw: each card has exactly one
 * settlement; a card the victim held when it was paused is never accepted (codex is never told
 * to accept it); every write is signed by the runner that held the item under the epoch it names,
 * so the paused runner wrote nothing for an item after another took it; each item has exactly one
 * result, and the result's moves are the stored row's and the recorded moves.
 *
 * Every invariant is checked and each broken one listed. The advisory-lock scenario runs a second
 * time with the ownership checks off in both runners (`OwnershipChecks`): the list must then name
 * the held cards accepted to codex; with the checks on it must be empty.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { ClusterClient, Invariants, Storage, Wire } from "@warden/cluster"
import { untilEffect } from "@warden/test-support/Polling"
import * as Postgres from "@warden/test-support/Postgres"
import { Context, Effect, Fiber, Layer, Schema, Stream } from "effect"
import * as Path from "node:path"
import { killedAfterAll } from "@warden/test-support/KilledAfterAll"
import type { Proc } from "@warden/test-support/Processes"
import { spawnListening } from "@warden/test-support/Processes"
import { shardingTimings } from "@warden/test-support/ShardingTimings"

const runnerScript = Path.join("packages", "cluster", "test", "fixtures", "runner.ts")

const started = killedAfterAll()

const lastShards = (p: Proc) => {
  const lines = p.json().filter((l) => l.type === "runner.shards")
  return lines.length === 0 ? 0 : Number(lines[lines.length - 1]!.count)
}

const decodeResult = Schema.decodeUnknownSync(Schema.parseJson(Wire.RunResult))

const pausedPastItsLease = (name: string, disableAdvisory: boolean, checks = true) =>
  it.live(
    checks
      ? `${name}: a runner paused past its lease with open cards never accepts them on waking; every card settles once, every item ends once`
      : `${name}, the ownership checks off in both runners: the runner woken past its lease accepts its held cards to codex, and the invariants say so`,
    () =>
      Effect.gen(function* () {
        const timings = { ...shardingTimings, shardLockDisableAdvisory: disableAdvisory }
        const pg = yield* Postgres.start()
        started.add(pg.pid)
        const runner = (label: string) =>
          Effect.gen(function* () {
            const { proc, ready } = yield* spawnListening(
              runnerScript,
              {
                WARDEN_CLUSTER_URL: pg.url,
                WARDEN_RUNNER_NAME: label,
                WARDEN_RUNNER_SHARDING: JSON.stringify(timings),
                ...(checks ? {} : { WARDEN_RUNNER_OWNERSHIP_CHECKS: "off" })
              },
              {
                portVariable: "WARDEN_RUNNER_PORT",
                what: `${label} ready`,
                ready: (l) => l.type === "runner.ready",
                timeout: "120 seconds",
                spawned: (pid) => started.add(pid)
              }
            )
            return { proc, runId: String(ready["runId"]), address: String(ready["address"]), name: label }
          })
        const a = yield* runner("a")
        yield* a.proc.waitForJson(
          "a holds every shard",
          (l) => l.type === "runner.shards" && l.count === 300,
          "120 seconds"
        )
        const b = yield* runner("b")
        const describeState = () =>
          [a, b]
            .map(
              (r) =>
                `--- ${r.name} stdout:\n${r.proc.lines().slice(-15).join("\n")}\n--- ${r.name} stderr:\n${r.proc.stderr().slice(-2500)}`
            )
            .join("\n")
        yield* untilEffect(
          "the shards split between a and b",
          Effect.sync(
            () => lastShards(a.proc) > 0 && lastShards(b.proc) > 0 && lastShards(a.proc) + lastShards(b.proc) === 300
          ),
          { context: describeState }
        )

        const context = yield* Layer.build(
          ClusterClient.layer({ sharding: timings }).pipe(Layer.provideMerge(Storage.layer(pg.url)))
        )
        const client = Context.get(context, ClusterClient.ClusterClient)
        const sql = Context.get(context, SqlClient.SqlClient)

        const items = Array.from({ length: 6 }, (_, i) => `fence-${i}`)
        /** Every distinct line the submitter saw, per item (by incarnation and seq). */
        const seen = new Map<string, Map<string, Wire.ItemEvent>>(items.map((id) => [id, new Map()]))
        const events = (id: string) => [...seen.get(id)!.values()]
        const lines = (id: string) => events(id).map((e) => e.line)
        const all = () => items.flatMap(lines)
        /** The cards held open on the victim when it was paused: never answered until then. */
        const held = new Set<string>()
        let answering = false
        const decisions = new Map<string, string>()
        const answer = (id: string, card: string) =>
          Effect.gen(function* () {
            if (decisions.has(card) || held.has(card)) return
            decisions.set(card, "Accept")
            yield* client.answer(id, card, { _tag: "Accept" })
          })
        const followers = yield* Effect.forEach(items, (id) =>
          client.follow(id).pipe(
            Stream.runForEach((event) =>
              Effect.gen(function* () {
                const key = `${event.incarnation}/${event.seq}`
                if (seen.get(id)!.has(key)) return
                seen.get(id)!.set(key, event)
                if (answering && event.line["type"] === "card.opened") yield* answer(id, String(event.line["card"]))
              })
            ),
            Effect.fork
          )
        )
        const runs = yield* Effect.forEach(items, (id) => client.run(id, { prompt: `task ${id}` }).pipe(Effect.fork))

        yield* untilEffect(
          "a card open on every item",
          Effect.sync(() => items.every((id) => lines(id).some((l) => l["type"] === "card.opened"))),
          { context: describeState }
        )
        const placement = new Map(
          items.map((id) => [id, String(lines(id).find((l) => l["type"] === "card.opened")!["runner"])])
        )
        const count = (address: string) => [...placement.values()].filter((r) => r === address).length
        const victim = count(a.address) >= count(b.address) ? a : b
        const survivor = victim === a ? b : a
        const victimItems = items.filter((id) => placement.get(id) === victim.address)
        expect(victimItems.length).toBeGreaterThan(0)
        /** Per victim item: its held card, and the thread and turn codex asked it in (on the victim's fake). */
        const victimCards = new Map(
          victimItems.map((id) => {
            // The card's own line names the thread and turn it was asked in (no other line needed:
            // under load an activation of the item may have been let go of and taken back).
            const opened = events(id).find((e) => e.incarnation === victim.runId && e.line["type"] === "card.opened")!
            const card = String(opened.line["card"])
            return [id, { card, threadId: String(opened.line["threadId"]), turnId: String(opened.line["turnId"]) }]
          })
        )
        for (const { card } of victimCards.values()) held.add(card)
        // The survivor's cards are answered now, and every card opened from now on (the victim's held ones excepted).
        answering = true
        for (const id of items)
          for (const l of lines(id)) if (l["type"] === "card.opened") yield* answer(id, String(l["card"]))

        // Paused: no timers, no refreshes, no reading of its sockets. Woken again whatever happens.
        yield* Effect.acquireRelease(
          Effect.sync(() => process.kill(-victim.proc.pid, "SIGSTOP")),
          () =>
            Effect.sync(() => {
              try {
                process.kill(-victim.proc.pid, "SIGCONT")
              } catch {
                // gone
              }
            })
        )
        /** What each decision for a held card got back (sent while the victim sleeps, and again after it wakes). */
        const lateAnswers: Array<{ card: string; result: Wire.AnswerWire | string }> = []
        const sendHeld = Effect.forEach(
          [...victimCards],
          ([id, { card }]) =>
            client.answer(id, card, { _tag: "Accept" }).pipe(
              Effect.timeoutFail({ duration: "200 seconds", onTimeout: () => "not delivered" }),
              Effect.catchAll((e) => Effect.succeed(typeof e === "string" ? e : `failed: ${JSON.stringify(e)}`)),
              Effect.map((result) => void lateAnswers.push({ card, result }))
            ),
          { concurrency: "unbounded" }
        )
        for (const { card } of victimCards.values()) decisions.set(card, "Accept")
        const whileAsleep = yield* Effect.fork(sendHeld)

        // Paused past its lease: its heartbeat older than the lock expiration (the database's clock).
        yield* untilEffect(
          "the victim's heartbeat older than shardLockExpiration",
          sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM cluster_runners
          WHERE address = ${victim.address} AND last_heartbeat < NOW() - INTERVAL '10 seconds'`.pipe(
            Effect.map((rows) => Number(rows[0]?.n ?? 0) === 1),
            Effect.orDie
          ),
          { context: describeState }
        )
        const cardRows = sql<{
          id: string
          item_id: string
          incarnation: string
          outcome: string | null
          source: string | null
          epoch: unknown
          settled_by: string | null
          settled_epoch: unknown
        }>`
        SELECT id, item_id, incarnation, outcome, source, epoch, settled_by, settled_epoch FROM warden_cluster_cards ORDER BY opened_at, id`.pipe(
          Effect.orDie
        )
        if (disableAdvisory) {
          // Table locks expire: the survivor takes the victim's shards, and strands the held cards.
          yield* untilEffect(
            "the survivor holding the victim's items, their held cards stranded",
            Effect.map(cardRows, (rows) =>
              [...victimCards.values()].every(({ card }) => rows.find((r) => r.id === card)?.outcome === "stranded")
            ),
            { context: describeState }
          )
        }

        process.kill(-victim.proc.pid, "SIGCONT")
        const afterWaking = yield* Effect.fork(sendHeld)

        const results = yield* Effect.forEach(runs, (f) =>
          Fiber.join(f).pipe(
            Effect.timeoutFail({
              duration: "240 seconds",
              onTimeout: () => new Error(`an item did not end\n${JSON.stringify(all())}\n${describeState()}`)
            })
          )
        )
        // The victim dealt with each held card's request on waking (the answer its codex got).
        const toldVictim = (threadId: string, turnId: string) =>
          victim.proc
            .json()
            .filter((l) => l.type === "fake.answer" && l["threadId"] === threadId && l["turnId"] === turnId)
        yield* untilEffect(
          "the victim's codex answered about every held card",
          Effect.sync(() =>
            [...victimCards.values()].every(({ threadId, turnId }) => toldVictim(threadId, turnId).length > 0)
          ),
          { context: describeState }
        )
        yield* Fiber.join(whileAsleep)
        yield* Fiber.join(afterWaking)
        yield* Effect.forEach(followers, (f) =>
          Fiber.join(f).pipe(
            Effect.timeoutFail({
              duration: "90 seconds",
              onTimeout: () => new Error(`lines did not end\n${describeState()}`)
            })
          )
        )

        // Every invariant below is checked and each broken one said (not stopped at the first): the
        // variant with the ownership checks off must break some, the others none.
        const violations: Array<string> = []
        const check = (holds: boolean, what: string) => {
          if (!holds) violations.push(what)
        }
        const said = (v: unknown) => JSON.stringify(v)

        // The held cards: never accepted, by anyone; codex was never told to accept them.
        const rows = yield* cardRows
        for (const [id, { card, threadId, turnId }] of victimCards) {
          const row = rows.find((r) => r.id === card)
          check(
            row?.outcome === "stranded" || (row?.outcome === "refused" && !disableAdvisory),
            `held card ${card} of ${id}: ${disableAdvisory ? "stranded" : "stranded or refused"}, not ${said(row?.outcome)}`
          )
          for (const r of [a, b]) {
            for (const told of r.proc
              .json()
              .filter((l) => l.type === "fake.answer" && l["threadId"] === threadId && l["turnId"] === turnId)) {
              check(
                !said(told["answer"]).includes('"accept'),
                `held card ${card}: ${r.name}'s codex was told ${said(told["answer"])}`
              )
            }
          }
        }
        for (const { card, result } of lateAnswers) {
          // Answered from storage (or by a runner that no longer drives the item): never a settlement.
          check(
            (typeof result === "string" ? result : result._tag) !== "Settled",
            `a late decision for held card ${card} settled it: ${said(result)}`
          )
        }

        // Every card has exactly one settlement, made by the runner that held its item under the
        // epoch the settlement names; every card was opened under its opener's epoch.
        const claims = yield* sql<{
          item_id: string
          epoch: unknown
          incarnation: string
          from_incarnation: string | null
          reason: string | null
        }>`
        SELECT item_id, epoch, incarnation, from_incarnation, reason FROM warden_cluster_claims ORDER BY item_id, epoch`.pipe(
          Effect.orDie
        )
        const holderOf = (item: string, epoch: unknown) =>
          claims.find((c) => c.item_id === item && Number(c.epoch) === Number(epoch))?.incarnation
        for (const row of rows) {
          check(row.outcome !== null, `${row.id} never settled`)
          check(holderOf(row.item_id, row.epoch) === row.incarnation, `${row.id} opened under epoch ${row.epoch}`)
          check(
            holderOf(row.item_id, row.settled_epoch) === row.settled_by,
            `${row.id} settled by ${row.settled_by} under epoch ${row.settled_epoch}`
          )
        }
        // The paused runner wrote nothing for an item after another runner took it from it: it
        // settled no card of it (its held card was stranded by the taker) and opened none after.
        if (disableAdvisory) {
          for (const [id, { card }] of victimCards) {
            const taken = claims.find(
              (c) => c.item_id === id && c.from_incarnation === victim.runId && c.incarnation !== victim.runId
            )
            check(taken !== undefined, `${id} taken from the victim`)
            if (taken === undefined) continue
            const itsRows = rows.filter((r) => r.item_id === id)
            const settledByVictim = itsRows
              .filter((r) => r.settled_by === victim.runId && Number(r.settled_epoch) <= Number(taken.epoch))
              .map((r) => r.id)
            check(settledByVictim.length === 0, `${id}: the victim settled ${said(settledByVictim)} after losing it`)
            const openedByVictim = itsRows
              .filter((r) => r.incarnation === victim.runId && Number(r.epoch) < Number(taken.epoch))
              .map((r) => r.id)
            check(said(openedByVictim) === said([card]), `${id}: the victim opened ${said(openedByVictim)}`)
          }
        }

        // Each item ended once: the submitter's result is the stored one, its moves the row's and the recorded moves.
        const itemRows = yield* sql<{
          id: string
          status: string
          moves: unknown
          turns_done: unknown
          result: string | null
          epoch: unknown
          incarnation: string
        }>`
        SELECT id, status, moves, turns_done, result, epoch, incarnation FROM warden_cluster_items ORDER BY id`.pipe(
          Effect.orDie
        )
        for (const [i, result] of results.entries()) {
          const id = items[i]!
          const row = itemRows.find((r) => r.id === id)!
          check(result._tag === "Completed", `${id}: ${said(result)}`)
          check(row.status === "completed", `${id}: stored ${row.status}`)
          check(said(decodeResult(row.result)) === said(result), `${id}: stored result ${row.result}`)
          check(
            holderOf(id, row.epoch) === row.incarnation,
            `${id}: ended under epoch ${row.epoch} by ${row.incarnation}`
          )
          // One prompt, one turn done: a stale runner's turn would have counted twice.
          check(Number(row.turns_done) === 1, `${id}: ${row.turns_done} turns done`)
          const moves = claims.filter((c) => c.item_id === id && c.reason !== null)
          if (result._tag === "Completed")
            check(
              result.moves === moves.length && Number(row.moves) === moves.length,
              `${id}: moves told ${result.moves}, stored ${row.moves}, recorded ${moves.length}`
            )
          // Every move the submitter was told of is a stored one (same epoch, same reason). It may
          // miss one: a runner's lines are replayed per activation, and an activation that ended
          // before the follower reached it (a shard handed on at once) takes its lines with it.
          for (const l of lines(id).filter((l) => l["type"] === "item.moved")) {
            check(
              moves.some((c) => Number(c.epoch) === Number(l["epoch"]) && c.reason === l["reason"]),
              `${id}: told of a move not stored: ${said(l)}`
            )
          }
          // The victim's items moved (taken, or let go of when its lease ran out and taken back).
          if (victimItems.includes(id)) check(moves.length > 0, `${id}: held by the victim, never moved`)
        }

        // What the submitter saw: one settlement per card, no acceptance without a decision, every item ended.
        violations.push(...Invariants.check({ lines: all(), decisions, dead: [victim.runId], items }))
        for (const [id, { card }] of victimCards) {
          const settled = lines(id).filter((l) => l["type"] === "card.settled" && l["card"] === card)
          check(settled.length > 0, `${card} settled in the lines`)
          for (const l of settled) check(l["outcome"] !== "accepted", `held card ${card} settled accepted in the lines`)
        }
        yield* Effect.log(
          `${name}: victim ${victim.name} held ${victimItems.length} items; moves ${JSON.stringify(claims.filter((c) => c.reason !== null).map((c) => [c.item_id, c.reason]))}; ` +
            `held cards ${JSON.stringify(rows.filter((r) => held.has(r.id)).map((r) => [r.id, r.outcome, r.settled_by === victim.runId ? "victim" : "survivor"]))}; ` +
            `late answers ${JSON.stringify(lateAnswers.map((l) => (typeof l.result === "string" ? l.result : l.result._tag + ("outcome" in l.result ? `(${l.result.outcome})` : ""))))}; violations ${said(violations)}`
        )
        if (checks) expect(violations).toEqual([])
        else {
          // The checks off: the runner that woke past its lease accepted its held card to codex.
          expect(violations.length, "the ownership checks off broke no invariant").toBeGreaterThan(0)
          expect(
            violations.some((v) => v.startsWith("held card") && v.includes("codex was told")),
            said(violations)
          ).toBe(true)
        }
        yield* survivor.proc.stop
        yield* victim.proc.stop
      }).pipe(Effect.scoped),
    420_000
  )

describe("fencing: a runner paused past its hold on its shards (PostgreSQL)", () => {
  pausedPastItsLease("table locks", true)
  pausedPastItsLease("advisory locks", false)
  // Fencing deliberately broken: the same scenario must then break the invariants above. With
  // advisory locks nobody can take the paused runner's shards, so the decisions sent while it
  // sleeps reach it (the fleet routes to it) and are read on waking, past its lease, every time.
  pausedPastItsLease("advisory locks", false, false)
})
