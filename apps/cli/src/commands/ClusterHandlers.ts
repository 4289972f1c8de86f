/**
 * What the fleet's commands do (ClusterCommands.ts has their options; this module is loaded only
 * when one of them runs).
 */
import { ShardId, Sharding } from "@effect/cluster"
import * as SqlClient from "@effect/sql/SqlClient"
import { SecretMask } from "@warden/approvals"
import { ClusterClient, Runner, Storage, Wire } from "@warden/cluster"
import { CodexCommand } from "@warden/supervisor"
import { ChildEnv } from "@warden/transport"
import {
  Console,
  Context,
  Duration,
  Effect,
  Exit,
  Fiber,
  FiberSet,
  Layer,
  Option,
  Schedule,
  Schema,
  Stream
} from "effect"
import { randomBytes } from "node:crypto"
import * as Readline from "node:readline"
import * as ExitCodes from "../contract/ExitCodes.js"
import * as Opts from "../contract/Options.js"
import * as StdinDecisions from "../answering/StdinDecisions.js"

/** `warden runner`'s options. */
export interface RunnerInput {
  readonly cluster: string
  readonly listen: string
  readonly codex: string
  readonly config: ReadonlyArray<string>
  readonly enable: ReadonlyArray<string>
  readonly disable: ReadonlyArray<string>
  readonly concurrency: number
  readonly pool: number
  /** Policy rules (as `warden run --rules`): a card they decide never waits for a person. */
  readonly rules: Option.Option<string>
  /** How long a card waits for a decision before it refuses by itself (as `warden run`). */
  readonly approvalTimeout: Duration.Duration
  readonly noThreadState: boolean
  /** A runner this long without a heartbeat has its ledger run recorded crashed (`RunnerOptions.deadAfter`). */
  readonly deadAfter: Duration.Duration
  readonly sharding: ReadonlyArray<string>
}

/** `warden submit`'s options. */
export interface SubmitInput {
  readonly cluster: string
  readonly json: boolean
  /** `deny`: decline every card; `stdin`: JSON lines; `inbox`: answer none here (the fleet's inbox, `warden fleet --inbox`, or a rule does). */
  readonly approvals: "deny" | "stdin" | "inbox"
  readonly cwd: string
  readonly model: Option.Option<string>
  readonly sandbox: Option.Option<string>
  readonly approvalPolicy: string
  readonly sharding: ReadonlyArray<string>
  readonly allowSecrets: boolean
  /** `--submission ID`: the items are `ID-1`, `ID-2`, ...; made up when absent. */
  readonly submission: Option.Option<string>
  readonly prompts: ReadonlyArray<string>
}

/** What `--submission` accepts: it becomes part of every item id (and of card ids). */
const SUBMISSION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

/** `warden fleet`'s options. */
export interface FleetInput {
  readonly cluster: string
  readonly json: boolean
  /** The runners' `--sharding` (its `shardLockExpiration` says when a runner is taken for dead). */
  readonly sharding: ReadonlyArray<string>
  /** `--inbox` and its companions: serve the fleet's one inbox instead (`FleetInbox.ts`). */
  readonly inbox: Option.Option<Opts.InboxAddress>
  readonly inboxAllowRemote: boolean
  readonly inboxPublicUrl: Option.Option<string>
  readonly notify: ReadonlyArray<string>
  readonly notifySecret: Option.Option<string>
}

const say = (line: Record<string, unknown>) =>
  Effect.sync(() => {
    process.stdout.write(`${JSON.stringify(SecretMask.maskJson({ ts: new Date().toISOString(), ...line }))}\n`)
  })

const parseAddress = (text: string) => {
  const at = text.lastIndexOf(":")
  const port = Number(text.slice(at + 1))
  if (at <= 0 || !Number.isInteger(port) || port <= 0 || port > 65535) return undefined
  return { host: text.slice(0, at), port }
}

