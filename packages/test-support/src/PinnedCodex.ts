/**
 * The pinned codex as this repository's tests check it: the version the workspace pins and the one
 * installed; the binary's own protocol schema (the test kit's `PinnedSchema.dump`) and one
 * validator of it, both made once per test file (~0.1 s + ~0.5 s of ajv compilation on first use);
 * and `validateAnswer`: check any answer or refusal we would write for a server request against
 * the response schema the binary publishes.
 *
 *   const verdict = yield* validateAnswer("item/commandExecution/requestApproval", { decision: "decline" })
 *   assert.deepStrictEqual(verdict, { _tag: "Valid" })
 */
import * as SchemaDump from "@warden/protocol/SchemaDump"
import type { RealCodex } from "@warden/testkit"
import { PinnedSchema } from "@warden/testkit"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"

/** The codex version Warden is tested against (the workspace's `@openai/codex` devDependency). */
export const PinnedCodexVersion = "0.171.0"

const requireHere = createRequire(import.meta.url)

/** The version of the `@openai/codex` package installed in the workspace. */
export const installedCodexVersion = (): string => {
  const manifest = requireHere.resolve("@openai/codex/package.json")
  return (JSON.parse(readFileSync(manifest, "utf8")) as { readonly version: string }).version
}

/** The dump of `generate-json-schema` of the pinned codex (stable surface, no --experimental). */
export const pinnedDump: Effect.Effect<SchemaDump.SchemaDump, SchemaDump.SchemaDumpError | RealCodex.RealCodexError> =
  PinnedSchema.dump

/** A validator of the pinned dump, made once per process. */
export const pinnedValidator: Effect.Effect<
  SchemaDump.Validator,
  SchemaDump.SchemaDumpError | RealCodex.RealCodexError
> = Effect.runSync(Effect.cached(Effect.map(pinnedDump, SchemaDump.makeValidator)))

/**
 * Validate `value` (the `result` of our reply) against the pinned schema's response for `method`.
 * `Unavailable` means the dump has no such server request: treat it as a failure in tests.
 * Error frames are not results: there is nothing to validate for them.
 */
export const validateAnswer = (
  method: string,
  value: unknown
): Effect.Effect<SchemaDump.Validation, SchemaDump.SchemaDumpError | RealCodex.RealCodexError> =>
  Effect.map(pinnedValidator, (validator) => validator.serverRequestResponse(method, value))
