/**
 * Admission: at most `limit` work items run at once, the rest wait FIFO. Fixed at `max`, or
 * adaptive (AIMD): when codex reports pressure (a `-32001` overload answer, a rate limit reached in
 * `account/rateLimits/updated`, a turn error saying rate limit, overload or HTTP 429), the limit
 * halves (at most once per `cooldown`, floor 1); after `recoverAfter` without any pressure it grows
 * by one, up to `max`, one step per quiet period. Running items are never stopped: a lower limit
 * holds new admissions back until enough running ones ended.
 *
 * Pressure is reported synchronously (`pressure`, safe on the read loop: one queue offer); one
 * controller fiber in the supervisor's scope reads it and moves the limit. Every move is reported
 * through `changed`.
 *
 * Scope and fibers: the controller (adaptive only) is forked in the caller's scope (the
 * supervisor's), which also shuts the pressure queue down; a permit is a finalizer of the work
 * item's scope, released when the item ends however it ends.
 */
import { Clock, Duration, Effect, Option, Queue, Scope } from "effect"

export interface AdmissionSettings {
  readonly max: number
  readonly adaptive: boolean
  readonly cooldown: Duration.Duration
  readonly recoverAfter: Duration.Duration
}

/** A move of the limit: `reason` is the pressure that lowered it, or "recovered". */
export interface AdmissionChange {
  readonly limit: number
  readonly max: number
  readonly reason: string
}

export interface Admission {
  /** Wait to be admitted (FIFO), then hold one permit until `scope` closes. */
  readonly acquire: (scope: Scope.Scope) => Effect.Effect<void>
  /** Codex said it is under pressure (`reason`, for people); ignored when admission is fixed. */
  readonly pressure: (reason: string) => void
  /** The current limit. */
  readonly limit: () => number
}

export const make = (
  settings: AdmissionSettings,
  changed: (change: AdmissionChange) => void
): Effect.Effect<Admission, never, Scope.Scope> =>
  Effect.gen(function* () {
    const max = Math.max(1, settings.max)
    const semaphore = yield* Effect.makeSemaphore(max)
    /** One effect for every permit's release (an item's scope finalizer), not one per item. */
    const releaseOne = semaphore.release(1)
    let limit = max
    const signals = yield* Queue.unbounded<string>()
    yield* Effect.addFinalizer(() => Queue.shutdown(signals))

    const move = (next: number, reason: string) =>
      Effect.gen(function* () {
        if (next === limit) return
        limit = next
        yield* semaphore.resize(next)
        changed({ limit: next, max, reason })
      })

    if (settings.adaptive) {
      const cooldown = Duration.toMillis(settings.cooldown)
      let lastDecrease = -Infinity
      const controller = Effect.gen(function* () {
        while (true) {
          const signal = yield* Effect.timeoutOption(Queue.take(signals), settings.recoverAfter)
          if (Option.isNone(signal)) {
            if (limit < max) yield* move(limit + 1, "recovered")
            continue
          }
          const now = yield* Clock.currentTimeMillis
          if (now - lastDecrease < cooldown || limit === 1) continue // one storm, one halving
          lastDecrease = now
          yield* move(Math.max(1, Math.floor(limit / 2)), signal.value)
        }
      })
      yield* controller.pipe(Effect.interruptible, Effect.forkScoped)
    }

    return {
      // Uninterruptible once the permit is taken: it is in the scope before anything can stop us.
      acquire: (scope) =>
        Effect.uninterruptibleMask((restore) =>
          Effect.zipRight(restore(semaphore.take(1)), Scope.addFinalizer(scope, releaseOne))
        ),
      pressure: settings.adaptive ? (reason) => void Queue.unsafeOffer(signals, reason) : () => {},
      limit: () => limit
    }
  })

/** Codes of `codexErrorInfo` that say "too much at once" (not a quota that waiting ends). */
const PressureCodes = new Set(["rateLimitExceeded", "serverOverloaded"])

/**
 * The pressure a turn error or an `error` notification reports (its `codexErrorInfo`: rate limit,
 * overload, or an HTTP 429/503 status), or undefined. Reads the wire shape without Schema.
 */
export const pressureOfError = (error: unknown): string | undefined => {
  if (typeof error !== "object" || error === null) return undefined
  const info = (error as Record<string, unknown>)["codexErrorInfo"]
  if (typeof info === "string") return PressureCodes.has(info) ? info : undefined
  if (typeof info !== "object" || info === null) return undefined
  const [code, detail] = Object.entries(info as Record<string, unknown>)[0] ?? []
  if (code === undefined) return undefined
  if (PressureCodes.has(code)) return code
  const status =
    typeof detail === "object" && detail !== null ? (detail as Record<string, unknown>)["httpStatusCode"] : undefined
  return status === 429 || status === 503 ? `HTTP ${status} (${code})` : undefined
}

/** The pressure an `account/rateLimits/updated` reports: a limit reached, or a window used up. */
export const pressureOfRateLimits = (params: unknown): string | undefined => {
  const limits =
    typeof params === "object" && params !== null ? (params as Record<string, unknown>)["rateLimits"] : undefined
  if (typeof limits !== "object" || limits === null) return undefined
  const l = limits as Record<string, unknown>
  if (typeof l["rateLimitReachedType"] === "string") return `rate limit reached (${l["rateLimitReachedType"]})`
  for (const window of ["primary", "secondary"]) {
    const used = (l[window] as Record<string, unknown> | null | undefined)?.["usedPercent"]
    if (typeof used === "number" && used >= 100) return `rate limit window used up (${window})`
  }
  return undefined
}
