/**
 * JSON-RPC 2.0 as codex app-server speaks it, classified on the way in and encoded on the way out.
 *
 * The server omits `"jsonrpc"` (and accepts it present or absent), ids are exact integers or
 * strings, and 0 is an id (test `!== undefined`, never truthiness). Server request ids count up from
 * 0 in a number space of their own, separate from the client's.
 *
 * `classify` runs on the read loop for every frame: plain property checks, no Schema work.
 */

/**
 * A JSON-RPC request id, an exact integer or a string, echoed back unchanged in the response.
 *
 * Numbers must be safe integers (`Number.isSafeInteger`): a larger one has already lost digits in
 * `JSON.parse`, so `classify` refuses it rather than risk two requests sharing one id.
 */
export type RequestId = number | string

/**
 * The `error` member of a JSON-RPC error response.
 *
 * codex uses `-32600` for most failures (not initialized, bad params, thread not found, steer
 * mismatch) and `-32001` when its bounded ingress is full (retry with backoff); see `ErrorCodes`.
 * As read by `classify`, `message` is `""` when the peer sent none and `data` is present only when
 * it was sent.
 */
export interface RpcErrorBody {
  readonly code: number
  readonly message: string
  readonly data?: unknown
}

/**
 * One frame as `classify` reads it, told apart by `_tag`.
 *
 * - `Request`: a method and an id. From codex this is a server request, which must be answered
 *   (codex waits forever on an unanswered one); see `ServerRequests`.
 * - `Response` / `ErrorResponse`: the answer to one of our requests, by id.
 * - `Notification`: a method without an id.
 * - `Invalid`: none of these, with a `detail` for the log. It may have been an approval request
 *   whose id could not be read, so Warden treats it as fatal for the connection.
 */
export type Incoming =
  | { readonly _tag: "Request"; readonly id: RequestId; readonly method: string; readonly params: unknown }
  | { readonly _tag: "Response"; readonly id: RequestId; readonly result: unknown }
  | { readonly _tag: "ErrorResponse"; readonly id: RequestId; readonly error: RpcErrorBody }
  | { readonly _tag: "Notification"; readonly method: string; readonly params: unknown }
  | { readonly _tag: "Invalid"; readonly detail: string }

type Frame = { readonly [key: string]: unknown }

/**
 * Ids are the key of exactly-once, so they must be exact: a string, or an integer JSON numbers
 * hold exactly (|id| <= 2^53 - 1). A larger number has already lost digits in `JSON.parse` (two
 * different requests could read as one id), and a fraction is no id codex sends: both are refused.
 */
const isId = (id: unknown): id is RequestId =>
  (typeof id === "number" && Number.isSafeInteger(id)) || typeof id === "string"

const badId = (kind: string, id: unknown, frame: Frame): string =>
  typeof id === "number"
    ? `${kind} id ${id} is not an exact integer (JSON numbers beyond 2^53 - 1 lose digits, so two requests could share one id): ${preview(frame)}`
    : `${kind} has an id that is neither number nor string: ${preview(frame)}`

const preview = (frame: Frame): string => {
  const text = JSON.stringify(frame)
  return text.length > 200 ? `${text.slice(0, 200)}…` : text
}

/**
 * Classifies one parsed JSON object as a request, response, error response, notification or
 * invalid frame.
 *
 * It never throws for an object, and does no Schema work (it runs for every frame on the read
 * loop). A string `method` makes a frame a `Request` (with an id) or a `Notification` (without);
 * otherwise an `id` with an `error` carrying a numeric `code` is an `ErrorResponse` (an `error`
 * wins over a `result`), and an `id` with a `result` is a `Response`. Everything else is `Invalid`:
 * a non-string method, an id that is neither a string nor a safe integer (`1.5`, `2 ** 60`), an
 * error without a numeric code, a response with neither result nor error. `"jsonrpc"` is not
 * checked. The frame must be an object (check `Json.isRecord` first): `null` throws.
 *
 * @example
 * ```ts
 * import { Json, JsonRpc } from "@warden/protocol"
 *
 * const parsed: unknown = JSON.parse(line)
 * if (Json.isRecord(parsed)) {
 *   const message = JsonRpc.classify(parsed)
 *   if (message._tag === "Request") {
 *     // a server request: decode it with ServerRequests.decode and answer it
 *   }
 * }
 * ```
 */
