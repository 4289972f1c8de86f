/**
 * The fleet across hosts, with a nemesis (issue 30, item 3), tested as Jepsen tests: several hosts
 * on this machine (Linux network namespaces on one bridge, `@warden/test-support/Hosts`), each
 * with its own address and its own codex home; PostgreSQL on a host of its own (table locks,
 * `shardLockDisableAdvisory=true`, as docs/scaling.md says to run across hosts); two `warden
 * runner` processes (the pinned codex 0.171.0 against one ScriptedModel this process serves on the
 * network's gateway); `warden submit --json --approvals stdin` on a fifth host. Every item's lane
 * is one command approval, then a message.
 *
 * Each scenario opens every item's card, leaves them open, then does one harm to the runner that
 * holds most of them (the victim), or to the submitter; the person then answers every card
 * (accept on even items, decline on odd ones), and the harm ends when the scenario says so. After
 * it, over every JSON line and every stored row:
 *
 * - each card has exactly one settlement (lines and `warden_cluster_cards`), `stranded` only for
 *   the victim's; no acceptance without the person's accept;
 * - each item has exactly one result, and it completed;
 * - no thread was driven by two app-servers at once: in the model's request log, an item's lane
 *   is served to one host, then maybe another, never back (the requests carry their host's address);
 * - no process and no namespace is left.
 */