/** `KEY=VALUE` overrides of the engine's ShardingConfig (durations as text, numbers, booleans). */
const parseSharding = (pairs: ReadonlyArray<string>) => {
  const out: Record<string, unknown> = {}
  for (const pair of pairs) {
    const at = pair.indexOf("=")
    if (at <= 0) return undefined
    const value = pair.slice(at + 1)
    out[pair.slice(0, at)] = /^\d+$/.test(value)
      ? Number(value)
      : value === "true"
        ? true
        : value === "false"
          ? false
          : value
  }
  return out
}

/** Prints the runner's readiness, then its shard count whenever it changes. */
const report = Layer.scopedDiscard(
  Effect.gen(function* () {
    const sharding = yield* Sharding.Sharding
    const info = yield* Runner.RunnerInfo
    yield* say({ type: "runner.ready", runId: info.runId, address: info.address, pid: process.pid })
    let last = -1
    // The engine publishes no event for shard assignment: the runner reads its own state.
    yield* Effect.gen(function* () {
      let count = 0
      for (let i = 1; i <= 300; i++) if (sharding.hasShardId(ShardId.make("default", i))) count++
      if (count !== last) {
        last = count
        yield* say({ type: "runner.shards", count })
      }
    }).pipe(Effect.repeat(Schedule.spaced("500 millis")), Effect.forkScoped)
  })
)

type Verdict = { readonly status: string; readonly result: Wire.RunResult }

const verdictOf = (result: Wire.RunResult): Verdict => ({
  status: result._tag === "Completed" ? result.status : result._tag === "Failed" ? result.reason : "interrupted",
  result
})

/** `warden runner`. */
/** How long `warden runner` may take to stop after SIGINT/SIGTERM before it exits regardless. */
export const stopBoundMs = 30_000

export const runner = (o: RunnerInput) =>
  Effect.gen(function* () {
    const address = parseAddress(o.listen)
    if (address === undefined)
      return yield* Effect.fail(ExitCodes.usage(`--listen expects HOST:PORT, got ${JSON.stringify(o.listen)}`))
    const sharding = parseSharding(o.sharding)
    if (sharding === undefined) return yield* Effect.fail(ExitCodes.usage("--sharding expects KEY=VALUE"))
    const rules = Option.isSome(o.rules) ? yield* Opts.loadRules(o.rules.value) : undefined
    // The database URL may carry its password: no child (codex, git) gets a variable holding it.
    ChildEnv.withhold(o.cluster)
    const live = report.pipe(
      Layer.provideMerge(
        Runner.layer({
          ...address,
          supervisor: {
            concurrency: o.concurrency,
            pool: o.pool,
            approvals: { deadlines: { default: o.approvalTimeout }, ...(rules ? { rules } : {}) }
          },
          sharding,
          ledger: true,
          threadState: !o.noThreadState,
          deadAfter: o.deadAfter
        })
      ),
      Layer.provide(
        CodexCommand.transportLayer({ command: o.codex, config: o.config, enable: o.enable, disable: o.disable })
      ),
      Layer.provide(Storage.layer(o.cluster))
    )
    // A graceful stop refuses the open cards, then releases the shards and deregisters through the
    // store; a runner cut off from the store would wait for it indefinitely. So the stop is
    // bounded: `stopBoundMs` after the first SIGINT/SIGTERM the runner says so and exits (its
    // shard locks expire on their own, and its codex exits when its stdin closes).
    const onStopSignal = () => {
      setTimeout(() => {
        process.stderr.write(
          `warden runner: not stopped ${stopBoundMs / 1000} s after the signal (is the store reachable?); exiting without releasing its shards, whose locks expire on their own\n`
        )
        process.exit(ExitCodes.Failed)
      }, stopBoundMs).unref()
    }
    process.once("SIGTERM", onStopSignal)
    process.once("SIGINT", onStopSignal)
    // Runs until stopped, or until another runner recorded this one's ledger run crashed (it was
    // away from the store for longer than --dead-after): then it exits, to be started again.
    const crashed = Effect.scoped(
      Effect.flatMap(Layer.build(live), (context) => Context.get(context, Runner.RunnerCrashed).await)
    )
    const why = yield* crashed.pipe(
      Effect.mapError(
        (e) =>
          new ExitCodes.CliExit({
            code: ExitCodes.Failed,
            message: `warden runner: ${SecretMask.maskText(e instanceof Error ? e.message : String(e))}`
          })
      )
    )
    return yield* Effect.fail(new ExitCodes.CliExit({ code: ExitCodes.Failed, message: `warden runner: ${why}` }))
  })

