/**
 * A scripted stand-in for the OpenAI Responses API, for driving the real `codex app-server` offline.
 *
 * An HTTP server (node:http on 127.0.0.1 unless `Options.host` says otherwise, an ephemeral port) that answers
 * `POST …/responses` with server-sent events, one `event: TYPE\ndata: JSON\n\n` per event (the JSON
 * repeats `type`, which codex reads from the data). Every other request gets a 404 (and is recorded).
 *
 * Lanes: every request is routed to a lane, and each lane serves its own steps in order, so
 * concurrent threads each get their own sequence. The lane is named by the LAST `[lane:NAME]` marker
 * (NAME: letters, digits, `_ . -`) found in the text of the `role:"user"` message items of the
 * request's `input` (codex resends the whole conversation each time, so a marker put in a thread's
 * first prompt keeps routing that thread; a later prompt may switch lanes). Without a marker the
 * lane is `default`. Use {@link laneMarker} to write one.
 *
 * Exhausted lane: once a lane has served all its steps, every further request on it is answered with
 * one plain assistant message, `exhaustedText` (default {@link defaultExhaustedText}), completed
 * normally, so a turn that samples once more than scripted still ends. Such requests are recorded
 * with `served: "Exhausted"` and `stepIndex: null`, so a test can assert it did not happen.
 *
 * Time: delays (`delayMs`, `chunkDelayMs`) are real time (`Effect.sleep` in the runtime that built
 * the model): use it under `it.live`, not under the TestClock.
 *
 * Scoped: closing the scope stops listening, destroys every open socket (stalled streams included)
 * and interrupts every request handler.
 */
import * as Http from "node:http"
import type * as Net from "node:net"
import { Context, Data, Duration, Effect, FiberSet, Layer, Option, Schema, Stream, SubscriptionRef } from "effect"
import type { Scope } from "effect"
import { Json } from "@warden/protocol"
import * as Step from "./Step.js"

// ---------------------------------------------------------------------------------------------
// Script

/** A whole script, with the steps of each lane and the text served once a lane is exhausted. */
export const Script = Schema.Struct({
  lanes: Schema.Record({ key: Schema.String, value: Schema.Array(Step.Step) }),
  exhaustedText: Schema.optional(Schema.String)
})
export type Script = typeof Script.Type

/** A `Script`, or just the steps of the `default` lane. */
export type ScriptInput = typeof Script.Encoded | ReadonlyArray<typeof Step.Step.Encoded>

/** The lane of a request without a `[lane:NAME]` marker, and of a script given as a plain list of steps. */
export const defaultLane = "default"
/** The text an exhausted lane answers with, unless the script sets `exhaustedText`. */
export const defaultExhaustedText = "(script exhausted)"

/** The marker that routes a thread to `lane`, to put in the prompt text of `turn/start`. */
export const laneMarker = (lane: string): string => `[lane:${lane}]`

// ---------------------------------------------------------------------------------------------
// Errors

/** The script (or steps given to `append`) does not decode; `detail` is the Schema error. */
export class ScriptError extends Data.TaggedError("ScriptError")<{
  readonly detail: string
}> {
  override get message() {
    return `The ScriptedModel script is not valid: ${this.detail}`
  }
}

/** The model could not listen (an ephemeral port on its host, 127.0.0.1 by default). */
export class ServerError extends Data.TaggedError("ServerError")<{
  readonly cause: unknown
}> {
  override get message() {
    return `The ScriptedModel could not listen: ${String(this.cause)}`
  }
}

// ---------------------------------------------------------------------------------------------
// Recorded requests

/** What a request was answered with. */
export type Served = Step.Step["_tag"] | "Exhausted" | "NotFound" | "BadRequest"

/** One HTTP request the model received, how it was routed, and what it was answered with. */
export interface RecordedRequest {
  /** 1-based, across all lanes, in arrival order. */
  readonly seq: number
  readonly lane: string
  /** Index of the step served within its lane; null when the lane was exhausted (or not routed). */
  readonly stepIndex: number | null
  readonly served: Served
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  /** The parsed JSON body (the raw text if it was not JSON). */
  readonly body: unknown
  readonly receivedAtMs: number
  /** The address the request came from (which host, when several hosts share one model). */
  readonly remoteAddress: string
}

