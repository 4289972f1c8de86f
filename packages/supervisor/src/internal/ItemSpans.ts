/**
 * A work item's spans, set on its fiber rather than wrapped around its effects (an idle item keeps
 * no wrapper on its stack), and made only where somebody sees them.
 */
import {
  Chunk,
  Clock,
  Context,
  DefaultServices,
  Effect,
  type Exit,
  type Fiber,
  FiberRef,
  HashMap,
  Scope,
  Tracer
} from "effect"

/**
 * The fiber's current span (what `Effect.withSpan` would provide), set for the rest of the
 * fiber's run instead of around an effect: a work item idles in a turn with no wrapper of its own
 * on its stack (see `run`). The supervisor puts the caller's back when the item ends.
 */
export const enterSpan = (span: Tracer.AnySpan | undefined): Effect.Effect<void> =>
  span === undefined ? Effect.void : FiberRef.update(FiberRef.currentContext, Context.add(Tracer.ParentSpan, span))

/** Effect's own tracer, whose spans nobody sees (as the approvals engine's card spans tell it). */
const nativeTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/**
 * Whether a work item makes its spans: with telemetry, or under a tracer somebody sees (an
 * embedder's). Under Effect's own tracer they would go nowhere (~0.6 KiB each, three per idle
 * item), so there are none, as for cards.
 */
export const tracesVisibly = (telemetry: boolean): Effect.Effect<boolean> =>
  telemetry ? Effect.succeed(true) : Effect.map(Effect.tracer, (tracer) => tracer !== nativeTracer)

/** A span child of the current one, ended with the exit `scope` closes with; none when not `traced`. */
export const spanIn = (
  traced: boolean,
  scope: Scope.Scope,
  name: string,
  options: Tracer.SpanOptions
): Effect.Effect<Tracer.Span | undefined> =>
  traced ? Effect.makeSpanScoped(name, options).pipe(Scope.extend(scope)) : Effect.succeed(undefined)

/** End `span` with `exit` (as `Effect.withSpan` does), unless it already ended. */
export const endSpan = (span: Tracer.Span, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(FiberRef.currentTracerTimingEnabled), (timing) =>
    Effect.clockWith((clock) =>
      Effect.sync(() => {
        if (span.status._tag !== "Ended") span.end(timing ? clock.unsafeCurrentTimeNanos() : BigInt(0), exit)
      })
    )
  )

/**
 * A span started now in `fiber`, a child of its current span, and what ends it: what
 * `Effect.withSpan` makes and ends (the fiber's tracer and clock, the span annotations and links
 * in force, its timing switch), without the effects around it and without becoming the fiber's
 * current span: for a span nothing is made under (a client request's). None when the fiber's
 * tracing is off.
 */
export const startSpanIn = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  name: string,
  kind: Tracer.SpanKind,
  attributes: Readonly<Record<string, unknown>>
): ((exit: Exit.Exit<unknown, unknown>) => void) | undefined => {
  if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return undefined
  const services = fiber.getFiberRef(DefaultServices.currentServices)
  const clock = Context.get(services, Clock.Clock)
  const timing = fiber.getFiberRef(FiberRef.currentTracerTimingEnabled)
  const links = fiber.getFiberRef(FiberRef.currentTracerSpanLinks)
  const span = Context.get(services, Tracer.Tracer).span(
    name,
    Context.getOption(fiber.getFiberRef(FiberRef.currentContext), Tracer.ParentSpan),
    Context.empty(),
    Chunk.isEmpty(links) ? [] : Chunk.toReadonlyArray(links),
    timing ? clock.unsafeCurrentTimeNanos() : BigInt(0),
    kind,
    NoStackTrace
  )
  const annotations = fiber.getFiberRef(FiberRef.currentTracerSpanAnnotations)
  if (HashMap.size(annotations) > 0) HashMap.forEach(annotations, (value, key) => span.attribute(key, value))
  for (const key in attributes) span.attribute(key, attributes[key])
  return (exit) => {
    if (span.status._tag !== "Ended") span.end(timing ? clock.unsafeCurrentTimeNanos() : BigInt(0), exit)
  }
}

// No call-site stack trace: it would always point here (and formatting it when a span ends
// failed costs more than the span).
const NoStackTrace = { captureStackTrace: false } as const
