/**
 * An in-memory Transport for deterministic tests.
 *
 * The client side is the real connection core (same FrameDecoder, writer, end rules and stop
 * sequence as a child process); the other side is a `Peer` the test drives by hand or with a
 * `program`.
 *
 * Nothing here uses a timer: a peer that dies on SIGTERM (the default) ends every stop sequence at
 * once; a peer that traps SIGTERM, or exits without closing its pipes, waits on the Clock, so the
 * TestClock decides when the bounds expire.
 */
import type { Duration } from "effect"
import { Effect, Exit, Layer, Mailbox } from "effect"
import * as ConnectionCore from "./internal/ConnectionCore.js"
import { SpawnFailed } from "./ConnectionEnded.js"
import { Transport } from "./Transport.js"
import type { JsonObject, TransportShape } from "./Transport.js"

/** As for a child process; the graces run on the Clock (the TestClock in `it.effect`). */
export interface Options {
  /** Longest accepted frame the peer sends, in UTF-8 bytes. Default 16 MiB. */
  readonly maxFrameBytes?: number | undefined
  /** How much of what the peer writes to stderr is kept for the end report. Default 64 KiB. */
  readonly stderrTailBytes?: number | undefined
  /** SIGTERM to SIGKILL, for a peer that traps SIGTERM. Default 2 s. */
  readonly killGrace?: Duration.DurationInput | undefined
  /** After an exit without `drain`, how long until the end is reported anyway. Default 500 ms. */
  readonly drainGrace?: Duration.DurationInput | undefined
  /** Every `connect` fails with `SpawnFailed` carrying this detail (as a missing binary would). */
  readonly spawnFailure?: string | undefined
  /**
   * Keep every frame the client wrote for `writtenSoFar` (default true). A long benchmark turns it
   * off, so the test double's log does not count as the client's memory (`writtenSoFar` is then empty).
   */
  readonly keepLog?: boolean | undefined
  /** Runs for each connection, in the connection's scope, as the peer's "process". */
  readonly program?: ((peer: Peer) => Effect.Effect<void>) | undefined
  /**
   * Called with each frame the client writes, synchronously, the moment its writer hands the
   * text to the "pipe" (before `written` offers it to the peer's reader). For benchmarks that stop
   * their clock when an answer reaches the peer, not when the peer's own fiber gets to read it.
   */
  readonly onClientWrite?: ((frame: JsonObject) => void) | undefined
}

/** The far end of one in-memory connection, doing on demand what a child process could do. */
export interface Peer {
  /** Write one frame (JSON + "\n") to the client. */
  readonly sendFrame: (frame: JsonObject) => Effect.Effect<void>
  /** Write raw bytes or text to the client's stdout decoder (garbage, partial lines, split UTF-8). */
  readonly sendRaw: (data: string | Uint8Array) => Effect.Effect<void>
  /**
   * `sendRaw`, synchronously, outside Effect: the bytes reach the client's decoder during this
   * call, as a pipe's `data` event does (throws after stdout closed). For benchmarks that time
   * from the moment the bytes arrive.
   */
  readonly unsafeSendRaw: (data: string | Uint8Array) => void
  /** Write to the peer's stderr (kept in the connection's stderr tail). */
  readonly writeStderr: (data: string | Uint8Array) => Effect.Effect<void>
  /** Close stdout (EOF) without exiting. */
  readonly closeStdout: Effect.Effect<void>
  /** Exit; with `drain` (default true) stdout and stderr close right after the exit is seen. */
  readonly exit: (
    code: number | null,
    signal?: string | null,
    options?: { readonly drain?: boolean }
  ) => Effect.Effect<void>
  /** The next client write reports this error in its callback (as a failed pipe does). */
  readonly failNextWrite: (detail: string) => Effect.Effect<void>
  /** Every client write from now on throws this error (as a destroyed pipe can). */
  readonly breakWrites: (detail: string) => Effect.Effect<void>
  /** stdin raises `error` (e.g. EPIPE). */
  readonly stdinError: (detail: string) => Effect.Effect<void>
  /** stdout raises `error`. */
  readonly stdoutError: (detail: string) => Effect.Effect<void>
  /** While held, client writes are buffered and report backpressure (`false`); release drains them. */
  readonly holdWrites: Effect.Effect<void>
  /** Deliver the writes held since `holdWrites`, in order, and wake the waiting writer. */
  readonly releaseWrites: Effect.Effect<void>
  /** Ignore SIGTERM from now on (only SIGKILL stops this peer). */
  readonly trapSigterm: Effect.Effect<void>
  /** Frames the client wrote, in order; ends when the client ends stdin. One consumer. */
  readonly written: Mailbox.ReadonlyMailbox<JsonObject>
  /** Synchronous snapshot of every frame the client wrote so far. */
  readonly writtenSoFar: () => ReadonlyArray<JsonObject>
  /** Whether the client has ended the peer's stdin (the first step of every stop). */
  readonly stdinEnded: () => boolean
  /** The signals the client sent so far, in order (`"SIGTERM"`, `"SIGKILL"`). */
  readonly signals: () => ReadonlyArray<ConnectionCore.Signal>
  /** Whether the peer has exited (by `exit`, or by a signal it did not trap). */
  readonly hasExited: () => boolean
}

