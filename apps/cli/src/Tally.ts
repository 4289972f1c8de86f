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
  /** The last {@link SettledKept} settlements, oldest first (the summary's card table). */
  readonly settled: Array<Card.Settlement>
  /** Every settlement counted, by item index and outcome (the summary's CARDS column). */
  readonly outcomes: Map<number, Map<string, number>>
  /** How many cards settled in all (`settled` keeps the last ones). */
  settledCount: number
  connection: ConnectionState
  /** Adaptive admission, once it moved: at most `limit` of `max` items run now. */
  admission: { readonly limit: number; readonly max: number } | undefined
}

/** A queued item's row (numbered `index`, `-1` where the row is keyed otherwise). */
export const queuedItem = (index: number, prompt: string): ItemState => ({
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

/** How many settlements the tally keeps for the summary's card table (the most recent). */
export const SettledKept = 1_000

export const make = (prompts: ReadonlyArray<string>, now: number): Tally => ({
  startedAt: now,
  items: prompts.map((prompt, index) => queuedItem(index, prompt)),
  openCards: new Map(),
  settled: [],
  outcomes: new Map(),
  settledCount: 0,
  connection: { _tag: "Starting" },
  admission: undefined
})

/** A work item submitted after the start (`warden serve`), queued; its index (the next one). */
export const add = (tally: Tally, prompt: string): number => {
  const index = tally.items.length
  ;(tally.items as Array<ItemState>).push(queuedItem(index, prompt))
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

/**
 * What a work item's own events change in its row: the one reducer of an item's status, activity,
 * tokens, times and worktree, for the CLI's tally and the web inbox's board alike. `waiting` says
 * what the item waits for when a card of its is open (the tally knows its open cards), else
 * undefined. Returns whether the row changed (a token count that did not move, or a notification
 * that says nothing about the item, changes nothing).
 */
export const applyItemEvent = (
  item: ItemState,
  event: Supervisor.SupervisorEvent & { readonly _tag: "ItemFinished" | "Work" },
  now: number,
  waiting: (item: ItemState) => string | undefined = () => undefined
): boolean => {
  if (event._tag === "ItemFinished") {
    const outcome = outcomeOf(event.exit)
    item.status = outcome.status
    item.threadId = outcome.threadId ?? item.threadId
    item.finalMessage = outcome.finalMessage
    item.error = outcome.error
    item.finishedAt = now
    item.activity = outcome.status === "completed" ? "done" : outcome.error ?? outcome.status
    return true
  }
  const work = event.event
  switch (work._tag) {
    case "ThreadReady":
      item.threadId = work.threadId
      item.status = "running"
      item.startedAt ??= now
      item.activity = work.resumed ? "resumed" : "starting"
      return true
    case "TurnStarted":
      item.activity = "thinking"
      return true
    case "TurnCompleted":
      item.turns++
      item.activity = `turn ${work.turn.status}`
      return true
    case "Stalled":
      item.activity = "stalled"
      return true
    case "WorktreeReady":
      item.worktree = { path: work.path, branch: work.branch }
      item.activity = `in worktree ${work.branch}`
      return true
    case "WorktreeFinished":
      item.worktree = work.worktree
      return true
    case "ConnectionLost":
      item.activity = "connection lost"
      return true
    case "Resumed":
      item.activity = `resumed (attempt ${work.attempt})`
      return true
    case "ThreadStartedFresh":
      item.activity = "starting a new thread"
      return true
    case "Notification": {
      const params = record(work.params)
      if (work.method === "thread/tokenUsage/updated") {
        const total = record(record(params?.["tokenUsage"])?.["total"])?.["totalTokens"]
        if (typeof total !== "number" || total === item.tokens) return false
        item.tokens = total
        return true
      }
      if (work.method === "item/started") {
        const started = record(params?.["item"])
        if (!started) return false
        item.activity = waiting(item) ?? activityOfItem(started)
        return true
      }
      if (work.method === "item/completed") {
        item.activity = waiting(item) ?? "working"
        return true
      }
      return false
    }
    default:
      return false
  }
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
      if (item) applyItemEvent(item, event, now)
      return
    }
    case "Work": {
      const item = itemOf(tally, event.event.item)
      if (item) applyItemEvent(item, event, now, (i) => waitingActivity(tally, i))
      return
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
      // Bounded: a long run (warden serve) keeps counts, not every settlement.
      if (tally.settled.length > SettledKept) tally.settled.splice(0, tally.settled.length - SettledKept)
      tally.settledCount++
      const index = itemIndexOf(card.workItem)
      if (index !== null) {
        const counts = tally.outcomes.get(index) ?? new Map<string, number>()
        counts.set(event.settlement.outcome, (counts.get(event.settlement.outcome) ?? 0) + 1)
        tally.outcomes.set(index, counts)
      }
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
