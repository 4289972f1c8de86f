/**
 * Files the ledger ships beside its modules, found at run time: `relatives` resolved against this
 * module's location (the sources' `src/internal/`, the built package's `dist/internal/`, or the
 * CLI's bundle, where every module is the one file), the ones that exist, in order. A bundle whose
 * stand-in for the module's URL is not a file URL has none.
 */
import * as Fs from "node:fs"
import { fileURLToPath } from "node:url"

export const besideModule = (relatives: ReadonlyArray<string>): Array<string> => {
  const found: Array<string> = []
  for (const relative of relatives) {
    try {
      const file = fileURLToPath(new URL(relative, import.meta.url))
      if (Fs.existsSync(file)) found.push(file)
    } catch {
      // not a file URL (a bundle's stand-in): not there
    }
  }
  return found
}
