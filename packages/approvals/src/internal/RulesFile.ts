/**
 * Reading a rules file: `.json`, `.yaml` or `.yml`, at most `MaxRulesFileBytes`, parsed (the YAML
 * parser for both, which also reports duplicate keys) and decoded strictly (`RuleSchema`). Each
 * failure says at which step (`RulesFileError.reason`).
 */
import { Data, Effect, Either } from "effect"
import { readFile, stat } from "node:fs/promises"
import { extname } from "node:path"
import * as YAML from "yaml"
import type { Rules } from "./RuleSchema.js"
import { decodeRules } from "./RuleSchema.js"

/**
 * A rules file could not be used; `reason` says at which step.
 *
 * `Read` (missing, not a regular file,
 * larger than {@link MaxRulesFileBytes}, unreadable), `Extension` (not `.json`, `.yaml` or `.yml`),
 * `Parse` (not valid JSON or YAML, duplicate keys), `Schema` (not a valid rules document).
 */
export class RulesFileError extends Data.TaggedError("RulesFileError")<{
  readonly path: string
  readonly reason: "Read" | "Extension" | "Parse" | "Schema"
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `rules file ${this.path}: ${this.detail}`
  }
}

/** Rules files larger than this are refused (a policy is small; a huge file is a mistake). */
export const MaxRulesFileBytes = 1_048_576

const parseText = (path: string, text: string, format: "json" | "yaml"): Either.Either<unknown, RulesFileError> => {
  const fail = (detail: string, cause?: unknown) =>
    Either.left(new RulesFileError({ path, reason: "Parse", detail, cause }))
  if (format === "json") {
    try {
      JSON.parse(text)
    } catch (cause) {
      return fail(`is not valid JSON: ${cause instanceof Error ? cause.message : String(cause)}`, cause)
    }
  }
  // JSON is YAML 1.2; the YAML parser also reports duplicate keys, which JSON.parse silently merges.
  const doc = YAML.parseDocument(text, { uniqueKeys: true, prettyErrors: true, schema: "core", merge: false })
  if (doc.errors.length > 0) {
    const first = doc.errors[0]!
    const more = doc.errors.length > 1 ? ` (and ${doc.errors.length - 1} more)` : ""
    return fail(
      `is not valid ${format === "json" ? "JSON" : "YAML"}: ${first.message.split("\n")[0]!.replace(/:\s*$/, "")}${more}`,
      first
    )
  }
  try {
    return Either.right(doc.toJS({ maxAliasCount: 100 }))
  } catch (cause) {
    return fail(`could not be read as data: ${cause instanceof Error ? cause.message : String(cause)}`, cause)
  }
}

/**
 * Parse and decode rules text; `format` is what the file extension said. Fails with a
 * `RulesFileError` of reason `Parse` or `Schema`; `path` only names the source in messages.
 */
export const parse = (path: string, text: string, format: "json" | "yaml"): Either.Either<Rules, RulesFileError> =>
  Either.flatMap(parseText(path, text, format), (data) => {
    if (data === null || data === undefined) {
      return Either.left(
        new RulesFileError({ path, reason: "Schema", detail: "is empty; expected an object with a rules list" })
      )
    }
    return Either.mapLeft(
      decodeRules(data),
      (detail) => new RulesFileError({ path, reason: "Schema", detail: `is not a valid rules file: ${detail}` })
    )
  })

/**
 * Read a rules file (`.json`, `.yaml` or `.yml`), decoded strictly (an unknown key is an error).
 * Fails with a `RulesFileError` (see its `reason`).
 *
 * @example
 * ```ts
 * import { Policy } from "@warden/approvals"
 * import { Supervisor } from "@warden/supervisor"
 * import { Effect, Layer } from "effect"
 *
 * const WardenLive = Layer.unwrapEffect(
 *   Effect.map(Policy.load("warden-rules.yaml"), (rules) => Supervisor.layer({ approvals: { rules } }))
 * ) // fails with RulesFileError | ConfigError
 * ```
 */
export const load = (path: string): Effect.Effect<Rules, RulesFileError> =>
  Effect.gen(function* () {
    const ext = extname(path).toLowerCase()
    const format = ext === ".json" ? "json" : ext === ".yaml" || ext === ".yml" ? "yaml" : undefined
    if (format === undefined) {
      return yield* new RulesFileError({
        path,
        reason: "Extension",
        detail: `has extension "${ext}"; use .json, .yaml or .yml`
      })
    }
    const readError = (cause: unknown) =>
      new RulesFileError({
        path,
        reason: "Read",
        detail: `could not be read: ${cause instanceof Error ? cause.message : String(cause)}`,
        cause
      })
    const info = yield* Effect.tryPromise({ try: () => stat(path), catch: readError })
    if (!info.isFile()) return yield* new RulesFileError({ path, reason: "Read", detail: "is not a regular file" })
    if (info.size > MaxRulesFileBytes) {
      return yield* new RulesFileError({
        path,
        reason: "Read",
        detail: `is ${info.size} bytes; the limit is ${MaxRulesFileBytes}`
      })
    }
    const text = yield* Effect.tryPromise({ try: () => readFile(path, "utf8"), catch: readError })
    return yield* parse(path, text, format)
  })
