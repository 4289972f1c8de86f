/**
 * The audit trail, with every card's opening and settling (and every late decision) as one flat
 * JSON record. Records carry the masked title, never request values, answers or form contents, and
 * `record` passes every string of a record through the one masking function (a detail may quote a
 * handler's error), so a secret can't reach the log. `record` is also what `@warden/ledger` stores
 * for a card's title and its settlement, and the ledger writes the same lines when it is given an
 * audit file: one record, two renderings. `jsonlSink` appends one line per event and flushes it.
 */
import { Data, Effect } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs"
import type { ApprovalEvent } from "./ApprovalEvent.js"
import { Approvals } from "./Approvals.js"
import type { CardView, Source } from "./Card.js"
import { describeSource } from "./Card.js"
import * as SecretMask from "./SecretMask.js"
import * as EventPump from "./EventPump.js"

/**
 * One line of the audit trail, flat, with `null` for what does not apply to its type.
 *
 * Its `type` is `card.opened`, `card.settled` or `card.late`. `summary` is the card's masked title;
 * `source` is `Card.describeSource` (`rule:<id>`, `handler`, `person`, `deadline`, ...);
 * `channel` is where a person's decision came from (`terminal`, `stdin`, `web`, `link`; null for
 * any other source, or a person through the plain inbox); `ts` is ISO 8601.
 */
export interface AuditRecord {
  readonly type: "card.opened" | "card.settled" | "card.late"
  readonly ts: string
  readonly cardId: string
  readonly requestId: number | string
  readonly method: string
  readonly threadId: string | null
  readonly turnId: string | null
  readonly workItem: string | number | null
  readonly summary: string
  readonly decision: string | null
  readonly source: string | null
  readonly channel: string | null
  readonly outcome: string | null
  readonly written: boolean | null
  readonly latencyMs: number | null
  readonly detail: string | null
}

/** What every record says about its card (the masked title, never request values). */
const cardFields = (c: CardView) => ({
  cardId: c.id,
  requestId: c.requestId,
  method: c.method,
  threadId: c.threadId ?? null,
  turnId: c.turnId ?? null,
  workItem: c.workItem ?? null,
  summary: c.title
})

const iso = (ms: number) => new Date(ms).toISOString()

const channelOf = (source: Source): string | null => (source._tag === "Person" ? (source.channel ?? null) : null)

/**
 * What a record says of an event's decision: its decision, source, channel, outcome, whether the
 * answer was written, the latency and the detail (null where they do not apply: an opening).
 */
export type DecisionFields = Pick<
  AuditRecord,
  "decision" | "source" | "channel" | "outcome" | "written" | "latencyMs" | "detail"
>

const NoDecision: DecisionFields = {
  decision: null,
  source: null,
  channel: null,
  outcome: null,
  written: null,
  latencyMs: null,
  detail: null
}

/** `DecisionFields` before masking. */
const decisionFields = (event: ApprovalEvent): DecisionFields => {
  switch (event._tag) {
    case "CardOpened":
      return NoDecision
    case "CardSettled": {
      const s = event.settlement
      return {
        decision: s.decision ?? null,
        source: describeSource(s.source),
        channel: channelOf(s.source),
        outcome: s.outcome,
        written: s.written,
        latencyMs: s.latencyMs,
        detail: s.detail ?? null
      }
    }
    case "LateDecision":
      return {
        decision: event.decision,
        source: describeSource(event.source),
        channel: channelOf(event.source),
        outcome: event.outcome,
        written: false,
        latencyMs: null,
        detail: "decision arrived after the card settled; dropped"
      }
  }
}

const typeOf = (event: ApprovalEvent): AuditRecord["type"] =>
  event._tag === "CardOpened" ? "card.opened" : event._tag === "CardSettled" ? "card.settled" : "card.late"

const atOf = (event: ApprovalEvent): number =>
  event._tag === "CardOpened"
    ? event.card.openedAt
    : event._tag === "CardSettled"
      ? event.settlement.settledAt
      : event.at

const cardOf = (event: ApprovalEvent): CardView => (event._tag === "CardSettled" ? event.settlement.card : event.card)

/**
 * The audit record of an approval event, before masking (pure, never fails). It copies only the
 * card's masked fields; what is written is `record`, which passes every string through
 * `SecretMask` as well.
 */
export const toRecord = (event: ApprovalEvent): AuditRecord => ({
  type: typeOf(event),
  ts: iso(atOf(event)),
  ...cardFields(cardOf(event)),
  ...decisionFields(event)
})

/** The longest `summary` (a card's masked title) in a record; longer ones are cut, ending with "…". */
export const MaxSummary = 400

/** The longest `detail` in a record; longer ones are cut, ending with "…". */
export const MaxDetail = 4_000

