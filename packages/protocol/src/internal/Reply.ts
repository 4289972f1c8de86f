/**
 * What goes back: a server request's reply (a result or an error frame) and the error bodies that
 * refuse. Public through `ServerRequests`.
 */
import type { RpcErrorBody, RequestId } from "../JsonRpc.js"

/**
 * What goes back on the wire for a server request, a result or an error frame.
 *
 * Write it with `replyFrame`. codex takes an error frame as a denial.
 */
export type Reply =
  | { readonly _tag: "Result"; readonly result: Record<string, unknown> }
  | { readonly _tag: "Error"; readonly error: RpcErrorBody }

/**
 * Encodes a `Reply` to server request `id` as a JSON-RPC response frame, with `"jsonrpc":"2.0"`.
 *
 * @example
 * ```ts
 * import { ServerRequests } from "@warden/protocol"
 *
 * const request = ServerRequests.decode(0, "item/fileChange/requestApproval", params)
 * ServerRequests.replyFrame(request.id, ServerRequests.refusalFor(request))
 * // { jsonrpc: "2.0", id: 0, result: { decision: "decline" } }
 * ```
 */
export const replyFrame = (id: RequestId, reply: Reply): Record<string, unknown> =>
  reply._tag === "Result" ? { jsonrpc: "2.0", id, result: reply.result } : { jsonrpc: "2.0", id, error: reply.error }

export const result = (value: Record<string, unknown>): Reply => ({ _tag: "Result", result: value })

/**
 * The error body that refuses a request Warden never answers positively (token refresh, attestation).
 *
 * It is the honest answer for a method nobody here can answer: codex takes any error frame as a
 * denial. Its message tells the model to go on with what it is already allowed to do.
 */
export const refusedError: RpcErrorBody = {
  code: -32001,
  message: "Warden refused this request: nobody approved it. Continue with what you are already allowed to do."
}
/**
 * The error body (code -32601) that refuses a server request method Warden does not know.
 *
 * `refusalFor` sends it for every `Unknown` request; codex takes it as a denial.
 */
export const unknownMethodError = (method: string): RpcErrorBody => ({
  code: -32601,
  message: `Warden does not handle ${method}; refused.`
})
