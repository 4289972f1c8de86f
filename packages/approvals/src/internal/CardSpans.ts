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
  type FiberId,
  FiberRef,
  FiberRefs,
  HashMap,
  HashSet,
  Inspectable,
  Logger,
  LogLevel,
  type List,
  type LogSpan,
  Option,
  Tracer
} from "effect"
import type { Fiber } from "effect"
import type { Settlement } from "../Card.js"
import { describeSource } from "./Outcomes.js"
import type { HandlerSpan } from "./HandlerPool.js"
import type { PendingCard, SpanState } from "./PendingCard.js"
import { untilInterrupted } from "./UntilInterrupted.js"

/** Effect's own tracer, whose spans nobody sees: cards make none under it (unless telemetry asks). */
const nativeTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/** Whether a span made by `fiber` can be seen by anyone (its tracer is not Effect's built-in one). */
export const tracesVisibly = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean =>
  Context.get(fiber.getFiberRef(DefaultServices.currentServices), Tracer.Tracer) !== nativeTracer

/**
 * The card's span (`warden.card`), ended when the card settles. What `Effect.makeSpan` does for
 * `fiber`, read in the step that opens the card (the read loop's: an effect here would hand the
 * rest of the chunk to the loop's fiber for every card): its tracer and clock, the span
 * annotations and links in force, the time; no span when tracing is off.
 *
 * Without a `parent` (telemetry off, under an embedder's tracer) the span is made now, a child of
 * the caller's, and only says the outcome, ended synchronously in the settlement. With one (the
 * turn's span, telemetry on) and a `describer`, the span is made when first needed (`cardSpan`):
 * after the card settled, by the describer, in a batch with others (off the read loop), or when
 * its handler's span needs a parent; its start time is the opening's all the same. The
 * settlement is described on it (source, decision, latency, whether the answer was written, the
 * card's kind and masked title: never the request itself) and a log record is written in it:
 * building the masked summary of a large patch and running the logger are not the loop's work.
 * The span's end time is the settlement's. Returns whether the card has a span.
 */
export const startSpan = (
  card: PendingCard,
  parent: Tracer.AnySpan | undefined,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  describer?: Describer
): boolean => {
  if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return false
  const services = fiber.getFiberRef(DefaultServices.currentServices)
  const clock = Context.get(services, Clock.Clock)
  const timing = fiber.getFiberRef(FiberRef.currentTracerTimingEnabled)
  const state: SpanState = {
    span: undefined,
    parent:
      parent !== undefined
        ? Option.some(parent)
        : propagating(Context.getOption(fiber.getFiberRef(FiberRef.currentContext), Tracer.ParentSpan)),
    startTime: timing ? clock.unsafeCurrentTimeNanos() : BigInt(0),
    clock,
    tracer: Context.get(services, Tracer.Tracer),
    describer: parent === undefined ? undefined : describer,
    ambient: {
      log: parent !== undefined && describer !== undefined ? logContextOf(fiber) : undefined,
      annotations: fiber.getFiberRef(FiberRef.currentTracerSpanAnnotations),
      links: fiber.getFiberRef(FiberRef.currentTracerSpanLinks),
      timing
    },
    answered: undefined
  }
  card.attachSpan(state)
  // Nothing describes it later: made now.
  if (state.describer === undefined) cardSpan(card, state)
  return true
}

