/**
 * The exit codes of `warden` (part of the command contract; scripts rely on them):
 *
 * | code | meaning |
 * | --- | --- |
 * | 0 | every work item completed; `warden serve`: stopped by SIGINT/SIGTERM (its normal end) |
 * | 1 | a work item failed, was interrupted (including by Ctrl-C) or stalled; or another runtime failure |
 * | 2 | usage error: bad or missing arguments, an unreadable rules file, no codex binary, a `--state` that cannot be used |
 * | 3 | the app-server connection was lost and could not be recovered |
 * | 4 | every work item completed, but the ledger lost records of the run (it stayed locked, or a write failed) |
 *
 * The same fault is the same code in every command: a `--state` that cannot be used as given (not
 * a place for a file, not readable or writable as the command needs, no ledger where one must
 * exist: `StatePath.check`) and an id named on the command line that is not there (`rules revoke
 * ID`, `resume --run ID`) are 2; a ledger that opens and then fails is 1. `warden resume` that
 * left asked work undone (a not-resumed item) is 1.
 *
 * A command handler ends with `CliExit` to choose its code; bin.ts turns it into the process's.
 */
import type * as RunState from "@warden/inbox/RunState"
import { Data } from "effect"

export const Ok = 0
export const Failed = 1
export const Usage = 2
export const ConnectionLost = 3
export const LedgerGaps = 4

/** Ends a command with a chosen exit code; `message` (if any) was already shown or is shown by bin.ts. */
export class CliExit extends Data.TaggedError("CliExit")<{
  readonly code: number
  readonly message?: string
}> {}

let stopped: number = Failed

/**
 * The exit code of a command stopped by SIGINT/SIGTERM (its main fiber interrupted, its scopes
 * closed): 1, unless the command said a stop is its normal end (`warden serve`, once it has
 * reported everything: 0). Read by Main.ts when the process ends.
 */
export const whenStopped = (): number => stopped

/** Says how a stop ends this process (see {@link whenStopped}). */
export const stopEndsWith = (code: number): void => {
  stopped = code
}

let ledgerGaps = false

/**
 * Says the ledger lost records of this command's run, or its audit file lines (StateLedger.ts,
 * once the ledger has closed): the process then exits 4 where it would have exited 0 (see
 * {@link final}).
 */
export const ledgerLost = (): void => {
  ledgerGaps = true
}

/**
 * What a run says when its audit file (`--audit`) could not take some lines: how many, and why
 * (`detail`, the first failure's); `after` says where the records still are. One wording for the
 * ledger's file (StateLedger.ts) and the approvals' sink (SupervisedRun.ts).
 */
export const auditLinesMissing = (audit: string, missing: number, detail: string, after = ""): string =>
  `the audit file ${audit} is missing ${missing} line${missing === 1 ? "" : "s"} of this run (${detail})${after}`

/**
 * The process's exit code from the command's: 4 instead of 0 when the ledger lost records or the
 * audit file lines (`ledgerLost`); any other code is kept (the message is on stderr either way).
 */
export const final = (code: number): number => (code === Ok && ledgerGaps ? LedgerGaps : code)

/** A usage error a person can fix: printed on stderr, exit 2. */
export const usage = (message: string): CliExit => new CliExit({ code: Usage, message })

/**
 * How a work item ended, as reported in `item.finished.status` and `run.finished.items`
 * (`RunState.ItemStatus`).
 */
export type ItemStatus = RunState.ItemStatus

/**
 * The run's exit code from its items' final statuses (any connection loss wins, then any failure);
 * `notRun`: items asked for that were never run (`warden resume`'s not-resumed items), a failure.
 */
export const forItems = (statuses: ReadonlyArray<ItemStatus>, notRun: number = 0): number => {
  if (statuses.some((s) => s === "connection-lost")) return ConnectionLost
  if (notRun === 0 && statuses.length > 0 && statuses.every((s) => s === "completed")) return Ok
  return Failed
}
