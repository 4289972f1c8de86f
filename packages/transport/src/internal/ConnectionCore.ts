/**
 * The connection state machine both transports share, so a child process and the in-memory pair
 * cannot drift apart: stdout through the `FrameDecoder` into `incoming`, stderr into the
 * `StderrTail`, one writer fiber, an end decided once and reported once, a bounded stop.
 *
 * A transport feeds it events synchronously (the `Core` sinks, called from stream callbacks) and
 * gives it a `PeerControl` to write, end stdin and send signals. Internal: not re-exported.
 *
 * Reading: each chunk's frames go to the direct reader when one is set (the reader's fiber waits
 * and `incoming` is empty: it handles them in the `data` call), else to `incoming`.
 * What the direct reader leaves goes to `incoming`, and from then on everything does, until the
 * reader sets it again: no frame overtakes one that waits in `incoming`.
 *
 * Writing, in order, one frame after another: a frame sent while nothing is queued or being
 * written, and stdin is not waiting to drain, is handed to the pipe at once, in the sender's
 * synchronous step (a card's answer reaches the peer without a scheduler hop); otherwise
 * it is queued for the writer fiber, which writes everything queued in one write once stdin can
 * take it. A direct write that reports backpressure makes every later frame wait for the drain.
 *
 * The end, in two steps:
 * - DECIDED by the first cause (exit, protocol fault, write/read failure, abort, close), at once
 *   and synchronously: `isOpen()` is false from then on, `send` fails, later causes are ignored.
 *   After a Protocol decision no further frame is delivered (the stream is untrusted); after any
 *   other decision frames still read from stdout are delivered (a child's last words often race
 *   its exit).
 * - REPORTED when the peer has exited and both stdout and stderr have closed, so the stderr tail is
 *   complete; `incoming` ends at that moment. If the pipes stay open (a grandchild can hold them),
 *   it is reported `drainGrace` after the exit; if the peer never exits, after the kill sequence.
 *
 * Stopping (the stopper fiber, on any decision; `close` and scope close decide ClosedByUs and wait
 * for it): flush frames already sent (close only, bounded by killGrace), end stdin, SIGTERM, wait
 * up to killGrace for the exit and the rest of the process group, SIGKILL, wait up to killGrace for
 * the exit. Worst case about 3 x killGrace; a child that ignores SIGTERM costs one killGrace.
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Mailbox, Option } from "effect"
import type { Scheduler, Scope } from "effect"
import { ConnectionClosed, ConnectionEnded, UnencodableFrame } from "../ConnectionEnded.js"
import type { EndReason } from "../ConnectionEnded.js"
import * as FrameDecoder from "./FrameDecoder.js"
import * as StderrTail from "./StderrTail.js"
import type { Connection, DirectReader, JsonObject, SendResult } from "../Transport.js"

/** How long the peer gets after SIGTERM (and after ending stdin on close) before SIGKILL. */
export const DEFAULT_KILL_GRACE: Duration.DurationInput = "2 seconds"
/** How long after the exit the pipes may stay open before the end is reported anyway. */
export const DEFAULT_DRAIN_GRACE: Duration.DurationInput = "500 millis"
/** How often the stop sequence looks for survivors of the process group once the leader exited. */
const GROUP_POLL: Duration.DurationInput = "10 millis"
/** How long after SIGKILL the group gets to vanish (see `killSequence`). */
const SIGKILL_SETTLE: Duration.DurationInput = "250 millis"

export type Signal = "SIGTERM" | "SIGKILL"

/** The peer's side of the pipes, as the core drives it. Every method is synchronous. */
export interface PeerControl {
  /** Write to the peer's stdin. May throw; `false` is backpressure (wait for drain), not failure. */
  readonly write: (text: string, onWritten: (error: Error | null | undefined) => void) => boolean
  /** Call `wake` once when stdin drains or can never drain (closed); returns a canceller. */
  readonly onDrain: (wake: () => void) => () => void
  readonly endStdin: () => void
  readonly signal: (signal: Signal) => void
  /** Whether anything that must die with the peer is still running (a child: its process group). */
  readonly anyAlive: () => boolean
}

