/**
 * Cards' spans (`warden.card`): made only when someone can see them, with telemetry (a turn's
 * span to hang them under) or under a tracer other than Effect's built-in one, and ended when the
 * card settles. With telemetry the settlement is described on the span, and logged in it, by a
 * fiber of the connection's owner, off the read loop.
 */
import { Context, DefaultServices, Effect, Exit, Tracer } from "effect"
import type { Fiber } from "effect"
import type { Settlement } from "../Card.js"
import { describeSource } from "./Outcomes.js"
import type { PendingCard, SpanState } from "./PendingCard.js"

// Card spans capture no call-site stack trace: it would always point here, and capturing it (an
// Error per span, formatted whenever a span ends failed or interrupted) was a measurable share of
// each card's cost (measured in bench/).
export const spanOptions = (card: PendingCard) => ({ attributes: cardAttributes(card), captureStackTrace: false })

/** Effect's own tracer, whose spans nobody sees: cards make none under it (unless telemetry asks). */
const nativeTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/** Whether a span made by `fiber` can be seen by anyone (its tracer is not Effect's built-in one). */
export const tracesVisibly = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean =>
  Context.get(fiber.getFiberRef(DefaultServices.currentServices), Tracer.Tracer) !== nativeTracer

/**
 * Open the card's span (`warden.card`), ended when the card settles.
 *
 * Without a `parent` (telemetry off, under an embedder's tracer) the span is a child of the
 * caller's and only says the outcome, ended synchronously in the settlement. With one (the turn's
 * span, telemetry on) and `fork`, the settlement is described on it (source, decision, latency,
 * whether the answer was written, the card's kind and masked title: never the request itself) and
 * a log record is written in it, by a fiber of `fork`'s, off the read loop: building the masked
 * summary of a large patch and running the logger are not the loop's work. The span's end time is
 * the settlement's.
 */
export const startSpan = (
  card: PendingCard,
  parent: Tracer.AnySpan | undefined,
  fork?: (effect: Effect.Effect<void>) => void
): Effect.Effect<Tracer.Span> =>
  Effect.flatMap(Effect.clock, (clock) =>
    Effect.map(
      Effect.makeSpan("warden.card", parent === undefined ? spanOptions(card) : { ...spanOptions(card), parent }),
      (span) => {
        card.attachSpan(span, clock, parent === undefined ? undefined : fork)
        return span
      }
    )
  )

/** The card settled: its span says so and ends (described by a fiber of `fork`'s with telemetry). */
export const endSpan = (card: PendingCard, settlement: Settlement, state: SpanState): void => {
  const span = state.span
  span.attribute("warden.outcome", settlement.outcome)
  const endTime = state.clock.unsafeCurrentTimeNanos()
  if (state.fork === undefined) return span.end(endTime, Exit.void)
  state.fork(describeSettled(card, settlement, span, endTime))
}

/** A settled card's span described and ended, and its log record written (telemetry on; its own fiber). */
const describeSettled = (
  card: PendingCard,
  settlement: Settlement,
  span: Tracer.Span,
  endTime: bigint
): Effect.Effect<void> =>
  Effect.suspend(() => {
    const source = describeSource(settlement.source)
    span.attribute("warden.source", source)
    if (settlement.decision !== undefined) span.attribute("warden.decision", settlement.decision)
    span.attribute("warden.latency_ms", settlement.latencyMs)
    span.attribute("warden.written", settlement.written)
    // The masked summary (built once, shared with the board, the audit and the ledger).
    span.attribute("warden.card.kind", card.view.summary.kind)
    span.attribute("warden.card.title", card.view.title)
    if (card.view.workItem !== undefined) span.attribute("warden.item", String(card.view.workItem))
    span.end(endTime, Exit.void)
    return Effect.logInfo(`card ${settlement.outcome}`).pipe(
      Effect.annotateLogs({
        cardId: card.view.id,
        method: card.view.method,
        threadId: card.view.threadId ?? "",
        turnId: card.view.turnId ?? "",
        outcome: settlement.outcome,
        source
      }),
      Effect.withParentSpan(span)
    )
  })

const cardAttributes = (card: PendingCard) => ({
  "warden.card_id": card.view.id,
  "warden.method": card.view.method,
  "warden.thread_id": card.view.threadId ?? "",
  "warden.turn_id": card.view.turnId ?? ""
})
