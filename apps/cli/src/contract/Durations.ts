/**
 * Durations on the command line: a number and a unit, `ms`, `s`, `m`, `h` or `d`, optionally
 * several in a row (`300ms`, `5s`, `2m`, `15m`, `1h`, `1m30s`, `90d`). Zero and negative durations
 * are refused, and so are durations beyond 36,500 days (a deadline that far is past the dates a
 * `--json` line can write: it would have failed the line; "wait forever" is a long duration, not
 * an endless one).
 */
import { Duration, Either } from "effect"

const unitMs = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const

const part = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y

/** The longest duration taken: 36,500 days (about a hundred years). */
export const MaxMs = 36_500 * unitMs.d

export const parse = (text: string): Either.Either<Duration.Duration, string> => {
  const input = text.trim()
  const fail = Either.left(
    `invalid duration ${JSON.stringify(text)}: use a number and a unit (ms, s, m, h, d), e.g. 300ms, 5s, 2m, 15m, 1h, 7d`
  )
  if (input.length === 0) return fail
  let total = 0
  part.lastIndex = 0
  while (part.lastIndex < input.length) {
    const match = part.exec(input)
    if (match === null) return fail
    total += Number(match[1]) * unitMs[match[2] as keyof typeof unitMs]
  }
  if (!Number.isFinite(total) || total <= 0)
    return Either.left(`invalid duration ${JSON.stringify(text)}: it must be more than zero`)
  if (total > MaxMs) return Either.left(`invalid duration ${JSON.stringify(text)}: it must be at most 36500d`)
  return Either.right(Duration.millis(Math.round(total)))
}

/** A compact rendering: `850ms`, `12s`, `4m05s`, `1h02m`. */
export const short = (ms: number): string => {
  const value = Math.max(0, Math.round(ms))
  if (value < 1_000) return `${value}ms`
  const seconds = Math.floor(value / 1_000)
  if (seconds < 60) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes}m${String(seconds % 60).padStart(2, "0")}s`
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, "0")}m`
}

/** A clock-style countdown: `14:59`, `0:03`, `1:02:03`. */
export const clock = (ms: number): string => {
  const seconds = Math.max(0, Math.ceil(ms / 1_000))
  const h = Math.floor(seconds / 3_600)
  const m = Math.floor((seconds % 3_600) / 60)
  const s = seconds % 60
  return h > 0
    ? `${h}:${String(m).padStart(2, "0")}:${String(s).padStart(2, "0")}`
    : `${m}:${String(s).padStart(2, "0")}`
}
