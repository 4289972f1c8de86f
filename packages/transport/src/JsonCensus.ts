/**
 * How many keys the large objects of a frame have, known without enumerating them.
 *
 * In V8, reading an object's keys (`Object.keys`, `for...in`, `Object.entries`, even a `for...in`
 * that stops after the first key) costs time linear in ALL its keys: a large parsed object is a
 * dictionary whose keys are collected and sorted before the first one is given. There is no way to
 * read "the first 100 keys" of a 1.85-million-key object (what a 16 MiB frame can hold) for less
 * than about a second of CPU, a quarter of the frame's own `JSON.parse`. So a bounded walk over a
 * frame's values cannot bound itself by stopping early: it must know an object's size BEFORE it
 * enumerates it.
 *
 * The census gives that size. `parse` is `JSON.parse`, and for a text of `ScanFrom` characters or
 * more, one linear scan of the same text (each string skipped by `indexOf`, every other character
 * read once: a few percent of `JSON.parse`) that counts the keys of every object and registers each
 * object of `MinKeys` keys or more, up to `MaxDepth` levels deep, with its count. `keyCount(o)` then
 * answers in O(1): the number of keys `o` was written with, or `undefined` for an object the census
 * did not register (a small one, one too deep, one not parsed here). A walker asks before it
 * enumerates (`ownKeys` of `@warden/protocol`'s `JsonCensus` re-export does), and leaves a large
 * object unread, saying how many keys it holds.
 *
 * A count is never below the object's real number of keys: a key written twice in one object is
 * counted twice, and where a key is written twice in an object along the path, JSON.parse keeps the
 * last value, whose own record (written later) wins; an earlier twin's larger count can only stay
 * on an object smaller than it says. Erring large only makes a walker read less (a bound, never a
 * wrong answer: what is not read is never allowed by a rule and shown as "N more").
 */
import { GlobalValue } from "effect"

/** Texts shorter than this are parsed without a census (they hold fewer than ~11,000 keys in all). */
export const ScanFrom = 64 * 1024
/** Objects with fewer keys are not registered (`keyCount` is `undefined`; reading them is cheap). */
export const MinKeys = 64
/** Objects nested deeper than this (the text's value is level 1) are not registered. */
export const MaxDepth = 32

/**
 * The registry: the key count of every object registered, by the object. One per process, held
 * by Effect's `globalValue` under that name, because `@warden/protocol` reads it (its
 * `Json.keysWithin` and `Json.isEmpty`) without importing the transport: the transport and the
 * protocol never import each other (docs/architecture.md, "Layering").
 */
const counts = GlobalValue.globalValue(Symbol.for("@warden/JsonCensus/counts"), () => new WeakMap<object, number>())

/**
 * The number of keys `value` was written with, when the census registered it (an object of
 * `MinKeys` keys or more from a text `parse` scanned), else `undefined`.
 */
export const keyCount = (value: object): number | undefined => counts.get(value)

/**
 * Register the number of keys of an object built rather than parsed (an embedder's, a test's), so
 * walks leave it unread past their budgets as they do a frame's. Safe whatever the number: a count
 * above the real one only makes walks read less; one below it is found out when the keys are read
 * (`keysWithin` counts them).
 */
export const note = (value: object, keys: number): void => {
  counts.set(value, keys)
}

/** One registered object: where it is (keys as JSON string literals, array indices as numbers), and its count. */
interface Found {
  readonly path: ReadonlyArray<string | number>
  readonly keys: number
}

/** Where the string literal opening at `at` closes (its closing quote). The text is valid JSON. */
const stringEnd = (text: string, at: number): number => {
  let j = at + 1
  for (;;) {
    j = text.indexOf("\"", j)
    if (j < 0) return text.length
    let backslashes = 0
    for (let k = j - 1; text.charCodeAt(k) === 92; k--) backslashes++
    if ((backslashes & 1) === 0) return j
    j++
  }
}

/**
 * Every object of `MinKeys` keys or more in a valid JSON text, up to `MaxDepth` levels, innermost
 * first in the order they close. One pass: linear in the text (each backslash run is read once,
 * by the quote that ends it).
 */
