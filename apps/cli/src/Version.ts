/** The CLI's version, from its package.json. */
import { createRequire } from "node:module"

export const version: string = (createRequire(import.meta.url)("../package.json") as { readonly version: string }).version
