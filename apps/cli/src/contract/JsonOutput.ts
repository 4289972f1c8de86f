/**
 * `--json`: one JSON object per line on stdout, nothing else. Every line has `type` and `ts` (ISO
 * time of writing). The types and their fields are part of the command contract (README, Usage):
 *
 * - `connection.ready {slot, userAgent, codexHome}`
 * - `connection.lost {slot, reason, message, stderrTail}` (the app-server ended, or never came up)
 * - `connection.restarting {slot, attempt, delayMs}`, `connection.gave-up {slot, detail}`
 * - `admission.changed {limit, max, reason}` (adaptive admission: at most `limit` of `max` items run now)
 * - `item.submitted {item, prompt}` (`warden serve`: a work item submitted through the inbox; numbered after the last)
 * - `item.started {item, prompt, threadId}` (`item` is the 0-based PROMPT index)
 * - `item.resumed {item, threadId}` (its thread resumed on a restarted app-server; the interrupted turn runs again)
 * - `turn.started {item, threadId, turnId}`, `turn.completed {item, threadId, turnId, status, error}`
 * - `item.stalled {item, threadId, turnId}`
 * - `item.thread_missing {item, missingThreadId, detail}` (`warden resume`: codex never saved the thread; a new one starts)
 * - `item.not_resumed {fromRunId, fromItem, reason, detail}` (`warden resume`: an item of the dead run not run again; written by ResumeCommand.ts before the others)
 * - `card.opened {cardId, item, threadId, turnId, method, kind, group, summary, offers, deadline}`
 *   (`group`: cards with the same group ask the same thing; one stdin line answers them all)
 * - `card.settled {cardId, item, threadId, method, outcome, source, channel?, decision, written, detail, latencyMs}`
 *   (`channel`: where a person's decision came from, `stdin`, `web` or `link`)
 * - `card.late {cardId, item, decision, source, channel?, outcome}` (a decision after the card settled: dropped)
 * - `item.worktree {item, path, branch, base, reused}` (`--worktree`: the item runs in this worktree)
 * - `item.finished {item, threadId, status, finalMessage, error, worktree}` (`worktree`: null, or
 *   `{path, branch, base, head, changed, kept, diffstat, files, insertions, deletions, error}`;
 *   `base` and `head` are commit ids abbreviated to 12 hex digits)
 * - `inbox.listening {url, publicUrl?}` (`--inbox`: where the web inbox listens, and with
 *   `--inbox-public-url` where people reach it; the token is not in it)
 * - `run.finished {items: [{item, status}], exitCode}` (always the last line)
 */
import type { ApprovalEvent, Card } from "@warden/approvals"
import { Card as CardNs, CardGroup, CardText, SecretMask } from "@warden/approvals"
import type { Supervisor } from "@warden/supervisor"
import { ConnectionEnded } from "@warden/transport"
import * as RunState from "@warden/inbox/RunState"

export type Line = { readonly type: string } & Readonly<Record<string, unknown>>

/**
 * A commit id cut to 12 hex digits, as `git log --abbrev=12` shows it: the whole 40 read as a
 * secret to the masking every line goes through (a run of 32+ hex digits), and would be masked.
 */
const abbreviated = (commit: string) => commit.slice(0, 12)

/** An item's worktree once it was finished (`WorktreeFinished` comes before `ItemFinished`), or null. */
const finishedWorktree = (worktree: RunState.ItemState["worktree"]) =>
  worktree !== undefined && "changed" in worktree
    ? {
        path: worktree.path,
        branch: worktree.branch,
        base: abbreviated(worktree.base),
        head: abbreviated(worktree.head),
        changed: worktree.changed,
        kept: worktree.kept,
        diffstat: worktree.diffstat,
        files: worktree.files,
        insertions: worktree.insertions,
        deletions: worktree.deletions,
        error: worktree.error ?? null
      }
    : null

