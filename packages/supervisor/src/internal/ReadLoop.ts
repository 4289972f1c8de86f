/**
 * The connection's read loop: one fiber that takes every frame decoded so far
 * (`incoming.takeAll`) and hands each to the router, in order, synchronously; while it waits with
 * nothing buffered, the transport hands it each chunk's frames in its `data` callback (the direct
 * reader), without waking the fiber.
 *
 * Scope and fibers: the loop's fiber is forked in the connection's scope (`start`), interruptible,
 * and supervised: however it ends, the end path runs. Read to the peer's last frame, it hands the
 * transport's end to `endWith`; any other exit (a throw while handling a frame, a dying effect, an
 * interruption) goes to `endByDefect`, which aborts the transport as `InternalDefect`. Closing the
 * connection's scope interrupts it, after the scope's own end path (`ConnectionEnd.onScopeClose`)
 * has run.
 */
import type { Transport as TransportNs } from "@warden/transport"
import { Effect, Exit } from "effect"
import type { Scope } from "effect"
import { Metrics } from "../Telemetry.js"
import type { ConnectionEnd } from "./ConnectionEnd.js"
import type { FrameRouter } from "./FrameRouter.js"
import { FrameHandlingDefect } from "./FrameRouter.js"

/**
 * What the direct reader leaves the read loop's fiber in `incoming`, ahead of the frames it did not
 * handle: the rest of a frame it began (the effect its handling returned, or its defect).
 */
class HandOver {
  readonly [key: string]: unknown
  constructor(readonly effect: Effect.Effect<void>) {}
}

export interface Options {
  readonly connection: TransportNs.Connection
  readonly router: FrameRouter
  readonly end: ConnectionEnd
  /** Sample `warden.read_loop.lag` per batch of frames (telemetry on). */
  readonly measureLag: boolean
}

/** Fork the read loop in the caller's scope (the connection's). */
export const start = (options: Options): Effect.Effect<void, never, Scope.Scope> => {
  const { connection, end, router } = options
  const measureLag = options.measureLag && connection.takeArrival !== undefined

  /**
   * The read loop, while its fiber waits for frames (`takeAll`, nothing buffered): the transport
   * gives it each chunk's frames in the `data` callback (`setDirectReader`), and it handles them
   * there, as the loop would, without waking its fiber. At the first frame whose handling must run
   * an effect (a thread's first card, a span, an abort) or throws, it hands the rest to the fiber:
   * that effect (or the defect, `Effect.die`) first, then the frames it did not handle, through
   * `incoming`, in order.
   */
  const readDirectly = (
    frames: ReadonlyArray<TransportNs.JsonObject>
  ): ReadonlyArray<TransportNs.JsonObject> | undefined => {
    const startedAt = measureLag ? performance.now() : undefined
    for (let i = 0; i < frames.length; i++) {
      const frame = frames[i]!
      let effect: Effect.Effect<void> | undefined
      try {
        effect = router.handle(frame)
      } catch (defect) {
        effect = Effect.die(new FrameHandlingDefect(frame, defect))
      }
      if (effect !== undefined) return [new HandOver(effect), ...frames.slice(i + 1)]
    }
    if (startedAt !== undefined) Metrics.readLoopLag.unsafeUpdate(performance.now() - startedAt, [])
    return undefined
  }
  const direct = connection.setDirectReader
  const reader = Effect.gen(function* () {
    yield* Effect.withFiberRuntime<void>((fiber, status) =>
      Effect.sync(() => router.readIn(fiber, status.runtimeFlags))
    )
    while (true) {
      // Set only while `takeAll` waits with nothing buffered (unset in the step it returns in).
      direct?.(readDirectly)
      const [frames, done] = yield* connection.incoming.takeAll
      direct?.(undefined)
      // Read in the same synchronous step as takeAll: no chunk can arrive in between.
      const arrivedAt = measureLag ? connection.takeArrival!() : undefined
      for (const frame of frames) {
        if (router.aborted()) break
        if (frame instanceof HandOver) {
          yield* frame.effect // a frame the direct reader began: its effect, or its defect
          continue
        }
        let effect: Effect.Effect<void> | undefined
        try {
          effect = router.handle(frame)
        } catch (defect) {
          return yield* Effect.die(new FrameHandlingDefect(frame, defect))
        }
        if (effect) yield* effect
      }
      if (arrivedAt !== undefined) Metrics.readLoopLag.unsafeUpdate(performance.now() - arrivedAt, [])
      if (done || router.aborted()) break
    }
    const ended = yield* connection.ended
    end.endWith(ended)
  })
  // Supervised: however the reader ends, the end path runs.
  return reader.pipe(
    Effect.ensuring(Effect.sync(() => direct?.(undefined))),
    Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : end.endByDefect(exit.cause))),
    Effect.interruptible,
    Effect.forkScoped,
    Effect.asVoid
  )
}
