/**
 * An in-process OTLP/HTTP receiver (JSON), for tests of what Warden exports: a `node:http` server
 * on loopback that keeps every request it is sent and decodes traces, metrics and logs.
 *
 * @packageDocumentation
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"
import type { Scope } from "effect"

/** An OTLP attribute value (only the scalar kinds Warden exports). */
export interface AnyValue {
  readonly stringValue?: string
  readonly intValue?: number | string
  readonly boolValue?: boolean
  readonly doubleValue?: number
}

/** An OTLP attribute. */
export interface KeyValue {
  readonly key: string
  readonly value: AnyValue
}

/** One exported span. */
export interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind?: number
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
  readonly attributes?: ReadonlyArray<KeyValue>
  readonly status?: { readonly code?: number; readonly message?: string }
}

/** One exported log record. */
export interface LogRecord {
  readonly timeUnixNano?: string
  readonly severityText?: string
  readonly body?: AnyValue
  readonly attributes?: ReadonlyArray<KeyValue>
  readonly traceId?: string
  readonly spanId?: string
}

/** One data point of a metric (a sum's, a gauge's or a histogram's). */
export interface DataPoint {
  readonly attributes?: ReadonlyArray<KeyValue>
  readonly asInt?: number
  readonly asDouble?: number
  readonly count?: number
  readonly sum?: number
  readonly min?: number
  readonly max?: number
}

/** One exported metric. */
export interface Metric {
  readonly name: string
  readonly description?: string
  readonly unit?: string
  readonly sum?: { readonly dataPoints: ReadonlyArray<DataPoint>; readonly isMonotonic?: boolean }
  readonly gauge?: { readonly dataPoints: ReadonlyArray<DataPoint> }
  readonly histogram?: { readonly dataPoints: ReadonlyArray<DataPoint> }
}

/** One request the receiver was sent. */
export interface Received {
  /** `/v1/traces`, `/v1/metrics` or `/v1/logs`. */
  readonly path: string
  readonly headers: Http.IncomingHttpHeaders
  /** The body as sent. */
  readonly text: string
}

/** A running receiver and what it has received so far. */
export interface Receiver {
  /** The base URL to export to (`http://127.0.0.1:PORT`). */
  readonly url: string
  /** Every request, in arrival order. */
  readonly received: () => ReadonlyArray<Received>
  /** Every span of every trace export. */
  readonly spans: () => ReadonlyArray<Span>
  /** Every log record. */
  readonly logs: () => ReadonlyArray<LogRecord>
  /** The last exported value of every metric, by name (metrics are cumulative: the last export holds the totals). */
  readonly metrics: () => ReadonlyMap<string, Metric>
  /** Everything received, as text (to look for what must not be there). */
  readonly allText: () => string
}

interface Bodies {
  readonly resourceSpans?: ReadonlyArray<{
    readonly scopeSpans?: ReadonlyArray<{ readonly spans?: ReadonlyArray<Span> }>
  }>
  readonly resourceLogs?: ReadonlyArray<{
    readonly scopeLogs?: ReadonlyArray<{ readonly logRecords?: ReadonlyArray<LogRecord> }>
  }>
  readonly resourceMetrics?: ReadonlyArray<{
    readonly scopeMetrics?: ReadonlyArray<{ readonly metrics?: ReadonlyArray<Metric> }>
  }>
}

const parse = (text: string): Bodies => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null ? (value as Bodies) : {}
  } catch {
    return {}
  }
}

/**
 * Start a receiver on a free loopback port, in the current scope (closed with it). It answers
 * every request `200 {}`.
 */
export const make: Effect.Effect<Receiver, never, Scope.Scope> = Effect.acquireRelease(
  Effect.async<{ readonly server: Http.Server; readonly receiver: Receiver }>((resume) => {
    const received: Array<Received & { readonly body: Bodies }> = []
    const server = Http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        received.push({ path: req.url ?? "", headers: req.headers, text, body: parse(text) })
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      const of = (path: string) => received.filter((r) => r.path === path).map((r) => r.body)
      resume(
        Effect.succeed({
          server,
          receiver: {
            url: `http://127.0.0.1:${port}`,
            received: () => received.map(({ headers, path, text }) => ({ headers, path, text })),
            spans: () =>
              of("/v1/traces").flatMap((b) =>
                (b.resourceSpans ?? []).flatMap((r) => (r.scopeSpans ?? []).flatMap((s) => s.spans ?? []))
              ),
            logs: () =>
              of("/v1/logs").flatMap((b) =>
                (b.resourceLogs ?? []).flatMap((r) => (r.scopeLogs ?? []).flatMap((s) => s.logRecords ?? []))
              ),
            metrics: () => {
              const last = new Map<string, Metric>()
              for (const b of of("/v1/metrics")) {
                for (const r of b.resourceMetrics ?? [])
                  for (const s of r.scopeMetrics ?? []) for (const m of s.metrics ?? []) last.set(m.name, m)
              }
              return last
            },
            allText: () => received.map((r) => r.text).join("\n")
          }
        })
      )
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ receiver }) => receiver))

/** An attribute's value, or undefined. */
export const attribute = (
  attributes: ReadonlyArray<KeyValue> | undefined,
  key: string
): string | number | boolean | undefined => {
  const value = attributes?.find((a) => a.key === key)?.value
  return value === undefined ? undefined : (value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue)
}

/** The data points of `metric` whose attributes include every one of `labels`. */
export const points = (
  metric: Metric | undefined,
  labels: Readonly<Record<string, string>> = {}
): ReadonlyArray<DataPoint> => {
  const all = metric?.sum?.dataPoints ?? metric?.gauge?.dataPoints ?? metric?.histogram?.dataPoints ?? []
  return all.filter((p) => Object.entries(labels).every(([k, v]) => attribute(p.attributes, k) === v))
}

/** A counter's value summed over the matching data points (a histogram's: its count). */
export const total = (metric: Metric | undefined, labels: Readonly<Record<string, string>> = {}): number =>
  points(metric, labels).reduce((n, p) => n + Number(p.asInt ?? p.asDouble ?? p.count ?? 0), 0)
