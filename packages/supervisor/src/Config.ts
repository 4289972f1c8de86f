/**
 * The supervisor's configuration, decoded once, at construction, with the approvals package's
 * Schema building blocks.
 *
 * Resolved once, too: every default is written here, in {@link defaults}, and nowhere else.
 *
 * `Supervisor.make`, `createSupervisor` and the CLI decode it: durations, counts, rules, deadlines
 * and the handler are checked there, and a bad value is a `ConfigError` naming every field at
 * fault, never a defect later on the read loop. `Supervisor.make` then reads one
 * {@link ResolvedConfig} (from {@link resolve}), a value with every field set, so no part of the
 * engine falls back to a default of its own.
 */
import { Config as ApprovalsConfig } from "@warden/approvals"
import type { Approvals } from "@warden/approvals"
import type { ClientMethods } from "@warden/protocol"
import { Duration, Effect, Either, Option, Schema } from "effect"
import * as RunId from "./RunId.js"
import type { SupervisorConfig } from "./Supervisor.js"

/**
 * A configuration value is wrong, with `issues` naming every field at fault.
 *
 * Issues read like `approvals.deadlines.default: expected a duration ...` or `stallTimout: unknown
 * setting (misspelt?)`. This is the approvals package's `ConfigError`, re-exported: one error type
 * for the whole configuration.
 */
export type ConfigError = ApprovalsConfig.ConfigError
export const ConfigError = ApprovalsConfig.ConfigError

const { Count, DurationSetting, PositiveCount } = ApprovalsConfig
const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { exact: true })

/**
 * The schema of `SupervisorConfig.connection.clientInfo`: who we are in `initialize` (`name` must
 * be a valid HTTP header value). The shape of the protocol's `ClientMethods.ClientInfo` (the
 * compiler checks they are the same), defined here so that checking a configuration does not build
 * the protocol's client-method schemas: `warden run` checks its configuration before codex is
 * spawned, and they are not needed until the handshake (docs/performance.md, "Start-up").
 */
const ClientInfoSetting = Schema.Struct({
  name: Schema.String,
  title: Schema.optional(Schema.String),
  version: Schema.String
})
const sameAsProtocol: Schema.Schema<typeof ClientMethods.ClientInfo.Type, typeof ClientMethods.ClientInfo.Encoded> =
  ClientInfoSetting
void sameAsProtocol

/** The schema of `SupervisorConfig.connection` (client info, request deadlines, overload retries, capabilities). */
export const ConnectionSetting = Schema.Struct({
  clientInfo: optional(ClientInfoSetting),
  requestTimeout: optional(DurationSetting),
  requestTimeouts: optional(Schema.Record({ key: Schema.String, value: DurationSetting })),
  overloadRetries: optional(Count),
  overloadBackoff: optional(DurationSetting),
  capabilities: optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})

/** The schema of `SupervisorConfig.restart` (policy `resume` or `fail`, attempts, backoff, stable period). */
export const RestartSetting = Schema.Struct({
  policy: optional(Schema.Literal("resume", "fail")),
  maxAttempts: optional(Count),
  backoff: optional(DurationSetting),
  stableAfter: optional(DurationSetting)
})

/**
 * The schema of a whole `SupervisorConfig`, decoded strictly by `decode`.
 *
 * Durations, counts (at least 1 for `concurrency` and `pool`), the approvals part and the nested
 * settings above.
 */
export const SupervisorSetting = Schema.Struct({
  connection: optional(ConnectionSetting),
  approvals: optional(ApprovalsConfig.ApprovalsSetting),
  stallTimeout: optional(DurationSetting),
  interruptTimeout: optional(DurationSetting),
  concurrency: optional(PositiveCount),
  admission: optional(
    Schema.Struct({
      adaptive: optional(Schema.Boolean),
      cooldown: optional(DurationSetting),
      recoverAfter: optional(DurationSetting)
    })
  ),
  pool: optional(PositiveCount),
  restart: optional(RestartSetting),
  runBudget: optional(Schema.Struct({ maxTokens: PositiveCount })),
  runId: optional(
    Schema.String.pipe(
      Schema.pattern(/^[A-Za-z0-9._-]{1,64}$/, { message: () => "letters, digits, '.', '_' or '-', 1 to 64 of them" })
    )
  )
})

/**
 * Decode a supervisor configuration, strictly (an unknown key is an error). `Supervisor.make` and
 * `createSupervisor` call it first; it returns `Left` with a `ConfigError` naming every field at
 * fault.
 */
export const decode = (input: unknown): Either.Either<SupervisorConfig, ConfigError> =>
  ApprovalsConfig.decodeWith(SupervisorSetting, input) as Either.Either<SupervisorConfig, ConfigError>

/**
 * The app-server connection's settings with every default applied (see {@link ResolvedConfig}).
 */
export interface ResolvedConnection {
  /** Who we are in `initialize`. */
  readonly clientInfo: typeof ClientMethods.ClientInfo.Type
  /** The deadline of our requests unless `requestTimeouts` names their method. */
  readonly requestTimeout: Duration.Duration
  /** Deadlines by client method. */
  readonly requestTimeouts: ReadonlyMap<string, Duration.Duration>
  /** Retries of a `-32001` (server overloaded) answer. */
  readonly overloadRetries: number
  /** The first back-off before such a retry (doubling, capped at 5 seconds, with jitter). */
  readonly overloadBackoff: Duration.Duration
  /** Capabilities sent in `initialize`, if any. */
  readonly capabilities: Option.Option<Readonly<Record<string, unknown>>>
}

