/**
 * Configuration (durations, rules, deadlines, counts), decoded once, at construction, with Schema.
 * A bad value (from an untyped JavaScript caller, a JSON file, a cast) is a `ConfigError` that
 * names every field at fault, at `make` time, never a defect later while a frame is handled.
 *
 * Durations are what `Duration.decode` takes (`"5 minutes"`, `"300 millis"`, a number of
 * milliseconds, a `Duration`); decoded, they are `Duration` values, so nothing downstream decodes
 * again. The schemas here are the building blocks the supervisor's configuration reuses.
 */
import { Data, Duration, Either, Option, ParseResult, Predicate, Schema } from "effect"
import type { ApprovalsConfig } from "./Approvals.js"
import * as Policy from "./Policy.js"

/** A configuration value is wrong. `issues` name the field and what was expected, one per line. */
export class ConfigError extends Data.TaggedError("ConfigError")<{
  readonly issues: ReadonlyArray<string>
}> {
  override get message(): string {
    return `invalid configuration: ${this.issues.join("; ")}`
  }
}

const shown = (value: unknown): string => {
  if (typeof value === "bigint") return `${value}n`
  if (typeof value === "function") return "a function"
  try {
    return (JSON.stringify(value) ?? String(value)).slice(0, 60)
  } catch {
    return "(unprintable)"
  }
}

/** A duration, as `Duration.decode` takes it, not negative, not NaN. Decodes to a `Duration`. */
export const DurationSetting = Schema.declare(
  (input: unknown): input is Duration.DurationInput => {
    // Duration.decode reads a negative number as zero: a deadline of -5 must not mean "now".
    if (typeof input === "number" && !(input >= 0)) return false
    if (typeof input === "bigint" && input < 0n) return false
    if (typeof input === "string" && /^\s*-/.test(input)) return false
    return Option.isSome(Duration.decodeUnknown(input))
  },
  {
    identifier: "Duration",
    message: (issue) => ({
      message: `expected a duration such as "5 minutes", "300 millis" or a number of milliseconds, not ${shown(issue.actual)}`,
      override: true
    })
  }
).pipe(
  Schema.transform(Schema.DurationFromSelf, {
    strict: true,
    decode: (input) => Duration.decode(input),
    encode: (duration) => duration
  })
)

const integer = (min: number, what: string) =>
  Schema.Number.pipe(
    Schema.filter((n) => Number.isSafeInteger(n) && n >= min, {
      message: (issue) => ({ message: `expected ${what}, not ${shown(issue.actual)}`, override: true })
    })
  ).annotations({
    message: (issue) => ({ message: `expected ${what}, not ${shown(issue.actual)}`, override: true })
  })

/** A whole number of at least 1 (concurrency, pool size, limits). */
export const PositiveCount = integer(1, "a whole number of at least 1")
/** A whole number of at least 0 (retries, restarts, history). */
export const Count = integer(0, "a whole number of at least 0")

const fn = Schema.declare(
  (input: unknown): input is (...args: ReadonlyArray<never>) => unknown => Predicate.isFunction(input),
  {
    identifier: "Function",
    message: (issue) => ({ message: `expected a function, not ${shown(issue.actual)}`, override: true })
  }
)

const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { exact: true })

/** The schema of card deadlines, `default` and `perMethod` (by server-request method), each a `DurationSetting`. */
export const DeadlinesSetting = Schema.Struct({
  default: optional(DurationSetting),
  perMethod: optional(Schema.Record({ key: Schema.String, value: DurationSetting }))
})

/** The schema of the safety filter's bounds (questions, choices, text, label and URL lengths), each a `PositiveCount`. */
export const SafetyLimitsSetting = Schema.Struct({
  maxQuestions: optional(PositiveCount),
  maxChoices: optional(PositiveCount),
  maxTextLength: optional(PositiveCount),
  maxLabelLength: optional(PositiveCount),
  maxUrlLength: optional(PositiveCount)
})

/** The approvals engine's configuration (see `ApprovalsConfig`). */
export const ApprovalsSetting = Schema.Struct({
  deadlines: optional(DeadlinesSetting),
  // Read when a configuration has rules: the published `warden run` builds Policy's schemas on
  // first use, after codex is spawned when no rules are given (docs/performance.md, "Start-up").
  rules: optional(Schema.suspend((): Schema.Schema<Policy.Rules, typeof Policy.Rules.Encoded> => Policy.Rules)),
  handler: optional(fn),
  remembered: optional(fn),
  safety: optional(SafetyLimitsSetting),
  settledHistory: optional(Count)
})

/**
 * Issues as lines naming the path and the problem (at most sixteen).
 *
 * For example `concurrency: expected a whole number of at least 1, not 0`.
 */
export const formatIssues = (error: ParseResult.ParseError): ReadonlyArray<string> => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const lines = issues
    .slice(0, 16)
    .map((issue) =>
      issue._tag === "Unexpected"
        ? `${issue.path.map(String).join(".")}: unknown setting (misspelt?)`
        : `${issue.path.length > 0 ? `${issue.path.map(String).join(".")}: ` : ""}${issue.message}`
    )
  return issues.length > lines.length ? [...lines, `and ${issues.length - lines.length} more`] : lines
}

/**
 * Decode a configuration with `schema`, strictly (an unknown key is an error, since a misspelt
 * setting must not be silently ignored). `undefined` or `null` decode as `{}`. Every issue is
 * collected into one `ConfigError` (see {@link formatIssues}).
 */
export const decodeWith = <A, I>(schema: Schema.Schema<A, I>, input: unknown): Either.Either<A, ConfigError> =>
  Either.mapLeft(
    Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(input ?? {}),
    (error) => new ConfigError({ issues: formatIssues(error) })
  )

/** The approvals engine's configuration, decoded (durations as `Duration`s, rules checked). */
export const decode = (input: unknown): Either.Either<ApprovalsConfig, ConfigError> =>
  decodeWith(ApprovalsSetting, input) as Either.Either<ApprovalsConfig, ConfigError>
