/**
 * The connection's end, handled in one place (`endWith`): our pending requests fail with the
 * typed cause, the open cards settle as connection-lost, then (once the microtasks that queued
 * have run) every thread route is told and `ended` resolves.
 *
 * Three ways lead there and no other: the read loop read the peer's last frame (`endWith` with
 * the transport's end), the read loop ended any other way (`endByDefect`: the transport is aborted
 * as `InternalDefect`, naming what died), or the connection's scope closed (`onScopeClose`: close
 * the transport, wait for its end, bounded, then `endWith`).
 *
 * Scope and fibers: this module starts no fiber of its own but the one that defers telling the
 * routes, in the connection's FiberSet (`spawn`); if that fiber is interrupted before it ran
 * (the connection's scope closing), its observer still tells them, once. `onScopeClose` is the
 * connection scope's finalizer: `AppServerConnection.make` adds it after the read loop's fiber
 * is forked, so that it runs before that fiber is interrupted and the end reads `ClosedByUs`,
 * not an interrupted read loop.
 */
import { SecretMask } from "@warden/approvals"
import type { Transport as TransportNs } from "@warden/transport"
import { ConnectionEnded as ConnectionEndedNs } from "@warden/transport"
import { Cause, Deferred, Duration, Effect } from "effect"
import type { Fiber } from "effect"
import { ConnectionLost } from "../Errors.js"
import type { PendingRequests } from "./PendingRequests.js"
import type { ThreadRoute } from "./ThreadRoute.js"

type ConnectionEnded = ConnectionEndedNs.ConnectionEnded
const ConnectionEnded = ConnectionEndedNs.ConnectionEnded

/**
 * The end as it may leave Warden: the stderr tail and any detail (a frame preview, a write error)
 * through the one masking function, `SecretMask.maskText` (an `Authorization: Bearer …` line on
 * stderr, an `OPENAI_API_KEY=…` in a frame preview never reach an error, an event or a log).
 */
export const maskEnded = (ended: ConnectionEnded): ConnectionEnded => {
  const reason = ended.reason
  const masked = "detail" in reason ? { ...reason, detail: SecretMask.maskText(reason.detail) } : reason
  return new ConnectionEnded({ reason: masked, stderrTail: SecretMask.maskText(ended.stderrTail) })
}

/**
 * Resumes after every microtask queued before it, Promise reactions included: a sleep of zero,
 * which the live Clock keeps with a timer (a macrotask), and a virtual clock (the TestClock, the
 * property tests' StepClock) ends at once, so deterministic schedules stay deterministic.
 */
export const afterQueuedMicrotasks: Effect.Effect<void> = Effect.sleep(Duration.zero)

const firstLine = (text: string): string => {
  const line = text.split("\n", 1)[0] ?? ""
  return line.length > 0 ? line : text.slice(0, 200)
}

/** What the end settles, and where it defers telling the routes. */
export interface Settles {
  readonly pending: PendingRequests
  /**
   * The connection's open cards settle connection-lost (nothing is written: nothing can be). A
   * function, since the connection's cards are made after the end (its line asks the end whether it is alive).
   */
  readonly cardsLost: (message: string) => void
  readonly routes: ReadonlyMap<string, ThreadRoute>
  /** Run an effect in the connection's FiberSet (not on the caller's stack). */
  readonly spawn: (effect: Effect.Effect<void>) => Fiber.RuntimeFiber<void>
}

export interface ConnectionEnd {
  /** The end, once handled (masked); undefined while the connection lives. */
  readonly handled: () => ConnectionEnded | undefined
  /** Neither handled nor reported by the transport: a write may still reach the peer. */
  readonly isOpen: () => boolean
  /** Queue a frame on the transport's single writer; false once the line is dead (or the frame unencodable). */
  readonly write: (frame: Record<string, unknown>) => boolean
  /** The typed cause a request or a notification fails with once the line is dead. */
  readonly lost: () => ConnectionLost
  /** Resolved once every route was told (what `ended` waits for). */
  readonly signal: Deferred.Deferred<ConnectionEnded>
  /** The one end path; the first call wins. */
  readonly endWith: (raw: ConnectionEnded) => void
  /** The read loop ended other than by reading to the peer's end: Warden failed (see the module comment). */
  readonly endByDefect: (cause: Cause.Cause<unknown>) => Effect.Effect<void>
  /** The connection's scope closes: close the transport, wait for its end (bounded), then `endWith`. */
  readonly onScopeClose: Effect.Effect<void>
}

