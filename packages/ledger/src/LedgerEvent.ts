/**
 * What the ledger records: the supervisor's events, the approvals engine's events, and the one
 * thing neither publishes, a work item being submitted (its prompt and options).
 */
import type { ApprovalEvent } from "@warden/approvals"
import type { Supervisor, WorkItem } from "@warden/supervisor"

/** Where a submitted work item came from when it continues one of a dead run (`warden resume`). */
export interface ItemOrigin {
  readonly runId: string
  readonly item: string
}

export type LedgerEvent =
  /**
   * A work item handed to the supervisor (record it before `run`/`start`): its prompt, follow-ups
   * and options, masked. Only submitted items can be listed as unfinished after a crash.
   */
  | { readonly _tag: "ItemSubmitted"; readonly item: WorkItem.WorkItem; readonly from?: ItemOrigin }
  | { readonly _tag: "Supervisor"; readonly event: Supervisor.SupervisorEvent }
  | { readonly _tag: "Approval"; readonly event: ApprovalEvent.ApprovalEvent }

export const itemSubmitted = (item: WorkItem.WorkItem, from?: ItemOrigin): LedgerEvent =>
  from === undefined ? { _tag: "ItemSubmitted", item } : { _tag: "ItemSubmitted", item, from }

export const supervisor = (event: Supervisor.SupervisorEvent): LedgerEvent => ({ _tag: "Supervisor", event })

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
