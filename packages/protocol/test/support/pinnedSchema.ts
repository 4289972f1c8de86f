/**
 * The pinned binary's own protocol schema, generated once per test file (~0.1 s + ~0.5 s of ajv
 * compilation on first use), and `validateAnswer`: check any answer or refusal we would write for
 * a server request against the response schema the binary publishes.
 *
 *   const verdict = yield* validateAnswer("item/commandExecution/requestApproval", { decision: "decline" })
 *   assert.deepStrictEqual(verdict, { _tag: "Valid" })
 */
import { Effect } from "effect"
import * as SchemaDump from "../../src/SchemaDump.js"
import { codexBinaryPath } from "./codexBinary.js"

const loaded = Effect.runSync(Effect.cached(
  Effect.suspend(() => SchemaDump.generate(codexBinaryPath())).pipe(
    Effect.map((dump) => ({ dump, validator: SchemaDump.makeValidator(dump) }))
  )
))

/** The dump of `generate-json-schema` of the pinned codex (stable surface, no --experimental). */
export const pinnedDump: Effect.Effect<SchemaDump.SchemaDump, SchemaDump.SchemaDumpError> = Effect.map(
  loaded,
  (l) => l.dump
)

export const pinnedValidator: Effect.Effect<SchemaDump.Validator, SchemaDump.SchemaDumpError> = Effect.map(
  loaded,
  (l) => l.validator
)

/**
 * Validate `value` (the `result` of our reply) against the pinned schema's response for `method`.
 * `Unavailable` means the dump has no such server request: treat it as a failure in tests.
 * Error frames are not results: there is nothing to validate for them.
 */
export const validateAnswer = (
  method: string,
  value: unknown
): Effect.Effect<SchemaDump.Validation, SchemaDump.SchemaDumpError> =>
  Effect.map(pinnedValidator, (validator) => validator.serverRequestResponse(method, value))
