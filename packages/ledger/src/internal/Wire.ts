/**
 * The writer's ops as they cross to its thread (`WorkerWriter`, `WriterWorker`): plain data that
 * `postMessage`'s structured clone copies, and back to the ops `Projection.apply` writes.
 *
 * What the read loop records most, a card, crosses as what its view was made from
 * (`Card.portable`: the request and its context), so its summary, facts and masking are worked out
 * on the writer's thread, as they were by the writer on the main thread. Everything else is copied
 * field by field, only the fields the projection reads: a value of the embedder's (a work item's
 * `config`) goes through JSON, and an item's end (an `Exit`, whose cause does not survive a clone)
 * as what the projection stores of it. `fromWire(toWire(op))` projects to the same rows as `op`
 * (WorkerWriter.test.ts writes both and compares).
 */
import { Card, SecretMask } from "@warden/approvals"
import type { ApprovalEvent, Card as CardTypes } from "@warden/approvals"
import type { Supervisor, WorkItem } from "@warden/supervisor"
import { Cause, Duration, Exit, FiberId, Option } from "effect"
import type { ItemOrigin, LedgerEvent } from "../LedgerEvent.js"
import * as Projection from "./Projection.js"

type Item = string | number | undefined

/** A supervisor event, as much of it as the projection reads. */
export type WireSupervisorEvent =
  | { readonly _tag: "Work"; readonly event: Record<string, unknown> & { readonly _tag: string; readonly item: Item } }
  | {
      readonly _tag: "ItemFinished"
      readonly item: Item
      readonly ending:
        | { readonly _tag: "Success"; readonly value: Record<string, unknown> }
        | { readonly _tag: "Stopped" }
        | { readonly _tag: "Failed"; readonly reason: string; readonly detail: string; readonly threadId: unknown }
        | { readonly _tag: "Defect"; readonly pretty: string }
    }
  | { readonly _tag: "Other"; readonly event: Record<string, unknown> & { readonly _tag: string } }

/** A card whose opening crossed already (in the same run): its id only; the worker kept the view. */
export interface SentCard {
  readonly _tag: "Sent"
  readonly id: string
}

export type WireApprovalEvent =
  | { readonly _tag: "CardOpened"; readonly card: CardTypes.PortableCard }
  | {
      readonly _tag: "CardSettled"
      readonly settlement: Omit<CardTypes.Settlement, "card" | "reply"> & {
        readonly card: CardTypes.PortableCard | SentCard
      }
    }
  | {
      readonly _tag: "LateDecision"
      readonly card: CardTypes.PortableCard
      readonly decision: string
      readonly source: CardTypes.Source
      readonly outcome: CardTypes.Outcome
      readonly at: number
    }

export type WireEvent =
  | { readonly _tag: "ItemSubmitted"; readonly item: WorkItem.WorkItem; readonly from: ItemOrigin | undefined }
  | { readonly _tag: "Supervisor"; readonly event: WireSupervisorEvent }
  | { readonly _tag: "Approval"; readonly event: WireApprovalEvent }

export type WireOp =
  | Exclude<Projection.Op, { readonly _tag: "Event" }>
  | { readonly _tag: "Event"; readonly runId: string; readonly at: number; readonly event: WireEvent }

/** A value of the embedder's, through JSON (what the projection stores of it anyway); `Mask` when JSON cannot carry it. */
const plainJson = (value: unknown): unknown => {
  if (value === undefined) return undefined
  try {
    const text = JSON.stringify(value)
    return text === undefined ? undefined : JSON.parse(text)
  } catch {
    return SecretMask.Mask
  }
}

const plainItem = (item: WorkItem.WorkItem): WorkItem.WorkItem => {
  const out: Record<string, unknown> = { prompt: item.prompt }
  const copy = (key: keyof WorkItem.WorkItem) => {
    if (item[key] !== undefined) out[key] = item[key]
  }
  copy("id")
  copy("threadId")
  copy("cwd")
  copy("model")
  copy("approvalPolicy")
  copy("sandbox")
  if (item.followUps !== undefined) out["followUps"] = [...item.followUps]
  if (item.config !== undefined) out["config"] = plainJson(item.config)
  if (item.threadParams !== undefined) out["threadParams"] = plainJson(item.threadParams)
  if (item.worktree !== undefined) out["worktree"] = plainJson(item.worktree)
  if (item.budget !== undefined) {
    const budget: Record<string, unknown> = {}
    if (item.budget.maxTokens !== undefined) budget["maxTokens"] = item.budget.maxTokens
    // A Duration does not survive a clone: its milliseconds do (the projection stores those).
    const turnTime = Projection.maxTurnTimeOf(item)
    // Infinite: JSON has no number for it (`fromWire` makes it a Duration again).
    if (turnTime !== undefined)
      budget["maxTurnTime"] = Duration.isFinite(turnTime) ? Duration.toMillis(turnTime) : InfiniteDuration
    out["budget"] = budget
  }
  return out as unknown as WorkItem.WorkItem
}