export const scan = (text: string): ReadonlyArray<Found> => {
  const found: Array<Found> = []
  // The levels above the current one (1..MaxDepth); the current level's state is kept in locals.
  const levels = MaxDepth + 2
  const isObjectAt = new Uint8Array(levels)
  const keysAt = new Float64Array(levels)
  const commasAt = new Float64Array(levels)
  const keyStartAt = new Float64Array(levels)
  const keyEndAt = new Float64Array(levels)
  let depth = 0
  let isObject = false
  let expectKey = false
  let keys = 0
  let commas = 0
  let keyStart = 0
  let keyEnd = 0
  const n = text.length
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 34) {
      const end = stringEnd(text, i)
      if (expectKey) {
        expectKey = false
        keys++
        keyStart = i
        keyEnd = end + 1
      }
      i = end
    } else if (c === 44) {
      if (isObject) expectKey = true
      else commas++
    } else if (c === 123 || c === 91) {
      if (depth > 0 && depth <= MaxDepth) {
        isObjectAt[depth] = isObject ? 1 : 0
        keysAt[depth] = keys
        commasAt[depth] = commas
        keyStartAt[depth] = keyStart
        keyEndAt[depth] = keyEnd
      }
      depth++
      // deeper than MaxDepth, nothing is counted (expectKey stays false)
      isObject = c === 123 && depth <= MaxDepth
      expectKey = isObject
      keys = 0
      commas = 0
    } else if (c === 125 || c === 93) {
      if (isObject && keys >= MinKeys) {
        const path: Array<string | number> = []
        for (let l = 1; l < depth; l++) path.push(isObjectAt[l] === 1 ? text.slice(keyStartAt[l]!, keyEndAt[l]!) : commasAt[l]!)
        found.push({ path, keys })
      }
      depth--
      if (depth > 0 && depth <= MaxDepth) {
        isObject = isObjectAt[depth] === 1
        keys = keysAt[depth]!
        commas = commasAt[depth]!
        keyStart = keyStartAt[depth]!
        keyEnd = keyEndAt[depth]!
      } else {
        isObject = false
      }
      expectKey = false
    }
  }
  return found
}

/** A key's name from its JSON string literal. */
const keyName = (literal: string): string => (literal.includes("\\") ? (JSON.parse(literal) as string) : literal.slice(1, -1))

/** Register what `scan` found in `text` on the values `JSON.parse` made of it. */
const register = (root: unknown, found: ReadonlyArray<Found>): void => {
  for (const { keys, path } of found) {
    let value: unknown = root
    for (const step of path) {
      if (typeof value !== "object" || value === null) break
      value = typeof step === "number" ? (value as Array<unknown>)[step] : (value as Record<string, unknown>)[keyName(step)]
    }
    if (typeof value === "object" && value !== null && !Array.isArray(value)) counts.set(value, keys)
  }
}

/**
 * `JSON.parse(text)`, and for a text of `ScanFrom` characters or more, the census of its large
 * objects (`keyCount`). Throws what `JSON.parse` throws.
 */
export const parse = (text: string): unknown => {
  const value: unknown = JSON.parse(text)
  census(text, value)
  return value
}

/**
 * The census of `value`, which is `JSON.parse(text)` (for a text of `ScanFrom` characters or more;
 * a shorter one has nothing to register). `parse` is both steps; this one is for a caller that
 * times them apart.
 */
export const census = (text: string, value: unknown): void => {
  if (text.length >= ScanFrom && typeof value === "object" && value !== null) register(value, scan(text))
}

/** The keys of an object, read only when there are few enough (`keysWithin`). */
export interface Keys {
  /** Its own enumerable keys (`Object.keys`), or `undefined` when it has more than were asked for. */
  readonly keys: ReadonlyArray<string> | undefined
  /** How many keys it has (counted, or as the census knows them). */
  readonly count: number
}

/**
 * The keys of `value` when it has at most `max`, else `undefined` (and how many it has). An object
 * the census registered with more is not enumerated at all; any other is (it is small, or did not
 * come from a text `parse` scanned: then this costs what `Object.keys` costs). The answer is the
 * same either way, only the work differs.
 */
export const keysWithin = (value: object, max: number): Keys => {
  const known = counts.get(value)
  if (known !== undefined && known > max) return { keys: undefined, count: known }
  const keys = Object.keys(value)
  return { keys: keys.length > max ? undefined : keys, count: keys.length }
}

/** Has `value` no own enumerable key? (A registered object has `MinKeys` or more: never enumerated here.) */
export const isEmpty = (value: object): boolean => {
  if (counts.has(value)) return false
  for (const key in value) if (Object.prototype.hasOwnProperty.call(value, key)) return false
  return true
}
