/**
 * Timing and summary statistics, hand-rolled: `process.hrtime.bigint()` for the clock, medians and
 * nearest-rank percentiles for the summaries. Ratios are always taken between numbers measured in
 * the same process, in interleaved rounds, so a noisy neighbour slows every contender alike.
 */

/** Monotonic time in milliseconds (fractional). */
export const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6

/** Monotonic time in microseconds (fractional). */
export const nowUs = (): number => Number(process.hrtime.bigint()) / 1e3

const sorted = (values: ReadonlyArray<number>): Array<number> => [...values].sort((a, b) => a - b)

/** Nearest-rank percentile (p in [0, 100]) of a non-empty sample. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  if (values.length === 0) return Number.NaN
  const s = sorted(values)
  const rank = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))
  return s[rank]!
}

export const median = (values: ReadonlyArray<number>): number => {
  if (values.length === 0) return Number.NaN
  const s = sorted(values)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

export const min = (values: ReadonlyArray<number>): number =>
  values.reduce((a, b) => Math.min(a, b), Number.POSITIVE_INFINITY)
export const max = (values: ReadonlyArray<number>): number =>
  values.reduce((a, b) => Math.max(a, b), Number.NEGATIVE_INFINITY)
export const mean = (values: ReadonlyArray<number>): number => values.reduce((a, b) => a + b, 0) / values.length

/** Round to `digits` significant digits (for JSON that diffs well). */
export const round = (value: number, digits = 4): number => {
  if (!Number.isFinite(value) || value === 0) return value
  return Number(value.toPrecision(digits))
}

/** Yield to the event loop once (a macrotask: what separates two `data` events of a pipe). */
export const macrotask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/** Full collection, twice (finalizers and weak structures settle in the second pass). */
export const collect = (): void => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error("global.gc is missing: run node with --expose-gc (pnpm bench does)")
  gc()
  gc()
}

/** Heap in use after a full collection, in bytes. */
export const heapAfterGc = async (): Promise<number> => {
  collect()
  await macrotask()
  collect()
  return process.memoryUsage().heapUsed
}
