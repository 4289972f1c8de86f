/**
 * Reading untyped JSON on hot paths, without Schema: the one place for the small guards every
 * package needs (a frame's params, an item, a result read on the read loop).
 */

/** A JSON object (not null, not an array), for a type guard. */
export const isRecord = (value: unknown): value is { readonly [key: string]: unknown } =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The value as a JSON object, or undefined: `asRecord(p?.["item"])?.["id"]`. */
export const asRecord = (value: unknown): Readonly<Record<string, unknown>> | undefined =>
  isRecord(value) ? value : undefined

/** The value if it is a string. */
export const asString = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)
