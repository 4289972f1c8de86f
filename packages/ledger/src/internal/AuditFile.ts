/**
 * The ledger's audit file: one JSON line per card event recorded, appended once the writer has
 * written it (`LedgerOptions.audit`).
 */
import { Effect, Runtime, type Scope } from "effect"
import * as Fs from "node:fs"
import { describeCause, LedgerError } from "./LedgerError.js"
import * as Projection from "./Projection.js"

/**
 * The audit file, open for appending until the scope closes (after the writer: opened before it),
 * and what appends a written slice's card events to it (in the writer's step; a line that cannot
 * be written is logged, and the writer goes on).
 */
export const open = (
  path: string
): Effect.Effect<(ops: ReadonlyArray<Projection.Op>) => void, LedgerError, Scope.Scope> =>
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
    return (ops: ReadonlyArray<Projection.Op>): void => {
      let text = ""
      for (const op of ops) {
        if (op._tag === "Event" && op.event._tag === "Approval")
          text += JSON.stringify(Projection.auditRecord(op.event.event)) + "\n"
      }
      if (text === "") return
      try {
        Fs.writeSync(fd, text)
      } catch (cause) {
        fork(Effect.logError(`the audit file ${path} could not be written: ${describeCause(cause)}`))
      }
    }
  })
