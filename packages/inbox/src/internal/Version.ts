/**
 * The package's version, from its package.json (two levels above `src/internal/` and
 * `dist/internal/`); the CLI's bundles write it in as a constant (scripts/build.mjs).
 */
import * as Fs from "node:fs"

/** `@warden/inbox`'s version (the OpenAPI document's). */
export const version: string = (
  JSON.parse(Fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { readonly version: string }
).version
