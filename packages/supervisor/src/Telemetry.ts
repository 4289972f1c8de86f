/**
 * What Warden tells a telemetry backend: the metric instruments (`warden.*`), the span and
 * attribute names, and the switch that turns the instrumentation on.
 *
 * Off by default, and free when off: a supervisor built without the {@link Telemetry} service in
 * its context updates no metric, makes no request span and measures no read-loop lag (its work
 * item, thread, turn, connection and card spans are Effect spans as before, which cost what
 * Effect's own tracer costs). `@warden/observability`'s `Observability.layer` provides the service
 * together with the OTLP exporters; provide `Telemetry.layer` yourself to feed the same metrics to
 * another exporter (any reader of Effect's metric registry).
 *
 * On the connection's read loop: a clock read per stdout chunk, and the card metrics (a few
 * metric updates as a card opens and settles, counted from the approval events as they are
 * published); the rest where the work happens (a work item's fiber, a slot's loop, a request's
 * caller). Every label value is a method name, an
 * outcome, a source (`rule:<id>` names a rule, never its text), a model or a reason tag: never a
 * command, a path or a prompt.
 *
 * @packageDocumentation
 */
import { Context, Layer, Metric, MetricBoundaries, MetricKey, MetricLabel } from "effect"
import type { MetricKeyType } from "effect"

/**
 * What the instrumentation is told by whoever switched it on (nothing yet: its presence is the switch).
 */
export interface TelemetryShape {
  /** Measure the read loop's lag (chunk arrival to frame handled); default true. */
  readonly readLoopLag?: boolean
}

/**
 * The switch: a supervisor built with this service in its context records the `warden.*`
 * metrics, a `warden.request` span per client request, and parents every card's span to its turn's.
 */
export class Telemetry extends Context.Tag("@warden/supervisor/Telemetry")<Telemetry, TelemetryShape>() {}

/**
 * The instrumentation on, with no exporter: what `Observability.layer` provides next to its OTLP
 * exporters. Provide it to `Supervisor.layer` (or around `Supervisor.make`).
 */
export const layer: Layer.Layer<Telemetry> = Layer.succeed(Telemetry, {})

/** Span names, as exported (one trace per work item; a connection's span is a trace of its own). */
export const Spans = {
  /** A work item, from admission to its result (the root of its trace). */
  workItem: "warden.workItem",
  /** A thread on one connection (a resume after a restart is a second one, `warden.resume` true). */
  thread: "warden.thread",
  /** One turn, `turn/start` to `turn/completed`. */
  turn: "warden.turn",
  /** One approval card, opened to settled; a child of its turn's span. */
  card: "warden.card",
  /** The card's handler, while it decides. */
  cardHandler: "warden.card.handler",
  /** One client request to the app-server (`rpc.method`), sent to answered. */
  request: "warden.request",
  /** One app-server connection of a slot, spawn to end (`warden.restart` counts the restarts before it). */
  connection: "warden.connection"
}

/** Attribute (and metric label) names Warden uses, besides OpenTelemetry's `rpc.method`, `rpc.system`. */
export const Attributes = {
  item: "warden.item",
  threadId: "warden.thread_id",
  turnId: "warden.turn_id",
  cardId: "warden.card_id",
  method: "warden.method",
  kind: "warden.card.kind",
  outcome: "warden.outcome",
  source: "warden.source",
  decision: "warden.decision",
  latencyMs: "warden.latency_ms",
  title: "warden.card.title",
  status: "warden.status",
  reason: "warden.reason",
  model: "warden.model",
  tokenType: "warden.token.type",
  slot: "warden.slot",
  connection: "warden.connection",
  resume: "warden.resume",
  restart: "warden.restart"
}

const millis = MetricBoundaries.exponential({ start: 1, factor: 2, count: 22 }) // 1 ms .. ~35 min

// The unit is a tag of the key itself (OTLP's exporter reads it from the `unit` tag), not a
// `Metric.tagged` wrapper: an update with no labels then finds its series without a registry lookup.
const withUnit = <Type extends MetricKeyType.MetricKeyType<any, any>>(key: MetricKey.MetricKey<Type>, unit: string) =>
  Metric.fromMetricKey(MetricKey.tagged(key, "unit", unit))
