/**
 * Where the ledger's writer thread (`WriterWorker`) is started from, if anywhere:
 *
 * - `WARDEN_LEDGER_WORKER` in the environment: a script's path, or `off` (the writer then runs on
 *   the main thread: what `Ledger.make` on any `SqlClient` does);
 * - else `ledger-writer.cjs` beside the running module: the CLI's bundle (`scripts/build.mjs`
 *   writes it next to `warden-run.cjs`);
 * - else `WriterWorker.js` beside this module: the built package (`dist/internal/`).
 *
 * Run from the TypeScript sources (tests, `pnpm warden`) neither file is there, so the writer runs
 * on the main thread unless the environment names a script (the test suite's set-up bundles one:
 * scripts/test-bundle.mjs).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

export const locate = (): string | undefined => {
  const named = process.env["WARDEN_LEDGER_WORKER"]
  if (named !== undefined && named !== "") return named === "off" ? undefined : Path.resolve(named)
  for (const name of ["./ledger-writer.cjs", "./WriterWorker.js"]) {
    try {
      const file = fileURLToPath(new URL(name, import.meta.url))
      if (Fs.existsSync(file)) return file
    } catch {
      // not a file URL (a bundle's stand-in): not there
    }
  }
  return undefined
}
