/**
 * The supervisor's typed failures. Each message says what ended and why, with the stderr tail
 * when the connection is involved, so a person can act on it.
 */
import type { ConnectionEnded as ConnectionEndedNs } from "@warden/transport"
import { Data } from "effect"

type ConnectionEnded = ConnectionEndedNs.ConnectionEnded

/** A client request got no answer in time. The connection stays up; the entry is freed. */
export class RequestTimeout extends Data.TaggedError("RequestTimeout")<{
  readonly method: string
  readonly id: number
  readonly timeoutMs: number
}> {
  override get message() {
    return `${this.method} (request ${this.id}) got no answer within ${this.timeoutMs} ms`
  }
}

/** The server answered a client request with a JSON-RPC error. */
export class RemoteError extends Data.TaggedError("RemoteError")<{
  readonly method: string
  readonly code: number
  readonly detail: string
  readonly data?: unknown
}> {
  override get message() {
    return `${this.method} failed on the app-server (${this.code}): ${this.detail}`
  }
}

/** The server's result did not have the shape we rely on (such as no `result.thread.id`). */
export class UnexpectedResult extends Data.TaggedError("UnexpectedResult")<{
  readonly method: string
  readonly detail: string
}> {
  override get message() {
    return `${this.method} returned a result Warden cannot use: ${this.detail}`
  }
}

/** The connection ended while the request was pending, or before it was sent. */
export class ConnectionLost extends Data.TaggedError("ConnectionLost")<{
  readonly ended: ConnectionEnded | undefined
}> {
  override get message() {
    return this.ended ? `connection lost: ${this.ended.message}` : "connection lost"
  }
}

/** Every way one of our requests to the app-server can fail (such as `WorkHandle.steer`'s `turn/steer`). */
export type RequestError = RequestTimeout | RemoteError | UnexpectedResult | ConnectionLost

/** Why a work item ended without a turn result. */
export class WorkItemFailed extends Data.TaggedError("WorkItemFailed")<{
  readonly reason:
    | "connection-lost"
    | "stalled"
    | "start-failed"
    | "turn-failed-to-start"
    | "interrupt-timeout"
    | "resume-failed"
    | "worktree-failed"
    | "budget-exhausted"
  readonly detail: string
  readonly threadId: string | undefined
  readonly cause?: unknown
}> {
  override get message() {
    return `work item ${this.reason}${this.threadId ? ` (thread ${this.threadId})` : ""}: ${this.detail}`
  }
}