const counter = (name: string, description: string, unit: string): Metric.Metric.Counter<number> =>
  withUnit(MetricKey.counter(name, { description, incremental: true }), unit)
const gauge = (name: string, description: string, unit: string): Metric.Metric.Gauge<number> =>
  withUnit(MetricKey.gauge(name, { description }), unit)
const histogram = (
  name: string,
  boundaries: MetricBoundaries.MetricBoundaries,
  description: string,
  unit: string
): Metric.Metric.Histogram<number> => withUnit(MetricKey.histogram(name, boundaries, description), unit)

/**
 * The same label array for the same values, every time: Effect caches a metric's series by the
 * identity of the labels array, so an update with a cached array costs no registry lookup.
 */
export const labelsOf = (
  keys: ReadonlyArray<string>
): ((...values: ReadonlyArray<string>) => ReadonlyArray<MetricLabel.MetricLabel>) => {
  const cache = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()
  return (...values) => {
    const id = values.join("\u0000")
    let labels = cache.get(id)
    if (labels === undefined) {
      labels = keys.map((key, i) => MetricLabel.make(key, values[i] ?? ""))
      cache.set(id, labels)
    }
    return labels
  }
}

/**
 * The `warden.*` metrics, as Effect `Metric`s (in Effect's global registry, where OTLP's metrics
 * exporter reads them). Units are the `unit` tag (`ms`, `{card}`, `{token}`, ...).
 */
export const Metrics: {
  readonly openCards: Metric.Metric.Gauge<number>
  readonly cardLatency: Metric.Metric.Histogram<number>
  readonly cardsSettled: Metric.Metric.Counter<number>
  readonly workItems: Metric.Metric.Counter<number>
  readonly workItemsRunning: Metric.Metric.Gauge<number>
  readonly turns: Metric.Metric.Counter<number>
  readonly tokens: Metric.Metric.Counter<number>
  readonly restarts: Metric.Metric.Counter<number>
  readonly losses: Metric.Metric.Counter<number>
  readonly requestLatency: Metric.Metric.Histogram<number>
  readonly readLoopLag: Metric.Metric.Histogram<number>
} = {
  /** Cards open now, by `warden.method` (a gauge: who is waiting on a decision right now). */
  openCards: gauge("warden.cards.open", "Approval cards open now", "{card}"),
  /** Opened to settled, by `warden.method`, `warden.outcome`, `warden.source` (ms). */
  cardLatency: histogram("warden.card.duration", millis, "Time from a card's opening to its settlement", "ms"),
  /** Cards settled, by `warden.method`, `warden.outcome`, `warden.source`. */
  cardsSettled: counter("warden.cards.settled", "Approval cards settled", "{card}"),
  /** Work items ended, by `warden.status` (a turn status, or the failure reason: `stalled`, `connection-lost`, ...). */
  workItems: counter("warden.work_items", "Work items ended", "{item}"),
  /** Work items running now (admitted, not ended). */
  workItemsRunning: gauge("warden.work_items.running", "Work items running now", "{item}"),
  /** Turns ended, by `warden.status` (`completed`, `interrupted`, `failed`). */
  turns: counter("warden.turns", "Turns ended", "{turn}"),
  /** Tokens from `thread/tokenUsage/updated` (its `last`), by `warden.token.type` (`input`, `output`, `cached`) and `warden.model`. */
  tokens: counter("warden.tokens", "Tokens used, from thread/tokenUsage/updated", "{token}"),
  /** App-server restarts, by `warden.slot`. */
  restarts: counter("warden.connection.restarts", "App-server restarts", "{restart}"),
  /** App-server connections lost, by `warden.reason` (the end reason: `Exited`, `StdoutClosed`, `InternalDefect`, ...). */
  losses: counter("warden.connection.losses", "App-server connections lost", "{connection}"),
  /** Client requests, sent to answered, by `rpc.method` and `warden.outcome` (`ok` or the error's tag) (ms). */
  requestLatency: histogram(
    "warden.request.duration",
    millis,
    "Time from a client request's sending to its answer",
    "ms"
  ),
  /** From a stdout chunk's arrival to the last frame it carried handled by the read loop (ms). */
  readLoopLag: histogram(
    "warden.read_loop.lag",
    MetricBoundaries.fromIterable([0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000]),
    "Time from a stdout chunk's arrival to its frames handled by the read loop",
    "ms"
  )
}
