/**
 * A runner: one process of the fleet. It owns one local `Supervisor` (its app-server pool,
 * admission, restarts, deadlines: the engine's promises hold inside it unchanged) and hosts the
 * work item entities whose shards the cluster assigns it. Runners find each other, own shards and
 * keep durable messages through the engine's SQL storage; they talk over TCP sockets.
 */
import { RunnerAddress, RunnerStorage, ShardingConfig, SqlMessageStorage, SqlRunnerStorage } from "@effect/cluster"
import type { Sharding } from "@effect/cluster"
import type { SocketServerError } from "@effect/platform/SocketServer"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Config } from "@warden/supervisor"
import type { Transport } from "@warden/transport"
import type { ConfigError } from "effect"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import { RunId, Supervisor } from "@warden/supervisor"
import { Ledger } from "@warden/ledger"
import { Context, Deferred, Duration, Effect, Layer, Option } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"
import * as DeadRuns from "./internal/DeadRuns.js"
import * as Handlers from "./internal/Handlers.js"
import * as ItemStore from "./internal/ItemStore.js"
import * as ShardLease from "./internal/ShardLease.js"
import * as Storage from "./Storage.js"
import { WorkItemEntity } from "./WorkItemEntity.js"

/** Who a runner process is: its run id (the incarnation of every item it runs) and its address. */
export const RunnerInfo = Handlers.RunnerInfo
/** The shape of {@link RunnerInfo}. */
export type RunnerInfoShape = Handlers.RunnerInfoShape

/** A runner's options. */
export interface RunnerOptions {
  /** The address other runners reach this one at (advertised and listened on). */
  readonly host: string
  readonly port: number
  /** This process's run id (default: a new one, `RunId.make` of `@warden/supervisor`); card ids are `<runId>:<card id>`. */
  readonly runId?: string
  /** The local supervisor's configuration (its `runId` is set to the runner's). */
  readonly supervisor?: Supervisor.SupervisorConfig
  /**
   * Record this runner in `@warden/ledger` on the fleet's database (default false): one ledger run
   * per runner process (its run id), every work item, thread, turn, card and settlement, and a
   * moved item's open cards `stranded` there too (`Ledger.layer()` on the same `SqlClient`).
   */
  readonly ledger?: boolean
  /**
   * Overrides of the engine's `ShardingConfig` (failover timings and the like). Every key that
   * matters is passed: the engine also reads `HOST`, `PORT`, ... from the environment.
   */
  readonly sharding?: Partial<ShardingConfig.ShardingConfig["Type"]>
  /**
   * How long before its shard locks could expire the runner stops the items of a shard whose
   * lock it could not renew (default: a fifth of `shardLockExpiration`, 7 s at the engine's
   * 35 s). Each shard is held until `shardLockExpiration - leaseMargin` after the start of the
   * last lock acquire or refresh that returned it; past that, its items stop and their cards are
   * refused, before another runner can take the shard (docs/scaling.md, "Fencing"). Must be
   * positive and below `shardLockExpiration`.
   */
  readonly leaseMargin?: Duration.DurationInput
  /**
   * Keep each item's thread state (its codex rollout as of its last completed turn) in the fleet's
   * store, so that a runner on another host (another codex home) resumes the item's thread when
   * it moves (default true). The state is the conversation itself, unmasked: prompts, answers,
   * command outputs (docs/scaling.md, "Threads that move"). Off, a moved item whose thread lives
   * in another codex home fails `thread-unreachable`.
   */
  readonly threadState?: boolean
  /**
   * With `ledger`: how long a runner may go without a heartbeat in the store (each of its lock
   * refreshes writes one) before the live runners record its ledger run `crashed` and the run's
   * open cards `stranded` (default 5 minutes; must be above `shardLockExpiration`). A run is also
   * recorded so at once when a later runner starts at its address, or when it ran on this host
   * and its process is gone. A runner that finds its own run recorded `crashed` (it was away from
   * the store that long) completes `RunnerCrashed`: `warden runner` then exits, to be started
   * again as a new run (docs/scaling.md, "A dead runner's ledger run").
   */
  readonly deadAfter?: Duration.DurationInput
}

/** The default `deadAfter`: 5 minutes. */
export const DEFAULT_DEAD_AFTER: Duration.DurationInput = "5 minutes"

/**
 * Completes, with the reason, when another runner recorded this runner's own ledger run `crashed`
 * (`RunnerOptions.deadAfter`); never without the ledger. Whoever launched the runner should stop
 * it then (`warden runner` exits 1).
 */