/** Lines for a supervisor event; `tally` has already seen the event (it knows each item's prompt and thread). */
export const fromSupervisorEvent = (
  event: Supervisor.SupervisorEvent,
  tally: RunState.RunState
): ReadonlyArray<Line> => {
  switch (event._tag) {
    case "ConnectionReady":
      return [
        { type: "connection.ready", slot: event.slot, userAgent: event.init.userAgent, codexHome: event.init.codexHome }
      ]
    case "ConnectionLost":
      return [
        {
          type: "connection.lost",
          slot: event.slot,
          reason: ConnectionEnded.describeReason(event.reason),
          message: event.message,
          stderrTail: event.stderrTail
        }
      ]
    case "ConnectionFailed":
      return [
        {
          type: "connection.lost",
          slot: event.slot,
          reason: event.reason ? ConnectionEnded.describeReason(event.reason) : event.message,
          message: event.message,
          stderrTail: event.stderrTail
        }
      ]
    case "ConnectionRestarting":
      return [{ type: "connection.restarting", slot: event.slot, attempt: event.attempt, delayMs: event.delayMs }]
    case "ConnectionGaveUp":
      return [{ type: "connection.gave-up", slot: event.slot, detail: event.detail }]
    case "AdmissionChanged":
      return [
        { type: "admission.changed", limit: event.limit, max: event.max, reason: SecretMask.maskText(event.reason) }
      ]
    case "ItemFinished": {
      const outcome = RunState.outcomeOf(event.exit)
      const index = RunState.itemIndexOf(event.item)
      return [
        {
          type: "item.finished",
          item: index,
          threadId: outcome.threadId ?? (index === null ? undefined : tally.items[index]?.threadId) ?? null,
          status: outcome.status,
          finalMessage: outcome.finalMessage ?? null,
          error: outcome.error ?? null,
          worktree: finishedWorktree(index === null ? undefined : tally.items[index]?.worktree)
        }
      ]
    }
    case "Work": {
      const work = event.event
      const item = RunState.itemIndexOf(work.item)
      switch (work._tag) {
        case "ThreadReady":
          return work.resumed
            ? [{ type: "item.resumed", item, threadId: work.threadId }]
            : [
                {
                  type: "item.started",
                  item,
                  prompt: item === null ? null : (tally.items[item]?.prompt ?? null),
                  threadId: work.threadId
                }
              ]
        case "TurnStarted":
          return [{ type: "turn.started", item, threadId: work.threadId, turnId: work.turnId }]
        case "TurnCompleted":
          return [
            {
              type: "turn.completed",
              item,
              threadId: work.threadId,
              turnId: work.turn.turnId,
              status: work.turn.status,
              error: work.turn.error?.message ?? null
            }
          ]
        case "Stalled":
          return [{ type: "item.stalled", item, threadId: work.threadId, turnId: work.turnId }]
        case "ThreadStartedFresh":
          return [{ type: "item.thread_missing", item, missingThreadId: work.missingThreadId, detail: work.detail }]
        case "WorktreeReady":
          return [
            {
              type: "item.worktree",
              item,
              path: work.path,
              branch: work.branch,
              base: abbreviated(work.base),
              reused: work.reused
            }
          ]
        case "WorktreeFinished": // in item.finished, which follows
        case "Resumed": // announced before the new app-server is up; ThreadReady{resumed} reports the resume
        case "ConnectionLost":
        case "Notification":
          return []
      }
    }
  }
}

const cardBase = (card: Card.CardView) => ({
  cardId: card.id,
  item: RunState.itemIndexOf(card.workItem),
  threadId: card.threadId ?? null,
  method: card.method
})

/** `channel` of a person's decision (`stdin`, `web`, ...), when the inbox was told it. */
const channelOf = (source: Card.Source) =>
  source._tag === "Person" && source.channel !== undefined ? { channel: source.channel } : {}

export const fromApprovalEvent = (event: ApprovalEvent.ApprovalEvent): ReadonlyArray<Line> => {
  switch (event._tag) {
    case "CardOpened": {
      const card = event.card
      return [
        {
          type: "card.opened",
          ...cardBase(card),
          turnId: card.turnId ?? null,
          kind: card.summary.kind,
          group: CardGroup.groupOf(card) ?? null,
          summary: card.title,
          offers: card.offers.map(CardText.offerWord),
          deadline: new Date(card.deadlineAt).toISOString()
        }
      ]
    }
    case "CardSettled": {
      const s = event.settlement
      return [
        {
          type: "card.settled",
          ...cardBase(s.card),
          outcome: s.outcome,
          source: CardNs.describeSource(s.source),
          ...channelOf(s.source),
          decision: s.decision ?? null,
          written: s.written,
          detail: s.detail ?? null,
          latencyMs: s.latencyMs
        }
      ]
    }
    case "LateDecision":
      return [
        {
          type: "card.late",
          ...cardBase(event.card),
          decision: event.decision,
          source: CardNs.describeSource(event.source),
          ...channelOf(event.source),
          outcome: event.outcome
        }
      ]
  }
}

export const runFinished = (tally: RunState.RunState, exitCode: number): Line => ({
  type: "run.finished",
  items: RunState.finalStatuses(tally).map((status, index) => ({ item: index, status })),
  exitCode
})

/** The text of one line: `type` first, then `ts`, then the fields. */
/**
 * The line as JSON, through `SecretMask.maskJson` on the way out (every string by the one masking
 * function, values under secret-looking keys whole): the engine masks what it builds, and this
 * exit masks again whatever server or model text an event carries (a turn error, a detail).
 */
export const render = (line: Line, now: Date): string => {
  const { type, ...rest } = line
  return JSON.stringify({ type, ts: now.toISOString(), ...(SecretMask.maskJson(rest) as Record<string, unknown>) })
}
