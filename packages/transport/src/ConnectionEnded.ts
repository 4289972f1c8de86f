/**
 * Why a connection ended. Reported once per connection, after stdout drained, with the stderr
 * tail attached so the message says something a person can act on.
 */
import { Data } from "effect"

/**
 * Why a connection ended, as a union tagged by `_tag`.
 *
 * The first cause decides it; later causes are ignored. `ClosedByUs` is the only end Warden chose;
 * every other tag is a failure of the peer, of the pipes, or of Warden itself (`InternalDefect`).
 */
export type EndReason =
  /** The peer process exited (or, in memory, the peer said it exited). */
  | { readonly _tag: "Exited"; readonly code: number | null; readonly signal: string | null }
  /** A write to the peer threw, its callback reported an error, or stdin emitted `error`. */
  | { readonly _tag: "WriteFailed"; readonly detail: string }
  /** Reading from the peer failed (`error` on stdout). */
  | { readonly _tag: "ReadFailed"; readonly detail: string }
  /** The peer broke the protocol: an unreadable or oversized frame, or a fault found above. */
  | { readonly _tag: "Protocol"; readonly detail: string }
  /**
   * The peer closed its stdout but did not exit (within the drain grace): nothing more can be
   * read, so nothing it asks can be answered in time. The peer is then stopped.
   */
  | { readonly _tag: "StdoutClosed" }
  /**
   * Warden itself failed while serving the connection (a defect in the read loop or in handling
   * one frame). `detail` names what died. The connection cannot be trusted to keep its promise
   * any more, so it is ended like any other failure: pending requests fail, cards settle.
   */
  | { readonly _tag: "InternalDefect"; readonly detail: string }
  /** The peer could not be started. */
  | { readonly _tag: "SpawnFailed"; readonly detail: string }
  /** We closed it (scope close or `close`). */
  | { readonly _tag: "ClosedByUs" }

/**
 * One sentence for people saying why the connection ended (`ConnectionEnded.message` starts with it).
 *
 * For example `the app-server exited with code 1`, or `the app-server broke the protocol: ...`.
 * Never fails.
 */
export const describeReason = (reason: EndReason): string => {
  switch (reason._tag) {
    case "Exited":
      return reason.signal !== null
        ? `the app-server was killed by signal ${reason.signal}`
        : `the app-server exited with code ${reason.code}`
    case "WriteFailed":
      return `writing to the app-server failed: ${reason.detail}`
    case "ReadFailed":
      return `reading from the app-server failed: ${reason.detail}`
    case "Protocol":
      return `the app-server broke the protocol: ${reason.detail}`
    case "StdoutClosed":
      return "the app-server closed its stdout without exiting"
    case "InternalDefect":
      return `Warden failed while serving the app-server: ${reason.detail}`
    case "SpawnFailed":
      return `the app-server could not be started: ${reason.detail}`
    case "ClosedByUs":
      return "the connection was closed by Warden"
  }
}

/** The connection's end, with its reason and the stderr tail captured when it ended. */
export class ConnectionEnded extends Data.TaggedError("ConnectionEnded")<{
  readonly reason: EndReason
  readonly stderrTail: string
}> {
  override get message(): string {
    const tail = this.stderrTail.trim()
    return tail.length > 0
      ? `${describeReason(this.reason)}; last stderr:\n${tail}`
      : `${describeReason(this.reason)} (stderr was empty)`
  }
}

/** A send on a connection that has already ended. Carries the end so callers can report it. */
export class ConnectionClosed extends Data.TaggedError("ConnectionClosed")<{
  readonly ended: ConnectionEnded | undefined
}> {
  override get message(): string {
    return this.ended ? `connection closed: ${this.ended.message}` : "connection closed"
  }
}

/** The peer could not be started (missing binary, permission denied, ...). */
export class SpawnFailed extends Data.TaggedError("SpawnFailed")<{
  readonly command: string
  readonly detail: string
}> {
  override get message(): string {
    return `could not start ${this.command}: ${this.detail}`
  }
}

/** A frame that cannot be written as JSON (a BigInt, a cycle, ...). Nothing was queued. */
export class UnencodableFrame extends Data.TaggedError("UnencodableFrame")<{
  readonly detail: string
}> {
  override get message(): string {
    return `the frame cannot be encoded as JSON: ${this.detail}`
  }
}
