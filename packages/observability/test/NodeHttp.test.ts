/**
 * The exporters' HTTP client (internal/NodeHttp.ts) against a real `node:http` server on a port of
 * its own: a JSON body as the OTLP exporters make it (`OtlpSerialization.layerJson`) arrives whole
 * with its type and length, the answer's status, headers, cookies and body are read; a body too
 * long, a body the client does not send, and a refused connection fail as `HttpClientError`s, the
 * last one reported (through `Observability.layer`) with its `ECONNREFUSED`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import { freePort } from "@warden/test-support/Processes"
import { Effect, Option, Stream } from "effect"
import * as Http from "node:http"
import * as Https from "node:https"
import { Observability } from "../src/index.js"
import * as NodeHttp from "../src/internal/NodeHttp.js"

interface Received {
  readonly method: string
  readonly url: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: Buffer
}

/** A server answering every request with `answer`, after reading its body whole; what it read is kept. */
const server = (answer: (req: Received, res: Http.ServerResponse) => void) =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: Http.Server; readonly received: Array<Received> }>((resume) => {
      const received: Array<Received> = []
      const server = Http.createServer((req, res) => {
        const parts: Array<Buffer> = []
        req.on("data", (part: Buffer) => parts.push(part))
        req.on("end", () => {
          const one = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(parts) }
          received.push(one)
          answer(one, res)
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, received })))
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(
    Effect.map(({ server, received }) => ({
      url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
      received
    }))
  )

/** A keep-alive client of agents of its own (destroyed with the test's scope). */
const client = (options?: { readonly maxResponseBytes?: number }) =>
  Effect.acquireRelease(
    Effect.sync(() => ({ http: new Http.Agent({ keepAlive: true }), https: new Https.Agent({ keepAlive: true }) })),
    (agents) =>
      Effect.sync(() => {
        agents.http.destroy()
        agents.https.destroy()
      })
  ).pipe(Effect.map((agents) => NodeHttp.make(agents, options)))

describe("NodeHttp: the exporters' client on node:http", () => {
  it.scopedLive("sends an OTLP JSON body whole and reads the answer's status, headers, cookies and text", () =>
    Effect.gen(function* () {
      const collector = yield* server((_req, res) => {
        res.setHeader("set-cookie", ["session=abc; Path=/", "other=1"])
        res.writeHead(202, { "content-type": "application/json", "x-answer": "yes" })
        res.end(JSON.stringify({ partialSuccess: {} }))
      })
      const serialization = yield* OtlpSerialization.OtlpSerialization.pipe(Effect.provide(OtlpSerialization.layerJson))
      // Large enough to be written and read in several chunks.
      const spans = Array.from({ length: 2000 }, (_, i) => ({ name: `span-${i}`, attributes: [{ key: "é", i }] }))
      const body = serialization.traces({ resourceSpans: [{ scopeSpans: [{ spans }] }] } as never)
      assert.strictEqual(body._tag, "Uint8Array", "the JSON serializer makes a Uint8Array body")
      const http = yield* client()
      const response = yield* http.execute(
        HttpClientRequest.post(`${collector.url}/v1/traces`).pipe(
          HttpClientRequest.setHeader("x-api-key", "key-1"),
          HttpClientRequest.setBody(body)
        )
      )

      const [received] = collector.received
      if (received === undefined) return assert.fail("nothing received")
      assert.strictEqual(received.method, "POST")
      assert.strictEqual(received.url, "/v1/traces")
      assert.strictEqual(received.headers["content-type"], "application/json")
      assert.strictEqual(received.headers["x-api-key"], "key-1")
      assert.strictEqual(Number(received.headers["content-length"]), received.body.byteLength)
      assert.isAbove(received.body.byteLength, 64 * 1024)
      assert.deepStrictEqual(JSON.parse(received.body.toString("utf8")), {
        resourceSpans: [{ scopeSpans: [{ spans }] }]
      })

      assert.isTrue(HttpClientResponse.TypeId in response)
      assert.strictEqual(response.status, 202)
      assert.strictEqual(response.headers["x-answer"], "yes")
      assert.deepStrictEqual(
        Object.keys(response.cookies.cookies).sort(),
        ["other", "session"],
        "the set-cookie headers are the response's cookies"
      )
      assert.strictEqual(yield* response.text, '{"partialSuccess":{}}')
      assert.deepStrictEqual(yield* response.json, { partialSuccess: {} })
      assert.strictEqual(new TextDecoder().decode(yield* response.arrayBuffer), '{"partialSuccess":{}}')
      const streamed = yield* Stream.runCollect(response.stream)
      assert.strictEqual(Buffer.concat([...streamed]).toString("utf8"), '{"partialSuccess":{}}')
      assert.strictEqual((yield* Effect.flip(response.formData)).reason, "Decode", "form data is not decoded")
      assert.deepStrictEqual(response.remoteAddress, Option.some("127.0.0.1"))
      const shown = response.toJSON() as Record<string, unknown>
      assert.strictEqual(shown["_id"], "@effect/platform/HttpClientResponse")
      assert.strictEqual(shown["status"], 202)
      assert.deepStrictEqual(shown["body"], { partialSuccess: {} }, "shown with its JSON body")
    })
  )

  it.scopedLive("sends a text body and an empty one; an answer of no body reads as an empty text", () =>
    Effect.gen(function* () {
      const collector = yield* server((req, res) => res.writeHead(req.body.byteLength === 0 ? 204 : 200).end())
      const http = yield* client()
      const first = yield* http.execute(
        HttpClientRequest.put(`${collector.url}/a`).pipe(HttpClientRequest.bodyText("héllo", "text/plain"))
      )
      const second = yield* http.execute(HttpClientRequest.get(`${collector.url}/b`))
      const raw = yield* http.execute(
        HttpClientRequest.post(`${collector.url}/c`).pipe(HttpClientRequest.setBody(HttpBody.raw("raw text")))
      )
      assert.deepStrictEqual(
        collector.received.map((r) => [r.method, r.body.toString("utf8"), r.headers["content-length"]]),
        [
          ["PUT", "héllo", "6"],
          ["GET", "", undefined],
          ["POST", "raw text", "8"]
        ]
      )
      assert.strictEqual(first.status, 200)
      assert.strictEqual(second.status, 204)
      assert.strictEqual(raw.status, 200)
      assert.strictEqual(yield* second.text, "")
      assert.isNull(yield* second.json)
    })
  )

  it.scopedLive("an answer longer than the bound fails with a ResponseError (Decode)", () =>
    Effect.gen(function* () {
      const collector = yield* server((_req, res) => {
        // No content-length: the bound is hit while reading.
        res.writeHead(200, { "transfer-encoding": "chunked" })
        res.write("x".repeat(800))
        res.end("y".repeat(800))
      })
      const http = yield* client({ maxResponseBytes: 1024 })
      const error = yield* Effect.flip(http.execute(HttpClientRequest.get(collector.url)))
      assert.strictEqual(error._tag, "ResponseError")
      assert.strictEqual(error.reason, "Decode")
      assert.include(error.message, "longer than 1024 bytes")
    })
  )

  it.scopedLive("a streamed body is not sent: a RequestError (Encode), nothing reaches the server", () =>
    Effect.gen(function* () {
      const collector = yield* server((_req, res) => res.end())
      const http = yield* client()
      const error = yield* Effect.flip(
        http.execute(
          HttpClientRequest.post(collector.url).pipe(
            HttpClientRequest.setBody(HttpBody.stream(Stream.make(new Uint8Array([1, 2, 3]))))
          )
        )
      )
      assert.strictEqual(error._tag, "RequestError")
      assert.strictEqual(error.reason, "Encode")
      assert.include(error.message, '"Stream" body is not sent')
      assert.deepStrictEqual(collector.received, [])
    })
  )

  it.scopedLive("a refused connection fails with a RequestError (Transport), the Node error its cause", () =>
    Effect.gen(function* () {
      // A port that was free a moment ago and is closed now: connections are refused.
      const port = yield* freePort
      const http = yield* client()
      const error = yield* Effect.flip(http.execute(HttpClientRequest.post(`http://127.0.0.1:${port}/v1/logs`)))
      assert.strictEqual(error._tag, "RequestError")
      assert.strictEqual(error.reason, "Transport")
      assert.strictEqual((error.cause as { code?: unknown }).code, "ECONNREFUSED")
    })
  )

  it.scopedLive("through Observability.layer, a refused connection is reported once with its ECONNREFUSED", () =>
    Effect.gen(function* () {
      const port = yield* freePort
      const reports: Array<string> = []
      // The span is exported by the final flush when the layer closes (the interval is not reached).
      yield* Effect.void.pipe(
        Effect.withSpan("warden.test.refused"),
        Effect.provide(
          Observability.layer({
            endpoint: `http://127.0.0.1:${port}`,
            exportInterval: "1 hour",
            onExportError: (message) => Effect.sync(() => reports.push(message))
          })
        )
      )
      assert.strictEqual(reports.length, 1, reports.join(" | "))
      assert.include(reports[0], "ECONNREFUSED")
      assert.include(reports[0], `127.0.0.1:${port}`)
    })
  )
})
