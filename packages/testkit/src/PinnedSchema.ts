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
    Effect.gen(function*() {
      const binary = yield* RealCodex.binaryPath
      const dump = yield* SchemaDump.generate(binary)
      return { dump, validator: SchemaDump.makeValidator(dump) }
    })
  )
)

export const dump = Effect.map(loaded, (l) => l.dump)

/** Validate the `result` of a reply to `method` against the pinned response schema. */
export const validateAnswer = (method: string, value: unknown) =>
  Effect.map(loaded, (l) => l.validator.serverRequestResponse(method, value))