/** `warden submit`. */
export const submit = (o: SubmitInput) =>
  Effect.gen(function* () {
    // The persisted Run payload must be runnable again, so the fleet's database stores prompts
    // verbatim: a secret-looking prompt is refused unless the caller says so.
    const secret = o.prompts.findIndex((p) => SecretMask.maskText(p) !== p)
    if (secret >= 0 && !o.allowSecrets) {
      return yield* Effect.fail(
        ExitCodes.usage(
          `PROMPT ${secret + 1} holds something that looks secret, and the fleet stores prompts verbatim: remove it, or pass --allow-secrets-in-storage`
        )
      )
    }
    const sharding = parseSharding(o.sharding)
    if (sharding === undefined) return yield* Effect.fail(ExitCodes.usage("--sharding expects KEY=VALUE"))
    if (o.submission._tag === "Some" && !SUBMISSION_ID.test(o.submission.value)) {
      return yield* Effect.fail(
        ExitCodes.usage(
          `--submission takes letters, digits, ".", "_" and "-" (up to 64, a letter or digit first), not ${JSON.stringify(SecretMask.maskText(o.submission.value.slice(0, 80)))}`
        )
      )
    }
    const context = yield* Layer.build(
      ClusterClient.layer({ sharding }).pipe(Layer.provideMerge(Storage.layer(o.cluster)))
    )
    const client = Context.get(context, ClusterClient.ClusterClient)
    const sql = Context.get(context, SqlClient.SqlClient)
    const submission =
      o.submission._tag === "Some" ? o.submission.value : `s${Date.now().toString(36)}${randomBytes(3).toString("hex")}`
    const ids = o.prompts.map((_, i) => `${submission}-${i + 1}`)
    const indexOf = new Map(ids.map((id, i) => [id, i + 1]))
    // Items already in the fleet under these ids (a submission made again): attached to, not run again.
    const known = new Set(
      (yield* sql<{ id: string }>`SELECT id FROM warden_cluster_items WHERE id IN ${sql.in(ids)}`.pipe(
        Effect.orElseSucceed(() => [])
      )).map((r) => r.id)
    )
    /** Card id → item id, from the card.opened lines seen. */
    const cardItems = new Map<string, string>()
    /** The cards whose settlement a line told. */
    const settledCards = new Set<string>()
    const seen = new Set<string>()
    const out = (line: Record<string, unknown>) =>
      o.json
        ? say(line)
        : Console.log(
            `item ${String(line["item"] ?? "")}: ${String(line["type"])} ${JSON.stringify(SecretMask.maskJson({ ...line, type: undefined, item: undefined }))}`
          )
    /**
     * Each decision is delivered in a fiber of its own: a card whose runner cannot be reached (dead
     * and not yet replaced, cut off, paused) holds back no other decision. Those still in flight
     * when the run ends are reported as not delivered.
     */
    const deliveries = yield* FiberSet.make<void, never>()
    const inFlight = new Map<string, string>()
    const answer = (itemId: string, cardId: string, decision: Parameters<typeof client.answer>[2]) =>
      Effect.suspend(() => {
        inFlight.set(cardId, itemId)
        return FiberSet.run(
          deliveries,
          deliver(itemId, cardId, decision).pipe(Effect.ensuring(Effect.sync(() => inFlight.delete(cardId))))
        )
      }).pipe(Effect.asVoid)
    const deliver = (itemId: string, cardId: string, decision: Parameters<typeof client.answer>[2]) =>
      client.answer(itemId, cardId, decision).pipe(
        // While the card's runner is dead and not yet replaced, the engine retries; bounded here.
        Effect.timeoutFail({ duration: "90 seconds", onTimeout: () => ({ _tag: "runner unreachable" }) }),
        Effect.flatMap((result) =>
          out({
            type: "card.answer",
            item: indexOf.get(itemId),
            card: cardId,
            result: result._tag,
            ...("outcome" in result ? { outcome: result.outcome } : {})
          })
        ),
        Effect.catchAll((e) =>
          Console.error(`warden submit: the decision for ${cardId} was not delivered (${e._tag}); nothing was written`)
        )
      )
    const onEvent = (itemId: string, event: Wire.ItemEvent) =>
      Effect.gen(function* () {
        if (event.seq < 0) return
        const key = `${itemId}/${event.incarnation}/${event.seq}`
        if (seen.has(key)) return
        seen.add(key)
        const line = {
          ...event.line,
          item: indexOf.get(itemId),
          itemId,
          runner: event.runner,
          incarnation: event.incarnation
        }
        yield* out(line)
        if (event.line["type"] === "card.settled") settledCards.add(String(event.line["card"]))
        if (event.line["type"] === "card.opened") {
          const card = String(event.line["card"])
          cardItems.set(card, itemId)
          if (o.approvals === "deny") yield* answer(itemId, card, { _tag: "Decline" })
        }
      })
    if (o.approvals === "stdin") {
      const lines = Readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
      yield* Effect.addFinalizer(() => Effect.sync(() => lines.close()))
      yield* Stream.fromAsyncIterable(lines, (e) => e).pipe(
        Stream.runForEach((text) => {
          const verdict = StdinDecisions.parseLine(text)
          if (verdict._tag === "Blank") return Effect.void
          if (verdict._tag !== "Decision")
            return Console.error(
              `warden submit: stdin: ${verdict._tag === "Invalid" ? verdict.reason : "only {cardId, decision} lines are routed in a fleet"}`
            )
          const itemId = cardItems.get(verdict.cardId)
          if (itemId === undefined)
            return Console.error(`warden submit: stdin: no card ${verdict.cardId} among the submitted items`)
          return answer(itemId, verdict.cardId, verdict.decision)
        }),
        Effect.ignore,
        Effect.forkScoped
      )
    }
    // First line: the submission's name, so that a submitter that dies can be followed by another
    // (`--submission ID`), and which items it found already in the fleet.
    yield* o.json
      ? say({ type: "submission", submission, items: ids, attached: ids.filter((id) => known.has(id)) })
      : Console.log(
          `submission ${submission} (${ids.length} items${known.size > 0 ? `, ${known.size} already in the fleet: attached` : ""}); to follow it again: warden submit --submission ${submission} ...`
        )
    const followers = yield* Effect.forEach(ids, (id) =>
      client.follow(id).pipe(
        Stream.runForEach((e) => onEvent(id, e)),
        Effect.fork
      )
    )
    const verdicts = yield* Effect.forEach(
      ids,
      (id, i) =>
        client
          .run(id, {
            prompt: o.prompts[i]!,
            cwd: o.cwd,
            approvalPolicy: o.approvalPolicy,
            ...(o.model._tag === "Some" ? { model: o.model.value } : {}),
            ...(o.sandbox._tag === "Some" ? { sandbox: o.sandbox.value } : {})
          })
          .pipe(
            Effect.exit,
            Effect.map(
              (exit): Verdict =>
                Exit.isSuccess(exit)
                  ? verdictOf(exit.value)
                  : verdictOf(
                      new Wire.Failed({
                        reason: "cluster-error",
                        detail: SecretMask.maskText(String(exit.cause)),
                        threadId: null
                      })
                    )
            ),
            Effect.tap((v) =>
              out({
                type: "item.result",
                item: i + 1,
                itemId: id,
                status: v.status,
                result: Schema.encodeSync(Wire.RunResult)(v.result)
              })
            )
          ),
      { concurrency: "unbounded" }
    )
    yield* Effect.forEach(followers, (f) => Fiber.join(f).pipe(Effect.timeoutOption("10 seconds")))
    // What the live lines missed: a subscription can stall on a runner cut off from the store and
    // not catch up before the run ends. Each card seen open and never seen settled is told from
    // the fleet's table (`fromStore: true`), so the report has every card's one settlement.
    for (const [cardId, itemId] of cardItems) {
      if (settledCards.has(cardId)) continue
      const rows = yield* sql<{ outcome: string | null; source: string | null }>`
          SELECT outcome, source FROM warden_cluster_cards WHERE id = ${cardId}`.pipe(Effect.orElseSucceed(() => []))
      const row = rows[0]
      if (row?.outcome !== undefined && row.outcome !== null) {
        yield* out({
          type: "card.settled",
          item: indexOf.get(itemId),
          itemId,
          card: cardId,
          outcome: row.outcome,
          source: row.source,
          fromStore: true
        })
      } else {
        yield* Console.error(`warden submit: card ${cardId} is not settled in the fleet's table at the run's end`)
      }
    }
    for (const [cardId, itemId] of inFlight) {
      yield* out({ type: "card.answer", item: indexOf.get(itemId), card: cardId, result: "NotDelivered" })
      yield* Console.error(
        `warden submit: the decision for ${cardId} was not delivered before the run ended; nothing was written`
      )
    }
    yield* FiberSet.clear(deliveries)
    yield* out({ type: "run.finished", items: verdicts.map((v) => v.status) })
    const code = ExitCodes.forItems(verdicts.map((v) => v.status))
    if (code !== ExitCodes.Ok) return yield* Effect.fail(new ExitCodes.CliExit({ code }))
  }).pipe(Effect.scoped)

