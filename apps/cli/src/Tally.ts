/**
 * The run as the CLI sees it: every work item's status, activity, tokens and times, the open
 * cards and every settlement. Updated synchronously from supervisor and approval events; the
 * board draws it, the summary prints it, the exit code is computed from it.
 */
import type { ApprovalEvent, Card } from "@warden/approvals"
import type { Supervisor, WorkItem, Worktree } from "@warden/supervisor"
import { Cause, Exit } from "effect"
import type { ItemStatus } from "./ExitCodes.js"
import { Json } from "@warden/protocol"

export type LiveStatus = "queued" | "running"

export interface ItemState {
  readonly index: number
  readonly prompt: string
  status: LiveStatus | ItemStatus
  threadId: string | undefined
  activity: string
  tokens: number | undefined
  startedAt: number | undefined
  finishedAt: number | undefined
  finalMessage: string | undefined
  error: string | undefined
  turns: number
  /** Its worktree (`--worktree`): where it is while the item runs, what became of it once it ended. */
  worktree: { readonly path: string; readonly branch: string } | Worktree.WorktreeSummary | undefined
}

export type ConnectionState =
  | { readonly _tag: "Starting" }
  | { readonly _tag: "Ready"; readonly userAgent: string; readonly codexHome: string }
  | { readonly _tag: "Restarting"; readonly attempt: number; readonly detail: string }
  | { readonly _tag: "Lost"; readonly detail: string }

export interface Tally {
  readonly startedAt: number
  readonly items: ReadonlyArray<ItemState>
  /** Open cards in the order they opened. */
  readonly openCards: Map<Card.CardId, Card.CardView>
  readonly settled: Array<Card.Settlement>
  connection: ConnectionState
  /** Adaptive admission, once it moved: at most `limit` of `max` items run now. */
  admission: { readonly limit: number; readonly max: number } | undefined
}

const queued = (index: number, prompt: string): ItemState => ({
  index,
  prompt,
  status: "queued",
  threadId: undefined,
  activity: "waiting for a slot",
  tokens: undefined,
  startedAt: undefined,
  finishedAt: undefined,
  finalMessage: undefined,
  error: undefined,
  turns: 0,
  worktree: undefined
})

export const make = (prompts: ReadonlyArray<string>, now: number): Tally => ({
  startedAt: now,
  items: prompts.map((prompt, index) => queued(index, prompt)),
  openCards: new Map(),
  settled: [],
  connection: { _tag: "Starting" },
  admission: undefined
})

/** A work item submitted after the start (`warden serve`), queued; its index (the next one). */
export const add = (tally: Tally, prompt: string): number => {
  const index = tally.items.length
  ;(tally.items as Array<ItemState>).push(queued(index, prompt))
  return index
}

/** How a finished work item is reported: its status, final message and error. */
export interface ItemOutcome {
  readonly status: ItemStatus
  readonly threadId: string | undefined
  readonly finalMessage: string | undefined
  readonly error: string | undefined
}

export const outcomeOf = (
  exit: Exit.Exit<WorkItem.WorkResult, { readonly reason: string; readonly message: string; readonly threadId: string | undefined }>
): ItemOutcome => {
  if (Exit.isSuccess(exit)) {
    const result = exit.value
    const lastError = result.turns[result.turns.length - 1]?.error?.message
    return { status: result.status, threadId: result.threadId, finalMessage: result.finalMessage, error: lastError }
  }
  const failure = Cause.failureOption(exit.cause)
  if (failure._tag === "Some") {
    return { status: failure.value.reason, threadId: failure.value.threadId, finalMessage: undefined, error: failure.value.message }
  }
  if (Cause.isInterruptedOnly(exit.cause)) {
    return { status: "interrupted", threadId: undefined, finalMessage: undefined, error: "the work item was stopped" }
  }
  return { status: "failed", threadId: undefined, finalMessage: undefined, error: Cause.pretty(exit.cause).split("\n")[0] }
}

const record = Json.asRecord

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** What an item is doing, from an `item/started` notification. */
const activityOfItem = (item: Record<string, unknown>): string => {
  switch (item["type"]) {
    case "commandExecution":
      return `running ${str(item["command"]) ?? "a command"}`
    case "fileChange": {
      const changes = Array.isArray(item["changes"]) ? item["changes"] : []
      const paths = changes.map((c) => str(record(c)?.["path"])).filter((p): p is string => p !== undefined)
      return `editing ${paths.length > 0 ? paths.join(", ") : "files"}`
    }
    case "mcpToolCall":
      return `calling ${str(item["server"]) ?? "mcp"}.${str(item["tool"]) ?? "tool"}`
    case "dynamicToolCall":
      return `calling ${str(item["tool"]) ?? "a tool"}`
    case "agentMessage":
      return "writing"
    case "reasoning":
      return "thinking"
    case "webSearch":
      return "searching the web"
    case "plan":
      return "planning"
    case "contextCompaction":
      return "compacting context"
    case "userMessage":
      return "reading the prompt"
    default:
      return typeof item["type"] === "string" ? item["type"] : "working"
  }
}

