/**
 * A string enum the server may grow between releases, where the value is only shown (a status, a
 * flag): a known value decodes to itself, any other string to `"unknown"`, so a new value never
 * breaks decoding. The conformance test compares each known set with the pinned binary's schema, so
 * drift is caught in CI instead of at run time.
 */
import { Schema } from "effect"

export type Open<L extends string> = L | "unknown"

export const make = <const L extends ReadonlyArray<string>>(
  ...known: L
): Schema.Schema<Open<L[number]>, string> => {
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

/** The same mapping without Schema, for code that already holds a string. */
export const of = <const L extends ReadonlyArray<string>>(
  known: L,
  value: unknown
): Open<L[number]> => (typeof value === "string" && known.includes(value) ? (value as L[number]) : "unknown")
