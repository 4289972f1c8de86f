/**
 * A computation over many cards written once, run two ways: to its end at once (`run`: a command
 * that reads a whole record, `warden rules suggest`), or a slice of the event loop's time at a
 * time (`paced`: an offer made in a live run, whose thread also reads codex's frames).
 *
 * The computation is a generator that `yield`s between pieces of work (every `Every` cards); it
 * must not keep anything across a `yield` that another fiber could change meanwhile (it reads its
 * own copy of the cards).
 */
import { Effect } from "effect"
import { performance } from "node:perf_hooks"

/** Let the event loop (I/O callbacks, timers) and the other fibers run: resumes after a turn of it (`setImmediate`). */
export const yieldToLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/** A computation that pauses between pieces of work, and ends with an `A`. */
export type Steps<A> = Generator<void, A, void>

/** Cards worked on between two pauses (each a few µs to a few tens of µs). */
export const Every = 200

/** How long `paced` works before it lets the event loop turn, by default. */
export const DefaultSliceMs = 10

/** Run `steps` to its end, now. */
export const run = <A>(steps: Steps<A>): A => {
  for (;;) {
    const next = steps.next()
    if (next.done) return next.value
  }
}

/**
 * Run `steps` in slices of about `sliceMs` (at least one piece each), a turn of the event loop
 * between them (`setImmediate`: timers and I/O run). Interrupted between slices, it stops there.
 */
export const paced = <A>(steps: Steps<A>, sliceMs: number = DefaultSliceMs): Effect.Effect<A> =>
  Effect.gen(function* () {
    for (;;) {
      const started = performance.now()
      for (;;) {
        const next = steps.next()
        if (next.done) return next.value
        if (performance.now() - started >= sliceMs) break
      }
      yield* yieldToLoop
    }
  })
