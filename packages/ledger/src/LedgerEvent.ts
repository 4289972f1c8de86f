/**
 * The events a ledger run records, and their constructors.
 *
 * They are the supervisor's events, the approvals engine's events, and the one thing neither
 * publishes, a work item being submitted (its prompt and options). `Run.attach` records the first
 * two by itself; the embedder records `ItemSubmitted` with `Run.record`.
 */
import type { ApprovalEvent } from "@warden/approvals"
import type { Supervisor, WorkItem } from "@warden/supervisor"

/** Where a submitted work item came from when it continues one of a dead run (`warden resume`). */
export interface ItemOrigin {
  readonly runId: string
  readonly item: string
}

/**
 * One event a run records (`Run.record`), tagged by where it comes from.
 *
 * `ItemSubmitted` is the embedder's to record; `Supervisor` and `Approval` wrap what a supervisor
 * and its approvals engine publish (what `Run.attach` records). Of the supervisor's events only
 * work events (not a thread's notifications or stall notices), `ConnectionReady`,
 * `ConnectionLost` and `ItemFinished` are kept; the rest are dropped before they are queued.
 */
export type LedgerEvent =
  /**
   * A work item handed to the supervisor (record it before `run`/`start`): its prompt, follow-ups
   * and options, masked. Only submitted items can be listed as unfinished after a crash.
   */
  | { readonly _tag: "ItemSubmitted"; readonly item: WorkItem.WorkItem; readonly from?: ItemOrigin }
  | { readonly _tag: "Supervisor"; readonly event: Supervisor.SupervisorEvent }
  | { readonly _tag: "Approval"; readonly event: ApprovalEvent.ApprovalEvent }

/**
 * The event that records a work item being submitted, to record before the item is run.
 *
 * Record it before `run` or `start`: only a submitted item can be listed as unfinished after a
 * crash. Pass `from` when the item continues one of a dead run (`warden resume`). Its prompt,
 * follow-ups and options are stored masked; give every item an id, unique within its run.
 *
 * @example
 * ```ts
 * import { LedgerEvent } from "@warden/ledger"
 * import type { Ledger } from "@warden/ledger"
 *
 * declare const run: Ledger.Run
 * const item = { id: "fix-1", prompt: "fix the failing test", cwd: "/repo" }
 * run.record(LedgerEvent.itemSubmitted(item)) // then supervisor.run(item)
 * ```
 */
export const itemSubmitted = (item: WorkItem.WorkItem, from?: ItemOrigin): LedgerEvent =>
  from === undefined ? { _tag: "ItemSubmitted", item } : { _tag: "ItemSubmitted", item, from }

/** Wrap a supervisor event for `Run.record` (what `Run.attach` does for each one it reads). */
export const supervisor = (event: Supervisor.SupervisorEvent): LedgerEvent => ({ _tag: "Supervisor", event })

/** Wrap an approvals-engine event for `Run.record` (what `Run.attach` does for each one it reads). */
export const approval = (event: ApprovalEvent.ApprovalEvent): LedgerEvent => ({ _tag: "Approval", event })

/**
 * Whether the ledger keeps anything of this event. A thread's notifications (every streamed
 * delta) and connection restarts are not recorded: they are dropped before they are queued, so
 * they cost a tag comparison.
 */
export const isRecorded = (event: LedgerEvent): boolean => {
  if (event._tag !== "Supervisor") return true
  const e = event.event
  switch (e._tag) {
    case "Work":
      return e.event._tag !== "Notification" && e.event._tag !== "Stalled"
    case "ConnectionReady":
    case "ConnectionLost":
    case "ItemFinished":
      return true
    default:
      return false
  }
}
