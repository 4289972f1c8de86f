/**
 * What the CLI's fleet tests (`warden runner`, `warden submit` on PostgreSQL) share: the test
 * sharding timings as `--sharding` flags, the shard count a runner last reported, a bounded
 * wait on state spread over several processes' output, one way to start a runner, one fleet of a
 * single runner, the argv of a `warden submit` answered on stdin, and the two-drivers check over
 * what the model was asked (`unclaimedDrivers`).
 */
import * as Postgres from "@warden/test-support/Postgres"
import { freePort } from "@warden/test-support/Processes"
import { shardingTimings } from "@warden/test-support/ShardingTimings"
import type { TestProcess } from "@warden/testkit"
import { RealCodex, ScriptedModel } from "@warden/testkit"
import { Effect, type Scope } from "effect"
import { until, untilEffect } from "@warden/test-support/Polling"
import * as CliProcess from "./CliProcess.js"
import * as Codex from "./Codex.js"

/** `--sharding KEY=VALUE` for each of the tests' sharding timings (runners and submitters must agree). */
export const shardingFlags: ReadonlyArray<string> = Object.entries(shardingTimings).flatMap(([key, value]) => [
  "--sharding",
  `${key}=${value}`
])

/** The number of shards `cli` (a `warden runner`) last said it holds (`runner.shards` lines), 0 before any. */
export const lastShards = (cli: CliProcess.Cli): number => {
  const lines = cli.json().filter((l) => l.type === "runner.shards")
  return lines.length === 0 ? 0 : Number(lines[lines.length - 1]!.count)
}

/** The shared poll with a deadline (`@warden/test-support/Polling`), as the CLI's fleet tests import it. */
export { until, untilEffect }

/**
 * `warden runner` on `cluster`, listening on `listen` (default: a free port on 127.0.0.1), driving
 * `launch`'s codex with the tests' sharding timings and `extra` flags; waits for `runner.ready`.
 */
export const startRunner = (options: {
  readonly cluster: string
  readonly launch: RealCodex.Launch
  readonly listen?: string
  readonly extra?: ReadonlyArray<string>
  readonly on?: CliProcess.Options["on"]
}): Effect.Effect<
  { readonly cli: CliProcess.Cli; readonly runId: string; readonly address: string },
  TestProcess.TestProcessError,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const listen = options.listen ?? `127.0.0.1:${yield* freePort}`
    const cli = yield* CliProcess.spawn(
      [
        "runner",
        "--cluster",
        options.cluster,
        "--listen",
        listen,
        ...RealCodex.wardenFlags(options.launch),
        ...shardingFlags,
        ...(options.extra ?? [])
      ],
      { env: options.launch.env, stdin: "ignore", ...(options.on !== undefined ? { on: options.on } : {}) }
    )
    const ready = yield* cli.waitForJson(`runner on ${listen} ready`, (l) => l.type === "runner.ready", "120 seconds")
    return { cli, runId: String(ready["runId"]), address: String(ready["address"]) }
  })

/**
 * One runner on a fresh PostgreSQL, driving real codex against a model scripted with `script`,
 * holding all 300 shards before this returns. `extra(codex)` gives more `warden runner` flags
 * (`--rules`, ...); it may write their files into the codex home first.
 */
export const oneRunnerFleet = (
  script: ScriptedModel.ScriptInput,
  extra: (codex: Codex.Setup) => ReadonlyArray<string> = () => []
) =>
  Effect.gen(function* () {
    const codex = yield* Codex.setup(script)
    const pg = yield* Postgres.start()
    const { cli: runner } = yield* startRunner({ cluster: pg.url, launch: codex.launch, extra: extra(codex) })
    yield* until("the runner holding the 300 shards", () => lastShards(runner) === 300)
    return { codex, pg, runner }
  })

/**
 * Two runners on a fresh PostgreSQL driving `launch`'s codex with `extra` flags: A first (until
 * it holds the 300 shards), then B, until they share them.
 */
