/**
 * The ledger's audit file: one JSON line per card event recorded, appended once the writer has
 * written it (`LedgerOptions.audit`).
 */
import { Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import { describeCause, LedgerError } from "./LedgerError.js"
import * as Projection from "./Projection.js"

/**
 * The audit file, open for appending until the scope closes (after the writer: opened before it),
 * and what appends a written slice's card events to it.
 */
export const open = (
  path: string
): Effect.Effect<(ops: ReadonlyArray<Projection.Op>) => Effect.Effect<void>, LedgerError, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
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
    ),
    (fd) => (ops) =>
      Effect.suspend(() => {
        let text = ""
        for (const op of ops) {
          if (op._tag === "Event" && op.event._tag === "Approval")
            text += JSON.stringify(Projection.auditRecord(op.event.event)) + "\n"
        }
        if (text === "") return Effect.void
        try {
          Fs.writeSync(fd, text)
          return Effect.void
        } catch (cause) {
          return Effect.logError(`the audit file ${path} could not be written: ${describeCause(cause)}`)
        }
      })
  )
