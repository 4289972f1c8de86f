/**
 * The pinned codex binary's own protocol schema (`generate-json-schema`, offline), generated once
 * per process, and a validator for what Warden writes back to server requests. Shared by every
 * package's conformance tests.
 */
import * as SchemaDump from "@warden/protocol/SchemaDump"
import { Effect } from "effect"
import * as RealCodex from "./RealCodex.js"

const loaded = Effect.runSync(
  Effect.cached(
    Effect.gen(function* () {
      const binary = yield* RealCodex.binaryPath
      const dump = yield* SchemaDump.generate(binary)
      return { dump, validator: SchemaDump.makeValidator(dump) }
    })
  )
)

/**
 * The pinned binary's schema dump (`SchemaDump.generate`), generated on first use and cached for
 * the process. Fails with `RealCodexError` (no binary) or `SchemaDumpError` (generation failed).
 */
export const dump = Effect.map(loaded, (l) => l.dump)

/**
 * Validate the `result` of a reply to `method` against the pinned response schema.
 *
 * The verdict is `Valid`, `Invalid` (with the errors) or `Unavailable`. Fails as {@link dump} does.
 */
export const validateAnswer = (method: string, value: unknown) =>
  Effect.map(loaded, (l) => l.validator.serverRequestResponse(method, value))
