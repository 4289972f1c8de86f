/**
 * Bounded waits woken by what they wait on: a test's state changed by callbacks (output read,
 * events or requests received) calls `wake()`, and each wait asks its probe again then, never on
 * a timer; a wait fails when its timeout passes first. `TestProcess` waits this way on a child's
 * output.
 *
 * @example
 * ```ts
 * import { WokenWait } from "@warden/testkit"
 * import { Effect } from "effect"
 *
 * const lines: Array<string> = []
 * const waits = WokenWait.make()
 * const onLine = (line: string) => {
 *   lines.push(line)
 *   waits.wake()
 * }
 * const ready = waits.until(() => lines.find((l) => l === "ready"), "10 seconds", () => new Error("never ready"))
 * ```
 */

/** A new set of woken waits, empty: the code that changes the state calls `wake()`, tests wait with `until`. */
export { make } from "./internal/WokenWait.js"
export type { WokenWaits } from "./internal/WokenWait.js"
