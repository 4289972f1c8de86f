/**
 * Warden's traces, metrics and logs, exported over OTLP/HTTP (JSON) to a collector.
 *
 * `Observability.layer` is the whole of it: provide it to the supervisor's layer and everything the
 * supervisor does is exported (docs/observability.md lists every span, attribute and metric):
 *
 * - traces: one per work item (`warden.workItem` → `warden.thread` → `warden.turn` → `warden.card`,
 *   and `warden.request` for each client request); each app-server connection is a trace of its own;
 * - metrics: the `warden.*` instruments of `Telemetry.Metrics` (open cards, card latency, cards
 *   settled, work items, turns, tokens, restarts, losses, request latency, read-loop lag);
 * - logs: Effect's log records, with their annotations (thread, turn, card ids) and the trace and
 *   span they were written in.
 *
 * The exporters are `@effect/opentelemetry`'s OTLP modules over `node:http` (a small client of this
 * package's, internal/NodeHttp.ts, keep-alive connections): no OpenTelemetry SDK; not `fetch`,
 * whose first request in a process costs ~4x the CPU of `node:http`'s (it loads and compiles
 * undici) and each later one up to twice as much (docs/performance.md); and not
 * `@effect/platform-node`'s `NodeHttpClient`, whose module loads the undici package as soon as it
 * is imported. Nothing is sent from the connection's read loop: spans and log records are buffered
 * and sent by background fibers (every few seconds, and once more when the layer's scope closes,
 * bounded by `shutdownTimeout`). A collector that cannot be reached never fails or holds up the
 * run: the batch is dropped, the exporter rests for a minute, and the failure is reported once
 * (`onExportError`, masked).
 *
 * @packageDocumentation
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Otlp from "@effect/opentelemetry/Otlp"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import { SecretMask } from "@warden/approvals"
import { Telemetry } from "@warden/supervisor"
import { Duration, Effect, Fiber, Layer } from "effect"
import * as NodeHttp from "./internal/NodeHttp.js"

/** Where and how to export; only `endpoint` is required. */
export interface Options {
  /**
   * The collector's OTLP/HTTP base URL (`http://localhost:4318`): traces go to `/v1/traces`, metrics
   * to `/v1/metrics`, logs to `/v1/logs` under it (as `OTEL_EXPORTER_OTLP_ENDPOINT` means).
   */
  readonly endpoint: string
  /** `service.name` of everything exported (default `warden`). */
  readonly serviceName?: string
  /** `service.version` (default: none). */
  readonly serviceVersion?: string
  /** More resource attributes (`deployment.environment`, ...). */
  readonly attributes?: Readonly<Record<string, string>>
  /** Headers of every export request (a collector's API key: never reported, never logged). */
  readonly headers?: Readonly<Record<string, string>>
  /** How often spans and metrics are sent (default 5 seconds; logs every second). */
  readonly exportInterval?: Duration.DurationInput
  /** How long the layer's close may wait for the last export of each signal (default 3 seconds). */
  readonly shutdownTimeout?: Duration.DurationInput
  /** Record `warden.read_loop.lag` (default true). */
  readonly readLoopLag?: boolean
  /**
   * Told once, with a masked message, the first time an export fails (the collector refused the
   * connection, answered an error status, ...); later failures are not reported. Default: a
   * warning through Effect's logger.
   */
  readonly onExportError?: (message: string) => Effect.Effect<void>
}

/**
 * The OTLP/HTTP endpoint and service name from the standard environment variables, or undefined
 * when `OTEL_EXPORTER_OTLP_ENDPOINT` is not set.
 *
 * Reads `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_SERVICE_NAME` from `env` (default `process.env`).
 */
export const fromEnv = (env: Readonly<Record<string, string | undefined>> = process.env): Options | undefined => {
  const endpoint = env["OTEL_EXPORTER_OTLP_ENDPOINT"]?.trim()
  if (endpoint === undefined || endpoint.length === 0) return undefined
  const serviceName = env["OTEL_SERVICE_NAME"]?.trim()
  return { endpoint, ...(serviceName !== undefined && serviceName.length > 0 ? { serviceName } : {}) }
}

/** The endpoint as it may be shown: a user, a password or a query value in the URL is masked. */
export const describeEndpoint = (endpoint: string): string => SecretMask.maskText(endpoint)

/**
 * Export Warden's traces, metrics and logs to an OTLP/HTTP collector, and turn the supervisor's
 * instrumentation on (`Telemetry.Telemetry`).
 *
 * Provide it below `Supervisor.layer` (the supervisor reads the switch when it is built, and its
 * fibers inherit the tracer and the logger). Building it never fails and sends nothing; closing it
 * sends what is left (bounded by `shutdownTimeout`). Without it, Warden exports nothing and
 * records no metric.
 *
 * @example
 * ```ts
 * import { Observability } from "@warden/observability"
 * import { CodexCommand, Supervisor } from "@warden/supervisor"
 * import { Layer } from "effect"
 *
 * const WardenLive = Supervisor.layer({ concurrency: 4 }).pipe(
 *   Layer.provide(CodexCommand.transportLayer({ command: "codex" })),
 *   Layer.provide(Observability.layer({ endpoint: "http://localhost:4318", serviceName: "warden-ci" }))
 * )
 * ```
 */
