/**
 * `@warden/observability`: Warden's traces, metrics and logs over OTLP/HTTP.
 *
 * - {@link Observability}: `Observability.layer({ endpoint, serviceName, headers })`, provided to
 *   the supervisor's layer; `fromEnv` for `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_SERVICE_NAME`.
 *
 * What is exported (names, attributes, a panel list): docs/observability.md. The metric
 * instruments and span names themselves are `@warden/supervisor`'s `Telemetry`.
 *
 * @packageDocumentation
 */
export * as Observability from "./Observability.js"
