/** The CLI's version, from its package.json (beside `src/` and `dist/`, and the bundle in `dist/`). */
import * as Fs from "node:fs"

export const version: string = (JSON.parse(Fs.readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { readonly version: string }).version
