/**
 * Another process holding the database's lock (a second run, a `sqlite3` shell in a transaction,
 * a backup): SQLite answers `SQLITE_BUSY` or `SQLITE_LOCKED` at once (the ledger's connection has
 * no busy timeout, so better-sqlite3 never waits synchronously on the event loop), and the ledger
 * waits here instead, asynchronously (`Effect.sleep`), with a backoff, for a bounded time.
 */
import { Cause, Clock, Duration, Effect, Exit } from "effect"

/** How long a write waits for a locked database by default before giving up (5 minutes). */
export const DefaultTimeout: Duration.Duration = Duration.minutes(5)

/** The first pause after a busy answer, and the longest one. */
const FirstDelayMs = 5
const MaxDelayMs = 500

/** PostgreSQL's "try again" answers: serialization failure, deadlock, lock not available. */
const PgTransient = new Set(["40001", "40P01", "55P03"])

const codeOf = (error: unknown): string | undefined => {
  const code = (error as { readonly code?: unknown } | null | undefined)?.code
  return typeof code === "string" ? code : undefined
}

/** Whether an error or one of its causes (a `SqlError`, the driver's error inside) has a code `test` accepts. */
export const hasCode = (error: unknown, test: (code: string) => boolean): boolean => {
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const code = codeOf(e)
    if (code !== undefined && test(code)) return true
    e = (e as { readonly cause?: unknown }).cause
  }
  return false
}

/** Whether a driver error (or the `SqlError` wrapping it) says the database is locked by someone else. */
export const isBusyError = (error: unknown): boolean =>
  hasCode(error, (code) => code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED") || PgTransient.has(code))

/** Whether a failure (or a defect: a COMMIT that failed) is only a locked database. */
export const isBusy = (cause: Cause.Cause<unknown>): boolean => {
  if (Cause.isInterrupted(cause)) return false
  const errors = [...Cause.failures(cause), ...Cause.defects(cause)]
  return errors.length > 0 && errors.every(isBusyError)
}

/** The pause before attempt `n + 1` (0-based): 5 ms doubling to 500 ms. */
export const delayMs = (attempt: number): number => Math.min(MaxDelayMs, FirstDelayMs * 2 ** Math.min(attempt, 10))

/**
 * Run `effect` (a whole transaction: it is run again from the start), again and again while it
 * fails only because the database is locked, with a backoff, until it succeeds, fails otherwise, or
 * `timeout` has passed since the first busy answer (then the last busy failure is returned).
 */
export const retry = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  timeout: Duration.DurationInput = DefaultTimeout
): Effect.Effect<A, E, R> =>
  Effect.gen(function* () {
    const bound = Duration.toMillis(Duration.decode(timeout))
    let since: number | undefined
    for (let attempt = 0; ; attempt++) {
      const exit = yield* Effect.exit(effect)
      if (Exit.isSuccess(exit) || !isBusy(exit.cause)) return yield* exit
      const now = yield* Clock.currentTimeMillis
      since ??= now
      const left = since + bound - now
      if (left <= 0) return yield* exit
      yield* Effect.sleep(Duration.millis(Math.min(left, delayMs(attempt))))
    }
  })
