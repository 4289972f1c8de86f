import { SecretMask } from "@warden/approvals"
import { Data } from "effect"

/** A ledger operation that failed: opening, migrating, a query, a refused request. */
export class LedgerError extends Data.TaggedError("LedgerError")<{
  readonly reason: /** The database could not be opened (path, not a database). */
    | "Open"
    /** This user may not read (or, to write it, write) the ledger's file or directory. */
    | "Permission"
    /**
     * The database file is damaged (`PRAGMA quick_check` found broken pages when it was opened):
     * nothing is read from or written to it; move it aside or restore a backup.
     */
    | "Corrupt"
    /** The schema could not be brought up to date. */
    | "Migration"
    /** A query or statement failed. */
    | "Sql"
    /** The request was refused as given (a scope too wide, a secret in it, a bad value). */
    | "Invalid"
    /** No such rule (or run, or ledger file to read). */
    | "NotFound"
    /** The run is being recorded by this ledger: its open cards are not stranded. */
    | "LiveRun"
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `ledger: ${this.detail}`
  }
}

/** A driver error in words, masked (a message may quote a value). */
export const describeCause = (cause: unknown): string => {
  const error = cause as { readonly message?: unknown; readonly cause?: unknown }
  const inner = error?.cause as { readonly message?: unknown } | undefined
  const text = [error?.message, inner?.message]
    .filter((m): m is string => typeof m === "string" && m.length > 0)
    .join(": ")
  return SecretMask.maskShown(text.length > 0 ? text : String(cause), 500)
}

export const sqlError =
  (what: string) =>
  (cause: unknown): LedgerError =>
    new LedgerError({ reason: "Sql", detail: `${what}: ${describeCause(cause)}`, cause })
