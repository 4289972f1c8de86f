/**
 * Issue 19's done-when, on this machine: a throwaway PostgreSQL, three `warden runner` processes
 * (each a supervisor over the pinned codex 0.171.0, one shared CODEX_HOME) and one `warden submit
 * --json --approvals stdin` with 30 work items against the ScriptedModel. Each item's lane is
 * `[exec, message]`: one command approval, answered through the one inbox (the submitter's
 * stdin), accepted on even items and declined on odd ones. One runner's cards are left open and
 * that runner is SIGKILLed: its items move to the survivors (the persisted `Run` redelivered),
 * resume their threads and complete (the re-run turn gets the lane's message); its open cards are
 * `stranded` exactly once, and a decision for one of them is `AlreadySettled`, written nowhere.
 * A few of the survivors' items may move between them too (the shards rebalance when a runner
 * leaves): they resume their threads on the other survivor, which the first one let go of. Under
 * load a survivor may also let go of its shards and take them back (a shard lock refresh slower
 * than the engine allows): its items stop and run again there, recorded as moves (`shard-lost`).
 * At the end: every item completed, every card exactly one settlement, no process left behind.
 */
import { assert, describe, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { ClusterClient, Invariants, Storage, Wire } from "@warden/cluster"
import { Ledger } from "@warden/ledger"
import * as Postgres from "@warden/test-support/Postgres"
import { ProcessTree, ScriptedModel, Step } from "@warden/testkit"
import { Context, Effect, Layer, Schedule } from "effect"
import { shardingTimings } from "@warden/test-support/ShardingTimings"
import * as CliProcess from "./support/CliProcess.js"
import { lastShards, shardingFlags, startRunner, submitArgs, until, untilEffect } from "./support/Fleet.js"
import * as Codex from "./support/Codex.js"

const ITEMS = 30
const lanes = Object.fromEntries(
  Array.from({ length: ITEMS }, (_, i) => [
    `i${i}`,
    [
      Step.execCommand({ cmd: `echo warden-cluster-${i}`, escalated: true, justification: "cluster test" }),
      Step.message(`done ${i}`)
    ]
  ])
)

/** The end of a process's output, for a failure message. */
const tail = (name: string, cli: CliProcess.Cli) =>
  `--- ${name} stdout:\n${cli.lines().slice(-15).join("\n")}\n--- ${name} stderr:\n${cli.stderr().slice(-2000)}`

describe("a fleet of three warden runners on PostgreSQL (real codex 0.171.0)", () => {
  it.scopedLive(
    "30 items, one approval each through the one inbox, a runner SIGKILLed with open cards: every item completes, every card settles once",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({ lanes })
        const pg = yield* Postgres.start()
        const runners: Array<{ cli: CliProcess.Cli; runId: string; address: string; codexPids: Array<number> }> = []
        for (let i = 0; i < 3; i++) {
          // --dead-after: the survivors sweep for dead runners every 10 s (a quarter of it).
          const runner = yield* startRunner({
            cluster: pg.url,
            launch: codex.launch,
            extra: ["--concurrency", "12", "--dead-after", "40s"]
          })
          runners.push({ ...runner, codexPids: [] })
          // One at a time: each joins once the ones before it hold every shard between them.
          yield* until(
            `${i + 1} runner(s) holding the 300 shards`,
            () =>
              runners.every((r) => lastShards(r.cli) > 0) && runners.reduce((n, r) => n + lastShards(r.cli), 0) === 300
          )
        }
        const victim = runners[2]!

        const started = Date.now()
        const submit = yield* CliProcess.spawn(
          submitArgs({
            cluster: pg.url,
            workspace: codex.launch.workspace,
            lanes: Array.from({ length: ITEMS }, (_, i) => `i${i}`)
          }),
          { env: codex.env }
        )
        const decisions = new Map<string, "accept" | "decline">()
        let killed = false
        const answerOpenCards = Effect.gen(function* () {
          for (const line of submit.json()) {
            if (line.type !== "card.opened") continue
            const card = String(line["card"])
            if (decisions.has(card)) continue
            if (!killed && line["runner"] === victim.address) continue // left open until the SIGKILL
            const decision = Number(line["item"]) % 2 === 0 ? "accept" : "decline"
            decisions.set(card, decision)
            yield* submit.write(`${JSON.stringify({ cardId: card, decision })}\n`)
          }
        })
        const openVictimCards = () =>
          submit
            .json()
            .filter((l) => l.type === "card.opened" && l["runner"] === victim.address)
            .map((l) => String(l["card"]))
        // Answer the others' cards as they open, until the victim holds at least two open cards.
        yield* until("two open cards on the victim", () => {
          Effect.runSync(answerOpenCards)
          return openVictimCards().length >= 2
        })
        const openAtKill = openVictimCards()
        // The ledger's writer is asynchronous: wait until the victim's open cards are in it, so the
        // ledger's side of "stranded once" is checked too (a card it never got is the fleet table's only).
        const ledgerContext = yield* Layer.build(Ledger.layer().pipe(Layer.provide(Storage.layer(pg.url))))
        const ledger = Context.get(ledgerContext, Ledger.Ledger)
        yield* untilEffect(
          "the victim's ledger to record its open cards",
          Effect.map(ledger.cards({ runId: victim.runId }), (cards) => cards.length >= openAtKill.length),
          { timeout: "60 seconds" }
        )
        victim.codexPids.push(...ProcessTree.descendants(victim.cli.pid))
        killed = true
        const killedAt = Date.now()
        process.kill(-victim.cli.pid, "SIGKILL")
        yield* victim.cli.exited("30 seconds")

        // Every new card (the survivors', the moved items') is answered; wait for the end.
        yield* until(
          "submit's run.finished",
          () => {
            Effect.runSync(answerOpenCards)
            return submit.json().some((l) => l.type === "run.finished")
          },
          "420 seconds",
          () => [tail("submit", submit), ...runners.map((r, i) => tail(`runner ${i}`, r.cli))].join("\n")
        )
        const ended = Date.now()
        const stranded = submit.json().find((l) => l.type === "card.settled" && l["outcome"] === "stranded")
        assert.isDefined(stranded, "a stranded settlement was reported")
        // The one inbox: the victim's cards were answered right after the SIGKILL, routed to the
        // item's new owner before or after the move: UnknownCard or AlreadySettled, never Settled.
        for (const l of submit
          .json()
          .filter((l) => l.type === "card.answer" && String(l["card"]).startsWith(`${victim.runId}:`))) {
          assert.include(
            ["UnknownCard", "AlreadySettled"],
            l["result"],
            `a decision for the dead runner's card ${l["card"]}`
          )
        }
        // A decision for a stranded card now, from another client of the fleet: AlreadySettled, nothing written.
        const clientContext = yield* Layer.build(
          ClusterClient.layer({ sharding: shardingTimings }).pipe(Layer.provide(Storage.layer(pg.url)))
        )
        const client = Context.get(clientContext, ClusterClient.ClusterClient)
        const late = yield* client.answer(String(stranded!["itemId"]), String(stranded!["card"]), { _tag: "Accept" })
        assert.deepStrictEqual(late, new Wire.AlreadySettled({ outcome: "stranded" }))
        const madeUp = yield* client.answer(String(stranded!["itemId"]), `${victim.runId}:c9999`, { _tag: "Accept" })
        assert.strictEqual(madeUp._tag, "UnknownCard")
        yield* submit.endStdin
        const exit = yield* submit.exited("60 seconds")
        const lines = submit.json()
        // On failure, say which items did not complete and how the run ended (stderr is often empty).
        const notCompleted = lines.filter(
          (l) => (l.type === "item.result" || l.type === "item.finished") && l["status"] !== "completed"
        )
        assert.deepStrictEqual(
          exit,
          { code: 0, signal: null },
          `${submit.stderr()}\n${JSON.stringify(notCompleted)}\n${JSON.stringify(lines.find((l) => l.type === "run.finished"))}`
        )

        // Every item completed, on its thread; the victim's moved and resumed theirs.
        const results = lines.filter((l) => l.type === "item.result")
        assert.strictEqual(results.length, ITEMS)
        for (const r of results) assert.strictEqual(r["status"], "completed", JSON.stringify(r))
        const moved = lines.filter((l) => l.type === "item.moved")
        assert.isTrue(
          moved.some((m) => m["from"] === victim.address),
          "items moved off the victim"
        )
        // Some may also move between the survivors: the engine caps each runner at 300/N shards
        // (effect's HashRing.getShards), so when N changes a few shards move between live runners
        // too. Such an item is stopped on the one survivor, which lets go of its thread there, and
        // resumed on the other (docs/scaling.md, "Engine behaviour worth knowing").
        for (const m of moved)
          assert.include(
            runners.map((r) => r.address),
            m["from"],
            JSON.stringify(m)
          )
        // A moved item whose thread existed on the runner it left resumed that thread on the one it
        // went to (one that moved before its thread was made starts one on its new owner).
        for (const m of moved) {
          const had = lines.find(
            (l) =>
              (l.type === "thread.ready" || l.type === "thread.resumed") &&
              l["item"] === m["item"] &&
              l["runner"] === m["from"]
          )
          if (had === undefined) continue
          const resumed = lines.filter(
            (l) => l.type === "thread.resumed" && l["item"] === m["item"] && l["runner"] === m["to"]
          )
          assert.isAbove(resumed.length, 0, `item ${m["item"]} resumed its thread on ${m["to"]}`)
          for (const r of resumed)
            assert.strictEqual(r["threadId"], had["threadId"], `item ${m["item"]} resumed its own thread`)
        }
        assert.isTrue(
          moved.some((m) => lines.some((l) => l.type === "thread.resumed" && l["item"] === m["item"])),
          "some moved item resumed its thread"
        )
        // Every move says why: another incarnation held the item (shard-moved), or its own runner let
        // go of the item's shard and took it back (shard-lost: a lock refresh too slow under load),
        // or stopped it itself when its hold on the shard was last confirmed too long ago and ran it
        // again once confirmed (lease-lost): those two are moves from the runner to itself.
        for (const m of moved) {
          assert.include(["shard-moved", "shard-lost", "lease-lost"], m["reason"], JSON.stringify(m))
          assert.strictEqual(m["reason"] !== "shard-moved", m["from"] === m["to"], JSON.stringify(m))
        }
        /**
         * Whether the card's item moved away from the runner that opened the card: to another runner,
         * or back to the same one (its run stopped there when the shard was let go of).
         */
        const movedAwayFrom = (item: string, incarnation: string) => {
          const from = runners.find((r) => r.runId === incarnation)?.address
          // The submitter's lines name an item by its index (`item`) and its id (`itemId`); storage by its id.
          return moved.some((m) => m["itemId"] === item && m["from"] === from)
        }

        // Storage: every card has exactly one settlement. Every card the victim recorded (including
        // one it recorded just before the SIGKILL, which no one saw open) is stranded; none was answered.
        const context = yield* Layer.build(Storage.layer(pg.url))
        const sql = Context.get(context, SqlClient.SqlClient)
        const rows = yield* sql<{
          id: string
          item_id: string
          incarnation: string
          outcome: string | null
          source: string | null
        }>`SELECT id, item_id, incarnation, outcome, source FROM warden_cluster_cards`
        const opened = new Set(lines.filter((l) => l.type === "card.opened").map((l) => String(l["card"])))
        for (const card of opened)
          assert.isTrue(
            rows.some((r) => r.id === card),
            `card ${card} is stored`
          )
        const victimCards = rows.filter((r) => r.incarnation === victim.runId).map((r) => r.id)
        assert.isAtLeast(victimCards.length, openAtKill.length)
        for (const r of rows) {
          assert.isNotNull(r.outcome, r.id)
          if (r.incarnation === victim.runId) assert.strictEqual(r.outcome, "stranded", r.id)
          else {
            // The card of an item that moved off a survivor (to the other one, or back to the same
            // one, shard-lost): refused there when its turn was interrupted (TurnEnded) or its thread
            // stopped (ThreadStopped), whatever was decided; it may have been refused before the
            // submitter's inbox saw it open. Such a refusal without a recorded move fails below.
            if (
              r.outcome === "refused" &&
              (r.source === "TurnEnded" || r.source === "ThreadStopped") &&
              movedAwayFrom(r.item_id, r.incarnation)
            )
              continue
            assert.isTrue(opened.has(r.id), `a survivor's card ${r.id} was seen open`)
            assert.strictEqual(
              r.outcome,
              decisions.get(r.id) === "accept" ? "accepted" : "declined",
              `${r.id} (item ${r.item_id}, source ${r.source}, moves ${JSON.stringify(moved.filter((m) => m["itemId"] === r.item_id))})\n` +
                `the item's lines: ${JSON.stringify(lines.filter((l) => l["itemId"] === r.item_id).map(({ ts: _, ...l }) => l)).slice(0, 6000)}\n` +
                runners
                  .map(
                    (x, i) =>
                      `runner ${i} (${x.runId}): ${x.cli
                        .stderr()
                        .split("\n")
                        .filter((l) => /unhealthy|recovered|shard|interrupt/i.test(l) || l.includes(r.item_id))
                        .slice(-20)
                        .join("\n")}\n  ${x.cli
                        .lines()
                        .filter((l) => l.includes("runner.shards"))
                        .slice(-8)
                        .join("\n  ")}`
                  )
                  .join("\n")
            )
          }
        }
        // The property-test invariants over the recorded lines (1: one settlement per card, stranded
        // only for the dead runner's; 2: no acceptance without an accepting decision; 4: typed ends).
        const settled = lines.filter((l) => l.type === "card.settled")
        assert.deepStrictEqual(
          Invariants.check({
            lines,
            decisions: new Map([...decisions].map(([card, d]) => [card, d === "accept" ? "Accept" : "Decline"])),
            dead: [victim.runId],
            items: results.map((r) => Number(r["item"]))
          }),
          []
        )
        for (const l of settled.filter((l) => l["outcome"] === "accepted")) assert.strictEqual(l["source"], "person")
        // The ledger on the same database (each runner is one ledger run): no card left open in any
        // run; the victim's recorded cards are all stranded, once; the survivors' match the inbox.
        const victimLedger = yield* ledger.cards({ runId: victim.runId })
        assert.isAtLeast(victimLedger.length, openAtKill.length)
        for (const c of victimLedger) assert.strictEqual(c.settlement?.outcome, "stranded", `${c.cardId} in the ledger`)
        for (const c of victimLedger) assert.isTrue(victimCards.includes(`${victim.runId}:${c.cardId}`), c.cardId)
        assert.strictEqual((yield* ledger.accounting(victim.runId)).open, 0)
        // The victim's ledger run is recorded crashed by a survivor (its process is gone from this
        // host), which says so; the survivors' runs are still running.
        yield* untilEffect(
          "the victim's ledger run recorded crashed",
          Effect.map(ledger.runs("crashed"), (runs) => runs.some((r) => r.runId === victim.runId)),
          { timeout: "120 seconds", every: "500 millis" }
        )
        const running = (yield* ledger.runs("running")).map((r) => r.runId)
        for (const r of runners.slice(0, 2)) assert.include(running, r.runId)
        assert.isTrue(
          runners
            .slice(0, 2)
            .some((r) => r.cli.stderr().includes(`its ledger run ${victim.runId} is recorded crashed (process-gone)`)),
          "a survivor said why it recorded the victim's run crashed"
        )

        // The model saw each accepted command's output, and no declined command's.
        const requests = yield* codex.model.requests
        for (const l of settled.filter(
          (l) =>
            (l["outcome"] === "accepted" || l["outcome"] === "declined") && !victimCards.includes(String(l["card"]))
        )) {
          const item = Number(l["item"]) - 1
          const outputs = requests
            .filter((r) => r.lane === `i${item}`)
            .flatMap((r) => ScriptedModel.functionCallOutputs(r).map((o) => JSON.stringify(o)))
          const ran = outputs.some((o) => o.includes(`warden-cluster-${item}`))
          assert.strictEqual(ran, l["outcome"] === "accepted", `item ${item + 1}: ${l["outcome"]}`)
        }

        // Measurements for docs/scaling.md.
        const latencies = settled
          .filter((l) => typeof l["latencyMs"] === "number")
          .map((l) => Number(l["latencyMs"]))
          .sort((a, b) => a - b)
        yield* Effect.log(
          `cluster-real: ${ITEMS} items in ${ended - started} ms (${(ITEMS / ((ended - started) / 60_000)).toFixed(1)} items/min); ` +
            `failover: all ended ${ended - killedAt} ms after the SIGKILL; ${moved.length} moved (${moved.filter((m) => m["reason"] === "shard-lost").length} shard-lost, ${moved.filter((m) => m["reason"] === "lease-lost").length} lease-lost; ` +
            `the engine's "Shard lock storage is unhealthy" ${runners.map((r) => r.cli.stderr().split("Shard lock storage is unhealthy").length - 1).join("/")} times per runner), ${victimCards.length} stranded; ` +
            `card latency (opened → settled) median ${latencies[Math.floor(latencies.length / 2)]} ms, max ${latencies[latencies.length - 1]} ms`
        )

        // `warden fleet`: the runners that registered, every item completed, no open card.
        // The survivors are live (heartbeats younger than the lock expiry, by the database's clock);
        // the SIGKILLed runner stops being live once its last heartbeat is older (or leaves the table).
        type RunnerView = { address: string; live: boolean; heartbeatAgeSeconds: number; shards: number | null }
        const fleetView = CliProcess.runToEnd(["fleet", "--cluster", pg.url, "--json", ...shardingFlags], {
          env: codex.env
        }).pipe(
          Effect.tap((f) => assert.deepStrictEqual(f.exited, { code: 0, signal: null }, f.stderr)),
          Effect.map((f) => JSON.parse(f.stdout.join("\n")))
        )
        const view = yield* fleetView.pipe(
          Effect.flatMap((v) =>
            (v.runners as Array<RunnerView>).some((r) => r.address === victim.address && r.live)
              ? Effect.fail(new Error(`the SIGKILLed runner still live: ${JSON.stringify(v.runners)}`))
              : Effect.succeed(v)
          ),
          Effect.retry({ schedule: Schedule.spaced("1 second"), times: 60 })
        )
        const seen = new Map((view.runners as Array<RunnerView>).map((r) => [r.address, r]))
        for (const r of runners.slice(0, 2)) {
          assert.isTrue(seen.get(r.address)?.live, JSON.stringify(view.runners))
          // Advisory locks (this fleet's default) live in the runners' sessions: not countable here.
          assert.isNull(seen.get(r.address)?.shards)
        }
        assert.strictEqual(
          view.items
            .filter((r: { status: string }) => r.status === "completed")
            .reduce((n: number, r: { count: number }) => n + r.count, 0),
          ITEMS
        )
        assert.deepStrictEqual(view.openCards, [])
        // A secret-looking prompt is refused before anything is stored (exit 2).
        const refused = yield* CliProcess.runToEnd(
          ["submit", "--cluster", pg.url, "--json", "deploy with token ghp_0123456789abcdefghijABCDEFGHIJ012345"],
          { env: codex.env }
        )
        assert.strictEqual(refused.exited.code, 2, refused.stderr)
        assert.include(refused.stderr, "--allow-secrets-in-storage")

        // No process left behind: the victim's codex ended with it; the survivors stop on SIGTERM.
        yield* until(
          "the victim's codex gone",
          () => victim.codexPids.every((pid) => !ProcessTree.isAlive(pid)),
          "60 seconds"
        )
        for (const r of runners.slice(0, 2)) {
          r.codexPids.push(...ProcessTree.descendants(r.cli.pid))
          process.kill(-r.cli.pid, "SIGTERM")
          const e = yield* r.cli.exited("60 seconds")
          assert.notStrictEqual(e.signal, "SIGKILL")
        }
        // Stopped runners flushed their ledger runs: every card they opened settled there once, as stored.
        for (const r of runners.slice(0, 2)) {
          const cards = yield* ledger.cards({ runId: r.runId })
          assert.strictEqual((yield* ledger.accounting(r.runId)).open, 0, r.runId)
          for (const c of cards) {
            const row = rows.find((x) => x.id === `${r.runId}:${c.cardId}`)
            assert.strictEqual(c.settlement?.outcome, row?.outcome, `${r.runId}:${c.cardId}`)
          }
        }
        yield* until(
          "every runner's codex gone",
          () => runners.every((r) => r.codexPids.every((pid) => !ProcessTree.isAlive(pid))),
          "60 seconds"
        )
      }),
    900_000
  )
})
