/**
 * JSON-RPC 2.0 as codex app-server speaks it: `"jsonrpc"` is omitted by the server (accepted
 * present or absent), ids are exact integers or strings, and 0 is an id (test `!== undefined`).
 *
 * `classify` runs on the read loop for every frame: plain property checks, no Schema work.
 */

export type RequestId = number | string

export interface RpcErrorBody {
  readonly code: number
  readonly message: string
  readonly data?: unknown
}

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
const isId = (id: unknown): id is RequestId => (typeof id === "number" && Number.isSafeInteger(id)) || typeof id === "string"

const badId = (kind: string, id: unknown, frame: Frame): string =>
  typeof id === "number"
    ? `${kind} id ${id} is not an exact integer (JSON numbers beyond 2^53 - 1 lose digits, so two requests could share one id): ${preview(frame)}`
    : `${kind} has an id that is neither number nor string: ${preview(frame)}`

const preview = (frame: Frame): string => {
  const text = JSON.stringify(frame)
  return text.length > 200 ? `${text.slice(0, 200)}…` : text
}

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
export const request = (id: RequestId, method: string, params?: unknown): Frame =>
  params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params }

export const notification = (method: string, params?: unknown): Frame =>
  params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params }

export const response = (id: RequestId, result: unknown): Frame => ({ jsonrpc: "2.0", id, result })

export const errorResponse = (id: RequestId, error: RpcErrorBody): Frame => ({ jsonrpc: "2.0", id, error })

/** Codes codex uses: -32600 for most failures, -32001 when its bounded ingress is full. */
export const ErrorCodes = {
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  ServerOverloaded: -32001
} as const