/**
 * An in-memory transport, with the handle a test drives it by.
 *
 * The `transport` (or its `layer`) is for the code under test; `peer` acts as the peer of its
 * latest connection; `connections` counts the connections made.
 */
export interface MemoryTransport {
  /** The transport: each `connect` makes a new connection with a fresh peer. */
  readonly transport: TransportShape
  /** `transport` as a layer providing the `Transport` service. */
  readonly layer: Layer.Layer<Transport>
  /** The peer of the most recent connection (a defect before the first `connect`). */
  readonly peer: Peer
  /** How many times `connect` succeeded. */
  readonly connections: () => number
}

const encoder = new TextEncoder()
const bytesOf = (data: string | Uint8Array): Uint8Array => (typeof data === "string" ? encoder.encode(data) : data)

const makePeer = (
  core: ConnectionCore.Core,
  written: Mailbox.Mailbox<JsonObject>,
  keepLog: boolean,
  onClientWrite: ((frame: JsonObject) => void) | undefined
) => {
  const log: Array<JsonObject> = []
  const signals: Array<ConnectionCore.Signal> = []
  let stdoutOpen = true
  let stdinOpen = true
  let exited = false
  let trapping = false
  let nextWriteFailure: string | undefined
  let brokenWrites: string | undefined
  let held: Array<string> | undefined
  let drainWaiters: Array<() => void> = []

  const deliver = (text: string) => {
    for (const line of text.split("\n")) {
      if (line.length === 0) continue
      const frame = JSON.parse(line) as JsonObject
      if (keepLog) log.push(frame)
      if (onClientWrite !== undefined) onClientWrite(frame)
      written.unsafeOffer(frame)
    }
  }
  const wakeDrainWaiters = () => {
    const waiters = drainWaiters
    drainWaiters = []
    for (const wake of waiters) wake()
  }
  const requireStdout = (what: string) => {
    if (!stdoutOpen) throw new Error(`MemoryTransport peer: ${what} after stdout closed`)
  }
  const closeStdout = () => {
    if (!stdoutOpen) return
    stdoutOpen = false
    core.stdoutEnd()
  }
  const exit = (code: number | null, signal: string | null, drain: boolean) => {
    if (exited) return
    exited = true
    core.exited(code, signal)
    if (drain) {
      closeStdout()
      core.stderrEnd()
    }
  }
  const endStdin = () => {
    if (!stdinOpen) return
    stdinOpen = false
    written.unsafeDone(Exit.void)
    wakeDrainWaiters()
  }

  const control: ConnectionCore.PeerControl = {
    write: (text, onWritten) => {
      if (brokenWrites !== undefined) throw new Error(brokenWrites)
      if (nextWriteFailure !== undefined) {
        const detail = nextWriteFailure
        nextWriteFailure = undefined
        onWritten(new Error(detail))
        return true
      }
      if (held !== undefined) {
        held.push(text)
        return false
      }
      deliver(text)
      onWritten(null)
      return true
    },
    onDrain: (wake) => {
      drainWaiters.push(wake)
      return () => {
        drainWaiters = drainWaiters.filter((w) => w !== wake)
      }
    },
    endStdin,
    signal: (signal) => {
      signals.push(signal)
      if (signal === "SIGKILL" || !trapping) exit(null, signal, true)
    },
    anyAlive: () => !exited
  }

  const sendNow = (data: string | Uint8Array) => {
    requireStdout("sendRaw")
    core.stdoutData(bytesOf(data))
  }
  const peer: Peer = {
    sendFrame: (frame) => peer.sendRaw(JSON.stringify(frame) + "\n"),
    sendRaw: (data) => Effect.sync(() => sendNow(data)),
    unsafeSendRaw: sendNow,
    writeStderr: (data) => Effect.sync(() => core.stderrData(bytesOf(data))),
    closeStdout: Effect.sync(closeStdout),
    exit: (code, signal = null, options) => Effect.sync(() => exit(code, signal, options?.drain ?? true)),
    failNextWrite: (detail) => Effect.sync(() => void (nextWriteFailure = detail)),
    breakWrites: (detail) => Effect.sync(() => void (brokenWrites = detail)),
    stdinError: (detail) => Effect.sync(() => core.fail({ _tag: "WriteFailed", detail })),
    stdoutError: (detail) =>
      Effect.sync(() => {
        core.fail({ _tag: "ReadFailed", detail })
        closeStdout() // an errored stream is destroyed, then closes
      }),
    holdWrites: Effect.sync(() => void (held ??= [])),
    releaseWrites: Effect.sync(() => {
      const texts = held ?? []
      held = undefined
      for (const text of texts) deliver(text)
      wakeDrainWaiters()
    }),
    trapSigterm: Effect.sync(() => void (trapping = true)),
    written,
    writtenSoFar: () => log.slice(),
    stdinEnded: () => !stdinOpen,
    signals: () => signals.slice(),
    hasExited: () => exited
  }
  return { peer, control }
}

