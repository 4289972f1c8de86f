/**
 * Small guards for reading untyped JSON on hot paths without Schema, and a way to tell a Schema
 * failure without quoting the values it read.
 *
 * This is the one place for the guards every package needs (a frame's params, an item, a result
 * read on the read loop), and the one way a Schema failure is told to a person.
 */
import { ParseResult } from "effect"

/** A JSON object (not null, not an array), for a type guard. */
export const isRecord = (value: unknown): value is { readonly [key: string]: unknown } =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The value as a JSON object, or undefined when it is not one.
 *
 * @example
 * ```ts
 * import { Json } from "@warden/protocol"
 *
 * const itemId = Json.asString(Json.asRecord(params)?.["itemId"])
 * ```
 */
export const asRecord = (value: unknown): Readonly<Record<string, unknown>> | undefined =>
  isRecord(value) ? value : undefined

/** The value if it is a string, else undefined. */
export const asString = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/**
 * Describes a Schema failure by paths and expectations, without quoting the values it read.
 *
 * The values may be secrets (a `Bearer` token in a malformed request's params). Each issue is told
 * as its path and what the schema expected (`threadId: expected string`, `turnId is missing`), at
 * most `max` of them (default 5), then how many more there were.
 */
export const describeParseError = (error: ParseResult.ParseError, max = 5): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const shown = issues.slice(0, max).map((issue) => {
    const path = issue.path.length > 0 ? issue.path.map(String).join(".") : "the value"
    if (issue._tag === "Missing") return `${path} is missing`
    if (issue._tag === "Unexpected") return `${path} is not expected`
    const expected = (issue.message.split("\n", 1)[0] ?? "").replace(/,?\s*actual[\s\S]*$/i, "").trim()
    return /^expected /i.test(expected) ? `${path}: ${expected.replace(/^expected/i, "expected")}` : `${path} is not what the protocol says (${issue._tag})`
  })
  return shown.join("; ") + (issues.length > max ? `; and ${issues.length - max} more` : "")
}