export const twoRunnerFleet = (launch: RealCodex.Launch, extra: ReadonlyArray<string> = []) =>
  Effect.gen(function* () {
    const pg = yield* Postgres.start()
    const runner = startRunner({ cluster: pg.url, launch, extra })
    const a = yield* runner
    yield* until("runner A holding the 300 shards", () => lastShards(a.cli) === 300)
    const b = yield* runner
    yield* until(
      "the two runners sharing the 300 shards",
      () => lastShards(a.cli) > 0 && lastShards(b.cli) > 0 && lastShards(a.cli) + lastShards(b.cli) === 300
    )
    return { pg, a, b }
  })

/**
 * `warden submit` on `cluster` with JSON lines out and decisions on stdin (or none, `approvals:
 * "inbox"`), the items' commands run in `workspace` (workspace-write), the tests' sharding
 * timings, one item per lane of `lanes` (its prompt `<lane marker> <prompt>`), and `--submission`
 * when named.
 */
export const submitArgs = (options: {
  readonly cluster: string
  readonly workspace: string
  readonly lanes: ReadonlyArray<string>
  readonly prompt?: string
  readonly submission?: string
  readonly approvals?: "stdin" | "inbox"
}): ReadonlyArray<string> => [
  "submit",
  "--cluster",
  options.cluster,
  "--json",
  "--approvals",
  options.approvals ?? "stdin",
  ...(options.submission !== undefined ? ["--submission", options.submission] : []),
  "--cwd",
  options.workspace,
  "--sandbox",
  "workspace-write",
  ...shardingFlags,
  ...options.lanes.map((lane) => `${ScriptedModel.laneMarker(lane)} ${options.prompt ?? "run the command"}`)
]

/** One taking of an item, as `warden_cluster_claims` keeps it. */
export interface Claim {
  readonly item: string
  readonly epoch: number
  /** The runner's address (`host:port`). */
  readonly runner: string
  readonly claimedAt: number
}

/**
 * The lanes driven by a host that did not hold the item then (two drivers at once). A lane's
 * requests, in arrival order, may change host only where the item's claims do: each change must
 * be to the host of a later claim of the item (a move, or a move back once the paused host is
 * back), taken before the request arrived (same clock: one kernel, several namespaces). A legal
 * request cannot fail this (it is sent after its runner's claim and arrives later still); a
 * request of the old host sent after the new host took the item is caught once it follows one
 * of the new host's.
 */
export const unclaimedDrivers = (
  requests: ReadonlyArray<Pick<ScriptedModel.RecordedRequest, "seq" | "lane" | "remoteAddress" | "receivedAtMs">>,
  claims: ReadonlyArray<Claim>,
  itemOfLane: (lane: string) => string | undefined
): ReadonlyArray<string> => {
  const hostOf = (runner: string) => runner.slice(0, runner.lastIndexOf(":"))
  const broken: Array<string> = []
  const lanes = new Set(requests.map((r) => r.lane))
  for (const lane of lanes) {
    const item = itemOfLane(lane)
    const taken = claims.filter((c) => c.item === item).sort((a, b) => a.epoch - b.epoch)
    const served = requests.filter((r) => r.lane === lane).sort((a, b) => a.seq - b.seq)
    let current = -1
    for (const r of served) {
      if (current >= 0 && hostOf(taken[current]!.runner) === r.remoteAddress) continue
      const next = taken.findIndex(
        (c, k) => k > current && hostOf(c.runner) === r.remoteAddress && c.claimedAt <= r.receivedAtMs
      )
      if (next < 0) {
        broken.push(
          `${lane} (item ${item}): request ${r.seq} from ${r.remoteAddress} at ${r.receivedAtMs}; claims ${JSON.stringify(taken)}; hosts ${served.map((s) => `${s.seq}@${s.remoteAddress}@${s.receivedAtMs}`).join(" ")}`
        )
        break
      }
      current = next
    }
  }
  return broken
}
