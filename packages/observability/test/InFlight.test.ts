/**
 * An export in flight when the layer closes: the periodic export's fiber is interrupted by the
 * close, but its request is sent to its end and its answer read (the spans in it were taken from
 * the buffer: the final flush would not send them again). A collector that holds its answer makes
 * the close happen while the request waits; it answers only after the layer closed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect } from "effect"
import * as Http from "node:http"
import { Observability } from "../src/index.js"

interface HeldCollector {
  readonly url: string
  /** The first /v1/traces request arrived (its body read whole); its answer waits for `answer`. */
  readonly received: Deferred.Deferred<string>
  /** Answer the held request (200). */
  readonly answer: () => void
  /** How the held request ended: its answer written to its end, or the client went away first. */
  readonly ended: Deferred.Deferred<"answered" | "abandoned">
}

const heldCollector = Effect.acquireRelease(
  Effect.gen(function* () {
    const received = yield* Deferred.make<string>()
    const ended = yield* Deferred.make<"answered" | "abandoned">()
    let held: Http.ServerResponse | undefined
    const server = Http.createServer((req, res) => {
      const parts: Array<Buffer> = []
      req.on("data", (part: Buffer) => parts.push(part))
      req.on("end", () => {
        if (req.url === "/v1/traces" && held === undefined) {
          held = res
          res.on("close", () =>
            Deferred.unsafeDone(ended, Effect.succeed(res.writableFinished ? "answered" : "abandoned"))
          )
          Deferred.unsafeDone(received, Effect.succeed(Buffer.concat(parts).toString("utf8")))
          return
        }
        res.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    yield* Effect.async<void>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.void))
    })
    const port = (server.address() as { port: number }).port
    return {
      server,
      collector: {
        url: `http://127.0.0.1:${port}`,
        received,
        ended,
        answer: () => held?.writeHead(200, { "content-type": "application/json" }).end("{}")
      } satisfies HeldCollector
    }
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ collector }) => collector))

describe("Observability.layer: an export in flight when the layer closes", () => {
  it.scopedLive("is sent to its end and its answer read, not aborted with the exporter's fiber", () =>
    Effect.gen(function* () {
      const collector = yield* heldCollector
      // A span, then wait (under the layer) until the periodic export carrying it reached the collector.
      const body = yield* Effect.gen(function* () {
        yield* Effect.void.pipe(Effect.withSpan("warden.test.inflight"))
        return yield* Deferred.await(collector.received)
      }).pipe(Effect.provide(Observability.layer({ endpoint: collector.url, exportInterval: "50 millis" })))
      // The layer is closed; the request still waits for its answer.
      assert.include(body, "warden.test.inflight")
      assert.isFalse(yield* Deferred.isDone(collector.ended), "the request was still open when the layer closed")
      collector.answer()
      assert.strictEqual(yield* Deferred.await(collector.ended), "answered")
    })
  )
})
