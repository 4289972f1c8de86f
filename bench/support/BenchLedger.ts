/**
 * A ledger for the "ledger on" contenders: `Ledger.layerSqlite` on a fresh file under the OS temp
 * directory (WAL, `synchronous = NORMAL`, as `warden run --state` opens it), one run begun, and
 * `attach` recording what a source publishes. Built in the caller's scope (before the supervisor,
 * so it closes after it, as in the CLI); the file is removed when the scope closes.
 */
import { Ledger } from "@warden/ledger"
import { Context, Effect, Layer } from "effect"
import type { Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export interface BenchLedger {
  readonly ledger: Ledger.LedgerShape
  readonly run: Ledger.Run
  /** Wait until everything recorded so far is written. */
  readonly flush: Effect.Effect<void>
}

/**
 * `answerJournal: false`: without the answer journal (its `write(2)` before each answer), to show
 * what the rest of the ledger costs.
 */
export const make = (options?: {
  readonly answerJournal?: false
}): Effect.Effect<BenchLedger, Ledger.LedgerError, Scope.Scope> =>
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-bench-ledger-"))),
      (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
    )
    const ledger = Context.get(
      yield* Layer.build(
        Ledger.layerSqlite({
          filename: Path.join(dir, "ledger.db"),
          ...(options?.answerJournal === false ? { answerJournal: false } : {})
        })
      ),
      Ledger.Ledger
    )
    const run = yield* ledger.beginRun({ label: "bench" })
    return { ledger, run, flush: Effect.asVoid(ledger.flush) }
  })