/** The card's span, made now if it was not yet (at its opening's time: see `startSpan`). */
export const cardSpan = (card: PendingCard, state: SpanState): Tracer.Span => {
  if (state.span !== undefined) return state.span
  const links = state.ambient.links
  const span = state.tracer.span(
    "warden.card",
    state.parent,
    Context.empty(),
    Chunk.isEmpty(links) ? [] : Chunk.toReadonlyArray(links),
    state.startTime,
    "internal",
    NoStackTrace
  )
  state.span = span
  describe(span, card, state.ambient.annotations)
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

/**
 * The span a card's handler runs in (`warden.card.handler`), a child of the card's, made when it
 * is called (`open`). A handler that answered at once (`answered`): with telemetry its span is
 * made with the card's, by the describer, started and ended at that time; without, now.
 */
export const handlerSpan = (card: PendingCard): HandlerSpan | undefined => {
  const state = card.spanParts()
  if (state === undefined) return undefined
  const clock = state.clock
  return {
    clock,
    open: () => openHandlerSpan(card, state, clock.unsafeCurrentTimeNanos()),
    answered: (exit) => {
      const at = clock.unsafeCurrentTimeNanos()
      if (state.describer !== undefined) state.answered = { at, exit }
      else openHandlerSpan(card, state, at).end(at, exit)
    }
  }
}

/** The handler's span, started at `at` (when timing is on), under the card's (made if it was not). */
const openHandlerSpan = (card: PendingCard, state: SpanState, at: bigint): Tracer.Span => {
  // The fiber that opened the card: its span annotations, links and timing, as the handler's
  // span had them when it was made in a fiber of the opener's runtime.
  const ambient = state.ambient
  const span = state.tracer.span(
    "warden.card.handler",
    Option.some(cardSpan(card, state)),
    Context.empty(),
    Chunk.isEmpty(ambient.links) ? [] : Chunk.toReadonlyArray(ambient.links),
    ambient.timing ? at : BigInt(0),
    "internal",
    NoStackTrace
  )
  describe(span, card, ambient.annotations)
  return span
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
 * What describes a settled card's span (telemetry on): called in the settlement's step, it only
 * queues the card (`settledSpans`). The fiber that opened it (`SpanState.ambient`) writes its
 * record, with its loggers.
 */
export type Describer = (card: PendingCard, settlement: Settlement, state: SpanState, endTime: bigint) => void

/** How many settled cards wait for their description at most: a full batch is described at once (after the step). */
export const DescribeBatch = 64
/** How long a settled card waits for its batch at most (its span's end time is its settlement's all the same). */
export const DescribeWithinMs = 20

/** The settled cards' spans of one connection, described in batches (`settledSpans`). */
export interface SettledSpans {
  readonly describe: Describer
  /** Describe now, in the caller's step, every settled card still waiting for its batch. */
  readonly flush: () => void
}

/**
 * The settled cards' spans of one connection (telemetry on), described and their log records
 * written off the read loop, in batches: by a fiber of `owner`'s once `DescribeBatch` cards wait,
 * or by a timer `DescribeWithinMs` after the first of them settled, whichever comes first.
 * Described one by one as they settled, the cards' masked summaries and records cost about three
 * times as much on a busy read loop (a fiber and a cold summary each; measured in bench/,
 * "Telemetry"); the OTLP exporters batch spans and records anyway, for seconds.
 *
 * When `owner` closes (the connection's end), a fiber of its that waits for nothing ends, and what
 * still waits is described then, in the closing's step (the timer is cleared); a card settled
 * after that is described in its settlement's step. Each record is written by the loggers of the
 * fiber that opened its card (the read loop's), with its annotations and log spans as they are
 * when the batch is described (a read loop's do not change), dated with the settlement's time, as
 * `Effect.logInfo` there would have.
 * One whose description throws (an embedder's tracer or logger) is ended all the same and the
 * defect logged; the others are described.
 */
export const settledSpans = (owner: {
  readonly fork: (effect: Effect.Effect<void>) => void
  readonly spawn: (effect: Effect.Effect<void>) => Fiber.RuntimeFiber<void>
}): SettledSpans => {
  let waiting: Array<Described> = []
  let timer: ReturnType<typeof setTimeout> | undefined
  let watching = false
  let closed = false

  const take = (): Array<Described> => {
    if (timer !== undefined) {
      clearTimeout(timer)
      timer = undefined
    }
    const batch = waiting
    waiting = []
    return batch
  }
  const flush = (): void => describeAll(take())
  const flushing = Effect.sync(flush)
  const onTimer = (): void => {
    timer = undefined
    flush()
  }
  const describe: Describer = (card, settlement, state, endTime) => {
    const described = { card, settlement, state, endTime }
    if (closed) return describeAll([described])
    if (!watching) {
      watching = true
      try {
        // Ends when the owner closes (interrupted, even before it started): then what waits is
        // described (`untilInterrupted`: no timer holds the process meanwhile).
        owner.spawn(untilInterrupted).addObserver(() => {
          closed = true
          flush()
        })
      } catch {
        // An owner that cannot run a fiber: nothing would describe what waits, so nothing waits.
        closed = true
      }
      if (closed) return describeAll([described])
    }
    const waits = waiting.push(described)
    if (waits === DescribeBatch) {
      // A full batch: described by a fiber after this step, with what settles before it runs
      // (taking them clears the timer).
      owner.fork(flushing)
    } else if (waits === 1) {
      timer = setTimeout(onTimer, DescribeWithinMs)
      // A description waiting for its batch never keeps a process alive (the owner's close describes it).
      timer.unref?.()
    }
  }
  return { describe, flush }
}

/** Describe each settled card of `batch` and write its record; a throw is logged, and the others described. */
const describeAll = (batch: ReadonlyArray<Described>): void => {
  let log: LogContext | undefined
  let record: Recorder | undefined
  for (const d of batch) {
    try {
      if (d.state.ambient.log !== log) {
        record = undefined // (if making it throws, not the previous context's)
        log = d.state.ambient.log
        record = log === undefined ? undefined : recorder(log)
      }
      const span = describeSettled(d.card, d.settlement, d.state, d.endTime)
      record?.(d.card, d.settlement, span)
    } catch (defect) {
      // Ended all the same, if it was made and not ended (the throw came before its end).
      try {
        const span = d.state.span
        if (span !== undefined && span.status._tag !== "Ended") span.end(d.endTime, Exit.void)
      } catch {
        // the embedder's tracer again: reported below
      }
      if (d.state.ambient.log !== undefined) logDefect(d.state.ambient.log, defect)
    }
  }
}

interface Described {
  readonly card: PendingCard
  readonly settlement: Settlement
  readonly state: SpanState
  readonly endTime: bigint
}

/** The card settled: its span says so and ends (described by its connection's describer with telemetry). */
export const endSpan = (card: PendingCard, settlement: Settlement, state: SpanState): void => {
  const endTime = state.clock.unsafeCurrentTimeNanos()
  if (state.describer !== undefined) return state.describer(card, settlement, state, endTime)
  const span = cardSpan(card, state)
  span.attribute("warden.outcome", settlement.outcome)
  span.end(endTime, Exit.void)
}

/**
 * A settled card's span made if it was not, its handler's if the handler answered at once,
 * described and ended (telemetry on; a batch of the describer's).
 */
const describeSettled = (card: PendingCard, settlement: Settlement, state: SpanState, endTime: bigint): Tracer.Span => {
  const span = cardSpan(card, state)
  span.attribute("warden.outcome", settlement.outcome)
  const answered = state.answered
  if (answered !== undefined) {
    state.answered = undefined
    openHandlerSpan(card, state, answered.at).end(answered.at, answered.exit)
  }
  span.attribute("warden.source", describeSource(settlement.source))
  if (settlement.decision !== undefined) span.attribute("warden.decision", settlement.decision)
  span.attribute("warden.latency_ms", settlement.latencyMs)
  span.attribute("warden.written", settlement.written)
  // The masked summary (built once, shared with the board, the audit and the ledger).
  span.attribute("warden.card.kind", card.view.summary.kind)
  span.attribute("warden.card.title", card.view.title)
  if (card.view.workItem !== undefined) span.attribute("warden.item", String(card.view.workItem))
  span.end(endTime, Exit.void)
  return span
}

type Recorder = (card: PendingCard, settlement: Settlement, span: Tracer.Span) => void

/**
 * What the log records of cards opened by one fiber are written with: that fiber's loggers,
 * minimum level, log annotations and spans, and its FiberRefs (a record's `context`), as they
 * were when the card opened. Read from the fiber in the step that opens a card (a few FiberRef
 * reads) and made again only when one of them changed (`logContextOf`): a read loop's never do,
 * so its cards share one. Not read when the batch is described: a fiber's refs are not what it
 * had while it is in the middle of something else (a scope's close, a `locally`).
 */
export interface LogContext {
  readonly fiberId: FiberId.Runtime
  readonly refs: FiberRefs.FiberRefs
  readonly loggers: HashSet.HashSet<Logger.Logger<unknown, any>>
  readonly minimum: LogLevel.LogLevel
  readonly annotations: HashMap.HashMap<string, unknown>
  readonly spans: List.List<LogSpan.LogSpan>
  readonly context: Context.Context<never>
}

const logContexts = new WeakMap<Fiber.RuntimeFiber<unknown, unknown>, LogContext>()

/** `fiber`'s `LogContext` now (the one it had if nothing of it changed). */
export const logContextOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>): LogContext => {
  const loggers = fiber.getFiberRef(FiberRef.currentLoggers)
  const minimum = fiber.getFiberRef(FiberRef.currentMinimumLogLevel)
  const annotations = fiber.getFiberRef(FiberRef.currentLogAnnotations)
  const spans = fiber.getFiberRef(FiberRef.currentLogSpan)
  const known = logContexts.get(fiber)
  if (
    known !== undefined &&
    known.loggers === loggers &&
    known.minimum === minimum &&
    known.annotations === annotations &&
    known.spans === spans
  )
    return known
  const made: LogContext = {
    fiberId: fiber.id(),
    refs: fiber.getFiberRefs(),
    loggers,
    minimum,
    annotations,
    spans,
    context: fiber.getFiberRef(FiberRef.currentContext)
  }
  logContexts.set(fiber, made)
  return made
}

/**
 * What writes a settled card's log record (`card <outcome>`, at Info, its ids and source as
 * annotations, in its span: the record carries the span's trace and span ids) with the loggers of
 * `log`: what `Effect.logInfo(…).pipe(Effect.annotateLogs(…), Effect.withParentSpan(span))` in
 * the opening fiber would write, handed to the same loggers, without an effect per card (that
 * cost ~16 µs a card, most of it the annotations' and the span's FiberRef changes). The record is
 * not an event of the span (Effect's tracer logger is left out): the span already says all it
 * says. Undefined when no logger would write it (none but the tracer's, or Info below the minimum).
 */
const recorder = (log: LogContext): Recorder | undefined => {
  const to = loggersOf(log, LogLevel.Info)
  if (to === undefined) return undefined
  return (card, settlement, span) => {
    const view = card.view
    const annotations = HashMap.mutate(log.annotations, (m) => {
      HashMap.set(m, "cardId", view.id)
      HashMap.set(m, "method", view.method)
      HashMap.set(m, "threadId", view.threadId ?? "")
      HashMap.set(m, "turnId", view.turnId ?? "")
      HashMap.set(m, "outcome", settlement.outcome)
      HashMap.set(m, "source", describeSource(settlement.source))
    })
    to(LogLevel.Info, `card ${settlement.outcome}`, Cause.empty, annotations, span, settlement.settledAt)
  }
}

/** A description that threw, logged at Error with `log`'s loggers (one that throws too is not asked again). */
const logDefect = (log: LogContext, defect: unknown): void => {
  try {
    loggersOf(log, LogLevel.Error)?.(
      LogLevel.Error,
      "a card's settlement step threw",
      Cause.die(defect),
      log.annotations,
      undefined,
      Date.now()
    )
  } catch {
    // nowhere left to say it
  }
}

/**
 * What hands one record (in `span`, when given) to `log`'s loggers but Effect's tracer logger, as
 * the fiber's own `log` would; undefined when none of them would write one at `level`.
 */
const loggersOf = (log: LogContext, level: LogLevel.LogLevel) => {
  if (LogLevel.greaterThan(log.minimum, level)) return undefined
  const loggers = HashSet.remove(log.loggers, Logger.tracerLogger)
  if (HashSet.size(loggers) === 0) return undefined
  const fiberId = log.fiberId
  return (
    logLevel: LogLevel.LogLevel,
    message: string,
    cause: Cause.Cause<unknown>,
    annotations: HashMap.HashMap<string, unknown>,
    span: Tracer.Span | undefined,
    /** When it happened (epoch ms): a settlement's time, not the batch's. */
    at: number
  ): void => {
    const options: Logger.Logger.Options<unknown> = {
      fiberId,
      logLevel,
      message: [message],
      cause,
      context:
        span === undefined
          ? log.refs
          : FiberRefs.updateAs(log.refs, {
              fiberId,
              fiberRef: FiberRef.currentContext,
              value: Context.add(log.context, Tracer.ParentSpan, span)
            }),
      spans: log.spans,
      annotations,
      date: new Date(at)
    }
    // As the fiber's own `log`: a redactable value in the record shows as its context says.
    Inspectable.withRedactableContext(options.context, () => {
      for (const logger of loggers) logger.log(options)
    })
  }
}