/** A card's title as a record shows it: masked and cut to `MaxSummary`. */
export const summaryOf = (card: CardView): string => SecretMask.maskShown(card.title, MaxSummary)

const masked = (s: string | null): string | null => (s === null ? null : SecretMask.maskText(s))

/**
 * `DecisionFields` as `record` holds them (every string through `SecretMask`, `detail` cut to
 * `MaxDetail`), without the rest of the record: what the ledger stores for a settlement or a late
 * decision. Pure, never fails.
 */
export const decisionOf = (event: ApprovalEvent): DecisionFields => {
  const d = decisionFields(event)
  if (d === NoDecision) return NoDecision
  return {
    decision: masked(d.decision),
    source: masked(d.source),
    channel: masked(d.channel),
    outcome: masked(d.outcome),
    written: d.written,
    latencyMs: d.latencyMs,
    detail: d.detail === null ? null : SecretMask.maskShown(d.detail, MaxDetail)
  }
}

/**
 * The audit record of an approval event as it is written anywhere (the JSONL trail, the ledger):
 * `toRecord` with every string through `SecretMask` (`summary` and `detail` also cut, to
 * `MaxSummary` and `MaxDetail`). Pure, never fails.
 */
export const record = (event: ApprovalEvent): AuditRecord => {
  const card = cardOf(event)
  const r = cardFields(card)
  return {
    type: typeOf(event),
    ts: iso(atOf(event)),
    cardId: SecretMask.maskText(r.cardId),
    requestId: typeof r.requestId === "string" ? SecretMask.maskText(r.requestId) : r.requestId,
    method: SecretMask.maskText(r.method),
    threadId: masked(r.threadId),
    turnId: masked(r.turnId),
    workItem: typeof r.workItem === "string" ? SecretMask.maskText(r.workItem) : r.workItem,
    summary: summaryOf(card),
    ...decisionOf(event)
  }
}

/** One line of the JSONL trail for `event` (`record`, as JSON, with its newline). */
export const line = (event: ApprovalEvent): string => JSON.stringify(record(event)) + "\n"

/** The audit file at `path` could not be opened for appending (`detail` says why). */
export class AuditFileError extends Data.TaggedError("AuditFileError")<{
  readonly path: string
  readonly detail: string
}> {
  override get message() {
    return `cannot write the audit trail to ${this.path}: ${this.detail}`
  }
}

/**
 * Append every approval event to `path` as JSONL for as long as the scope lives. Opening the
 * file fails with a typed error; each event is written with a synchronous append (durable in the
 * OS before the next event is handled).
 *
 * Fails with `AuditFileError` when the file cannot be opened (created if missing, appended to
 * otherwise). A later write that fails is logged, that record is lost, and `options.onLost` is told
 * why (masked); the sink goes on. Events
 * still queued when the scope closes are written before the file is closed. Needs the `Approvals`
 * service: with a supervisor, provide `supervisor.approvals`.
 *
 * @example
 * ```ts
 * import { Approvals, Audit } from "@warden/approvals"
 * import { Supervisor } from "@warden/supervisor"
 * import { Effect } from "effect"
 *
 * const withAudit = Effect.gen(function*() {
 *   const supervisor = yield* Supervisor.Supervisor
 *   yield* Audit.jsonlSink("audit.jsonl").pipe(Effect.provideService(Approvals.Approvals, supervisor.approvals))
 *   return yield* supervisor.run({ prompt: "say hello" })
 * }) // in a Scope: the trail is written until it closes
 * ```
 */
export const jsonlSink = (
  path: string,
  options: {
    /** Told, for each record a write lost, why (masked): count them, say so at the end. */
    readonly onLost?: (detail: string) => void
  } = {}
): Effect.Effect<void, AuditFileError, Approvals | Scope.Scope> =>
  Effect.gen(function* () {
    const approvals = yield* Approvals
    const fd = yield* Effect.acquireRelease(
      Effect.try({ try: () => fs.openSync(path, "a"), catch: (e) => new AuditFileError({ path, detail: String(e) }) }),
      (fd) => Effect.sync(() => fs.closeSync(fd))
    )
    const queue = yield* approvals.subscribe
    const writeOne = (event: ApprovalEvent) =>
      Effect.try(() => fs.writeSync(fd, line(event))).pipe(
        Effect.tapError((e) =>
          Effect.zipRight(
            Effect.sync(() =>
              options.onLost?.(
                SecretMask.maskShown(
                  `the audit file ${path} could not be written: ${e.error instanceof Error ? e.error.message : String(e.error)}`,
                  500
                )
              )
            ),
            Effect.logError("audit write failed", e)
          )
        ),
        Effect.ignore
      )
    // Read so that no event is lost, the last settlements included: when the scope closes, what
    // was published is written first.
    yield* EventPump.make(queue, writeOne)
  })
