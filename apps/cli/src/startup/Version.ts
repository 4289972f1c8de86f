/**
 * The CLI's version, from its package.json: two folders up from this module in `src/startup/` and
 * `dist/startup/`. The bundles in `dist/` have it written in as a constant (scripts/build.mjs,
 * inlineVersion), since their own URL is the bundle's.
 */
import * as Fs from "node:fs"

export const version: string = (
  JSON.parse(Fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { readonly version: string }
).version