/**
 * `warden audit --cluster URL`: every card of the fleet, from its table (`warden_cluster_cards`),
 * oldest first: the runner run (incarnation) and address that opened it, under which epoch, how it
 * ended and which runner run settled it (for a card stranded when its runner was lost, the runner
 * that took the item). The fleet's table keeps what was asked (the method) and the settlement; a card's
 * details (its title, the command) are in the ledger of the runner that opened it. Filters as for
 * `warden audit`: `--run` is a runner's run id, `--item` a fleet item id.
 */
export const auditFleet = (o: {
  readonly cluster: string
  /** `warden audit`'s filters, checked (`LedgerCommands`); `runId` is a runner's run id here. */
  readonly filter: {
    readonly runId?: string
    readonly item?: string
    readonly outcome?: string
    readonly source?: string
    readonly method?: string
    readonly from?: number
  }
  readonly json: boolean
}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{
      id: string
      item_id: string
      incarnation: string
      method: string
      opened_at: unknown
      outcome: string | null
      source: string | null
      settled_at: unknown
      settled_by: string | null
      epoch: unknown
      runner: string | null
    }>`SELECT c.id, c.item_id, c.incarnation, c.method, c.opened_at, c.outcome, c.source, c.settled_at,
          c.settled_by, c.epoch, cl.runner
        FROM warden_cluster_cards c
        LEFT JOIN warden_cluster_claims cl ON cl.item_id = c.item_id AND cl.epoch = c.epoch
        ORDER BY c.opened_at, c.id`.pipe(
      Effect.catchAll((e) =>
        Effect.fail(
          ExitCodes.usage(
            `--cluster ${SecretMask.maskText(o.cluster)}: no fleet's table to read there (${SecretMask.maskText(e.message)})`
          )
        )
      )
    )
    const f = o.filter
    const sourceMatches = (source: string | null) => {
      if (f.source === undefined) return true
      const wanted = f.source.toLowerCase()
      const have = (source ?? "").toLowerCase()
      return have === wanted || have.split(":")[0] === wanted
    }
    const cards = rows.filter(
      (r) =>
        (f.runId === undefined || r.incarnation === f.runId) &&
        (f.item === undefined || r.item_id === f.item) &&
        (f.outcome === undefined || (r.outcome ?? "open") === f.outcome) &&
        (f.method === undefined || r.method === f.method) &&
        (f.from === undefined || Number(r.opened_at) >= f.from) &&
        sourceMatches(r.source)
    )
    const iso = (ms: unknown) => (ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString())
    for (const r of cards) {
      const card = {
        type: "card",
        cardId: r.id,
        itemId: r.item_id,
        runId: r.incarnation,
        runner: r.runner,
        epoch: r.epoch === null ? null : Number(r.epoch),
        method: r.method,
        openedAt: iso(r.opened_at),
        outcome: r.outcome ?? "open",
        source: r.source,
        settledBy: r.settled_by,
        settledAt: iso(r.settled_at)
      }
      yield* o.json
        ? Console.log(JSON.stringify(SecretMask.maskJson(card)))
        : Console.log(
            SecretMask.maskText(
              `${card.openedAt}  runner ${card.runner ?? "-"} (run ${card.runId})  item ${card.itemId}  ${card.cardId}  ${card.method}  ${card.outcome}${card.source !== null ? ` by ${card.source}` : ""}${card.settledBy !== null && card.settledBy !== card.runId ? ` (settled by ${card.settledBy})` : ""}`
            )
          )
    }
    if (!o.json) yield* Console.log(`${cards.length} card${cards.length === 1 ? "" : "s"} in the fleet's table`)
  }).pipe(
    Effect.provide(Storage.layer(o.cluster)),
    Effect.catchTag("SqlError", (e) => Effect.fail(ExitCodes.usage(`--cluster: ${SecretMask.maskText(e.message)}`)))
  )