export interface Options {
  readonly maxFrameBytes?: number | undefined
  readonly stderrTailBytes?: number | undefined
  readonly killGrace?: Duration.DurationInput | undefined
  readonly drainGrace?: Duration.DurationInput | undefined
}

/** Event sinks for the transport, then `start` once the peer exists. */
export interface Core {
  readonly stdoutData: (bytes: Uint8Array) => void
  readonly stdoutEnd: () => void
  readonly stderrData: (bytes: Uint8Array) => void
  readonly stderrEnd: () => void
  readonly exited: (code: number | null, signal: string | null) => void
  /** Decide the end (no-op if already decided). */
  readonly fail: (reason: EndReason) => void
  /** Fork the writer and the stopper into the scope; closing the scope closes the connection. */
  readonly start: (control: PeerControl) => Effect.Effect<Connection, never, Scope.Scope>
}

/** The frame as one line of JSON, or the reason it cannot be one. Never throws. */
export const encodeFrame = (frame: JsonObject): string | UnencodableFrame => {
  try {
    const text = JSON.stringify(frame)
    // `undefined` only for a frame that is not an object (a function); JsonObject rules it out.
    return typeof text === "string" ? text + "\n" : new UnencodableFrame({ detail: "not a JSON value" })
  } catch (error) {
    return new UnencodableFrame({ detail: describeError(error) })
  }
}

