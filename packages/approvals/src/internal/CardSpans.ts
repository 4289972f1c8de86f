/**
 * Cards' spans (`warden.card`): made only when someone can see them, with telemetry (a turn's
 * span to hang them under) or under a tracer other than Effect's built-in one, and ended when the
 * card settles. With telemetry the settlement is described on the span, and logged in it, by a
 * fiber of the connection's owner, off the read loop.
 */
import {
  Cause,
  Chunk,
  Clock,
  Context,
  DefaultServices,
  Effect,
  Exit,
  FiberRef,
  HashMap,
  HashSet,
  Logger,
  Option,
  Tracer
} from "effect"
import type { Fiber } from "effect"
import type { Settlement } from "../Card.js"
import { describeSource } from "./Outcomes.js"
import type { HandlerSpan } from "./HandlerPool.js"
import type { PendingCard, SpanState } from "./PendingCard.js"

/** Effect's own tracer, whose spans nobody sees: cards make none under it (unless telemetry asks). */
const nativeTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/** Whether a span made by `fiber` can be seen by anyone (its tracer is not Effect's built-in one). */
export const tracesVisibly = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean =>
  Context.get(fiber.getFiberRef(DefaultServices.currentServices), Tracer.Tracer) !== nativeTracer

/**
 * Open the card's span (`warden.card`), ended when the card settles; synchronously, in the step
 * that opens the card (the read loop's: an effect here would hand the rest of the chunk to the
 * loop's fiber for every card). What `Effect.makeSpan` does for `fiber`: its tracer and clock, the
 * span annotations and links in force, no span when tracing is off.
 *
 * Without a `parent` (telemetry off, under an embedder's tracer) the span is a child of the
 * caller's and only says the outcome, ended synchronously in the settlement. With one (the turn's
 * span, telemetry on) and a `describer`, the settlement is described on it (source, decision,
 * latency, whether the answer was written, the card's kind and masked title: never the request
 * itself) and a log record is written in it, by a fiber of the connection's, off the read loop:
 * building the masked summary of a large patch and running the logger are not the loop's work.
 * The span's end time is the settlement's.
 */
export const startSpan = (
  card: PendingCard,
  parent: Tracer.AnySpan | undefined,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  describer?: Describer
): Tracer.Span | undefined => {
  if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return undefined
  const services = fiber.getFiberRef(DefaultServices.currentServices)
  const tracer = Context.get(services, Tracer.Tracer)
  const clock = Context.get(services, Clock.Clock)
  const links = fiber.getFiberRef(FiberRef.currentTracerSpanLinks)
  const timing = fiber.getFiberRef(FiberRef.currentTracerTimingEnabled)
  const span = tracer.span(
    "warden.card",
    parent !== undefined
      ? Option.some(parent)
      : propagating(Context.getOption(fiber.getFiberRef(FiberRef.currentContext), Tracer.ParentSpan)),
    Context.empty(),
    Chunk.isEmpty(links) ? [] : Chunk.toReadonlyArray(links),
    timing ? clock.unsafeCurrentTimeNanos() : BigInt(0),
    "internal",
    NoStackTrace
  )
  const annotations = fiber.getFiberRef(FiberRef.currentTracerSpanAnnotations)
  describe(span, card, annotations)
  card.attachSpan(span, clock, tracer, parent === undefined ? undefined : describer, {
    annotations,
    links,
    timing
  })
  return span
}

/** The span annotations in force, then the card's ids (a card's span and its handler's). */
const describe = (span: Tracer.Span, card: PendingCard, annotations: HashMap.HashMap<string, unknown>) => {
  if (HashMap.size(annotations) > 0) HashMap.forEach(annotations, (value, key) => span.attribute(key, value))
  span.attribute("warden.card_id", card.view.id)
  span.attribute("warden.method", card.view.method)
  span.attribute("warden.thread_id", card.view.threadId ?? "")
  span.attribute("warden.turn_id", card.view.turnId ?? "")
}

