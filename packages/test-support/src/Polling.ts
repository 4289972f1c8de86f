/**
 * Waiting on state spread over several processes (their output, their pids, files): no single
 * event to wait on, so a condition is polled, with a deadline. Nothing here imports vitest.
 */
import { Effect, Schedule } from "effect"
import type { Duration } from "effect"

/**
 * `condition` polled every 250 ms until it holds; past `timeout`, fails naming `what`, with
 * `context()` after it.
 */
export const until = (
  what: string,
  condition: () => boolean,
  timeout: Duration.DurationInput = "180 seconds",
  context: () => string = () => ""
) =>
  Effect.suspend(() => (condition() ? Effect.void : Effect.fail(what))).pipe(
    Effect.retry(Schedule.spaced("250 millis")),
    Effect.timeoutFail({ duration: timeout, onTimeout: () => new Error(`timed out waiting for ${what}\n${context()}`) })
  )