const logUnlessInterrupted =
  (what: string) =>
  <A, E, R>(self: Effect.Effect<A, E, R>) =>
    Effect.tapErrorCause(self, (cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError(`transport ${what} crashed`, cause)
    )

export const describeError = (error: unknown): string =>
  error instanceof Error
    ? "code" in error && typeof error.code === "string" && !error.message.includes(error.code)
      ? `${error.message} (${error.code})`
      : error.message
    : String(error)

/**
 * How `incoming` wakes its reader: in the offering call (the `data` callback), not in a scheduler
 * task of its own. Waking is only a resumption message to the reader's fiber, which its own
 * scheduler runs after the callback returns; a Mailbox's default scheduler added a task (a
 * microtask round) before that message was even sent, for every chunk.
 */
const wakeInTheCall: Scheduler.Scheduler = {
  scheduleTask: (task) => task(),
  shouldYield: () => false
}

export const make = (options: Options): Effect.Effect<Core> =>
  Effect.gen(function* () {
    const decoder = FrameDecoder.make({ maxFrameBytes: options.maxFrameBytes })
    const tail = StderrTail.make(options.stderrTailBytes)
    const killGrace = Duration.decode(options.killGrace ?? DEFAULT_KILL_GRACE)
    const drainGrace = Duration.decode(options.drainGrace ?? DEFAULT_DRAIN_GRACE)
    const incoming = yield* Mailbox.make<JsonObject>().pipe(Effect.withScheduler(wakeInTheCall))
    const outbox = yield* Mailbox.make<string>() // serialised frames, newline included
    const decided = yield* Deferred.make<void>()
    const exitSeen = yield* Deferred.make<void>()
    const pipesClosed = yield* Deferred.make<void>()
    const reported = yield* Deferred.make<ConnectionEnded>()
    const writerDone = yield* Deferred.make<void>()
    const stopped = yield* Deferred.make<void>()

    let reason: EndReason | undefined
    let ended: ConnectionEnded | undefined
    let exited = false
    let stdoutOpen = true
    let stderrOpen = true
    let stdinEnded = false
    let arrivedAt: number | undefined
    /** The writer fiber waits in `outbox.takeAll` and nothing is queued: a frame may be written at once. */
    let writerIdle = false
    /** Frames offered to the outbox that the writer has not taken yet. */
    let queued = 0
    /** A direct write reported backpressure: nothing more is written until stdin drains. */
    let draining = false
    let drainWaiter: ((effect: Effect.Effect<void>) => void) | undefined
    /** Handles frames in the `data` callback while set (`setDirectReader`); `incoming` is empty meanwhile. */
    let directReader: DirectReader | undefined
    /** Frames decoded while the direct reader runs (a chunk its own write provoked): offered after what it returns. */
    let arrivedWhileReading: Array<JsonObject> | undefined

    const report = (): void => {
      if (ended !== undefined || reason === undefined) return
      ended = new ConnectionEnded({ reason, stderrTail: tail.text() })
      incoming.unsafeDone(Exit.void) // buffered frames stay takeable; then `done`
      Deferred.unsafeDone(reported, Exit.succeed(ended))
    }
    const reportIfComplete = (): void => {
      if (exited && !stdoutOpen && !stderrOpen) report()
    }
    const decide = (next: EndReason): void => {
      if (reason !== undefined) return
      reason = next
      outbox.unsafeDone(Exit.void) // wakes the writer: it flushes (close) or drops the rest
      Deferred.unsafeDone(decided, Exit.void)
      reportIfComplete()
    }
    const pipeClosed = (): void => {
      if (!stdoutOpen && !stderrOpen) Deferred.unsafeDone(pipesClosed, Exit.void)
      reportIfComplete()
    }
    const offer = (frames: ReadonlyArray<JsonObject>): void => {
      arrivedAt ??= performance.now() // the oldest chunk not yet taken (read-loop lag)
      incoming.unsafeOfferAll(frames)
    }
    /**
     * One chunk's frames to the direct reader (`setDirectReader`). What it leaves, and what arrived
     * while it ran, go to `incoming` in that order; then it is unset, so nothing later overtakes them.
     */
    const readDirectly = (reader: DirectReader, frames: ReadonlyArray<JsonObject>): void => {
      const later: Array<JsonObject> = []
      arrivedWhileReading = later
      let left: ReadonlyArray<JsonObject> | undefined
      try {
        left = reader(frames)
      } catch (error) {
        left = undefined
        directReader = undefined
        decide({ _tag: "InternalDefect", detail: `the direct reader threw: ${describeError(error)}` })
      } finally {
        arrivedWhileReading = undefined
      }
      if (left !== undefined && left.length > 0) {
        directReader = undefined
        offer(left)
      }
      if (later.length > 0) {
        directReader = undefined
        offer(later)
      }
    }
    /** Hand a frame's text to the pipe now if it can be (set by `start`, once the pipe exists). */
    let writeNow: (text: string) => "written" | "failed" | "queue" = () => "queue"
    /** stdout reached its end; if the peer has not exited within drainGrace, that is the end. */
    const stdoutEof = yield* Deferred.make<void>()

    const core: Omit<Core, "start"> = {
      stdoutData: (bytes) => {
        if (ended !== undefined || reason?._tag === "Protocol") return // still drained, never parsed
        const batch = decoder.push(bytes)
        if (batch.frames.length > 0) {
          if (arrivedWhileReading !== undefined) arrivedWhileReading.push(...batch.frames)
          else if (directReader !== undefined) readDirectly(directReader, batch.frames)
          else offer(batch.frames)
        }
        if (batch.fault !== undefined) decide({ _tag: "Protocol", detail: batch.fault.detail })
      },
      stdoutEnd: () => {
        if (!stdoutOpen) return
        stdoutOpen = false
        const fault = decoder.end()
        if (fault !== undefined) decide({ _tag: "Protocol", detail: fault.detail })
        Deferred.unsafeDone(stdoutEof, Exit.void)
        pipeClosed()
      },
      stderrData: (bytes) => tail.write(bytes),
      stderrEnd: () => {
        if (!stderrOpen) return
        stderrOpen = false
        pipeClosed()
      },
      exited: (code, signal) => {
        if (exited) return
        exited = true
        Deferred.unsafeDone(exitSeen, Exit.void)
        decide({ _tag: "Exited", code, signal })
        reportIfComplete()
      },
      fail: decide
    }

    const start = (control: PeerControl): Effect.Effect<Connection, never, Scope.Scope> =>
      Effect.gen(function* () {
        const writeText = (text: string) =>
          Effect.async<void>((resume) => {
            const failed = (error: unknown) => decide({ _tag: "WriteFailed", detail: describeError(error) })
            let flowing: boolean
            try {
              flowing = control.write(text, (error) => {
                if (error) failed(error)
              })
            } catch (error) {
              failed(error)
              return resume(Effect.void)
            }
            if (flowing) return resume(Effect.void)
            return Effect.sync(control.onDrain(() => resume(Effect.void)))
          })

        // A direct write reported backpressure: the writer waits for the drain before its next write.
        const drained = Effect.async<void>((resume) => {
          if (!draining) return resume(Effect.void)
          drainWaiter = resume
          return Effect.sync(() => {
            if (drainWaiter === resume) drainWaiter = undefined
          })
        })

        // Write `text` now, in the sender's step, if nothing is queued or being written (see the
        // module's doc): "written", or "failed" (the pipe threw: nothing was written and the
        // connection has ended), or "queue" when it must be queued for the writer instead.
        writeNow = (text) => {
          if (!writerIdle || queued > 0 || draining || stdinEnded) return "queue"
          let flowing: boolean
          try {
            flowing = control.write(text, (error) => {
              if (error) decide({ _tag: "WriteFailed", detail: describeError(error) })
            })
          } catch (error) {
            decide({ _tag: "WriteFailed", detail: describeError(error) })
            return "failed"
          }
          // A pipe may report the failure in the call itself (its callback, at once): then too
          // nothing was written, and the end is decided.
          if (reason !== undefined) return "failed"
          if (!flowing) {
            draining = true
            control.onDrain(() => {
              draining = false
              const waiter = drainWaiter
              drainWaiter = undefined
              if (waiter !== undefined) waiter(Effect.void)
            })
          }
          return "written"
        }

        // The single long-lived writer: one `write` per batch of queued frames, in order.
        const writer = Effect.gen(function* () {
          while (true) {
            writerIdle = true
            const [frames, done] = yield* outbox.takeAll
            writerIdle = false
            queued = 0
            if (stdinEnded || (reason !== undefined && reason._tag !== "ClosedByUs")) return
            let text = ""
            for (const frame of frames) text += frame
            if (text.length > 0) {
              if (draining) yield* drained
              yield* writeText(text)
            }
            if (done) return
          }
        })

        const exitWithin = (limit: Duration.Duration) =>
          Effect.map(Effect.timeoutOption(Deferred.await(exitSeen), limit), Option.isSome)
        // The rest of the group (grandchildren) gone by `deadline`, polled: no event tells us.
        const groupGoneBy = (deadline: number) =>
          Effect.gen(function* () {
            while (control.anyAlive()) {
              if ((yield* Clock.currentTimeMillis) >= deadline) return false
              yield* Effect.sleep(GROUP_POLL)
            }
            return true
          })

        // Once the end is decided, whatever decided it: stop the peer (every wait bounded) and,
        // side by side, report as soon as it has exited and its pipes closed (or drainGrace after
        // the exit), without waiting for the rest of its group to be cleaned up.
        const killSequence = Effect.gen(function* () {
          if (reason?._tag === "ClosedByUs") {
            yield* Effect.timeoutOption(Deferred.await(writerDone), killGrace) // flush what was sent
          }
          stdinEnded = true
          control.endStdin()
          control.signal("SIGTERM")
          const graceEnds = (yield* Clock.currentTimeMillis) + Duration.toMillis(killGrace)
          if ((yield* exitWithin(killGrace)) && (yield* groupGoneBy(graceEnds))) return
          control.signal("SIGKILL") // cannot be trapped: the whole group dies within milliseconds
          if (yield* exitWithin(killGrace)) {
            // Short: where init does not reap orphans, killed grandchildren linger as zombies that
            // kill(-pgid, 0) still finds; they are dead, and this only lets the SIGKILL land.
            yield* groupGoneBy((yield* Clock.currentTimeMillis) + Duration.toMillis(SIGKILL_SETTLE))
          }
        })
        const reportWhenGone = (killed: Deferred.Deferred<void>) =>
          Effect.gen(function* () {
            yield* Effect.raceFirst(Deferred.await(exitSeen), Deferred.await(killed)) // killed: it never exited
            yield* Effect.timeoutOption(Deferred.await(pipesClosed), drainGrace)
            report()
          })
        const stop = Effect.flatMap(Deferred.make<void>(), (killed) =>
          Effect.all([Effect.ensuring(killSequence, Deferred.done(killed, Exit.void)), reportWhenGone(killed)], {
            concurrency: 2,
            discard: true
          })
        )

        // stdout at its end while the peer lives: nothing it says can be read any more, so every
        // request it has open would wait out its deadline. A child that exits closes stdout too,
        // often just before its exit is seen: it gets drainGrace to exit, so its end reads as an
        // exit (with its code); one that stays alive ends the connection as StdoutClosed, and the
        // stopper then stops it (SIGTERM, bounded wait, SIGKILL).
        yield* Deferred.await(stdoutEof).pipe(
          Effect.zipRight(Effect.timeoutOption(Deferred.await(exitSeen), drainGrace)),
          Effect.flatMap((exit) =>
            Effect.sync(() => {
              if (Option.isNone(exit)) decide({ _tag: "StdoutClosed" })
            })
          ),
          Effect.raceFirst(Deferred.await(decided)),
          logUnlessInterrupted("stdout watcher"),
          Effect.interruptible,
          Effect.forkScoped
        )
        yield* writer.pipe(
          Effect.ensuring(Deferred.done(writerDone, Exit.void)),
          logUnlessInterrupted("writer"),
          Effect.interruptible,
          Effect.forkScoped
        )
        yield* Deferred.await(decided).pipe(
          Effect.zipRight(stop),
          Effect.ensuring(Effect.zipRight(Effect.sync(report), Deferred.done(stopped, Exit.void))),
          logUnlessInterrupted("stopper"),
          Effect.interruptible,
          Effect.forkScoped
        )

        /** Written or queued ("queued"), or not ("closed": a direct write threw, and that ended the connection). */
        const enqueue = (text: string): "queued" | "closed" => {
          const now = writeNow(text)
          if (now === "failed") return "closed"
          if (now === "written") return "queued"
          queued++
          outbox.unsafeOffer(text)
          return "queued"
        }

        const close = Effect.suspend(() => {
          decide({ _tag: "ClosedByUs" })
          return Deferred.await(stopped)
        })
        // Added last, so it runs first on scope close, while the stopper is still alive.
        yield* Effect.addFinalizer(() => close)

        const connection: Connection = {
          incoming,
          send: (frame) =>
            Effect.suspend((): Effect.Effect<void, ConnectionClosed | UnencodableFrame> => {
              if (reason !== undefined) {
                // Before the report, describe the end as known so far: the caller can still say why.
                return Effect.fail(
                  new ConnectionClosed({ ended: ended ?? new ConnectionEnded({ reason, stderrTail: tail.text() }) })
                )
              }
              // Serialised here, at the call: an unserialisable frame is the caller's failure, not the wire's.
              const text = encodeFrame(frame)
              if (typeof text !== "string") return Effect.fail(text)
              if (enqueue(text) === "closed")
                return Effect.fail(
                  new ConnectionClosed({
                    ended: ended ?? new ConnectionEnded({ reason: reason!, stderrTail: tail.text() })
                  })
                )
              return Effect.void
            }),
          trySend: (frame): SendResult => {
            if (reason !== undefined) return "closed"
            const text = encodeFrame(frame)
            if (typeof text !== "string") return "unencodable"
            return enqueue(text)
          },
          takeArrival: () => {
            const at = arrivedAt
            arrivedAt = undefined
            return at
          },
          setDirectReader: (reader) => {
            directReader = reader
          },
          isOpen: () => reason === undefined,
          ended: Deferred.await(reported),
          endedNow: () => ended,
          stderrTail: () => tail.text(),
          abort: (detail, kind = "Protocol") => Effect.sync(() => decide({ _tag: kind, detail })),
          close
        }
        return connection
      })

    return { ...core, start }
  })