export const classify = (frame: Frame): Incoming => {
  const id = frame["id"]
  const method = frame["method"]
  if (method !== undefined) {
    if (typeof method !== "string") {
      return { _tag: "Invalid", detail: `frame has a non-string method: ${preview(frame)}` }
    }
    if (id === undefined) return { _tag: "Notification", method, params: frame["params"] }
    if (!isId(id)) return { _tag: "Invalid", detail: badId("request", id, frame) }
    return { _tag: "Request", id, method, params: frame["params"] }
  }
  if (id === undefined || id === null) {
    return { _tag: "Invalid", detail: `frame is neither request, response nor notification: ${preview(frame)}` }
  }
  if (!isId(id)) return { _tag: "Invalid", detail: badId("response", id, frame) }
  if ("error" in frame && frame["error"] !== undefined) {
    const error = frame["error"]
    if (typeof error === "object" && error !== null && typeof (error as Frame)["code"] === "number") {
      const body = error as Frame
      return {
        _tag: "ErrorResponse",
        id,
        error: {
          code: body["code"] as number,
          message: typeof body["message"] === "string" ? body["message"] : "",
          ...(body["data"] !== undefined ? { data: body["data"] } : {})
        }
      }
    }
    return { _tag: "Invalid", detail: `error response without a numeric code: ${preview(frame)}` }
  }
  if ("result" in frame) return { _tag: "Response", id, result: frame["result"] }
  return { _tag: "Invalid", detail: `response has neither result nor error: ${preview(frame)}` }
}

// Encoders. We send "jsonrpc":"2.0": the server accepts it, and other peers expect it.
/**
 * Encodes a request frame, with `"jsonrpc":"2.0"` and without `params` when they are undefined.
 *
 * The frame is a plain object: the transport writes it as one line of JSON. Params are not checked
 * here; `ClientMethods.encodeParams` does that for the methods Warden sends.
 *
 * @example
 * ```ts
 * import { JsonRpc } from "@warden/protocol"
 *
 * JsonRpc.request(1, "thread/start", { cwd: "/repo" })
 * // { jsonrpc: "2.0", id: 1, method: "thread/start", params: { cwd: "/repo" } }
 * ```
 */
export const request = (id: RequestId, method: string, params?: unknown): Frame =>
  params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params }

/**
 * Encodes a notification frame, a method without an id, such as the client's `initialized`.
 *
 * @example
 * ```ts
 * import { ClientMethods, JsonRpc } from "@warden/protocol"
 *
 * JsonRpc.notification(ClientMethods.InitializedNotification)
 * // { jsonrpc: "2.0", method: "initialized" }
 * ```
 */
export const notification = (method: string, params?: unknown): Frame =>
  params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params }

/**
 * Encodes a successful response frame to a request the peer sent, echoing its id.
 *
 * To answer a codex server request, prefer `ServerRequests.replyFrame`, which takes the checked
 * `Reply` that `ServerRequests.answerFor` or `refusalFor` built.
 */
export const response = (id: RequestId, result: unknown): Frame => ({ jsonrpc: "2.0", id, result })

/**
 * Encodes an error response frame to a request the peer sent, echoing its id.
 *
 * codex takes any error frame in answer to an approval request as a denial (the item fails and
 * the model hears "approval request failed").
 */
export const errorResponse = (id: RequestId, error: RpcErrorBody): Frame => ({ jsonrpc: "2.0", id, error })

/**
 * The JSON-RPC error codes Warden meets or sends, by name.
 *
 * codex answers most failures with `InvalidRequest` (-32600) and `ServerOverloaded` (-32001) when
 * its bounded ingress is full (retry client requests with backoff; answers to server requests are
 * never refused this way). `MethodNotFound` (-32601) is the standard code Warden itself sends for a
 * server request method it does not know (`ServerRequests.unknownMethodError`).
 */
export const ErrorCodes = {
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  ServerOverloaded: -32001
} as const