export class RunnerCrashed extends Context.Tag("@warden/cluster/Runner/RunnerCrashed")<
  RunnerCrashed,
  { readonly await: Effect.Effect<string> }
>() {}

/** The default `leaseMargin`: a fifth of the lock expiration. */
export const defaultLeaseMargin = (shardLockExpiration: Duration.DurationInput): Duration.Duration =>
  Duration.unsafeDivide(Duration.decode(shardLockExpiration), 5)

/** The lease book a runner's lock storage renews and its handlers read. */
class LeaseBook extends Context.Tag("@warden/cluster/Runner/LeaseBook")<LeaseBook, ShardLease.LeaseBook>() {}

/**
 * The lease (`ShardLease`, read by the handlers) and its book, from the engine's configuration.
 * A margin that leaves no lease at all is a defect of the runner's configuration.
 */
const leaseLayer = (margin: Duration.DurationInput | undefined) =>
  Layer.effectContext(
    Effect.gen(function* () {
      const config = yield* ShardingConfig.ShardingConfig
      const expiration = Duration.decode(config.shardLockExpiration)
      const chosen = margin === undefined ? defaultLeaseMargin(expiration) : Duration.decode(margin)
      if (Duration.toMillis(chosen) <= 0 || Duration.greaterThanOrEqualTo(chosen, expiration)) {
        return yield* Effect.dieMessage(
          `leaseMargin (${Duration.format(chosen)}) must be positive and below shardLockExpiration (${Duration.format(expiration)})`
        )
      }
      const book = ShardLease.makeBook({ expiration, margin: chosen })
      return Context.make(LeaseBook, book).pipe(Context.add(ShardLease.ShardLease, book))
    })
  )

/** The engine's SQL lock storage, reporting every acquire, refresh and release to the lease book. */
const leasedRunnerStorage = Layer.scoped(
  RunnerStorage.RunnerStorage,
  Effect.gen(function* () {
    const storage = yield* Effect.orDie(SqlRunnerStorage.make({ prefix: Storage.ENGINE_TABLE_PREFIX }))
    return ShardLease.leasedStorage(storage, yield* LeaseBook)
  })
)

/** The engine's settings for a runner (or a client, `runnerAddress: None`), with Warden's defaults. */
export const shardingConfig = (
  address: Option.Option<RunnerAddress.RunnerAddress>,
  overrides: Partial<ShardingConfig.ShardingConfig["Type"]> = {}
): Partial<ShardingConfig.ShardingConfig["Type"]> => ({
  runnerAddress: address,
  runnerListenAddress: Option.none(),
  shardsPerGroup: 300,
  ...overrides
})

/**
 * The runner: the work item entity registered with sharding, over the local supervisor (built
 * from the `Transport` provided: `CodexCommand.transportLayer` in production, a fake in tests)
 * and the engine's socket and SQL layers (on the `SqlClient` provided, see `Storage.layer`).
 *
 * The engine's lock storage reports every shard lock acquire, refresh and release to the
 * runner's lease (`leaseMargin`), which the items' handlers check: an item whose shard's lease
 * runs out is stopped before the shard can go to another runner, and every write a runner makes
 * for an item is conditional on the epoch it took the item at (docs/scaling.md, "Fencing").
 *
 * Release order follows the graph: the entity registration closes first (every running item is
 * interrupted; its `Run` has no stored reply, so the next owner of its shard runs it again), then
 * the supervisor (cards still open are refused `shutdown`), then sharding and SQL.
 *
 * @example
 * ```ts
 * const RunnerLive = Runner.layer({ host: "10.0.0.5", port: 34431, supervisor: { pool: 2 } }).pipe(
 *   Layer.provide(CodexCommand.transportLayer({ command: "codex" })),
 *   Layer.provide(Storage.layer("postgres://warden@db/warden"))
 * )
 * Layer.launch(RunnerLive).pipe(NodeRuntime.runMain)
 * ```
 */
export const layer = (
  options: RunnerOptions
): Layer.Layer<
  Supervisor.Supervisor | Sharding.Sharding | Handlers.RunnerInfo | RunnerCrashed,
  Config.ConfigError | ConfigError.ConfigError | SocketServerError,
  SqlClient.SqlClient | Transport.Transport
