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
 * Nothing here runs on the connection's read loop but a clock read per stdout chunk: card metrics
 * are counted by a fiber of their own from the approval events, the rest where the work happens
 * (a work item's fiber, a slot's loop, a request's caller). Every label value is a method name, an
 * outcome, a source (`rule:<id>` names a rule, never its text), a model or a reason tag: never a
 * command, a path or a prompt.
 *
 * @packageDocumentation
 */
import { Context, Layer, Metric, MetricBoundaries } from "effect"

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
  openCards: Metric.tagged(Metric.gauge("warden.cards.open", { description: "Approval cards open now" }), "unit", "{card}"),
  /** Opened to settled, by `warden.method`, `warden.outcome`, `warden.source` (ms). */
  cardLatency: Metric.tagged(Metric.histogram("warden.card.duration", millis, "Time from a card's opening to its settlement"), "unit", "ms"),
  /** Cards settled, by `warden.method`, `warden.outcome`, `warden.source`. */
  cardsSettled: Metric.tagged(Metric.counter("warden.cards.settled", { description: "Approval cards settled", incremental: true }), "unit", "{card}"),
  /** Work items ended, by `warden.status` (a turn status, or the failure reason: `stalled`, `connection-lost`, ...). */
  workItems: Metric.tagged(Metric.counter("warden.work_items", { description: "Work items ended", incremental: true }), "unit", "{item}"),
  /** Work items running now (admitted, not ended). */
  workItemsRunning: Metric.tagged(Metric.gauge("warden.work_items.running", { description: "Work items running now" }), "unit", "{item}"),
  /** Turns ended, by `warden.status` (`completed`, `interrupted`, `failed`). */
  turns: Metric.tagged(Metric.counter("warden.turns", { description: "Turns ended", incremental: true }), "unit", "{turn}"),
  /** Tokens from `thread/tokenUsage/updated` (its `last`), by `warden.token.type` (`input`, `output`, `cached`) and `warden.model`. */
  tokens: Metric.tagged(Metric.counter("warden.tokens", { description: "Tokens used, from thread/tokenUsage/updated", incremental: true }), "unit", "{token}"),
  /** App-server restarts, by `warden.slot`. */
  restarts: Metric.tagged(Metric.counter("warden.connection.restarts", { description: "App-server restarts", incremental: true }), "unit", "{restart}"),
  /** App-server connections lost, by `warden.reason` (the end reason: `Exited`, `StdoutClosed`, `InternalDefect`, ...). */
  losses: Metric.tagged(Metric.counter("warden.connection.losses", { description: "App-server connections lost", incremental: true }), "unit", "{connection}"),
  /** Client requests, sent to answered, by `rpc.method` and `warden.outcome` (`ok` or the error's tag) (ms). */
  requestLatency: Metric.tagged(Metric.histogram("warden.request.duration", millis, "Time from a client request's sending to its answer"), "unit", "ms"),
  /** From a stdout chunk's arrival to the last frame it carried handled by the read loop (ms). */
  readLoopLag: Metric.tagged(Metric.histogram(
    "warden.read_loop.lag",
    MetricBoundaries.fromIterable([0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000]),
    "Time from a stdout chunk's arrival to its frames handled by the read loop"
  ), "unit", "ms")
}