const itemOf = (tally: Tally, id: string | number | undefined): ItemState | undefined =>
  typeof id === "number" ? tally.items[id] : typeof id === "string" && /^\d+$/.test(id) ? tally.items[Number(id)] : undefined

const waitingActivity = (tally: Tally, item: ItemState): string | undefined => {
  const ids = [...tally.openCards.values()].filter((c) => itemOf(tally, c.workItem) === item).map((c) => c.id)
  return ids.length > 0 ? `waiting for approval (${ids.join(", ")})` : undefined
}

export const applySupervisorEvent = (tally: Tally, event: Supervisor.SupervisorEvent, now: number): void => {
  switch (event._tag) {
    case "ConnectionReady":
      tally.connection = { _tag: "Ready", userAgent: event.init.userAgent, codexHome: event.init.codexHome }
      return
    case "ConnectionLost":
      tally.connection = { _tag: "Lost", detail: event.message }
      return
    case "ConnectionFailed":
      tally.connection = { _tag: "Lost", detail: event.message }
      return
    case "ConnectionRestarting":
      tally.connection = { _tag: "Restarting", attempt: event.attempt, detail: `restarting in ${event.delayMs} ms` }
      return
    case "ConnectionGaveUp":
      tally.connection = { _tag: "Lost", detail: event.detail }
      return
    case "AdmissionChanged":
      tally.admission = { limit: event.limit, max: event.max }
      return
    case "ItemFinished": {
      const item = itemOf(tally, event.item)
      if (!item) return
      const outcome = outcomeOf(event.exit)
      item.status = outcome.status
      item.threadId = outcome.threadId ?? item.threadId
      item.finalMessage = outcome.finalMessage
      item.error = outcome.error
      item.finishedAt = now
      item.activity = outcome.status === "completed" ? "done" : outcome.error ?? outcome.status
      return
    }
    case "Work": {
      const work = event.event
      const item = itemOf(tally, work.item)
      if (!item) return
      switch (work._tag) {
        case "ThreadReady":
          item.threadId = work.threadId
          item.status = "running"
          item.startedAt ??= now
          item.activity = work.resumed ? "resumed" : "starting"
          return
        case "TurnStarted":
          item.activity = "thinking"
          return
        case "TurnCompleted":
          item.turns++
          item.activity = `turn ${work.turn.status}`
          return
        case "Stalled":
          item.activity = "stalled"
          return
        case "WorktreeReady":
          item.worktree = { path: work.path, branch: work.branch }
          item.activity = `in worktree ${work.branch}`
          return
        case "WorktreeFinished":
          item.worktree = work.worktree
          return
        case "ConnectionLost":
          item.activity = "connection lost"
          return
        case "Resumed":
          item.activity = `resumed (attempt ${work.attempt})`
          return
        case "Notification": {
          const params = record(work.params)
          if (work.method === "thread/tokenUsage/updated") {
            const total = record(record(params?.["tokenUsage"])?.["total"])?.["totalTokens"]
            if (typeof total === "number") item.tokens = total
            return
          }
          if (work.method === "item/started") {
            const started = record(params?.["item"])
            if (started) item.activity = waitingActivity(tally, item) ?? activityOfItem(started)
            return
          }
          if (work.method === "item/completed") {
            item.activity = waitingActivity(tally, item) ?? "working"
          }
          return
        }
      }
    }
  }
}

export const applyApprovalEvent = (tally: Tally, event: ApprovalEvent.ApprovalEvent): void => {
  switch (event._tag) {
    case "CardOpened": {
      tally.openCards.set(event.card.id, event.card)
      const item = itemOf(tally, event.card.workItem)
      if (item) item.activity = waitingActivity(tally, item) ?? item.activity
      return
    }
    case "CardSettled": {
      const card = event.settlement.card
      tally.openCards.delete(card.id)
      tally.settled.push(event.settlement)
      const item = itemOf(tally, card.workItem)
      if (item && item.finishedAt === undefined) item.activity = waitingActivity(tally, item) ?? `card ${card.id} ${event.settlement.outcome}`
      return
    }
    case "LateDecision":
      return
  }
}

export const itemIndexOf = (id: string | number | undefined): number | null =>
  typeof id === "number" ? id : typeof id === "string" && /^\d+$/.test(id) ? Number(id) : null

export const finalStatuses = (tally: Tally): ReadonlyArray<ItemStatus> =>
  tally.items.map((item) => (item.status === "queued" || item.status === "running" ? "interrupted" : item.status))