> => {
  const runId = options.runId ?? RunId.make()
  const config = shardingConfig(Option.some(RunnerAddress.make(options.host, options.port)), options.sharding)
  // The engine's socket runner over storage of our making: its own SQL message storage, and its
  // SQL lock storage reporting to the lease book (the lease and the engine read one configuration).
  const lease = leaseLayer(options.leaseMargin).pipe(Layer.provideMerge(ShardingConfig.layerFromEnv(config)))
  const sharding = NodeClusterSocket.layer({ storage: "byo", shardingConfig: config }).pipe(
    Layer.provide(
      Layer.merge(
        Layer.orDie(SqlMessageStorage.layerWith({ prefix: Storage.ENGINE_TABLE_PREFIX })),
        leasedRunnerStorage
      )
    ),
    Layer.provideMerge(lease)
  )
  const address = `${options.host}:${options.port}`
  const supervisor = Supervisor.layer({ ...options.supervisor, runId })
  if (options.ledger !== true) {
    return entityLayer({ runId, address, threadState: options.threadState ?? true }).pipe(
      Layer.provideMerge(supervisor),
      Layer.provideMerge(sharding),
      Layer.merge(Layer.succeed(RunnerCrashed, { await: Effect.never }))
    )
  }
  const deadAfter = Duration.decode(options.deadAfter ?? DEFAULT_DEAD_AFTER)
  const expiration = Duration.decode(config.shardLockExpiration ?? "35 seconds")
  if (Duration.lessThanOrEqualTo(deadAfter, expiration))
    return Layer.die(
      new Error(
        `deadAfter (${Duration.format(deadAfter)}) must be above shardLockExpiration (${Duration.format(expiration)})`
      )
    )
  // The ledger is built before the supervisor and closed after it, so that the refusals the
  // supervisor writes while it stops are recorded (docs/ledger.md).
  const recording = Layer.scopedContext(
    Effect.gen(function* () {
      const ledger = yield* Ledger.Ledger
      const run = yield* ledger.beginRun({ id: runId, label: `runner ${address}`, info: { address } })
      yield* run.attach(yield* Supervisor.Supervisor)
      // The dead runners' runs recorded crashed; this one's own, found so, completes `RunnerCrashed`.
      const crashed = yield* Deferred.make<string>()
      yield* Effect.forkScoped(DeadRuns.sweep({ ledger, self: runId, deadAfter, crashed }))
      return Context.make(Handlers.LedgerRecording, { ledger, run }).pipe(
        Context.add(RunnerCrashed, { await: Deferred.await(crashed) })
      )
    })
  )
  return entityLayer({ runId, address, threadState: options.threadState ?? true }).pipe(
    Layer.provideMerge(recording),
    Layer.provideMerge(supervisor),
    Layer.provideMerge(Layer.orDie(Ledger.layer())),
    Layer.provideMerge(sharding)
  ) as Layer.Layer<
    Supervisor.Supervisor | Sharding.Sharding | Handlers.RunnerInfo | RunnerCrashed,
    Config.ConfigError | ConfigError.ConfigError | SocketServerError,
    SqlClient.SqlClient | Transport.Transport
  >
}

/**
 * The work item entity alone, registered with the `Sharding` in context over the `Supervisor` and
 * `SqlClient` in context: what `layer` builds on, for a runner with a sharding of its own making
 * (`TestRunner.layer` in tests, `SingleRunner.layer`, another transport). `host` defaults to this
 * machine's name and `codexHome` to `$CODEX_HOME`, else `~/.codex`. Its writes are fenced by the
 * items' epochs as `layer`'s are; it has no lease of its own (a shard is held for as long as the
 * engine keeps it here), since only `layer` wires one to the engine's lock storage.
 */
export const entityLayer = (info: {
  readonly runId: string
  readonly address: string
  readonly host?: string
  readonly codexHome?: string
  /** Keep the items' thread state in the store (default true; `RunnerOptions.threadState`). */
  readonly threadState?: boolean
}): Layer.Layer<
  Handlers.RunnerInfo | Handlers.LocalItems,
  never,
  Sharding.Sharding | Supervisor.Supervisor | SqlClient.SqlClient
> =>
  WorkItemEntity.toLayer(Handlers.make, { concurrency: "unbounded", maxIdleTime: "5 minutes" }).pipe(
    Layer.provide(ItemStore.layer),
    Layer.provideMerge(Layer.sync(Handlers.LocalItems, () => new Map())),
    Layer.provideMerge(
      Layer.succeed(Handlers.RunnerInfo, {
        runId: info.runId,
        address: info.address,
        host: info.host ?? Os.hostname(),
        codexHome: info.codexHome ?? process.env["CODEX_HOME"] ?? Path.join(Os.homedir(), ".codex"),
        threadState: info.threadState ?? true
      })
    )
  )
