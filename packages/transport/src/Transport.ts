/**
 * The Transport service, a scoped connection to a line-oriented JSON peer.
 *
 * Two implementations sit behind this one interface: a child process
 * (`ChildProcessTransport`) and an in-memory pair (`MemoryTransport`) for tests.
 * Both run bytes through the same `FrameDecoder`, so framing faults behave the same.
 */
import type { Effect, Mailbox, Scope } from "effect"
import { Context } from "effect"
import type { ConnectionClosed, ConnectionEnded, SpawnFailed, UnencodableFrame } from "./ConnectionEnded.js"

/** One decoded frame, always a JSON object (anything else is fatal for the connection). */
export type JsonObject = { readonly [key: string]: unknown }

/**
 * What `trySend` did, as a string (so the hot path allocates nothing).
 *
 * `queued`: written, or queued for the writer (in order either way); `closed`, nothing queued because the connection has ended;
 * `unencodable`, nothing queued because `JSON.stringify` refused the frame (a BigInt, a cycle).
 */
export type SendResult = "queued" | "closed" | "unencodable"

/**
 * One open connection to a peer.
 *
 * It has the frames the peer sent (`incoming`), a single writer for ours (`send`, `trySend`), and
 * its one end (`ended`), decided by the first cause and reported once.
 *
 * It lives in the `Scope` that `connect` ran in: closing that scope ends it as `ClosedByUs` and
 * stops the peer, as `close` does.
 */
export interface Connection {
  /**
   * Frames in arrival order, batched: one `takeAll` returns every frame decoded from the
   * chunks read so far, so a reader can process a whole chunk synchronously. (While a direct
   * reader is set, `setDirectReader`, a chunk's frames go to it first, and only what it leaves
   * comes here.)
   * The mailbox is ended (done) once the connection has ended and every frame read before
   * the end has been offered; frames after a protocol fault are never offered.
   */
  readonly incoming: Mailbox.ReadonlyMailbox<JsonObject>
  /**
   * Write one frame, in order with every other: handed to the pipe during the call when nothing
   * is queued or being written and the pipe is not waiting to drain, else queued for the single
   * long-lived writer. Fails with `ConnectionClosed` when the connection has already ended
   * (checked synchronously, at the call), and with `UnencodableFrame` when the frame cannot be
   * written as JSON (nothing is queued).
   */
  readonly send: (frame: JsonObject) => Effect.Effect<void, ConnectionClosed | UnencodableFrame>
  /**
   * The same as `send`, synchronously, without an Effect, and never throwing. For callers that
   * must answer inside a synchronous step (a card settling, the read loop).
   */
  readonly trySend: (frame: JsonObject) => SendResult
  /**
   * When the oldest frame not yet taken arrived (`performance.now()`, milliseconds), forgetting
   * it: a reader calls it right after `incoming.takeAll` to measure how long frames waited for it
   * (Warden's `warden.read_loop.lag`). Undefined when nothing is waiting or the peer does not say
   * (the in-memory transport).
   */
  readonly takeArrival?: () => number | undefined
  /**
   * Let a reader handle frames in the `data` callback itself while its fiber waits for them
   * (no wake-up of its fiber per chunk): while a `DirectReader` is set, each chunk's frames are given to it, in order, as
   * soon as they are decoded, instead of being offered to `incoming` (no wake-up of the reader's
   * fiber). What it returns (the frames it did not handle, in order) is offered to `incoming`,
   * and then the reader is unset: every later frame goes to `incoming` behind them, until the
   * reader sets it again. Set it only while `incoming` holds nothing (right before
   * `incoming.takeAll`, unsetting it when `takeAll` returns); `undefined` unsets it. Frames that
   * arrive while the reader runs (a write it makes answered at once) are offered to `incoming`
   * after what it returns. A reader that throws ends the connection (`InternalDefect`).
   */
  readonly setDirectReader?: (reader: DirectReader | undefined) => void
  /** Synchronous view of liveness: false from the instant the end is known. */
  readonly isOpen: () => boolean
  /**
   * The end, reported once, after stdout was drained (so the stderr tail is complete).
   * Waits until the connection ends.
   */
  readonly ended: Effect.Effect<ConnectionEnded>
  /** Poll the end without waiting. */
  readonly endedNow: () => ConnectionEnded | undefined
  /** The last bytes of the peer's stderr (bounded, 64 KiB by default), decoded as UTF-8. */
  readonly stderrTail: () => string
  /**
   * End the connection because a layer above found the peer broke the protocol (e.g. a
   * duplicate open request id), or (`"InternalDefect"`) because the layer above itself failed
   * and can no longer serve the peer. The reason becomes the connection's end reason unless the
   * connection already ended; the peer is then stopped as for any other end.
   */
  readonly abort: (detail: string, reason?: "Protocol" | "InternalDefect") => Effect.Effect<void>
  /** End the connection on purpose ("closed by us"); same stopping sequence as scope close. */
  readonly close: Effect.Effect<void>
}

/**
 * A synchronous reader of decoded frames (`Connection.setDirectReader`): called in the `data`
 * callback with one chunk's frames; returns the frames it leaves to `incoming` (in order; `undefined`
 * or empty when it handled them all). It must not throw.
 */
export type DirectReader = (frames: ReadonlyArray<JsonObject>) => ReadonlyArray<JsonObject> | undefined

/**
 * What a transport does, which is to open connections.
 *
 * `ChildProcessTransport.make` and `MemoryTransport.make` return one.
 */
export interface TransportShape {
  /** Open a connection; closing the scope ends it (stdin end, SIGTERM, bounded wait, SIGKILL). */
  readonly connect: Effect.Effect<Connection, SpawnFailed, Scope.Scope>
}

/**
 * The `Transport` service tag, what the supervisor connects through.
 *
 * Provide it with
 * `ChildProcessTransport.layer` (a real child process), `MemoryTransport.make(...).layer` (tests),
 * or `CodexCommand.transportLayer` from `@warden/supervisor` (`codex app-server`).
 *
 * @example
 * ```ts
 * import { Transport } from "@warden/transport"
 * import { Effect } from "effect"
 *
 * // Requires Transport and Scope; fails with SpawnFailed when the peer cannot be started.
 * const firstFrames = Effect.gen(function*() {
 *   const transport = yield* Transport.Transport
 *   const connection = yield* transport.connect
 *   const [frames, done] = yield* connection.incoming.takeAll
 *   return { frames, done }
 * })
 * ```
 */
export class Transport extends Context.Tag("@warden/transport/Transport")<Transport, TransportShape>() {}
