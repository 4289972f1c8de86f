/**
 * The exporters' HTTP client: `@effect/platform`'s `HttpClient` on `node:http` / `node:https`,
 * with keep-alive agents, the response's body read whole (bounded) before the response is returned.
 *
 * Not `@effect/platform-node`'s `NodeHttpClient`: that module also exports its undici client, so
 * importing it evaluates the `undici` package (~150 ms of CPU at every import of
 * `@warden/observability`, exporting or not). What the OTLP exporters send is small and whole (a
 * JSON or protobuf body, `HttpBody` "Uint8Array") and what they read is a short answer, so this
 * client sends only whole bodies and buffers the answer: a streamed or form-data request body
 * fails ("Encode"), and so does an answer longer than `maxResponseBytes` ("Decode").
 */
import * as Cookies from "@effect/platform/Cookies"
import * as Headers from "@effect/platform/Headers"
import type * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as UrlParams from "@effect/platform/UrlParams"
import { Effect, Inspectable, Layer, Option, Stream } from "effect"
import * as Http from "node:http"
import * as Https from "node:https"

/** The connections' agents: `http:` URLs go through `http`, `https:` URLs through `https`. */
export interface Agents {
  readonly http: Http.Agent
  readonly https: Https.Agent
}

/** The longest response body read by default (1 MiB); a longer one fails ("Decode"). */
export const DefaultMaxResponseBytes = 1024 * 1024

/**
 * A client sending over `agents`. Every request is sent whole (`HttpBody` "Empty", "Uint8Array",
 * or "Raw" holding a string or bytes); its answer is read whole, at most `maxResponseBytes`
 * (default `DefaultMaxResponseBytes`), before the response is returned. The request's signal
 * (an interrupted fiber's) aborts it; a connection that fails before the answer's head fails with
 * `RequestError` "Transport", the Node error as its `cause`.
 */
export const make = (agents: Agents, options?: { readonly maxResponseBytes?: number }): HttpClient.HttpClient => {
  const maxResponseBytes = options?.maxResponseBytes ?? DefaultMaxResponseBytes
  return HttpClient.make((request, url, signal) =>
    Effect.suspend(() => {
      const payload = encode(request)
      if (payload instanceof HttpClientError.RequestError) return Effect.fail(payload)
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        return Effect.fail(
          new HttpClientError.RequestError({
            request,
            reason: "InvalidUrl",
            description: `only http: and https: URLs are sent, not ${url.protocol}`
          })
        )
      }
      return send(
        request,
        url,
        signal,
        url.protocol === "https:" ? agents.https : agents.http,
        payload,
        maxResponseBytes
      )
    })
  )
}

/**
 * The client over one keep-alive `node:http` agent and one `node:https` agent, made when the layer
 * is built, as `fetch` keeps its connections. Not closed with the layer (closing them would abort
 * an export still on its way, see `toItsEnd` in Observability.ts): an idle one never holds the
 * process (Node unreferences a free socket) and is closed by the collector's idle timeout or the
 * process's exit.
 */
export const layerKeepAlive: Layer.Layer<HttpClient.HttpClient> = Layer.sync(HttpClient.HttpClient, () =>
  make({ http: new Http.Agent({ keepAlive: true }), https: new Https.Agent({ keepAlive: true }) })
)

/** What is written: the request's headers (with the body's type and length) and its bytes. */
interface Payload {
  readonly headers: Record<string, string>
  readonly body: string | Uint8Array | undefined
}

const encode = (request: HttpClientRequest.HttpClientRequest): Payload | HttpClientError.RequestError => {
  const body: HttpBody.HttpBody = request.body
  const headers: Record<string, string> = { ...request.headers }
  switch (body._tag) {
    case "Empty":
      return { headers, body: undefined }
    case "Uint8Array":
      headers["content-type"] = body.contentType
      headers["content-length"] = String(body.body.byteLength)
      return { headers, body: body.body }
    case "Raw": {
      const raw = body.body
      if (typeof raw !== "string" && !(raw instanceof Uint8Array)) break
      if (body.contentType !== undefined) headers["content-type"] = body.contentType
      headers["content-length"] = String(typeof raw === "string" ? Buffer.byteLength(raw) : raw.byteLength)
      return { headers, body: raw }
    }
  }
  return new HttpClientError.RequestError({
    request,
    reason: "Encode",
    description:
      body._tag === "Raw"
        ? `a "Raw" body is sent only when it is a string or a Uint8Array, not ${describeValue(body.body)}`
        : `a "${body._tag}" body is not sent by this client (only whole bodies: "Empty", "Uint8Array", "Raw")`
  })
}

const describeValue = (value: unknown): string =>
  value === null ? "null" : typeof value === "object" ? (value.constructor?.name ?? "an object") : typeof value