/** The span a card's handler runs in (`warden.card.handler`), a child of the card's, made when it is called. */
export const handlerSpan = (card: PendingCard, cardSpan: Tracer.Span): HandlerSpan | undefined => {
  const parts = card.spanParts()
  if (parts === undefined) return undefined
  // The fiber that opened the card: its span annotations, links and timing, as the handler's
  // span had them when it was made in a fiber of the opener's runtime.
  const { clock, tracer, ambient } = parts
  return {
    clock,
    open: () => {
      const span = tracer.span(
        "warden.card.handler",
        Option.some(cardSpan),
        Context.empty(),
        Chunk.isEmpty(ambient.links) ? [] : Chunk.toReadonlyArray(ambient.links),
        ambient.timing ? clock.unsafeCurrentTimeNanos() : BigInt(0),
        "internal",
        NoStackTrace
      )
      describe(span, card, ambient.annotations)
      return span
    }
  }
}

/** The caller's span, or the nearest of its parents that propagates (as `Effect.makeSpan` picks). */
const propagating = (span: Option.Option<Tracer.AnySpan>): Option.Option<Tracer.AnySpan> =>
  Option.flatMap(span, (s) =>
    Context.get(s.context, Tracer.DisablePropagation)
      ? s._tag === "Span"
        ? propagating(s.parent)
        : Option.none()
      : Option.some(s)
  )

// Card spans capture no call-site stack trace: it would always point here, and capturing it (an
// Error per span, formatted whenever a span ends failed or interrupted) was a measurable share of
// each card's cost (measured in bench/).
const NoStackTrace = { captureStackTrace: false } as const

/**
 * What describes settled cards' spans for one connection (telemetry on): the settlements of a
 * turn of the event loop are described together, by one fiber of `fork`'s (not one per card).
 * One whose description throws (an embedder's tracer) is logged; the others are described.
 */
export type Describer = (card: PendingCard, settlement: Settlement, span: Tracer.Span, endTime: bigint) => void

export const describer = (fork: (effect: Effect.Effect<void>) => void): Describer => {
  let waiting: Array<Described> = []
  const describeOne = (d: Described) =>
    Effect.catchAllDefect(describeSettled(d.card, d.settlement, d.span, d.endTime), (defect) => {
      // Ended all the same, if it was not (the throw came before its end).
      try {
        if (d.span.status._tag !== "Ended") d.span.end(d.endTime, Exit.void)
      } catch {
        // the embedder's tracer again: reported below
      }
      return Effect.logError("a card's settlement step threw", Cause.die(defect))
    })
  const drain = Effect.suspend(() => {
    const batch = waiting
    waiting = []
    const described = Effect.forEach(batch, describeOne, { discard: true })
    // The record is in the card's span (its trace and span ids), not an event of it: the span
    // already says all the record says, and the event cost more than the rest of the card.
    return Effect.locallyWith(described, FiberRef.currentLoggers, HashSet.remove(Logger.tracerLogger))
  })
  return (card, settlement, span, endTime) => {
    if (waiting.push({ card, settlement, span, endTime }) === 1) fork(drain)
  }
}

interface Described {
  readonly card: PendingCard
  readonly settlement: Settlement
  readonly span: Tracer.Span
  readonly endTime: bigint
}

/** The card settled: its span says so and ends (described by its connection's describer with telemetry). */
export const endSpan = (card: PendingCard, settlement: Settlement, state: SpanState): void => {
  const span = state.span
  span.attribute("warden.outcome", settlement.outcome)
  const endTime = state.clock.unsafeCurrentTimeNanos()
  if (state.describer === undefined) return span.end(endTime, Exit.void)
  state.describer(card, settlement, span, endTime)
}

/** A settled card's span described and ended, and its log record written (telemetry on; the describer's fiber). */
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
