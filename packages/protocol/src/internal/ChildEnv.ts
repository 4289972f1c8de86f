/**
 * The environment of the child `SchemaDump.generate` starts (`codex app-server
 * generate-json-schema`): this process's, without Warden's own variables (`WARDEN_*`) and without
 * any variable holding a value Warden withholds from its children.
 *
 * The rule is the transport's (`ChildEnv` of `@warden/transport`, which every other child of
 * Warden gets through): the protocol never imports the transport (docs/architecture.md,
 * "Layering"), so it reads the same process-wide set of withheld values (Effect's `globalValue`
 * under the same name; `ChildEnv.withhold` adds to it) and applies the same rule here.
 * packages/protocol/test/ChildEnv.test.ts holds the two together.
 */
import { GlobalValue } from "effect"

/** The values no child's environment may hold (the transport's `ChildEnv.withhold` adds them). */
const withheld = GlobalValue.globalValue(Symbol.for("@warden/ChildEnv/withheld"), () => new Set<string>())

/** Secrets shorter than this are matched as whole values only (a short one would match inside PATH). */
const MinContained = 8

const isWardenOwn = (name: string): boolean => name.toUpperCase().startsWith("WARDEN_")

const holdsWithheld = (value: string): boolean => {
  for (const secret of withheld) {
    if (value === secret || (secret.length >= MinContained && value.includes(secret))) return true
  }
  return false
}

/** The environment a child gets from `env`, as the transport's `ChildEnv.make` gives it. */
export const make = (env: Readonly<Record<string, string | undefined>> = process.env): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || isWardenOwn(name) || holdsWithheld(value)) continue
    out[name] = value
  }
  return out
}
