/**
 * The supervisor's configuration, decoded once, at construction, with the approvals package's
 * Schema building blocks.
 *
 * `Supervisor.make`, `createSupervisor` and the CLI decode it: durations, counts, rules, deadlines
 * and the handler are checked there, and a bad value is a `ConfigError` naming every field at
 * fault, never a defect later on the read loop.
 */
import { Config as ApprovalsConfig } from "@warden/approvals"
import type { ClientMethods } from "@warden/protocol"
import { Either, Schema } from "effect"
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
const sameAsProtocol: Schema.Schema<typeof ClientMethods.ClientInfo.Type, typeof ClientMethods.ClientInfo.Encoded> = ClientInfoSetting
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
  admission: optional(Schema.Struct({
    adaptive: optional(Schema.Boolean),
    cooldown: optional(DurationSetting),
    recoverAfter: optional(DurationSetting)
  })),
  pool: optional(PositiveCount),
  restart: optional(RestartSetting),
  runBudget: optional(Schema.Struct({ maxTokens: PositiveCount })),
  runId: optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._-]{1,64}$/, { message: () => "letters, digits, '.', '_' or '-', 1 to 64 of them" })))
})

/**
 * Decode a supervisor configuration, strictly (an unknown key is an error). `Supervisor.make` and
 * `createSupervisor` call it first; it returns `Left` with a `ConfigError` naming every field at
 * fault.
 */
export const decode = (input: unknown): Either.Either<SupervisorConfig, ConfigError> =>
  ApprovalsConfig.decodeWith(SupervisorSetting, input) as Either.Either<SupervisorConfig, ConfigError>