/**
 * A supervisor configuration with every default applied, as {@link resolve} makes it once: no
 * field is optional, durations are `Duration`s. What the engine's parts read; an embedder writes a
 * `SupervisorConfig`.
 */
export interface ResolvedConfig {
  /** The app-server connection (see `SupervisorConfig.connection`). */
  readonly connection: ResolvedConnection
  /**
   * The approvals engine's configuration, decoded; the supervisor's default engine is built from
   * it (the approvals engine applies its own defaults: card deadlines, safety limits, history).
   */
  readonly approvals: Approvals.ApprovalsConfig
  /** The stall watchdog. */
  readonly stallTimeout: Duration.Duration
  /** turn/interrupt's deadline before the connection is recycled. */
  readonly interruptTimeout: Duration.Duration
  /** Running work items at most. */
  readonly concurrency: number
  /** Adaptive admission. */
  readonly admission: {
    readonly adaptive: boolean
    readonly cooldown: Duration.Duration
    readonly recoverAfter: Duration.Duration
  }
  /** App-server processes. */
  readonly pool: number
  /** Restarts of a dead app-server and the fate of its work items. */
  readonly restart: {
    readonly policy: "resume" | "fail"
    readonly maxAttempts: number
    readonly backoff: Duration.Duration
    readonly stableAfter: Duration.Duration
  }
  /** The run's token budget, when it has one. */
  readonly runBudget: Option.Option<{ readonly maxTokens: number }>
  /** This run's name in work items' branches. */
  readonly runId: string
}

/**
 * Every default of the supervisor's configuration, in one place (the run id, new for every
 * supervisor, is made by {@link resolve}). The values the `SupervisorConfig` TSDoc promises: one
 * app-server, four work items at a time, a 10-minute stall watchdog, 30 seconds for a
 * turn/interrupt, 2 minutes per request, five overload retries from 100 ms, restarts from 1 second
 * at most three times in a row (reset after 60 seconds up), items resumed on the new app-server.
 */
export const defaults: Omit<ResolvedConfig, "runId"> = {
  connection: {
    clientInfo: { name: "warden", title: "Warden", version: "0.1.0" },
    requestTimeout: Duration.minutes(2),
    requestTimeouts: new Map(),
    overloadRetries: 5,
    overloadBackoff: Duration.millis(100),
    capabilities: Option.none()
  },
  approvals: {},
  stallTimeout: Duration.minutes(10),
  interruptTimeout: Duration.seconds(30),
  concurrency: 4,
  admission: { adaptive: false, cooldown: Duration.seconds(5), recoverAfter: Duration.seconds(30) },
  pool: 1,
  restart: { policy: "resume", maxAttempts: 3, backoff: Duration.seconds(1), stableAfter: Duration.seconds(60) },
  runBudget: Option.none()
}

/** A configuration as the schema decodes it: durations are `Duration`s already. */
type Decoded = typeof SupervisorSetting.Type

const resolveDecoded = (config: Decoded, runId: string): ResolvedConfig => {
  const connection = config.connection ?? {}
  const admission = config.admission ?? {}
  const restart = config.restart ?? {}
  const given = defaults.connection
  return {
    connection: {
      clientInfo: connection.clientInfo ?? given.clientInfo,
      requestTimeout: connection.requestTimeout ?? given.requestTimeout,
      requestTimeouts:
        connection.requestTimeouts === undefined
          ? given.requestTimeouts
          : new Map(Object.entries(connection.requestTimeouts)),
      overloadRetries: connection.overloadRetries ?? given.overloadRetries,
      overloadBackoff: connection.overloadBackoff ?? given.overloadBackoff,
      capabilities: Option.fromNullable(connection.capabilities)
    },
    approvals: (config.approvals ?? defaults.approvals) as Approvals.ApprovalsConfig,
    stallTimeout: config.stallTimeout ?? defaults.stallTimeout,
    interruptTimeout: config.interruptTimeout ?? defaults.interruptTimeout,
    concurrency: config.concurrency ?? defaults.concurrency,
    admission: {
      adaptive: admission.adaptive ?? defaults.admission.adaptive,
      cooldown: admission.cooldown ?? defaults.admission.cooldown,
      recoverAfter: admission.recoverAfter ?? defaults.admission.recoverAfter
    },
    pool: config.pool ?? defaults.pool,
    restart: {
      policy: restart.policy ?? defaults.restart.policy,
      maxAttempts: restart.maxAttempts ?? defaults.restart.maxAttempts,
      backoff: restart.backoff ?? defaults.restart.backoff,
      stableAfter: restart.stableAfter ?? defaults.restart.stableAfter
    },
    runBudget: config.runBudget === undefined ? defaults.runBudget : Option.some(config.runBudget),
    runId
  }
}

/**
 * Decode a supervisor configuration (as {@link decode}) and apply every default: the one
 * {@link ResolvedConfig} the supervisor reads. Fails with a `ConfigError` naming every field at
 * fault; a configuration without `runId` gets a new one (`RunId.make`).
 */
export const resolve = (input: unknown): Effect.Effect<ResolvedConfig, ConfigError> =>
  Either.match(ApprovalsConfig.decodeWith(SupervisorSetting, input), {
    onLeft: Effect.fail,
    onRight: (config) => Effect.sync(() => resolveDecoded(config, config.runId ?? RunId.make()))
  })
