/**
 * Small guards for reading untyped JSON on hot paths without Schema, and a way to tell a Schema
 * failure without quoting the values it read.
 *
 * This is the one place for the guards every package needs (a frame's params, an item, a result
 * read on the read loop), and the one way a Schema failure is told to a person.
 */
import { JsonCensus } from "@warden/json"
import { Option, type ParseResult, SchemaAST } from "effect"

/**
 * The keys of a JSON object when it has at most `max`, else `undefined` and how many it has,
 * without enumerating a large object of a frame (the census of `@warden/json`, which the transport
 * takes of every frame it parses, knows its size: in V8 even a `for...in` that stops at once reads
 * every key first). Every walk over a request's objects reads keys through this (or `isEmpty`), so
 * its work is bounded by what it asks for. It is `JsonCensus.keysWithin` of `@warden/json`.
 */
export const keysWithin: (value: object, max: number) => JsonCensus.Keys = JsonCensus.keysWithin

/** Has this object no own enumerable key? Constant time for a large object of a frame (`JsonCensus.isEmpty` of `@warden/json`). */
export const isEmpty: (value: object) => boolean = JsonCensus.isEmpty

/** What `keysWithin` gives. */
export type Keys = JsonCensus.Keys

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
  const issues: Array<Leaf> = []
  leaves(error.issue, [], issues)
  const shown = issues.slice(0, max).map(({ issue, path: at }) => {
    const path = at.length > 0 ? at.map(String).join(".") : "the value"
    if (issue._tag === "Missing") return `${path} is missing`
    if (issue._tag === "Unexpected") return `${path} is not expected`
    const expected = issue._tag === "Type" ? expectedOf(issue) : undefined
    return expected !== undefined ? `${path}: ${expected}` : `${path} is not what the protocol says (${issue._tag})`
  })
  return shown.join("; ") + (issues.length > max ? `; and ${issues.length - max} more` : "")
}

/** A failure where it happened. */
interface Leaf {
  readonly issue: ParseResult.ParseIssue
  readonly path: ReadonlyArray<PropertyKey>
}

/**
 * The failures of a Schema issue tree with their paths, as `ArrayFormatter` lists them, read from
 * the tree itself: the formatter writes every message with the value it read ("Expected null,
 * actual [...]"), and formatting a value is linear in it (seconds for a 16 MiB frame's array, once
 * per member of a union it failed).
 */
const leaves = (issue: ParseResult.ParseIssue, path: ReadonlyArray<PropertyKey>, out: Array<Leaf>): void => {
  switch (issue._tag) {
    case "Pointer":
      return leaves(issue.issue, [...path, ...(Array.isArray(issue.path) ? issue.path : [issue.path])], out)
    case "Composite":
      for (const inner of Array.isArray(issue.issues) ? issue.issues : [issue.issues]) leaves(inner, path, out)
      return
    case "Refinement":
    case "Transformation":
      return leaves(issue.issue, path, out)
    default:
      out.push({ issue, path })
  }
}

/** `expected T` for a failed type, from the schema (its message annotation or its description), never from the value. */
const expectedOf = (issue: ParseResult.Type): string | undefined => {
  let text = `Expected ${String(issue.ast)}`
  const annotation = SchemaAST.getMessageAnnotation(issue.ast)
  if (issue.message !== undefined) text = issue.message
  else if (Option.isSome(annotation)) {
    const message = annotation.value(issue)
    if (typeof message === "string") text = message
    else if (typeof message === "object" && "message" in message && typeof message.message === "string")
      text = message.message
  }
  const expected = (text.split("\n", 1)[0] ?? "").replace(/,?\s*actual[\s\S]*$/i, "").trim()
  return /^expected /i.test(expected) ? expected.replace(/^expected/i, "expected") : undefined
}
