/**
 * String enums the server may grow between releases, decoded so that a new value never breaks
 * decoding.
 *
 * For values that are only shown (a status, a flag): a known value decodes to itself, any other
 * string to `"unknown"`. The conformance test compares each known set with the pinned binary's
 * schema, so drift is caught in CI instead of at run time.
 */
import { Schema } from "effect"

/**
 * A known literal of an open enum, or `"unknown"` for a value this build does not know.
 */
export type Open<L extends string> = L | "unknown"

/**
 * Builds a Schema that decodes a string to itself when it is one of `known`, and to `"unknown"`
 * otherwise.
 *
 * Decoding fails only on a non-string. Encoding passes the value through, so an unknown value
 * encodes as `"unknown"`, not as what the server sent: use it only where the value is shown, never
 * where a decision depends on it.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { OpenEnum } from "@warden/protocol"
 *
 * const Status = OpenEnum.make("pending", "done")
 * Schema.decodeUnknownSync(Status)("done") // "done"
 * Schema.decodeUnknownSync(Status)("paused") // "unknown"
 * ```
 */
export const make = <const L extends ReadonlyArray<string>>(...known: L): Schema.Schema<Open<L[number]>, string> => {
  const isKnown = (value: string): value is L[number] => known.includes(value)
  return Schema.transform(
    Schema.String,
    Schema.Literal(...known, "unknown") as unknown as Schema.Schema<Open<L[number]>>,
    {
      strict: true,
      decode: (value): Open<L[number]> => (isKnown(value) ? value : "unknown"),
      encode: (value) => value
    }
  )
}

/**
 * The same mapping as `make` without Schema, for code that already holds the value.
 *
 * Anything that is not one of the `known` strings, a non-string included, maps to `"unknown"`.
 */
export const of = <const L extends ReadonlyArray<string>>(known: L, value: unknown): Open<L[number]> =>
  typeof value === "string" && known.includes(value) ? (value as L[number]) : "unknown"
