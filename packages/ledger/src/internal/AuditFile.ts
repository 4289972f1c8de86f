/**
 * The ledger's audit file: one JSON line per card event recorded, appended once the writer has
 * written it (`LedgerOptions.audit`).
 */
import { SecretMask } from "@warden/approvals"
import { Effect, Runtime, type Scope } from "effect"
import * as Fs from "node:fs"
import { describeCause, LedgerError } from "./LedgerError.js"
import * as Projection from "./Projection.js"
import { LedgerWriteFailed } from "./Writer.js"

/**
 * The audit file, open for appending until the scope closes (after the writer: opened before it),
 * and what appends a written slice's card events to it (in the writer's step). Lines that cannot
 * be written (a full disk, a broken file) are logged and given to `failed` (the writer's: it
 * counts them, `Stats.auditFailed`, and reports them as a `LedgerWriteFailed` of reason `Audit`:
 * their records are in the database, the file lacks them), and the writer goes on.
 */
export const open = (
  path: string
): Effect.Effect<
  (ops: ReadonlyArray<Projection.Op>, failed: (failure: LedgerWriteFailed) => void) => void,
  LedgerError,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const fork = Runtime.runFork(yield* Effect.runtime<never>())
    const fd = yield* Effect.acquireRelease(
      Effect.try({
        try: () => Fs.openSync(path, "a", 0o600),
        catch: (cause) =>
          new LedgerError({
            reason: "Open",
            detail: `cannot append to the audit file ${path}: ${describeCause(cause)}`,
            cause
          })
      }),
      (fd) => Effect.sync(() => Fs.closeSync(fd))
    )
    return (ops: ReadonlyArray<Projection.Op>, failed: (failure: LedgerWriteFailed) => void): void => {
      let text = ""
      let lines = 0
      const kinds = new Set<string>()
      for (const op of ops) {
        if (op._tag === "Event" && op.event._tag === "Approval") {
          text += JSON.stringify(Projection.auditRecord(op.event.event)) + "\n"
          lines++
          kinds.add(op.event.event._tag)
        }
      }
      if (text === "") return
      try {
        Fs.writeSync(fd, text)
      } catch (cause) {
        const failure = new LedgerWriteFailed({
          reason: "Audit",
          events: lines,
          kinds: [...kinds],
          detail: SecretMask.maskShown(`the audit file ${path} could not be written: ${describeCause(cause)}`, 500),
          cause
        })
        fork(Effect.logError(failure.message))
        failed(failure)
      }
    }
  })
