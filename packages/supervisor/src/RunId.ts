/**
 * Run ids, ordered by time: `r`, the start time in milliseconds as 9 base-36 digits, `-`, 8 random
 * hex digits (`r0mx52rtkw-e64a1a4d`). One format whoever makes one: the ledger for a run it
 * records, a cluster runner, `warden run` before its ledger opens, a supervisor given none.
 *
 * - Their text order is their time order (to the millisecond; 9 digits last until the year 5188).
 * - Letters, digits and `-` only: no `:` (a fleet-wide card id `<run id>:<card id>` splits at its
 *   last `:`), and safe in a git branch name (`warden/<run id>/<item id>`).
 * - Unique, not secret: the random part is `Math.random`, so that making one loads nothing
 *   (`warden run` makes its id before codex is spawned).
 *
 * @example
 * ```ts
 * import { RunId } from "@warden/supervisor"
 *
 * const id = RunId.make() // "r0mx52rtkw-e64a1a4d"
 * const earlier = RunId.make(Date.parse("2026-01-01T00:00:00Z"))
 * console.log(earlier < id) // true: ordered by time
 * ```
 */

/** A new run id for a run that starts at `now` (milliseconds since the epoch; default: now). */
export const make = (now: number = Date.now()): string =>
  `r${Math.floor(now).toString(36).padStart(9, "0")}-${Math.floor(Math.random() * 2 ** 32)
    .toString(16)
    .padStart(8, "0")}`