export const make = (connection: TransportNs.Connection, settles: Settles): Effect.Effect<ConnectionEnd> =>
  Effect.map(Deferred.make<ConnectionEnded>(), (signal) => {
    let handled: ConnectionEnded | undefined

    const lost = () => {
      if (handled) return new ConnectionLost({ ended: handled }) // masked once, by endWith
      const reported = connection.endedNow()
      return new ConnectionLost({ ended: reported && maskEnded(reported) })
    }

    /**
     * Pending requests fail, open cards settle as connection-lost, every thread route is told,
     * `ended` resolves. Each step is guarded so that `ended` always resolves.
     */
    const endWith = (raw: ConnectionEnded) => {
      if (handled) return
      // Everything downstream (errors, events, logs, the CLI) sees the masked end only.
      const ended = maskEnded(raw)
      handled = ended
      const error = new ConnectionLost({ ended })
      try {
        settles.pending.failAll(error)
        settles.cardsLost(ended.message)
      } finally {
        tellRoutesLater(error, ended)
      }
    }

    /**
     * Every thread route is told of the end, then `ended` resolves, once the microtasks queued
     * by the end have run (`afterQueuedMicrotasks`: a macrotask on the live clock, at once on a
     * virtual one). Told in the same step, 1,000 runners woke in the microtasks right behind the
     * failed callers' fibers, and a Promise's caller (`runPromise`, the facade), which hears of
     * its fiber's end two Promise reactions later, heard behind all of them
     * (docs/performance.md). However the deferring fiber ends (its scope closing with the
     * connection's, interrupted before it ran), its observer tells the routes: they are told
     * exactly once.
     */
    const tellRoutesLater = (error: ConnectionLost, ended: ConnectionEnded) => {
      let told = false
      const tell = () => {
        if (told) return
        told = true
        try {
          // Each route is told, whatever another one does (`receive` must not throw; a runner's
          // own bookkeeping is guarded, see ThreadRunner).
          for (const route of settles.routes.values()) {
            try {
              route.receive({ _tag: "ConnectionLost", error })
            } catch {
              // nothing to do here: the route's runner failed its own work item
            }
          }
        } finally {
          Deferred.unsafeDone(signal, Effect.succeed(ended))
        }
      }
      try {
        settles.spawn(afterQueuedMicrotasks).addObserver(tell)
      } catch (defect) {
        tell() // no fiber to defer with: tell now
        throw defect
      }
    }

    /**
     * The transport is told (so the child is stopped, bounded) and the end is handled at once,
     * with what died in the reason (masked and bounded: it may quote a frame).
     */
    const endByDefect = (cause: Cause.Cause<unknown>) =>
      Effect.suspend(() => {
        if (handled) return Effect.void
        const what = Cause.isInterruptedOnly(cause)
          ? "the read loop was interrupted"
          : `the read loop died: ${firstLine(Cause.pretty(cause))}`
        const detail = SecretMask.truncate(SecretMask.maskText(what), 1_000)
        return connection.abort(detail, "InternalDefect").pipe(
          Effect.zipRight(
            Effect.sync(() =>
              endWith(
                new ConnectionEnded({
                  reason: { _tag: "InternalDefect", detail },
                  stderrTail: connection.stderrTail()
                })
              )
            )
          ),
          Effect.zipRight(
            Cause.isInterruptedOnly(cause)
              ? Effect.void
              : Effect.logError("connection ended by a defect in Warden", cause)
          )
        )
      })

    // Closing the scope (supervisor stop) must also leave nothing pending.
    const onScopeClose = Effect.suspend(() => {
      if (handled) return Effect.void
      // This runs as a finalizer (uninterruptible): a timeout there only fires when what it bounds
      // may be interrupted, so the wait is made interruptible (the transport's own stopper goes on).
      return connection.close.pipe(
        Effect.zipRight(connection.ended),
        Effect.interruptible,
        Effect.timeoutOption("5 seconds"),
        Effect.flatMap((ended) =>
          Effect.sync(() =>
            endWith(
              ended._tag === "Some"
                ? ended.value
                : new ConnectionEnded({ reason: { _tag: "ClosedByUs" }, stderrTail: connection.stderrTail() })
            )
          )
        )
      )
    })

    return {
      handled: () => handled,
      isOpen: () => handled === undefined && connection.isOpen(),
      // Writes are synchronous enqueues onto the transport's single writer; false when dead (or
      // unencodable: a card's answer was checked when it was decided, so that cannot happen there).
      write: (frame) => handled === undefined && connection.trySend(frame) === "queued",
      lost,
      signal,
      endWith,
      endByDefect,
      onScopeClose
    }
  })
