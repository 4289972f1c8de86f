/**
 * The audit trail, with every card's opening and settling (and every late decision) as one flat
 * JSON record. Records carry the masked title, never request values, answers or form contents, and the
 * sink passes every string of a record through the one masking function again (a detail may quote
 * a handler's error), so a secret can't reach the log. It appends one line per event and flushes it.
 */
import { Data, Effect, Queue } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs"
import type { ApprovalEvent } from "./ApprovalEvent.js"
import { Approvals } from "./Approvals.js"
import type { CardView } from "./Card.js"
import { describeSource } from "./Card.js"
import * as SecretMask from "./SecretMask.js"

/**
 * One line of the audit trail, flat, with `null` for what does not apply to its type.
 *
 * Its `type` is `card.opened`, `card.settled` or `card.late`. `summary` is the card's masked title;
 * `source` is `Card.describeSource` (`rule:<id>`, `handler`, `person`, `deadline`, ...); `ts` is
 * ISO 8601.
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

/**
 * The audit record of an approval event (pure, never fails). It copies only the card's masked
 * fields; `jsonlSink` additionally passes every string through `SecretMask.maskJson` before writing.
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
        outcome: event.outcome,
        written: false,
        latencyMs: null,
        detail: "decision arrived after the card settled; dropped"
      }
  }
}

/** The audit file at `path` could not be opened for appending (`detail` says why). */
export class AuditFileError extends Data.TaggedError("AuditFileError")<{ readonly path: string; readonly detail: string }> {
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
  Effect.gen(function*() {
    const approvals = yield* Approvals
    const fd = yield* Effect.acquireRelease(
      Effect.try({ try: () => fs.openSync(path, "a"), catch: (e) => new AuditFileError({ path, detail: String(e) }) }),
      (fd) => Effect.sync(() => fs.closeSync(fd))
    )
    const queue = yield* approvals.subscribe
    const writeOne = (event: ApprovalEvent) =>
      Effect.try(() => fs.writeSync(fd, JSON.stringify(SecretMask.maskJson(toRecord(event))) + "\n")).pipe(
        Effect.tapError((e) => Effect.logError("audit write failed", e)),
        Effect.ignore
      )
    // Drain what is queued when the scope closes, so the last settlements are not lost.
    yield* Effect.addFinalizer(() => Queue.takeAll(queue).pipe(Effect.flatMap((events) => Effect.forEach(events, writeOne, { discard: true }))))
    yield* Queue.take(queue).pipe(Effect.flatMap(writeOne), Effect.forever, Effect.interruptible, Effect.forkScoped)
  })
