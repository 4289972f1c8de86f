/**
 * Reading untyped JSON on hot paths, without Schema: the one place for the small guards every
 * package needs (a frame's params, an item, a result read on the read loop), and the one way a
 * Schema failure is told to a person without quoting values.
 */
import { ParseResult } from "effect"

/** A JSON object (not null, not an array), for a type guard. */
export const isRecord = (value: unknown): value is { readonly [key: string]: unknown } =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The value as a JSON object, or undefined: `asRecord(p?.["item"])?.["id"]`. */
export const asRecord = (value: unknown): Readonly<Record<string, unknown>> | undefined =>
  isRecord(value) ? value : undefined

/** The value if it is a string. */
export const asString = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/**
 * A Schema failure told without the values it read (they may be secrets: a `Bearer` token in a
 * malformed request's params): each issue as its path and what the schema expected, at most `max`.
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
