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
 * The audit record of an approval event, before masking (pure, never fails). It copies only the
 * card's masked fields; what is written is `record`, which passes every string through
 * `SecretMask` as well.
 */
export const toRecord = (event: ApprovalEvent): AuditRecord => {
  switch (event._tag) {
    case "CardOpened":
      return {
        type: "card.opened",
        ts: iso(event.card.openedAt),
        ...cardFields(event.card),
        decision: null,
        source: null,
        channel: null,
        outcome: null,
        written: null,
        latencyMs: null,
        detail: null
      }
    case "CardSettled": {
      const s = event.settlement
      return {
        type: "card.settled",
        ts: iso(s.settledAt),
        ...cardFields(s.card),
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
        type: "card.late",
        ts: iso(event.at),
        ...cardFields(event.card),
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

/** The longest `summary` (a card's masked title) in a record; longer ones are cut, ending with "…". */
export const MaxSummary = 400

/** The longest `detail` in a record; longer ones are cut, ending with "…". */
export const MaxDetail = 4_000

/** A card's title as a record shows it: masked and cut to `MaxSummary`. */
export const summaryOf = (card: CardView): string => SecretMask.maskShown(card.title, MaxSummary)

const masked = (s: string | null): string | null => (s === null ? null : SecretMask.maskText(s))

/**
 * The audit record of an approval event as it is written anywhere (the JSONL trail, the ledger):
 * `toRecord` with every string through `SecretMask` (`summary` and `detail` also cut, to
 * `MaxSummary` and `MaxDetail`). Pure, never fails.
 */
export const record = (event: ApprovalEvent): AuditRecord => {
  const r = toRecord(event)
  const card = event._tag === "CardSettled" ? event.settlement.card : event.card
  return {
    type: r.type,
    ts: r.ts,
    cardId: SecretMask.maskText(r.cardId),
    requestId: typeof r.requestId === "string" ? SecretMask.maskText(r.requestId) : r.requestId,
    method: SecretMask.maskText(r.method),
    threadId: masked(r.threadId),
    turnId: masked(r.turnId),
    workItem: typeof r.workItem === "string" ? SecretMask.maskText(r.workItem) : r.workItem,
    summary: summaryOf(card),
    decision: masked(r.decision),
    source: masked(r.source),
    channel: masked(r.channel),
    outcome: masked(r.outcome),
    written: r.written,
    latencyMs: r.latencyMs,
    detail: r.detail === null ? null : SecretMask.maskShown(r.detail, MaxDetail)
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
 * otherwise). A later write that fails is logged and that record is lost; the sink goes on. Events
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
export const jsonlSink = (path: string): Effect.Effect<void, AuditFileError, Approvals | Scope.Scope> =>
  Effect.gen(function* () {
    const approvals = yield* Approvals
    const fd = yield* Effect.acquireRelease(
      Effect.try({ try: () => fs.openSync(path, "a"), catch: (e) => new AuditFileError({ path, detail: String(e) }) }),
      (fd) => Effect.sync(() => fs.closeSync(fd))
    )
    const queue = yield* approvals.subscribe
    const writeOne = (event: ApprovalEvent) =>
      Effect.try(() => fs.writeSync(fd, line(event))).pipe(
        Effect.tapError((e) => Effect.logError("audit write failed", e)),
        Effect.ignore
      )
    // Read so that no event is lost, the last settlements included: when the scope closes, what
    // was published is written first.
    yield* EventPump.make(queue, writeOne)
  })
