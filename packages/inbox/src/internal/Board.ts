/**
 * What the web inbox shows besides the cards: every work item's status, activity, tokens and
 * times, keyed by the item's id (the CLI's PROMPT index, or an embedder's id), updated
 * synchronously from supervisor events. Also the JSON forms of cards and settlements the API and
 * the event stream send (masked views only: the approvals engine masked them, and every string goes
 * through `SecretMask.maskJson` once more on the way out).
 */
import type { Card } from "@warden/approvals"
import { Card as CardNs, CardText, SecretMask } from "@warden/approvals"
import type { Supervisor } from "@warden/supervisor"
import type { CardBrief, CardFull, ItemJson, SettlementJson } from "../InboxApi.js"
import * as RunState from "../RunState.js"

/** An item's row: its id, its prompt when known, and the run state's progress fields (one reducer: `RunState.applyItemEvent`). */
interface Row {
  readonly item: string | number
  prompt: string | null
  readonly progress: RunState.ItemState
}

export interface Board {
  /** Applies a supervisor event; returns the item it changed, if one. */
  readonly onSupervisorEvent: (event: Supervisor.SupervisorEvent, now: number) => ItemJson | undefined
  readonly items: () => ReadonlyArray<ItemJson>
  /** A work item submitted after the start (`warden serve`), queued until it starts; its row. */
  readonly add: (id: string | number, prompt: string) => ItemJson
  /** A row as a source that keeps its own rows says it (a fleet's items); masked, returned as shown. */
  readonly put: (item: ItemJson) => ItemJson
}

const keyOf = (id: string | number) => String(id)

/** A board, with the items known in advance (queued until they start). */
export const make = (known: ReadonlyArray<{ readonly id: string | number; readonly prompt: string }> = []): Board => {
  const rows = new Map<string, Row>()
  const fresh = (item: string | number, prompt: string | null): Row => ({
    item,
    prompt,
    progress: RunState.queuedItem(-1, prompt ?? "")
  })
  for (const k of known) rows.set(keyOf(k.id), fresh(k.id, k.prompt))
  const rowOf = (id: string | number | undefined): Row | undefined => {
    if (id === undefined) return undefined
    let row = rows.get(keyOf(id))
    if (row === undefined) {
      row = fresh(id, null)
      rows.set(keyOf(id), row)
    }
    return row
  }
  // Each text masked (not the record: `tokens` is a count, not a secret).
  const text = (t: string | null | undefined) => (t === null || t === undefined ? null : SecretMask.maskText(t))
  const json = ({ item, prompt, progress: p }: Row): ItemJson => ({
    item,
    prompt: text(prompt),
    status: p.status,
    threadId: p.threadId ?? null,
    activity: SecretMask.maskText(p.activity),
    tokens: p.tokens ?? null,
    startedAt: p.startedAt ?? null,
    finishedAt: p.finishedAt ?? null,
    finalMessage: text(p.finalMessage),
    error: text(p.error)
  })
  const onSupervisorEvent = (event: Supervisor.SupervisorEvent, now: number): ItemJson | undefined => {
    if (event._tag !== "ItemFinished" && event._tag !== "Work") return undefined
    const row = rowOf(event._tag === "ItemFinished" ? event.item : event.event.item)
    if (!row) return undefined
    if (event._tag === "Work" && event.event._tag === "TurnStarted") row.prompt ??= event.event.prompt
    return RunState.applyItemEvent(row.progress, event, now) ? json(row) : undefined
  }
  const add = (id: string | number, prompt: string) => {
    const row = rows.get(keyOf(id)) ?? fresh(id, prompt)
    row.prompt = prompt
    rows.set(keyOf(id), row)
    return json(row)
  }
  /** Rows put whole by the source (never reduced from supervisor events). */
  const whole = new Map<string, ItemJson>()
  const put = (item: ItemJson) => {
    const shown = SecretMask.maskJson(item) as ItemJson
    whole.set(keyOf(item.item), shown)
    return shown
  }
  return { onSupervisorEvent, items: () => [...Array.from(rows.values(), json), ...whole.values()], add, put }
}

/** Who decided, as a phrase: `person (web)`, `deadline`, `rule:no-rm`. */
const byOf = (source: Card.Source): string =>
  source._tag === "Person" && source.channel !== undefined
    ? `person (${source.channel})`
    : CardNs.describeSource(source)

export const settlementJson = (s: Card.Settlement): SettlementJson =>
  SecretMask.maskJson({
    cardId: s.card.id,
    outcome: s.outcome,
    source: CardNs.describeSource(s.source),
    channel: s.source._tag === "Person" ? (s.source.channel ?? null) : null,
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
    offers: [...card.offers.map(CardText.offerWord), ...(always && card.offers.includes("Accept") ? ["always"] : [])],
    openedAt: card.openedAt,
    // JSON has no infinity: a card without a deadline says null.
    deadlineAt: Number.isFinite(card.deadlineAt) ? card.deadlineAt : null
  }) as CardBrief

export const cardFull = (card: Card.CardView, always: boolean, settlement: SettlementJson | undefined): CardFull => ({
  ...cardBrief(card, always),
  state: settlement === undefined ? "open" : "settled",
  details: SecretMask.maskJson(CardText.details(card)) as ReadonlyArray<string>,
  summary: SecretMask.maskJson(card.summary),
  settlement: settlement ?? null
})
