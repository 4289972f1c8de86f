/**
 * The run's state as its front ends show it: every work item's status, activity, tokens, times and
 * worktree, the open cards, every settlement counted, the connection and admission. One reducer
 * over the supervisor's and the approvals' events (`applySupervisorEvent`, `applyApprovalEvent`,
 * and `applyItemEvent` for one item's row), shared by the CLI's board, summary and `--json` lines
 * and by the web inbox's item list. No terminal, no HTTP, no clock: the time is given with each
 * event, so the same events give the same state. The state is updated in place (a board redraws
 * from it many times a second; nothing is copied per event).
 */
import type { ApprovalEvent, Card } from "@warden/approvals"
import type { Errors, Supervisor, WorkItem, Worktree } from "@warden/supervisor"
import { Json } from "@warden/protocol"
import { Cause, Exit } from "effect"

/**
 * How a work item ended, as reported in `item.finished.status` and `run.finished.items`: its last
 * turn's status, or why it failed (`WorkItemFailed`'s reasons, one list kept in the supervisor).
 */
export type ItemStatus = "completed" | "interrupted" | "failed" | Errors.WorkItemFailed["reason"] | (string & {})

/** A work item that has not ended: waiting for a slot, or running. */
export type LiveStatus = "queued" | "running"

/** One work item's row (updated in place by {@link applyItemEvent}). */
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

/** The app-server connection as last reported. */
export type ConnectionState =
  | { readonly _tag: "Starting" }
  | { readonly _tag: "Ready"; readonly userAgent: string; readonly codexHome: string }
  | { readonly _tag: "Restarting"; readonly attempt: number; readonly detail: string }
  | { readonly _tag: "Lost"; readonly detail: string }