/** Where the model listens. */
export interface Options {
  /**
   * The address to listen on; default `127.0.0.1`. Another address serves other hosts (network
   * namespaces of a fleet test, reaching this process on their network's gateway address).
   */
  readonly host?: string
}

const isRecord = Json.isRecord

/** The request's `input` items (empty if there are none). */
export const inputItems = (request: RecordedRequest): ReadonlyArray<unknown> =>
  isRecord(request.body) && Array.isArray(request.body["input"]) ? request.body["input"] : []

/** The last `input` item (after a tool ran, that tool's `function_call_output`). */
export const lastInputItem = (request: RecordedRequest): unknown => {
  const items = inputItems(request)
  return items[items.length - 1]
}

/** A `function_call_output` input item, what codex sends the model back after running a tool call. */
export const FunctionCallOutput = Schema.Struct({
  type: Schema.Literal("function_call_output"),
  call_id: Schema.String,
  output: Schema.Unknown
})
export type FunctionCallOutput = typeof FunctionCallOutput.Type

const isFunctionCallOutput = Schema.is(FunctionCallOutput)

/** Every `function_call_output` item in the request's input, in order. */
export const functionCallOutputs = (request: RecordedRequest): ReadonlyArray<FunctionCallOutput> =>
  inputItems(request).filter(isFunctionCallOutput)

/** The output the model was sent for `callId`, if any. */
export const outputFor = (request: RecordedRequest, callId: string): Option.Option<FunctionCallOutput> =>
  Option.fromNullable(functionCallOutputs(request).find((o) => o.call_id === callId))

const textsOf = (item: unknown, role: string): ReadonlyArray<string> => {
  if (!isRecord(item) || item["type"] !== "message" || item["role"] !== role) return []
  const content = item["content"]
  if (typeof content === "string") return [content]
  if (!Array.isArray(content)) return []
  return content.flatMap((c: unknown) => (isRecord(c) && typeof c["text"] === "string" ? [c["text"]] : []))
}

/** The texts of the request's `role:"user"` messages (prompts, plus codex's environment context). */
export const userTexts = (request: RecordedRequest): ReadonlyArray<string> =>
  inputItems(request).flatMap((item) => textsOf(item, "user"))

/** Names of the tools offered to the model (`function` and `namespace` tools by name, others by type). */
export const toolNames = (request: RecordedRequest): ReadonlyArray<string> => {
  const tools = isRecord(request.body) && Array.isArray(request.body["tools"]) ? request.body["tools"] : []
  return tools.flatMap((t: unknown) =>
    !isRecord(t) ? [] : typeof t["name"] === "string" ? [t["name"]] : typeof t["type"] === "string" ? [t["type"]] : []
  )
}

const laneRegex = /\[lane:([A-Za-z0-9_.-]+)\]/g

/** The lane a request body routes to (see the module doc). */
export const laneOf = (body: unknown): string => {
  const items = isRecord(body) && Array.isArray(body["input"]) ? body["input"] : []
  let lane = defaultLane
  for (const item of items) {
    for (const text of textsOf(item, "user")) {
      for (const match of text.matchAll(laneRegex)) lane = match[1]!
    }
  }
  return lane
}

// ---------------------------------------------------------------------------------------------
// The service

/** A running scripted model, with where it listens, what it received, and its script's state. */
export interface Service {
  /** The TCP port it listens on (on `host`, 127.0.0.1 unless `Options.host` says otherwise). */
  readonly port: number
  /** `http://HOST:PORT/v1`: the provider `base_url`. */
  readonly baseUrl: string
  /** Every request received so far, in arrival order. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Waits until at least `count` requests (of `lane`, if given) have arrived; returns them. */
  readonly awaitRequests: (count: number, lane?: string) => Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Appends steps to a lane (creating it), e.g. to script a later turn after seeing an earlier one. */
  readonly append: (lane: string, steps: ReadonlyArray<typeof Step.Step.Encoded>) => Effect.Effect<void, ScriptError>
  /** How many steps of `lane` are still to be served. */
  readonly remaining: (lane?: string) => Effect.Effect<number>
  /** Responses started and not yet finished (stalled streams, delays, slow deltas). */
  readonly openResponses: Effect.Effect<number>
}