export const layer = (options: Options): Layer.Layer<Telemetry.Telemetry> => {
  const report = options.onExportError ?? ((message: string) => Effect.logWarning(message))
  const interval = options.exportInterval ?? Duration.seconds(5)
  const exporters = Otlp.layer({
    baseUrl: options.endpoint,
    resource: {
      serviceName: options.serviceName ?? "warden",
      ...(options.serviceVersion !== undefined ? { serviceVersion: options.serviceVersion } : {}),
      ...(options.attributes !== undefined ? { attributes: { ...options.attributes } } : {})
    },
    ...(options.headers !== undefined ? { headers: { ...options.headers } } : {}),
    tracerExportInterval: interval,
    metricsExportInterval: interval,
    loggerExportInterval: Duration.min(Duration.decode(interval), Duration.seconds(1)),
    shutdownTimeout: options.shutdownTimeout ?? Duration.seconds(3)
  })
  return Layer.merge(
    exporters.pipe(
      Layer.provide(OtlpSerialization.layerJson),
      Layer.provide(reportingClient(options.endpoint, report))
    ),
    // Unset, the supervisor's default applies (Telemetry.TelemetryShape: on).
    Layer.succeed(Telemetry.Telemetry, options.readLoopLag === undefined ? {} : { readLoopLag: options.readLoopLag })
  )
}

/** How long one export may take at most, sent to its end even when the run is closing. */
const ExportTimeout = Duration.seconds(10)

/**
 * The exporters' HTTP client: `node:http`, with the first failure reported (masked) and a
 * collector that cannot be reached failing at once instead of being retried (the exporter's
 * retries would hold a closing run for `shutdownTimeout`; it drops the batch and rests for a
 * minute instead).
 */
const reportingClient = (endpoint: string, report: (message: string) => Effect.Effect<void>) =>
  Layer.effect(
    HttpClient.HttpClient,
    Effect.map(HttpClient.HttpClient, (client) => {
      let reported = false
      const once = (what: string) =>
        Effect.suspend(() => {
          if (reported) return Effect.void
          reported = true
          return report(
            SecretMask.maskText(
              `warden: exporting telemetry to ${describeEndpoint(endpoint)} failed (${what}); it is dropped while that lasts (reported once)`
            )
          )
        })
      return client.pipe(
        HttpClient.transform((response, request) => toItsEnd(response, request)),
        HttpClient.tap((response) =>
          response.status >= 200 && response.status < 300
            ? Effect.void
            : once(`the collector answered ${response.status}`)
        ),
        HttpClient.transformResponse((response) =>
          response.pipe(
            Effect.tapError((error) => once(describeError(error))),
            Effect.mapError((error) =>
              // Not "Transport": the exporter's retry policy would try three more times, a second apart.
              error._tag === "RequestError" && error.reason === "Transport"
                ? new HttpClientError.RequestError({
                    request: error.request,
                    reason: "Encode",
                    cause: error.cause,
                    description: "the collector cannot be reached"
                  })
                : error
            )
          )
        )
      )
    })
  ).pipe(Layer.provide(NodeHttp.layerKeepAlive))

/**
 * An export sent to its end (or for `ExportTimeout` at most) by a fiber of its own, even when the
 * exporter's fiber is interrupted meanwhile: the periodic export in flight when the layer closes
 * would otherwise be aborted with it, and its spans and records lost (the final flush sends only
 * what came after it). Past the timeout it is aborted and fails as a collector that cannot be
 * reached.
 */
const toItsEnd = <E, R>(
  response: Effect.Effect<HttpClientResponse.HttpClientResponse, E, R>,
  request: HttpClientRequest.HttpClientRequest
) =>
  Effect.forkDaemon(
    Effect.timeoutFail(response, {
      duration: ExportTimeout,
      onTimeout: () =>
        new HttpClientError.RequestError({
          request,
          reason: "Transport",
          description: `no answer in ${Duration.format(ExportTimeout)}`
        })
    })
  ).pipe(Effect.flatMap(Fiber.join))

const describeError = (error: HttpClientError.HttpClientError): string => {
  const cause = error.cause as
    | {
        readonly cause?: { readonly code?: unknown; readonly message?: unknown }
        readonly message?: unknown
        readonly code?: unknown
      }
    | undefined
  const text = (value: unknown) => (typeof value === "string" && value.length > 0 ? value : undefined)
  // A refused `localhost` whose IPv6 and IPv4 addresses were both tried fails with an AggregateError
  // of no message: its code (ECONNREFUSED) says it.
  return (
    text(cause?.cause?.code) ??
    text(cause?.cause?.message) ??
    text(cause?.message) ??
    text(cause?.code) ??
    error.message
  )
}