/** The whole run: its items (by index), open cards, settlements, connection and admission. */
export interface RunState {
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

/** How many settlements the state keeps for the summary's card table (the most recent). */
export const SettledKept = 1_000

/** The state at the start of a run of `prompts` (each queued, numbered by its index). */
export const make = (prompts: ReadonlyArray<string>, now: number): RunState => ({
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
export const add = (state: RunState, prompt: string): number => {
  const index = state.items.length
  ;(state.items as Array<ItemState>).push(queuedItem(index, prompt))
  return index
}

/** How a finished work item is reported: its status, final message and error. */
export interface ItemOutcome {
  readonly status: ItemStatus
  readonly threadId: string | undefined
  readonly finalMessage: string | undefined
  readonly error: string | undefined
}

/** How a work item's exit reads: its status, thread, final message and error. */
export const outcomeOf = (
  exit: Exit.Exit<
    WorkItem.WorkResult,
    { readonly reason: string; readonly message: string; readonly threadId: string | undefined }
  >
): ItemOutcome => {
  if (Exit.isSuccess(exit)) {
    const result = exit.value
    const lastError = result.turns[result.turns.length - 1]?.error?.message
    return { status: result.status, threadId: result.threadId, finalMessage: result.finalMessage, error: lastError }
  }
  const failure = Cause.failureOption(exit.cause)
  if (failure._tag === "Some") {
    return {
      status: failure.value.reason,
      threadId: failure.value.threadId,
      finalMessage: undefined,
      error: failure.value.message
    }
  }
  if (Cause.isInterruptedOnly(exit.cause)) {
    return { status: "interrupted", threadId: undefined, finalMessage: undefined, error: "the work item was stopped" }
  }
  return {
    status: "failed",
    threadId: undefined,
    finalMessage: undefined,
    error: Cause.pretty(exit.cause).split("\n")[0]
  }
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

const itemOf = (state: RunState, id: string | number | undefined): ItemState | undefined =>
  typeof id === "number"
    ? state.items[id]
    : typeof id === "string" && /^\d+$/.test(id)
      ? state.items[Number(id)]
      : undefined

/**
 * The open cards of each item (by its index), in the order they opened: kept beside a state by
 * `applyApprovalEvent`, so that what an item waits for is found without reading every open card
 * (it was, on each of the item's events: a fleet's events times its open cards).
 */
const openByItem = new WeakMap<RunState, Map<number, Array<Card.CardId>>>()

const openOf = (state: RunState): Map<number, Array<Card.CardId>> => {
  let byItem = openByItem.get(state)
  if (byItem === undefined) {
    byItem = new Map()
    openByItem.set(state, byItem)
  }
  return byItem
}

const waitingActivity = (state: RunState, index: number): string | undefined => {
  const ids = openByItem.get(state)?.get(index)
  return ids !== undefined && ids.length > 0 ? `waiting for approval (${ids.join(", ")})` : undefined
}

/**
 * What a work item's own events change in its row: the one reducer of an item's status, activity,
 * tokens, times and worktree, for the CLI's run state and the web inbox's item list alike. `waiting`
 * says what the item waits for when a card of its is open (the run state knows its open cards), else
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
    item.activity = outcome.status === "completed" ? "done" : (outcome.error ?? outcome.status)
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

/** Applies a supervisor event: the connection, admission, and the item's row (keyed by its index). */
export const applySupervisorEvent = (state: RunState, event: Supervisor.SupervisorEvent, now: number): void => {
  switch (event._tag) {
    case "ConnectionReady":
      state.connection = { _tag: "Ready", userAgent: event.init.userAgent, codexHome: event.init.codexHome }
      return
    case "ConnectionLost":
      state.connection = { _tag: "Lost", detail: event.message }
      return
    case "ConnectionFailed":
      state.connection = { _tag: "Lost", detail: event.message }
      return
    case "ConnectionRestarting":
      state.connection = { _tag: "Restarting", attempt: event.attempt, detail: `restarting in ${event.delayMs} ms` }
      return
    case "ConnectionGaveUp":
      state.connection = { _tag: "Lost", detail: event.detail }
      return
    case "AdmissionChanged":
      state.admission = { limit: event.limit, max: event.max }
      return
    case "ItemFinished": {
      const item = itemOf(state, event.item)
      if (item) applyItemEvent(item, event, now)
      return
    }
    case "Work": {
      const index = itemIndexOf(event.event.item)
      const item = index === null ? undefined : state.items[index]
      if (item) applyItemEvent(item, event, now, () => waitingActivity(state, index!))
      return
    }
  }
}

/** Applies an approval event: open cards, settlements and their counts, and the item's activity. */
export const applyApprovalEvent = (state: RunState, event: ApprovalEvent.ApprovalEvent): void => {
  switch (event._tag) {
    case "CardOpened": {
      state.openCards.set(event.card.id, event.card)
      const index = itemIndexOf(event.card.workItem)
      if (index === null) return
      const byItem = openOf(state)
      const ids = byItem.get(index)
      if (ids === undefined) byItem.set(index, [event.card.id])
      else if (!ids.includes(event.card.id)) ids.push(event.card.id)
      const item = state.items[index]
      if (item) item.activity = waitingActivity(state, index) ?? item.activity
      return
    }
    case "CardSettled": {
      const card = event.settlement.card
      state.openCards.delete(card.id)
      const index = itemIndexOf(card.workItem)
      const ids = index === null ? undefined : openByItem.get(state)?.get(index)
      if (ids !== undefined) {
        const at = ids.indexOf(card.id)
        if (at >= 0) ids.splice(at, 1)
        if (ids.length === 0) openByItem.get(state)?.delete(index!)
      }
      state.settled.push(event.settlement)
      // Bounded: a long run (warden serve) keeps counts, not every settlement.
      if (state.settled.length > SettledKept) state.settled.splice(0, state.settled.length - SettledKept)
      state.settledCount++
      if (index !== null) {
        const counts = state.outcomes.get(index) ?? new Map<string, number>()
        counts.set(event.settlement.outcome, (counts.get(event.settlement.outcome) ?? 0) + 1)
        state.outcomes.set(index, counts)
      }
      const item = index === null ? undefined : state.items[index]
      if (item && item.finishedAt === undefined)
        item.activity = waitingActivity(state, index!) ?? `card ${card.id} ${event.settlement.outcome}`
      return
    }
    case "LateDecision":
      return
  }
}

/** A work item's id as an index into {@link RunState}'s items (a number, or a string of digits), or null. */
export const itemIndexOf = (id: string | number | undefined): number | null =>
  typeof id === "number" ? id : typeof id === "string" && /^\d+$/.test(id) ? Number(id) : null

/** Every item's final status; an item that had not ended is `interrupted`. */
export const finalStatuses = (state: RunState): ReadonlyArray<ItemStatus> =>
  state.items.map((item) => (item.status === "queued" || item.status === "running" ? "interrupted" : item.status))
