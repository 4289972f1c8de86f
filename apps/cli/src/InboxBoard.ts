/**
 * What the web inbox shows besides the cards: every work item's status, activity, tokens and
 * times, keyed by the item's id (the CLI's PROMPT index, or an embedder's id), updated
 * synchronously from supervisor events. Also the JSON forms of cards and settlements the API and
 * the event stream send (masked views only: the approvals engine masked them, and every string goes
 * through `SecretMask.maskJson` once more on the way out).
 */
import type { ApprovalEvent, Card } from "@warden/approvals"
import { Card as CardNs, SecretMask } from "@warden/approvals"
import type { Supervisor } from "@warden/supervisor"
import { Json } from "@warden/protocol"
import * as CardText from "./CardText.js"
import type { CardBrief, CardFull, ItemJson, SettlementJson } from "./InboxApi.js"
import * as JsonOutput from "./JsonOutput.js"
import * as Tally from "./Tally.js"

interface ItemState {
  item: string | number
  prompt: string | null
  status: string
  threadId: string | null
  activity: string
  tokens: number | null
  startedAt: number | null
  finishedAt: number | null
  finalMessage: string | null
  error: string | null
}

export interface Board {
  /** Applies a supervisor event; returns the item it changed, if one. */
  readonly onSupervisorEvent: (event: Supervisor.SupervisorEvent, now: number) => ItemJson | undefined
  readonly items: () => ReadonlyArray<ItemJson>
  /** A work item submitted after the start (`warden serve`), queued until it starts; its row. */
  readonly add: (id: string | number, prompt: string) => ItemJson
}

const keyOf = (id: string | number) => String(id)

/** A board, with the items known in advance (queued until they start). */
export const make = (known: ReadonlyArray<{ readonly id: string | number; readonly prompt: string }> = []): Board => {
  const items = new Map<string, ItemState>()
  const fresh = (item: string | number, prompt: string | null): ItemState => ({
    item,
    prompt,
    status: "queued",
    threadId: null,
    activity: "waiting for a slot",
    tokens: null,
    startedAt: null,
    finishedAt: null,
    finalMessage: null,
    error: null
  })
  for (const k of known) items.set(keyOf(k.id), fresh(k.id, k.prompt))
  const itemOf = (id: string | number | undefined): ItemState | undefined => {
    if (id === undefined) return undefined
    let state = items.get(keyOf(id))
    if (state === undefined) {
      state = fresh(id, null)
      items.set(keyOf(id), state)
    }
    return state
  }
  // Each text masked (not the record: `tokens` is a count, not a secret).
  const text = (t: string | null) => (t === null ? null : SecretMask.maskText(t))
  const json = (s: ItemState): ItemJson => ({
    ...s,
    prompt: text(s.prompt),
    activity: SecretMask.maskText(s.activity),
    finalMessage: text(s.finalMessage),
    error: text(s.error)
  })
  const onSupervisorEvent = (event: Supervisor.SupervisorEvent, now: number): ItemJson | undefined => {
    if (event._tag === "ItemFinished") {
      const item = itemOf(event.item)
      if (!item) return undefined
      const outcome = Tally.outcomeOf(event.exit)
      item.status = outcome.status
      item.threadId = outcome.threadId ?? item.threadId
      item.finalMessage = outcome.finalMessage ?? null
      item.error = outcome.error ?? null
      item.finishedAt = now
      item.activity = outcome.status === "completed" ? "done" : outcome.error ?? outcome.status
      return json(item)
    }
    if (event._tag !== "Work") return undefined
    const work = event.event
    const item = itemOf(work.item)
    if (!item) return undefined
    switch (work._tag) {
      case "ThreadReady":
        item.threadId = work.threadId
        item.status = "running"
        item.startedAt ??= now
        item.activity = work.resumed ? "resumed" : "starting"
        break
      case "TurnStarted":
        item.prompt ??= work.prompt
        item.activity = "thinking"
        break
      case "TurnCompleted":
        item.activity = `turn ${work.turn.status}`
        break
      case "Stalled":
        item.activity = "stalled"
        break
      case "ConnectionLost":
        item.activity = "connection lost"
        break
      case "Resumed":
        item.activity = `resumed (attempt ${work.attempt})`
        break
      case "ThreadStartedFresh":
        item.activity = "starting a new thread"
        break
      case "Notification": {
        const params = Json.asRecord(work.params)
        if (work.method === "thread/tokenUsage/updated") {
          const total = Json.asRecord(Json.asRecord(params?.["tokenUsage"])?.["total"])?.["totalTokens"]
          if (typeof total !== "number" || total === item.tokens) return undefined
          item.tokens = total
          break
        }
        if (work.method === "item/started") {
          const type = Json.asRecord(params?.["item"])?.["type"]
          item.activity = type === "commandExecution" ? "running a command" : typeof type === "string" ? type : "working"
          break
        }
        return undefined
      }
    }
    return json(item)
  }
  const add = (id: string | number, prompt: string) => {
    const state = items.get(keyOf(id)) ?? fresh(id, prompt)
    state.prompt = prompt
    items.set(keyOf(id), state)
    return json(state)
  }
  return { onSupervisorEvent, items: () => Array.from(items.values(), json), add }
}

/** Who decided, as a phrase: `person (web)`, `deadline`, `rule:no-rm`. */
export const byOf = (source: Card.Source): string =>
  source._tag === "Person" && source.channel !== undefined ? `person (${source.channel})` : CardNs.describeSource(source)

export const settlementJson = (s: Card.Settlement): SettlementJson =>
  SecretMask.maskJson({
    cardId: s.card.id,
    outcome: s.outcome,
    source: CardNs.describeSource(s.source),
    channel: s.source._tag === "Person" ? s.source.channel ?? null : null,
    by: byOf(s.source),
    decision: s.decision ?? null,
    written: s.written,
    detail: s.detail ?? null,
    settledAt: s.settledAt,
    latencyMs: s.latencyMs
  }) as SettlementJson

export const cardBrief = (card: Card.CardView, always: boolean): CardBrief =>
  SecretMask.maskJson({
    id: card.id,
    method: card.method,
    kind: card.summary.kind,
    title: card.title,
    item: card.workItem ?? null,
    threadId: card.threadId ?? null,
    turnId: card.turnId ?? null,
    offers: [...card.offers.map(JsonOutput.offerWord), ...(always && card.offers.includes("Accept") ? ["always"] : [])],
    openedAt: card.openedAt,
    deadlineAt: card.deadlineAt
  }) as CardBrief

export const cardFull = (card: Card.CardView, always: boolean, settlement: Card.Settlement | undefined): CardFull => ({
  ...cardBrief(card, always),
  state: settlement === undefined ? "open" : "settled",
  details: SecretMask.maskJson(CardText.details(card)) as ReadonlyArray<string>,
  summary: SecretMask.maskJson(card.summary),
  settlement: settlement === undefined ? null : settlementJson(settlement)
})

/** The event-stream message for an approval event, if it is one the inbox sends. */
export const approvalMessage = (event: ApprovalEvent.ApprovalEvent, always: boolean): { readonly event: string; readonly data: unknown } | undefined => {
  switch (event._tag) {
    case "CardOpened":
      return { event: "card.opened", data: cardBrief(event.card, always) }
    case "CardSettled":
      return { event: "card.settled", data: settlementJson(event.settlement) }
    case "LateDecision":
      return undefined
  }
}