/** The `ScriptedModel` service tag, provided by `layer`. */
export class ScriptedModel extends Context.Tag("@warden/testkit/ScriptedModel")<ScriptedModel, Service>() {}

const decodeScript = (input: ScriptInput) =>
  Schema.decodeUnknown(Script, { onExcessProperty: "error" })(
    Array.isArray(input) ? { lanes: { [defaultLane]: input } } : input
  ).pipe(Effect.mapError((e) => new ScriptError({ detail: e.message })))

const decodeSteps = (steps: ReadonlyArray<unknown>) =>
  Schema.decodeUnknown(Schema.Array(Step.Step), { onExcessProperty: "error" })(steps).pipe(
    Effect.mapError((e) => new ScriptError({ detail: e.message }))
  )

const sseFrame = (type: string, data: Readonly<Record<string, unknown>>): string =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`

/** Writes `data`, resolving once it is flushed or the response is gone (never hangs on a dead socket). */
const write = (res: Http.ServerResponse, data: string): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (res.destroyed || res.writableEnded) return resume(Effect.void)
    let done = false
    const finish = () => {
      if (done) return
      done = true
      res.off("close", finish)
      resume(Effect.void)
    }
    res.on("close", finish)
    res.write(data, finish)
    return Effect.sync(() => res.off("close", finish))
  })

/** Resolves when the response's connection is closed (by the client, or by the scope closing). */
const awaitClose = (res: Http.ServerResponse): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (res.destroyed) return resume(Effect.void)
    const onClose = () => resume(Effect.void)
    res.once("close", onClose)
    return Effect.sync(() => res.off("close", onClose))
  })

const readBody = (req: Http.IncomingMessage): Effect.Effect<string> =>
  Effect.async<string>((resume) => {
    const chunks: Array<Buffer> = []
    let done = false
    const finish = () => {
      if (done) return
      done = true
      resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
    }
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", finish)
    req.on("error", finish)
    req.on("close", finish)
  })

const sleepMs = (ms: number | undefined) =>
  ms === undefined || ms === 0 ? Effect.void : Effect.sleep(Duration.millis(ms))

const defaultUsage: Step.Usage = { input_tokens: 10, output_tokens: 5, total_tokens: 15 }

const itemJson = (item: Step.OutputItem, seq: number, index: number): Record<string, unknown> => {
  switch (item._tag) {
    case "FunctionCall":
      return {
        type: "function_call",
        call_id: item.callId ?? `call_${seq}_${index}`,
        name: item.name,
        arguments: typeof item.arguments === "string" ? item.arguments : JSON.stringify(item.arguments),
        ...(item.namespace === undefined ? {} : { namespace: item.namespace })
      }
    case "CustomToolCall":
      return {
        type: "custom_tool_call",
        call_id: item.callId ?? `call_${seq}_${index}`,
        name: item.name,
        input: item.input
      }
    case "Message":
      return {
        type: "message",
        role: "assistant",
        id: item.id ?? `msg_${seq}_${index}`,
        content: [{ type: "output_text", text: item.text, annotations: [] }]
      }
    case "RawItem":
      return { ...item.item }
  }
}

const chunksOf = (text: string, size: number): Array<string> => {
  const chars = Array.from(text) // never split a surrogate pair
  const out: Array<string> = []
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(""))
  return out
}

const sseHeaders = { "content-type": "text/event-stream", "cache-control": "no-cache" } as const

const serveReply = (res: Http.ServerResponse, step: Step.Reply, seq: number) =>
  Effect.gen(function* () {
    const id = `resp_${seq}`
    res.writeHead(200, sseHeaders)
    yield* write(res, sseFrame("response.created", { response: { id, object: "response", status: "in_progress" } }))
    for (const [index, item] of step.items.entries()) {
      const json = itemJson(item, seq, index)
      if (item._tag === "Message" && item.stream === true) {
        const itemId = json["id"] as string
        yield* write(
          res,
          sseFrame("response.output_item.added", {
            output_index: index,
            item: { type: "message", role: "assistant", id: itemId, content: [] }
          })
        )
        for (const [n, delta] of chunksOf(item.text, item.chunkSize ?? 8).entries()) {
          if (n > 0) yield* sleepMs(item.chunkDelayMs)
          yield* write(
            res,
            sseFrame("response.output_text.delta", { item_id: itemId, output_index: index, content_index: 0, delta })
          )
        }
      }
      yield* write(res, sseFrame("response.output_item.done", { output_index: index, item: json }))
    }
    yield* write(
      res,
      sseFrame("response.completed", {
        response: { id, object: "response", status: "completed", usage: step.usage ?? defaultUsage }
      })
    )
    res.end()
  })

const serve = (res: Http.ServerResponse, step: Step.Step, seq: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    yield* sleepMs(step.delayMs)
    if (res.destroyed) return
    const id = `resp_${seq}`
    switch (step._tag) {
      case "Reply":
        return yield* serveReply(res, step, seq)
      case "Stall":
        res.writeHead(200, sseHeaders)
        yield* write(res, sseFrame("response.created", { response: { id, object: "response", status: "in_progress" } }))
        return yield* awaitClose(res)
      case "HttpError":
        res.writeHead(step.status, { "content-type": "application/json" })
        res.end(
          JSON.stringify({
            error: { message: step.message ?? `scripted HTTP ${step.status}`, type: "server_error", code: null }
          })
        )
        return
      case "Drop":
        res.writeHead(200, sseHeaders)
        yield* write(res, sseFrame("response.created", { response: { id, object: "response", status: "in_progress" } }))
        if (step.partialText !== undefined && step.partialText !== "") {
          const itemId = `msg_${seq}_0`
          yield* write(
            res,
            sseFrame("response.output_item.added", {
              output_index: 0,
              item: { type: "message", role: "assistant", id: itemId, content: [] }
            })
          )
          yield* write(
            res,
            sseFrame("response.output_text.delta", {
              item_id: itemId,
              output_index: 0,
              content_index: 0,
              delta: step.partialText
            })
          )
        }
        res.destroy() // cut: no terminating chunk, no response.completed
        return
      case "Failed":
        res.writeHead(200, sseHeaders)
        yield* write(res, sseFrame("response.created", { response: { id, object: "response", status: "in_progress" } }))
        yield* write(
          res,
          sseFrame("response.failed", {
            response: {
              id,
              object: "response",
              status: "failed",
              error: { code: step.code ?? "server_error", message: step.message }
            }
          })
        )
        res.end()
        return
    }
  })

/**
 * Starts the model on 127.0.0.1 (or `options.host`), on an ephemeral port. Closing the scope stops it. `script` is a whole
 * `Script` (lanes) or just the steps of the `default` lane. Fails with `ScriptError` when the
 * script does not decode, `ServerError` when it cannot listen.
 *
 * @example
 * ```ts
 * import { RealCodex, ScriptedModel, Step } from "@warden/testkit"
 * import { Effect } from "effect"
 *
 * const setup = Effect.gen(function*() {
 *   const model = yield* ScriptedModel.make({
 *     lanes: {
 *       A: [Step.execCommand({ cmd: "echo hi", escalated: true, justification: "why" }), Step.message("done")],
 *       B: [Step.message("nothing to do")]
 *     }
 *   })
 *   const launch = yield* RealCodex.make({ baseUrl: model.baseUrl })
 *   // turn/start text `${ScriptedModel.laneMarker("A")} do it` routes that thread to lane A
 *   return { model, launch }
 * })
 * ```
 */
export const make = (
  script: ScriptInput,
  options: Options = {}
): Effect.Effect<Service, ScriptError | ServerError, Scope.Scope> =>
  Effect.gen(function* () {
    const host = options.host ?? "127.0.0.1"
    const decoded = yield* decodeScript(script)
    const exhaustedText = decoded.exhaustedText ?? defaultExhaustedText
    const lanes = new Map<string, Array<Step.Step>>(Object.entries(decoded.lanes).map(([k, v]) => [k, [...v]]))
    const cursors = new Map<string, number>()
    let seq = 0
    let open = 0
    const recorded = yield* SubscriptionRef.make<ReadonlyArray<RecordedRequest>>([])

    // Handler fibers belong to this scope (closed after the server, see the finalizer order below).
    const runFork = yield* FiberSet.makeRuntime<never, void, never>()

    const take = (lane: string): { readonly step: Step.Step; readonly index: number } | undefined => {
      const steps = lanes.get(lane) ?? []
      const index = cursors.get(lane) ?? 0
      if (index >= steps.length) return undefined
      cursors.set(lane, index + 1)
      return { step: steps[index]!, index }
    }

    const handle = (req: Http.IncomingMessage, res: Http.ServerResponse): Effect.Effect<void> =>
      Effect.gen(function* () {
        const text = yield* readBody(req)
        const path = (req.url ?? "/").split("?")[0]!
        const method = req.method ?? "GET"
        let body: unknown = text
        let parsed = true
        try {
          body = text === "" ? null : JSON.parse(text)
        } catch {
          parsed = false
        }
        const isResponses = method === "POST" && path.endsWith("/responses")
        const lane = laneOf(body)
        const picked = isResponses && parsed ? take(lane) : undefined
        const served: Served = !isResponses ? "NotFound" : !parsed ? "BadRequest" : (picked?.step._tag ?? "Exhausted")
        const mySeq = ++seq
        yield* SubscriptionRef.update(recorded, (all) => [
          ...all,
          {
            seq: mySeq,
            lane,
            stepIndex: picked?.index ?? null,
            served,
            method,
            path,
            headers: { ...req.headers },
            body,
            receivedAtMs: Date.now(),
            remoteAddress: req.socket.remoteAddress ?? ""
          }
        ])
        if (served === "NotFound" || served === "BadRequest") {
          res.writeHead(served === "NotFound" ? 404 : 400, { "content-type": "application/json" })
          res.end(
            JSON.stringify({
              error: { message: `ScriptedModel: ${served} ${method} ${path}`, type: "invalid_request_error" }
            })
          )
          return
        }
        const step = picked?.step ?? Step.message(exhaustedText)
        open++
        yield* serve(res, step, mySeq).pipe(Effect.ensuring(Effect.sync(() => open--)))
      }).pipe(
        Effect.onInterrupt(() => Effect.sync(() => res.destroy())),
        Effect.catchAllCause((cause) =>
          Effect.logError("ScriptedModel request handler failed", cause).pipe(
            Effect.zipRight(Effect.sync(() => res.destroy()))
          )
        )
      )

    const sockets = new Set<Net.Socket>()
    const server = Http.createServer()
    server.on("connection", (socket) => {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
    })
    server.on("request", (req, res) => {
      res.on("error", () => {}) // a client that went away is not our failure
      runFork(handle(req, res))
    })

    const port = yield* Effect.acquireRelease(
      Effect.async<number, ServerError>((resume) => {
        const onError = (cause: unknown) => resume(Effect.fail(new ServerError({ cause })))
        server.once("error", onError)
        server.listen(0, host, () => {
          server.off("error", onError)
          const address = server.address()
          if (address === null || typeof address === "string") {
            return resume(Effect.fail(new ServerError({ cause: `unexpected address ${String(address)}` })))
          }
          resume(Effect.succeed(address.port))
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          server.close(() => resume(Effect.void))
          for (const socket of sockets) socket.destroy()
          server.closeAllConnections()
        })
    )

    const service: Service = {
      port,
      baseUrl: `http://${host}:${port}/v1`,
      requests: SubscriptionRef.get(recorded),
      awaitRequests: (count, lane) =>
        recorded.changes.pipe(
          Stream.map((all) => (lane === undefined ? all : all.filter((r) => r.lane === lane))),
          Stream.filter((all) => all.length >= count),
          Stream.runHead,
          Effect.map(Option.getOrElse((): ReadonlyArray<RecordedRequest> => []))
        ),
      append: (lane, steps) =>
        decodeSteps(steps).pipe(
          Effect.map((decodedSteps) => {
            const existing = lanes.get(lane)
            if (existing === undefined) lanes.set(lane, [...decodedSteps])
            else existing.push(...decodedSteps)
          })
        ),
      remaining: (lane = defaultLane) =>
        Effect.sync(() => Math.max(0, (lanes.get(lane)?.length ?? 0) - (cursors.get(lane) ?? 0))),
      openResponses: Effect.sync(() => open)
    }
    return service
  })

/** The model as a layer (scoped to the layer's lifetime). */
export const layer = (script: ScriptInput, options?: Options): Layer.Layer<ScriptedModel, ScriptError | ServerError> =>
  Layer.scoped(ScriptedModel, make(script, options))