/**
 * `warden steer` / `warden interrupt`: one call to the item's entity, on whichever runner drives
 * it (sent again there if its handler was interrupted by a move). Exit 0 when the runner did it;
 * 1 when the item has no running turn there (`ItemNotActive`, its reason on stderr).
 */
export const turnControl = (o: {
  readonly cluster: string
  readonly sharding: ReadonlyArray<string>
  readonly item: string
  readonly text: string
  readonly action: "steer" | "interrupt"
}) =>
  Effect.gen(function* () {
    const sharding = parseSharding(o.sharding)
    if (sharding === undefined) return yield* Effect.fail(ExitCodes.usage("--sharding expects KEY=VALUE"))
    // An item id is printed back and names an entity: control characters (a terminal's escape
    // sequences among them) are refused before anything is sent, and shown escaped.
    if (o.item.length === 0 || o.item.length > 255 || /[\u0000-\u001f\u007f-\u009f]/.test(o.item))
      return yield* Effect.fail(
        ExitCodes.usage(
          `ITEM is a fleet item id (1 to 255 characters, no control characters), not ${JSON.stringify(SecretMask.maskText(o.item.slice(0, 80)))}`
        )
      )
    const shown = SecretMask.maskText(o.item)
    const context = yield* Layer.build(ClusterClient.layer({ sharding }).pipe(Layer.provide(Storage.layer(o.cluster))))
    const client = Context.get(context, ClusterClient.ClusterClient)
    const done = o.action === "steer" ? client.steer(o.item, o.text) : client.interrupt(o.item)
    yield* done.pipe(
      Effect.timeoutFail({ duration: "90 seconds", onTimeout: () => ({ _tag: "runner unreachable" as const }) }),
      Effect.catchAll((e) =>
        Effect.zipRight(
          Console.error(
            `warden ${o.action}: ${shown}: ${e._tag === "ItemNotActive" ? `not done: ${SecretMask.maskText(e.detail)}` : `not delivered (${e._tag})`}`
          ),
          Effect.fail(new ExitCodes.CliExit({ code: 1 }))
        )
      )
    )
    yield* Console.log(`warden ${o.action}: ${shown}: done`)
  }).pipe(Effect.scoped)

