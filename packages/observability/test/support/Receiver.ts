/**
 * An in-process OTLP/HTTP receiver for tests: a node:http server on loopback that keeps every
 * request it is sent (path, headers, the decoded JSON body). The exporters speak OTLP/JSON.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"

export interface Received {
  readonly path: string
  readonly headers: Http.IncomingHttpHeaders
  readonly text: string
  readonly body: any
}

export interface Receiver {
  readonly url: string
  readonly received: Array<Received>
  /** Every span of every trace export. */
  readonly spans: () => Array<any>
  /** Every log record. */
  readonly logs: () => Array<any>
  /** The last value of every metric (the last export holds the final, cumulative values). */
  readonly metrics: () => Map<string, any>
  /** Everything received, as text (to look for secrets). */
  readonly allText: () => string
}

/** Start the receiver in the current scope (closed with it). */
export const make = Effect.acquireRelease(
  Effect.async<{ server: Http.Server; receiver: Receiver }>((resume) => {
    const received: Array<Received> = []
    const server = Http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        let body: unknown
        try {
          body = JSON.parse(text)
        } catch {
          body = undefined
        }
        received.push({ path: req.url ?? "", headers: req.headers, text, body })
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      const of = (path: string) => received.filter((r) => r.path === path)
      const receiver: Receiver = {
        url: `http://127.0.0.1:${port}`,
        received,
        spans: () =>
          of("/v1/traces").flatMap((r) =>
            (r.body?.resourceSpans ?? []).flatMap((rs: any) => (rs.scopeSpans ?? []).flatMap((ss: any) => ss.spans ?? []))
          ),
        logs: () =>
          of("/v1/logs").flatMap((r) =>
            (r.body?.resourceLogs ?? []).flatMap((rl: any) => (rl.scopeLogs ?? []).flatMap((sl: any) => sl.logRecords ?? []))
          ),
        metrics: () => {
          const last = new Map<string, any>()
          for (const r of of("/v1/metrics")) {
            for (const rm of r.body?.resourceMetrics ?? []) {
              for (const sm of rm.scopeMetrics ?? []) for (const m of sm.metrics ?? []) last.set(m.name, m)
            }
          }
          return last
        },
        allText: () => received.map((r) => r.text).join("\n")
      }
      resume(Effect.succeed({ server, receiver }))
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ receiver }) => receiver))

/** An attribute's value (OTLP/JSON `{ key, value: { stringValue | intValue | boolValue | doubleValue } }`). */
export const attr = (attributes: ReadonlyArray<any> | undefined, key: string): unknown => {
  const value = attributes?.find((a) => a.key === key)?.value
  if (value === undefined) return undefined
  return value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue
}

/** The data points of a metric whose attributes include `labels`. */
export const points = (metric: any, labels: Record<string, string> = {}): Array<any> => {
  const all: Array<any> = metric?.sum?.dataPoints ?? metric?.gauge?.dataPoints ?? metric?.histogram?.dataPoints ?? []
  return all.filter((p) => Object.entries(labels).every(([k, v]) => attr(p.attributes, k) === v))
}

/** The sum of a counter's (or the count of a histogram's) matching data points. */
export const total = (metric: any, labels: Record<string, string> = {}): number =>
  points(metric, labels).reduce((n, p) => n + Number(p.asInt ?? p.asDouble ?? p.count ?? 0), 0)
