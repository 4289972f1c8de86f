import type { Duration } from "effect"
import { Effect } from "effect"

/**
 * Bounded waits on state that callbacks change (a child's output, frames read, events or requests
 * received): each wait asks its probe at once and again at every `wake()`, never on a timer.
 */
export interface WokenWaits {
  /** Asks every pending wait's probe again; call it whenever what the probes read may have changed. */
  readonly wake: () => void
  /**
   * Waits until `probe` returns a value (not `undefined`), asked now and at every `wake()`; fails
   * with `onTimeout()` when `timeout` passes first. A probe may keep state between its calls (how
   * far it read), one probe per wait.
   */
  readonly until: <A, E>(
    probe: () => A | undefined,
    timeout: Duration.DurationInput,
    onTimeout: () => E
  ) => Effect.Effect<A, E>
}

/**
 * A new set of woken waits, empty: the code that changes the state calls `wake()`, tests wait
 * with `until`.
 */
export const make = (): WokenWaits => {
  const pending = new Set<() => void>()
  return {
    wake: () => {
      for (const check of [...pending]) check()
    },
    until: <A, E>(probe: () => A | undefined, timeout: Duration.DurationInput, onTimeout: () => E) =>
      Effect.async<A>((resume) => {
        const check = () => {
          const found = probe()
          if (found !== undefined) {
            pending.delete(check)
            resume(Effect.succeed(found))
          }
        }
        pending.add(check)
        check()
        return Effect.sync(() => pending.delete(check))
      }).pipe(Effect.interruptible, Effect.timeoutFail({ duration: timeout, onTimeout })) // bounded in a finalizer too
  }
}