/**
 * `warden fleet`: the runners as the engine sees them, the items by runner and status, the open
 * cards. A runner is `live` while its heartbeat (written with every shard lock refresh) is younger
 * than `shardLockExpiration`: the engine's own rule for which runners it assigns shards to. Its
 * `shards` are counted from the table locks still within that expiry; with advisory locks (held
 * by each runner's database session, not in a table) they cannot be read here and are `null`.
 * Ages are measured by the database's clock, not this machine's.
 */
export const fleet = (o: FleetInput) =>
  Effect.gen(function* () {
    const sharding = parseSharding(o.sharding)
    if (sharding === undefined) return yield* Effect.fail(ExitCodes.usage("--sharding expects KEY=VALUE"))
    const inbox = yield* Opts.inboxSetting(o)
    if (inbox === undefined) return yield* fleetView(o, sharding)
    const FleetInbox = yield* Effect.promise(() => import("./FleetInbox.js"))
    return yield* FleetInbox.serve({ cluster: o.cluster, json: o.json, sharding, inbox })
  })

const fleetView = (o: FleetInput, sharding: Record<string, unknown>) =>
  Effect.gen(function* () {
    // The engine's default expiry unless the runners were given another (a DurationInput: "10 seconds", or ms).
    const expiration = Duration.decodeUnknown(sharding["shardLockExpiration"] ?? "35 seconds")
    if (Option.isNone(expiration))
      return yield* Effect.fail(ExitCodes.usage("--sharding shardLockExpiration expects a duration (10 seconds)"))
    const expirationSeconds = Duration.toSeconds(expiration.value)
    const sql = yield* SqlClient.SqlClient
    const runners = yield* Storage.runnerHeartbeats.pipe(Effect.orElseSucceed(() => []))
    const locks = yield* Storage.shardLocks.pipe(Effect.option, Effect.map(Option.getOrUndefined))
    const shardsOf = (address: string) =>
      locks === undefined ? null : locks.filter((l) => l.address === address && l.ageSeconds < expirationSeconds).length
    const items = yield* sql<{ runner: string | null; status: string; n: unknown }>`
        SELECT runner, status, COUNT(*) AS n FROM warden_cluster_items GROUP BY runner, status ORDER BY runner, status`.pipe(
      Effect.orElseSucceed(() => [])
    )
    const open = yield* sql<{ id: string; item_id: string; method: string }>`
        SELECT id, item_id, method FROM warden_cluster_cards WHERE outcome IS NULL ORDER BY opened_at`.pipe(
      Effect.orElseSucceed(() => [])
    )
    const view = {
      runners: runners.map((r) => ({
        address: r.address,
        live: r.healthy && r.ageSeconds < expirationSeconds,
        healthy: r.healthy,
        lastHeartbeat: r.lastHeartbeat,
        heartbeatAgeSeconds: Math.round(r.ageSeconds * 10) / 10,
        shards: shardsOf(r.address)
      })),
      items: items.map((r) => ({ runner: r.runner, status: r.status, count: Number(r.n) })),
      openCards: open.map((c) => ({ card: c.id, item: c.item_id, method: c.method }))
    }
    if (o.json) return yield* Console.log(JSON.stringify(SecretMask.maskJson(view)))
    yield* Console.log(`runners (${view.runners.length}):`)
    for (const r of view.runners)
      yield* Console.log(
        `  ${r.address}  ${r.live ? "live" : "gone"}  heartbeat ${r.heartbeatAgeSeconds} s ago  shards ${r.shards ?? "? (advisory locks)"}${r.healthy ? "" : "  unhealthy"}`
      )
    yield* Console.log("items:")
    for (const r of view.items) yield* Console.log(`  ${r.runner ?? "-"}  ${r.status}  ${r.count}`)
    yield* Console.log(`open cards (${view.openCards.length}):`)
    for (const c of view.openCards) yield* Console.log(`  ${c.card}  item ${c.item}  ${c.method}`)
  }).pipe(
    Effect.provide(Storage.layer(o.cluster)),
    Effect.catchTag("SqlError", (e) => Effect.die(e))
  )