/**
 * A new in-memory transport. Each `connect` builds a connection on the same core as a child
 * process (framing, writer, end rules, stop sequence) and a fresh `Peer` for it; it fails
 * with `SpawnFailed` only when `options.spawnFailure` is set. `program`, if given, runs as the
 * peer's "process" in the connection's scope (interrupted when it closes).
 *
 * `peer` may be held before the first `connect`: it always acts on the latest connection's peer
 * (and is a defect when used before any connection exists). Nothing uses a timer of its own: the
 * kill and drain graces run on the Clock, so under the TestClock a test decides when they expire.
 *
 * @example
 * ```ts
 * import { MemoryTransport } from "@warden/transport"
 * import { Effect } from "effect"
 *
 * const memory = MemoryTransport.make()
 * const test = Effect.scoped(
 *   Effect.gen(function*() {
 *     const connection = yield* memory.transport.connect
 *     yield* memory.peer.sendFrame({ method: "thread/started", params: {} })
 *     const [frames] = yield* connection.incoming.takeAll // [{ method: "thread/started", params: {} }]
 *     yield* connection.send({ id: 1, result: {} })
 *     const written = yield* memory.peer.written.take // { id: 1, result: {} }
 *     yield* memory.peer.exit(3)
 *     const ended = yield* connection.ended // reason { _tag: "Exited", code: 3, signal: null }
 *   })
 * )
 * ```
 */
export const make = (options: Options = {}): MemoryTransport => {
  let current: Peer | undefined
  let connections = 0
  const latest = (): Peer => {
    if (current === undefined) throw new Error("MemoryTransport: no connection yet (call connect first)")
    return current
  }

  const transport: TransportShape = {
    connect: Effect.uninterruptible(
      Effect.gen(function* () {
        if (options.spawnFailure !== undefined) {
          return yield* Effect.fail(new SpawnFailed({ command: "memory peer", detail: options.spawnFailure }))
        }
        const core = yield* ConnectionCore.make(options)
        const written = yield* Mailbox.make<JsonObject>()
        const { control, peer } = makePeer(core, written, options.keepLog ?? true, options.onClientWrite)
        const connection = yield* core.start(control)
        current = peer
        connections++
        if (options.program !== undefined) {
          yield* options.program(peer).pipe(Effect.interruptible, Effect.forkScoped)
        }
        return connection
      })
    )
  }

  // Delegates to the latest connection's peer, so tests can hold `peer` before connecting.
  const peer: Peer = {
    sendFrame: (frame) => Effect.suspend(() => latest().sendFrame(frame)),
    sendRaw: (data) => Effect.suspend(() => latest().sendRaw(data)),
    unsafeSendRaw: (data) => latest().unsafeSendRaw(data),
    writeStderr: (data) => Effect.suspend(() => latest().writeStderr(data)),
    closeStdout: Effect.suspend(() => latest().closeStdout),
    exit: (code, signal, opts) => Effect.suspend(() => latest().exit(code, signal, opts)),
    failNextWrite: (detail) => Effect.suspend(() => latest().failNextWrite(detail)),
    breakWrites: (detail) => Effect.suspend(() => latest().breakWrites(detail)),
    stdinError: (detail) => Effect.suspend(() => latest().stdinError(detail)),
    stdoutError: (detail) => Effect.suspend(() => latest().stdoutError(detail)),
    holdWrites: Effect.suspend(() => latest().holdWrites),
    releaseWrites: Effect.suspend(() => latest().releaseWrites),
    trapSigterm: Effect.suspend(() => latest().trapSigterm),
    get written() {
      return latest().written
    },
    writtenSoFar: () => latest().writtenSoFar(),
    stdinEnded: () => latest().stdinEnded(),
    signals: () => latest().signals(),
    hasExited: () => latest().hasExited()
  }

  return { transport, layer: Layer.succeed(Transport, transport), peer, connections: () => connections }
}