/** An infinite `maxTurnTime`, as it crosses. */
const InfiniteDuration = "infinite"

/**
 * A card as it crosses: its portable copy, with a deadline JSON cannot carry (an infinite one:
 * `Infinity` becomes `null` in JSON) as text.
 */
const portableCard = (view: CardTypes.CardView): CardTypes.PortableCard => {
  const card = Card.portable(view)
  return Number.isFinite(card.deadlineAt) ? card : { ...card, deadlineAt: String(card.deadlineAt) as unknown as number }
}

/** The card back, its deadline a number again. */
const cardOf = (card: CardTypes.PortableCard): CardTypes.PortableCard =>
  typeof card.deadlineAt === "string" ? { ...card, deadlineAt: Number(card.deadlineAt) } : card

const plainWork = (event: WorkItem.WorkEvent): Record<string, unknown> & { _tag: string; item: Item } => {
  switch (event._tag) {
    case "ThreadReady":
      return { _tag: event._tag, item: event.item, threadId: event.threadId, resumed: event.resumed }
    case "TurnStarted":
      return {
        _tag: event._tag,
        item: event.item,
        threadId: event.threadId,
        turnId: event.turnId,
        prompt: event.prompt
      }
    case "TurnCompleted": {
      const t = event.turn
      return {
        _tag: event._tag,
        item: event.item,
        threadId: event.threadId,
        turn: {
          turnId: t.turnId,
          status: t.status,
          finalMessage: t.finalMessage,
          error: t.error === undefined ? undefined : { message: t.error.message }
        }
      }
    }
    case "ConnectionLost":
      return { _tag: event._tag, item: event.item, threadId: event.threadId }
    case "Resumed":
      return { _tag: event._tag, item: event.item, threadId: event.threadId, attempt: event.attempt }
    case "WorktreeReady":
      return { _tag: event._tag, item: event.item, branch: event.branch, path: event.path }
    default:
      // Not written (Notification, Stalled, ThreadStartedFresh, WorktreeFinished): its tag is enough.
      return { _tag: event._tag, item: event.item }
  }
}

const plainSupervisor = (event: Supervisor.SupervisorEvent): WireSupervisorEvent => {
  switch (event._tag) {
    case "Work":
      return { _tag: "Work", event: plainWork(event.event) }
    case "ItemFinished": {
      const exit = event.exit
      if (Exit.isSuccess(exit)) {
        const r = exit.value
        return {
          _tag: "ItemFinished",
          item: event.item,
          ending: {
            _tag: "Success",
            value: { status: r.status, finalMessage: r.finalMessage, threadId: r.threadId, resumes: r.resumes }
          }
        }
      }
      if (Cause.isInterruptedOnly(exit.cause))
        return { _tag: "ItemFinished", item: event.item, ending: { _tag: "Stopped" } }
      const failure = Option.getOrUndefined(Cause.failureOption(exit.cause))
      return {
        _tag: "ItemFinished",
        item: event.item,
        ending:
          failure !== undefined
            ? { _tag: "Failed", reason: failure.reason, detail: failure.detail, threadId: failure.threadId }
            : { _tag: "Defect", pretty: Cause.pretty(exit.cause) }
      }
    }
    case "ConnectionReady":
      return { _tag: "Other", event: { _tag: event._tag, slot: event.slot, connection: event.connection } }
    case "ConnectionLost":
      return {
        _tag: "Other",
        event: {
          _tag: event._tag,
          slot: event.slot,
          connection: event.connection,
          reason: { _tag: event.reason._tag },
          message: event.message
        }
      }
    default:
      return { _tag: "Other", event: { _tag: event._tag } }
  }
}

/**
 * Views whose opening crossed, by the run it was recorded in: their settlement sends the id only
 * (the worker kept the view: `Views`). Weak: a view nobody holds is gone from here too.
 */
export type Sent = WeakMap<CardTypes.CardView, string>

const plainApproval = (runId: string, event: ApprovalEvent.ApprovalEvent, sent: Sent): WireApprovalEvent => {
  switch (event._tag) {
    case "CardOpened":
      sent.set(event.card, runId)
      return { _tag: "CardOpened", card: portableCard(event.card) }
    case "CardSettled": {
      const s = event.settlement
      const opened = sent.get(s.card) === runId
      if (opened) sent.delete(s.card)
      return {
        _tag: "CardSettled",
        settlement: {
          card: opened ? { _tag: "Sent", id: s.card.id } : portableCard(s.card),
          outcome: s.outcome,
          source: s.source,
          decision: s.decision,
          written: s.written,
          detail: s.detail,
          settledAt: s.settledAt,
          latencyMs: s.latencyMs
        }
      }
    }
    case "LateDecision":
      return {
        _tag: "LateDecision",
        card: portableCard(event.card),
        decision: event.decision,
        source: event.source,
        outcome: event.outcome,
        at: event.at
      }
  }
}

