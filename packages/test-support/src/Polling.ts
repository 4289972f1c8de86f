/**
 * Waiting on state spread over several processes (their output, their pids, files, rows another
 * process writes): no single event to wait on, so a condition is polled, with a deadline. Nothing
 * here imports vitest.
 */
import { Effect, Schedule } from "effect"
import type { Duration } from "effect"

export interface PollOptions {
  /** How long before it fails (default 180 seconds). */
  readonly timeout?: Duration.DurationInput
  /** What the failure says after its first line (the state seen, the processes' output). */
  readonly context?: () => string
  /** How often the condition is tried (default every 250 ms). */
  readonly every?: Duration.DurationInput
}

/**
 * `condition` (an effect: a query, a read) tried every `every` until it gives true; a failure of
 * it is tried again as a false. Past `timeout`, fails naming `what`, with `context()` after it.
 */
export const untilEffect = <E, R>(
  what: string,
  condition: Effect.Effect<boolean, E, R>,
  options: PollOptions = {}
): Effect.Effect<void, Error, R> =>
  condition.pipe(
    Effect.flatMap((ok) => (ok ? Effect.void : Effect.fail(what))),
    Effect.retry(Schedule.spaced(options.every ?? "250 millis")),
    Effect.timeoutFail({
      duration: options.timeout ?? "180 seconds",
      onTimeout: () => new Error(`timed out waiting for ${what}\n${options.context?.() ?? ""}`)
    }),
    Effect.mapError((e) => (e instanceof Error ? e : new Error(`waiting for ${what}: ${String(e)}`)))
  )

/**
 * `condition` polled every 250 ms until it holds; past `timeout`, fails naming `what`, with
 * `context()` after it.
 */
export const until = (
  what: string,
  condition: () => boolean,
  timeout: Duration.DurationInput = "180 seconds",
  context: () => string = () => ""
): Effect.Effect<void, Error> => untilEffect(what, Effect.sync(condition), { timeout, context })
