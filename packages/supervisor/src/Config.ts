/**
 * The supervisor's configuration, decoded once, at construction (`Supervisor.make`,
 * `createSupervisor`, the CLI), with the approvals package's Schema building blocks: durations,
 * counts, rules, deadlines and the handler are checked there, and a bad value is a `ConfigError`
 * naming every field at fault, never a defect later on the read loop.
 */
import { Config as ApprovalsConfig } from "@warden/approvals"
import { ClientMethods } from "@warden/protocol"
import { Either, Schema } from "effect"
import type { SupervisorConfig } from "./Supervisor.js"

export type ConfigError = ApprovalsConfig.ConfigError
export const ConfigError = ApprovalsConfig.ConfigError

const { Count, DurationSetting, PositiveCount } = ApprovalsConfig
const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { exact: true })

export const ConnectionSetting = Schema.Struct({
  clientInfo: optional(ClientMethods.ClientInfo),
  requestTimeout: optional(DurationSetting),
  requestTimeouts: optional(Schema.Record({ key: Schema.String, value: DurationSetting })),
  overloadRetries: optional(Count),
  overloadBackoff: optional(DurationSetting),
  capabilities: optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})

export const RestartSetting = Schema.Struct({
  policy: optional(Schema.Literal("resume", "fail")),
  maxAttempts: optional(Count),
  backoff: optional(DurationSetting),
  stableAfter: optional(DurationSetting)
})

export const SupervisorSetting = Schema.Struct({
  connection: optional(ConnectionSetting),
  approvals: optional(ApprovalsConfig.ApprovalsSetting),
  stallTimeout: optional(DurationSetting),
  interruptTimeout: optional(DurationSetting),
  concurrency: optional(PositiveCount),
  pool: optional(PositiveCount),
  restart: optional(RestartSetting)
})

/** Decode a supervisor configuration (strict: an unknown key is an error). */
export const decode = (input: unknown): Either.Either<SupervisorConfig, ConfigError> =>
  ApprovalsConfig.decodeWith(SupervisorSetting, input) as Either.Either<SupervisorConfig, ConfigError>