const plainEvent = (runId: string, event: LedgerEvent, sent: Sent): WireEvent => {
  switch (event._tag) {
    case "ItemSubmitted":
      return { _tag: "ItemSubmitted", item: plainItem(event.item), from: event.from }
    case "Supervisor":
      return { _tag: "Supervisor", event: plainSupervisor(event.event) }
    case "Approval":
      return { _tag: "Approval", event: plainApproval(runId, event.event, sent) }
  }
}

/** An op as it crosses to the writer's thread (`sent`: the views whose opening crossed, kept across calls). */
export const toWire = (op: Projection.Op, sent: Sent): WireOp =>
  op._tag === "Event" ? { _tag: "Event", runId: op.runId, at: op.at, event: plainEvent(op.runId, op.event, sent) } : op

/**
 * The writer thread's views of the cards it has seen open: a card's opening and its settlement
 * then share one view (its summary worked out once), as on the main thread. Bounded.
 */
export interface Views {
  readonly view: (runId: string, card: CardTypes.PortableCard | SentCard, settles: boolean) => CardTypes.CardView
}

/**
 * At most `max` cards open at once are kept (the oldest is forgotten past it: its settlement, sent
 * by id, then cannot be read and is reported lost; an engine has far fewer open).
 */
export const makeViews = (max = 100_000): Views => {
  const views = new Map<string, CardTypes.CardView>()
  return {
    view: (runId, card, settles) => {
      const key = `${runId}\u0000${card.id}`
      const known = views.get(key)
      if (known !== undefined) {
        if (settles) views.delete(key)
        return known
      }
      if (card._tag === "Sent") throw new Error(`card ${card.id}: its opening was not kept by the writer's thread`)
      const view = Card.fromPortable(cardOf(card))
      if (!settles) {
        if (views.size >= max) views.delete(views.keys().next().value as string)
        views.set(key, view)
      }
      return view
    }
  }
}

const fromSupervisor = (event: WireSupervisorEvent): Supervisor.SupervisorEvent => {
  switch (event._tag) {
    case "Work":
      return { _tag: "Work", event: event.event as unknown as WorkItem.WorkEvent }
    case "ItemFinished": {
      const e = event.ending
      // The projection reads an exit's value, whether it was interrupted, its failure's reason,
      // detail and thread, and a defect's pretty print: rebuilt so that it reads the same.
      const exit =
        e._tag === "Success"
          ? Exit.succeed(e.value)
          : e._tag === "Stopped"
            ? Exit.interrupt(FiberId.none)
            : e._tag === "Failed"
              ? Exit.fail({ reason: e.reason, detail: e.detail, threadId: e.threadId })
              : Exit.fail({ reason: "defect", detail: e.pretty, threadId: undefined })
      return { _tag: "ItemFinished", item: event.item, exit } as unknown as Supervisor.SupervisorEvent
    }
    case "Other":
      return event.event as unknown as Supervisor.SupervisorEvent
  }
}

const fromApproval = (runId: string, event: WireApprovalEvent, views: Views): ApprovalEvent.ApprovalEvent => {
  switch (event._tag) {
    case "CardOpened":
      return { _tag: "CardOpened", card: views.view(runId, event.card, false) }
    case "CardSettled":
      return {
        _tag: "CardSettled",
        settlement: { ...event.settlement, card: views.view(runId, event.settlement.card, true), reply: undefined }
      }
    case "LateDecision":
      // After its settlement: not kept (nothing follows it that would read the view again).
      return { ...event, card: views.view(runId, event.card, true) }
  }
}

/** A work item back: an infinite `maxTurnTime` a Duration again. */
const itemOf = (item: WorkItem.WorkItem): WorkItem.WorkItem =>
  (item.budget?.maxTurnTime as unknown) === InfiniteDuration
    ? { ...item, budget: { ...item.budget, maxTurnTime: Duration.infinity } }
    : item

/** The op back, on the writer's thread. */
export const fromWire = (op: WireOp, views: Views): Projection.Op => {
  if (op._tag !== "Event") return op
  const e = op.event
  const event: LedgerEvent =
    e._tag === "ItemSubmitted"
      ? e.from === undefined
        ? { _tag: "ItemSubmitted", item: itemOf(e.item) }
        : { _tag: "ItemSubmitted", item: itemOf(e.item), from: e.from }
      : e._tag === "Supervisor"
        ? { _tag: "Supervisor", event: fromSupervisor(e.event) }
        : { _tag: "Approval", event: fromApproval(op.runId, e.event, views) }
  return { _tag: "Event", runId: op.runId, at: op.at, event }
}