const send = (
  request: HttpClientRequest.HttpClientRequest,
  url: URL,
  signal: AbortSignal,
  agent: Http.Agent,
  payload: Payload,
  maxResponseBytes: number
) =>
  Effect.async<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError>((resume) => {
    let settled = false
    const settle = (effect: Effect.Effect<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError>) => {
      if (settled) return
      settled = true
      resume(effect)
    }
    const transport = (cause: unknown) =>
      settle(Effect.fail(new HttpClientError.RequestError({ request, reason: "Transport", cause })))

    let nodeRequest: Http.ClientRequest
    try {
      const options: Http.RequestOptions = { agent, method: request.method, headers: payload.headers, signal }
      nodeRequest = url.protocol === "https:" ? Https.request(url, options) : Http.request(url, options)
    } catch (cause) {
      // A header Node refuses (a character not allowed in it, ...).
      settle(Effect.fail(new HttpClientError.RequestError({ request, reason: "Encode", cause })))
      return
    }
    // Never removed: an error after the request settled (aborted, destroyed) must not be unhandled.
    nodeRequest.on("error", transport)
    nodeRequest.on("response", (incoming) => {
      // The response an error carries: its head only (made when an error needs it).
      const decode = (description: string, cause?: unknown) =>
        new HttpClientError.ResponseError({
          request,
          response: new BufferedResponse(request, incoming, Empty),
          reason: "Decode",
          description,
          ...(cause !== undefined ? { cause } : {})
        })
      const tooLong = () => {
        settle(Effect.fail(decode(`the response's body is longer than ${maxResponseBytes} bytes`)))
        incoming.destroy()
      }
      const declared = Number(incoming.headers["content-length"])
      if (Number.isFinite(declared) && declared > maxResponseBytes) return tooLong()
      const parts: Array<Buffer> = []
      let length = 0
      incoming.on("data", (part: Buffer) => {
        if (settled) return
        length += part.byteLength
        if (length > maxResponseBytes) return tooLong()
        parts.push(part)
      })
      incoming.on("end", () => settle(Effect.succeed(new BufferedResponse(request, incoming, concat(parts, length)))))
      incoming.on("error", (cause) => settle(Effect.fail(decode("the response's body could not be read", cause))))
      incoming.on("close", () => settle(Effect.fail(decode("the connection closed before the response's end"))))
    })
    if (payload.body === undefined) nodeRequest.end()
    else nodeRequest.end(payload.body)
    return Effect.sync(() => {
      if (!settled) nodeRequest.destroy()
    })
  })

const Empty = new Uint8Array(0)

const concat = (parts: Array<Buffer>, length: number): Uint8Array =>
  parts.length === 1 ? parts[0]! : Buffer.concat(parts, length)

const decoder = new TextDecoder()

/**
 * A response whose body was read whole: the `HttpClientResponse` of `@effect/platform`, its body
 * served from the bytes read (`formData` is not decoded: it fails).
 */
class BufferedResponse extends Inspectable.Class implements HttpClientResponse.HttpClientResponse {
  readonly [HttpIncomingMessage.TypeId]: HttpIncomingMessage.TypeId = HttpIncomingMessage.TypeId
  readonly [HttpClientResponse.TypeId]: HttpClientResponse.TypeId = HttpClientResponse.TypeId
  readonly status: number
  readonly headers: Headers.Headers
  readonly remoteAddress: Option.Option<string>
  readonly #setCookie: string | ReadonlyArray<string> | undefined
  #cookies: Cookies.Cookies | undefined

  constructor(
    readonly request: HttpClientRequest.HttpClientRequest,
    incoming: Http.IncomingMessage,
    readonly bytes: Uint8Array
  ) {
    super()
    this.status = incoming.statusCode ?? 0
    this.headers = Headers.fromInput(incoming.headers)
    this.remoteAddress = Option.fromNullable(incoming.socket?.remoteAddress)
    this.#setCookie = incoming.headers["set-cookie"]
  }

  get cookies(): Cookies.Cookies {
    return (this.#cookies ??= this.#setCookie === undefined ? Cookies.empty : Cookies.fromSetCookie(this.#setCookie))
  }

  private decodeError(details: { readonly cause: unknown } | { readonly description: string }) {
    return new HttpClientError.ResponseError({ request: this.request, response: this, reason: "Decode", ...details })
  }

  get text(): Effect.Effect<string, HttpClientError.ResponseError> {
    return Effect.sync(() => decoder.decode(this.bytes))
  }

  get json(): Effect.Effect<unknown, HttpClientError.ResponseError> {
    return Effect.flatMap(this.text, (text) =>
      Effect.try({
        try: () => (text === "" ? null : (JSON.parse(text) as unknown)),
        catch: (cause) => this.decodeError({ cause })
      })
    )
  }

  get urlParamsBody(): Effect.Effect<UrlParams.UrlParams, HttpClientError.ResponseError> {
    return Effect.flatMap(this.text, (text) =>
      Effect.try({
        try: () => UrlParams.fromInput(new URLSearchParams(text)),
        catch: (cause) => this.decodeError({ cause })
      })
    )
  }

  get arrayBuffer(): Effect.Effect<ArrayBuffer, HttpClientError.ResponseError> {
    return Effect.sync(() => {
      const copy = new Uint8Array(this.bytes.byteLength)
      copy.set(this.bytes)
      return copy.buffer
    })
  }

  get stream(): Stream.Stream<Uint8Array, HttpClientError.ResponseError> {
    return this.bytes.byteLength === 0 ? Stream.empty : Stream.succeed(this.bytes)
  }

  get formData(): Effect.Effect<FormData, HttpClientError.ResponseError> {
    return Effect.fail(this.decodeError({ description: "a form-data body is not decoded by this client" }))
  }

  toJSON(): unknown {
    return HttpIncomingMessage.inspect(this, {
      _id: "@effect/platform/HttpClientResponse",
      request: this.request.toJSON(),
      status: this.status
    })
  }
}