import { assert, describe, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { ClusterClient, Invariants, Storage } from "@warden/cluster"
import * as Hosts from "@warden/test-support/Hosts"
import * as Postgres from "@warden/test-support/Postgres"
import { ProcessTree, RealCodex, ScriptedModel, Step } from "@warden/testkit"
import { Context, Effect, Fiber, Layer, Stream } from "effect"
import * as CliProcess from "./support/CliProcess.js"
import { lastShards, shardingFlags, startRunner, unclaimedDrivers, until } from "./support/Fleet.js"
import { shardingTimings } from "@warden/test-support/ShardingTimings"

const ITEMS = 6
/** Table locks: a lost host's locks expire (advisory locks would stay with its dead session). */
const fleetFlags = [...shardingFlags, "--sharding", "shardLockDisableAdvisory=true"]

type Harm = "kill" | "lose-host" | "pause" | "cut-from-store" | "cut-submitter"

const tail = (name: string, cli: CliProcess.Cli) =>
  `--- ${name} stdout:\n${cli.lines().slice(-12).join("\n")}\n--- ${name} stderr:\n${cli.stderr().slice(-1500)}`

const scenario = (harm: Harm) =>
  Effect.gen(function* () {
    const net = yield* Hosts.network(["store", "a", "b", "submitter"])
    const { a, b, store, submitter } = net.hosts as Record<string, Hosts.Host>
    const lanes = Object.fromEntries(
      Array.from({ length: ITEMS }, (_, i) => [
        `i${i}`,
        [
          Step.execCommand({ cmd: `echo warden-hosts-${i}`, escalated: true, justification: "hosts test" }),
          Step.message(`done ${i}`)
        ]
      ])
    )
    // One item more, from a client of the fleet in this process: its first turn tells the model a
    // word; its second opens a card. The harm is done to the runner holding that card.
    const history = "history"
    const model = yield* ScriptedModel.make(
      {
        lanes: {
          ...lanes,
          [history]: [
            Step.message("first answer: PELICAN noted"),
            Step.execCommand({ cmd: "echo warden-history", escalated: true, justification: "hosts test" }),
            Step.message("second turn done")
          ]
        }
      },
      { host: net.gateway }
    )
    const pg = yield* Postgres.start({ on: store! })
    const url = pg.networkUrl!
    // The test's own store client: one pool, patient with a machine busy enough to hold this
    // process's event loop for seconds.
    const storage = Storage.layer(pg.url, { connectTimeout: "60 seconds" })
    const sql = Context.get(yield* Layer.build(storage), SqlClient.SqlClient)

    const runnerOn = (host: Hosts.Host) =>
      Effect.gen(function* () {
        const launch = yield* RealCodex.make({ baseUrl: model.baseUrl })
        const started = yield* startRunner({
          cluster: url,
          launch,
          listen: `${host.address}:7100`,
          // Table locks; every item at once, the history item too, whichever runner holds them.
          extra: ["--sharding", "shardLockDisableAdvisory=true", "--concurrency", String(ITEMS + 1)],
          on: host
        })
        return { host, launch, ...started }
      })
    const first = yield* runnerOn(a!)
    yield* until("runner a holding the 300 shards", () => lastShards(first.cli) === 300)
    const second = yield* runnerOn(b!)
    const runners = [first, second]
    yield* until(
      "both runners holding shards",
      () =>
        lastShards(first.cli) > 0 &&
        lastShards(second.cli) > 0 &&
        lastShards(first.cli) + lastShards(second.cli) === 300
    )
    const context = () => [...runners.map((r) => tail(`runner ${r.host.name}`, r.cli))].join("\n")

    const clientContext = yield* Layer.build(
      ClusterClient.layer({ sharding: { ...shardingTimings, shardLockDisableAdvisory: true } }).pipe(
        Layer.provide(storage)
      )
    )
    const client = Context.get(clientContext, ClusterClient.ClusterClient)
    const historyLines: Array<Record<string, unknown>> = []
    const historyFollower = yield* client.follow(history).pipe(
      Stream.runForEach((e) => Effect.sync(() => historyLines.push(e.line))),
      Effect.forkScoped
    )
    const historyRun = yield* client
      .run(history, {
        prompt: `${ScriptedModel.laneMarker(history)} remember the word PELICAN`,
        followUps: [`${ScriptedModel.laneMarker(history)} now run the command`],
        cwd: first.launch.workspace,
        sandbox: "workspace-write"
      })
      .pipe(Effect.forkScoped)

    const prompts = Array.from({ length: ITEMS }, (_, i) => `${ScriptedModel.laneMarker(`i${i}`)} run the command`)
    const submit = yield* CliProcess.spawn(
      [
        "submit",
        "--cluster",
        url,
        "--json",
        "--approvals",
        "stdin",
        "--cwd",
        first.launch.workspace,
        "--sandbox",
        "workspace-write",
        ...fleetFlags,
        ...prompts
      ],
      { env: first.launch.env, on: submitter! }
    )
    const everything = () => `${tail("submit", submit)}\n${context()}`
    const opened = () => submit.json().filter((l) => l.type === "card.opened")
    yield* until(`every item's card open (${ITEMS})`, () => opened().length >= ITEMS, "180 seconds", everything)
    const historyCard = () => historyLines.find((l) => l["type"] === "card.opened")
    yield* until(
      "the history item's card open (its second turn)",
      () => historyCard() !== undefined,
      "120 seconds",
      everything
    )
    const byRunner = (r: (typeof runners)[number]) => opened().filter((l) => l["runner"] === r.address).length
    // A lost host: the one holding the history item (its thread must move with its history);
    // otherwise the runner with more of the submitted cards.
    const victim =
      harm === "lose-host"
        ? runners.find((r) => r.address === historyCard()!["runner"])!
        : byRunner(first) >= byRunner(second)
          ? first
          : second
    const survivor = victim === first ? second : first
    const victimCodex = ProcessTree.descendants(victim.cli.pid)

    // The harm, with the cards still open.
    let heal: Effect.Effect<void, unknown> = Effect.void
    switch (harm) {
      case "kill":
        process.kill(-victim.cli.pid, "SIGKILL")
        break
      case "lose-host":
        yield* victim.host.isolate
        break
      case "pause":
        process.kill(-victim.cli.pid, "SIGSTOP")
        heal = Effect.sync(() => process.kill(-victim.cli.pid, "SIGCONT"))
        break
      case "cut-from-store":
        yield* victim.host.cutFrom(store!)
        heal = victim.host.healFrom(store!)
        break
      case "cut-submitter":
        yield* submitter!.isolate
        heal = submitter!.reconnect
        break
    }
    const harmedAt = Date.now()
    yield* Effect.log(
      `${harm}: victim ${victim.host.name} (${byRunner(victim)} open cards), survivor ${survivor.host.name}`
    )

    // The person answers every card as it opens (decisions for the victim's too, which must not hold up the others).
    const decisions = new Map<string, "accept" | "decline">()
    const answer = () => {
      for (const line of opened()) {
        const card = String(line["card"])
        if (decisions.has(card)) continue
        const decision = Number(line["item"]) % 2 === 0 ? "accept" : "decline"
        decisions.set(card, decision)
        Effect.runFork(submit.write(`${JSON.stringify({ cardId: card, decision })}\n`))
      }
    }
    const historyCardId = String(historyCard()!["card"])
    decisions.set(historyCardId, "accept")
    const historyAnswer = yield* client
      .answer(history, historyCardId, { _tag: "Accept" })
      .pipe(Effect.timeout("120 seconds"), Effect.either, Effect.forkScoped)
    if (harm === "kill" || harm === "lose-host") {
      // The harm lasts: the survivor takes the victim's shards once their locks expire.
      yield* until(
        "the survivor holding the 300 shards",
        () => lastShards(survivor.cli) === 300,
        "120 seconds",
        everything
      )
      if (harm === "lose-host") process.kill(-victim.cli.pid, "SIGTERM")
    } else {
      // Longer than the lease: the victim must let go, and the survivor may take its shards.
      yield* until(
        "25 s of harm",
        () => {
          answer()
          return Date.now() - harmedAt >= 25_000
        },
        "60 seconds"
      )
      yield* heal
    }
    yield* until(
      "submit's run.finished",
      () => {
        answer()
        return submit.json().some((l) => l.type === "run.finished")
      },
      "300 seconds",
      everything
    )
    const historyExit = yield* Fiber.await(historyRun).pipe(Effect.timeout("120 seconds"))
    assert.isTrue(
      historyExit._tag === "Success",
      `the history item's run: ${String(historyExit)}\n${JSON.stringify(historyLines.map(({ ts: _, ...l }) => l))}\n${everything()}`
    )
    const historyResult = historyExit._tag === "Success" ? historyExit.value : (undefined as never)
    // The follower ends once it has the item's end, from whichever runner ended it; a follower
    // that sat on the runner cut from the store catches up only after that runner let go of the
    // item, possibly after the run returned (its lines, the stranded card's settlement among them,
    // are checked below).
    yield* Fiber.join(historyFollower).pipe(
      Effect.timeoutFail({
        duration: "120 seconds",
        onTimeout: () =>
          new Error(
            `the history item's follower did not reach its end\n${JSON.stringify(historyLines.map(({ ts: _, ...l }) => l))}`
          )
      })
    )
    yield* Fiber.join(historyAnswer)
    yield* Effect.log(`${harm}: run finished ${Date.now() - harmedAt} ms after the harm`)
    yield* submit.endStdin
    const exited = yield* submit.exited("60 seconds")
    const lines = submit.json()
    assert.deepStrictEqual(exited, { code: 0, signal: null }, everything())

    // Each item exactly one result, completed.
    const results = lines.filter((l) => l.type === "item.result")
    assert.sameMembers(
      results.map((r) => Number(r["item"])),
      Array.from({ length: ITEMS }, (_, i) => i + 1),
      JSON.stringify(results)
    )
    for (const r of results) assert.strictEqual(r["status"], "completed", JSON.stringify(r))

    // Each card one settlement (lines), stranded only the victim's, no acceptance without an accept.
    const harmedRunner = harm === "cut-submitter" ? [] : [victim.runId]
    const storedCards =
      yield* sql`SELECT id, item_id, incarnation, outcome, source, settled_epoch FROM warden_cluster_cards`
    const storedItems = yield* sql`SELECT * FROM warden_cluster_claims ORDER BY claimed_at`
    assert.deepStrictEqual(
      Invariants.check({
        lines: [...lines, ...historyLines.filter((l) => String(l["type"]).startsWith("card."))],
        decisions: new Map([...decisions].map(([card, d]) => [card, d === "accept" ? "Accept" : "Decline"])),
        dead: harmedRunner,
        items: results.map((r) => Number(r["item"]))
      }),
      [],
      `cards: ${JSON.stringify(storedCards)}\nclaims: ${JSON.stringify(storedItems)}\nlines: ${JSON.stringify(
        lines.filter((l) => l.type !== "turn.started" && l.type !== "turn.completed").map(({ ts: _, ...l }) => l)
      ).slice(0, 8000)}\n${context()}`
    )
    // The stored rows agree: one outcome per card, stranded only the victim's, accepted only when accepted.
    const rows = yield* sql<{ id: string; incarnation: string; outcome: string | null; source: string | null }>`
      SELECT id, incarnation, outcome, source FROM warden_cluster_cards`
    assert.isAtLeast(rows.length, ITEMS + 1)
    for (const r of rows) {
      assert.isNotNull(r.outcome, r.id)
      if (r.outcome === "stranded") assert.include(harmedRunner, r.incarnation, r.id)
      if (r.outcome === "accepted") assert.strictEqual(decisions.get(r.id), "accept", r.id)
      const told = [...lines, ...historyLines].filter(
        (l) => l["type"] === "card.settled" && l["card"] === r.id && l["replayed"] !== true
      )
      if (told.length > 0) assert.strictEqual(told[0]!["outcome"], r.outcome, r.id)
    }
    // `warden audit --cluster` lists every card of the run, each as it ended, the stranded ones too.
    const audit = yield* CliProcess.runToEnd(["audit", "--cluster", url, "--json"], {
      env: first.launch.env,
      on: submitter!
    })
    assert.deepStrictEqual(audit.exited, { code: 0, signal: null }, audit.stderr)
    const audited = new Map(audit.json().map((l) => [String(l["cardId"]), l]))
    assert.sameMembers(
      [...audited.keys()],
      rows.map((r) => r.id),
      `warden audit --cluster: stdout ${JSON.stringify(audit.stdout).slice(0, 2000)}; stderr ${audit.stderr.slice(-2000)}`
    )
    for (const r of rows) assert.deepInclude(audited.get(r.id)!, { outcome: r.outcome, runId: r.incarnation }, r.id)
    if (harm === "kill") {
      const stranded = yield* CliProcess.runToEnd(["audit", "--cluster", url, "--json", "--outcome", "stranded"], {
        env: first.launch.env,
        on: submitter!
      })
      const strandedRows = rows.filter((r) => r.outcome === "stranded").map((r) => r.id)
      assert.isAbove(strandedRows.length, 0, "the SIGKILLed runner's open cards were stranded")
      assert.sameMembers(
        stranded.json().map((l) => String(l["cardId"])),
        strandedRows
      )
      for (const l of stranded.json()) assert.strictEqual(l["runner"], victim.address, JSON.stringify(l))
    }
    // `warden fleet`: the survivor live, holding shards (table locks: counted from the table).
    const fleet = yield* CliProcess.runToEnd(["fleet", "--cluster", url, "--json", ...fleetFlags], {
      env: first.launch.env,
      on: submitter!
    })
    assert.deepStrictEqual(fleet.exited, { code: 0, signal: null }, fleet.stderr)
    const fleetRunners = JSON.parse(fleet.stdout.join("\n")).runners as Array<Record<string, unknown>>
    const survivorView = fleetRunners.find((r) => r["address"] === survivor.address)
    assert.isTrue(survivorView?.["live"], JSON.stringify(fleetRunners))
    assert.isAbove(Number(survivorView?.["shards"]), 0, JSON.stringify(fleetRunners))
    const items = yield* sql<{ id: string; status: string }>`SELECT id, status FROM warden_cluster_items`
    assert.strictEqual(items.length, ITEMS + 1)
    for (const i of items) assert.strictEqual(i.status, "completed", i.id)

    // The history item completed its two turns on one thread; moved to another host, its thread
    // was restored there, and the model's request from that host holds the first turn.
    assert.strictEqual(historyResult._tag, "Completed", JSON.stringify(historyResult))
    const historyRequests = (yield* model.requests).filter((r) => r.lane === history)
    if (historyResult._tag === "Completed") {
      assert.strictEqual(historyResult.turns, 2)
      // The thread its first turn completed on (one started afresh by a move before any turn
      // completed, at the fleet's start, is the item's thread from then on).
      const ready = historyLines.find((l) => l["type"] === "turn.completed")
      assert.strictEqual(
        historyResult.threadId,
        ready?.["threadId"],
        JSON.stringify(historyLines.map(({ ts: _, ...l }) => l))
      )
      if (harm === "lose-host") {
        assert.isAtLeast(historyResult.moves, 1)
        const restored = historyLines.filter((l) => l["type"] === "thread.restored")
        assert.strictEqual(restored.length, 1, JSON.stringify(historyLines.map((l) => l["type"])))
        assert.strictEqual(restored[0]!["threadId"], ready?.["threadId"])
        const fromSurvivor = historyRequests.filter((r) => r.remoteAddress === survivor.host.address)
        assert.isAbove(fromSurvivor.length, 0, "the survivor asked the model for the history item's second turn")
        const last = JSON.stringify(fromSurvivor[fromSurvivor.length - 1])
        assert.include(last, "PELICAN")
        assert.include(last, "first answer: PELICAN noted")
      }
    }

    // No thread driven by two app-servers at once: each lane's hosts follow its item's claims.
    const requests = yield* model.requests
    const claims = (yield* sql<{ item_id: string; epoch: number; runner: string; claimed_at: string }>`
      SELECT item_id, epoch, runner, claimed_at FROM warden_cluster_claims`).map((c) => ({
      item: c.item_id,
      epoch: Number(c.epoch),
      runner: c.runner,
      claimedAt: Number(c.claimed_at)
    }))
    const takings = new Map<string, Array<string>>()
    for (const c of [...claims].sort((x, y) => x.epoch - y.epoch))
      takings.set(c.item, [...(takings.get(c.item) ?? []), c.runner.split(":")[0]!])
    yield* Effect.log(
      `${harm}: hosts that took each item: ${[...takings].map(([item, hosts]) => `${item.slice(-6)} ${hosts.join(">")}`).join(", ")}`
    )
    const itemIds = new Map(results.map((r) => [`i${Number(r["item"]) - 1}`, String(r["itemId"])]))
    assert.deepStrictEqual(
      unclaimedDrivers(requests, claims, (lane) => (lane === history ? history : itemIds.get(lane))),
      [],
      "a lane served by a host that did not hold its item"
    )

    // The survivor stops on SIGTERM; the victim's codex is gone with it (killed), or when its host goes.
    const survivorCodex = ProcessTree.descendants(survivor.cli.pid)
    process.kill(-survivor.cli.pid, "SIGTERM")
    const survivorExit = yield* survivor.cli.exited("60 seconds")
    assert.notStrictEqual(survivorExit.signal, "SIGKILL")
    yield* until(
      "the survivor's codex gone",
      () => survivorCodex.every((pid) => !ProcessTree.isAlive(pid)),
      "60 seconds"
    )
    if (harm === "lose-host") {
      // Told to stop once its items moved (above), the victim could not finish a graceful stop cut
      // off from the store: it exits by itself, saying why.
      const victimExit = yield* victim.cli.exited("90 seconds")
      assert.deepStrictEqual(victimExit, { code: 1, signal: null }, victim.cli.stderr().slice(-2000))
      assert.include(victim.cli.stderr(), "is the store reachable?")
    }
    // The moves the submitter saw, and the history item's (a lost host is the one holding the
    // history item, which may hold none of the submitted ones).
    const moved = [...lines, ...historyLines].filter((l) => l["type"] === "item.moved")
    return { net, victim, victimCodex, lines, moved }
  })

/** Runs a scenario in its own scope, then checks that no namespace and no process of it is left. */
const runScenario = (harm: Harm) =>
  Effect.gen(function* () {
    const outcome = yield* Effect.scoped(scenario(harm))
    assert.deepStrictEqual(Hosts.namespacesWith(outcome.net.prefix), [])
    yield* until(
      "the victim and its codex gone",
      () => [outcome.victim.cli.pid, ...outcome.victimCodex].every((pid) => !ProcessTree.isAlive(pid)),
      "30 seconds"
    )
    return outcome
  })

// The scenarios run at once, each on its own network, store and fleet: they wait on leases more
// than they compute, and a busy machine is part of what they must survive.
describe.concurrent("a fleet across hosts (network namespaces), with a nemesis (real codex 0.171.0)", () => {
  it.live(
    "a runner SIGKILLed with open cards: its items complete on the other host, its cards stranded once",
    () =>
      Effect.gen(function* () {
        const { moved, victim } = yield* runScenario("kill")
        assert.isTrue(
          moved.some((m) => m["from"] === victim.address),
          JSON.stringify(moved)
        )
      }),
    600_000
  )

  it.live(
    "a host lost for good (its link down): its items complete on the other host, its cards stranded once",
    () =>
      Effect.gen(function* () {
        const { moved, victim } = yield* runScenario("lose-host")
        assert.isTrue(
          moved.some((m) => m["from"] === victim.address),
          JSON.stringify(moved)
        )
      }),
    600_000
  )

  it.live(
    "a runner paused (SIGSTOP) past its lease, then continued: it writes nothing for what it lost",
    () => runScenario("pause").pipe(Effect.asVoid),
    600_000
  )

  it.live(
    "a runner cut from the store past its lease, then healed: at most one runner drives each item",
    () => runScenario("cut-from-store").pipe(Effect.asVoid),
    600_000
  )

  it.live(
    "the submitter cut from everything for 25 s, then healed: its decisions arrive, every item completes",
    () => runScenario("cut-submitter").pipe(Effect.asVoid),
    600_000
  )
})
