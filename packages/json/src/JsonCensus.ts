/**
 * How many keys the large objects of a JSON text have, known without enumerating them.
 *
 * In V8, reading an object's keys (`Object.keys`, `for...in`, `Object.entries`, even a `for...in`
 * that stops after the first key) costs time linear in ALL its keys: a large parsed object is a
 * dictionary whose keys are collected and sorted before the first one is given. There is no way to
 * read "the first 100 keys" of a 1.85-million-key object (what a 16 MiB frame can hold) for less
 * than about a second of CPU, a quarter of the frame's own `JSON.parse`. So a bounded walk over a
 * frame's values cannot bound itself by stopping early: it must know an object's size BEFORE it
 * enumerates it.
 *
 * The census gives that size. {@link parse} is `JSON.parse`, and for a text of {@link ScanFrom}
 * characters or more, one linear scan of the same text (each string skipped by `indexOf`, every
 * other character read once: a few percent of `JSON.parse`) that counts the keys of every object
 * and registers each object of {@link MinKeys} keys or more, up to {@link MaxDepth} levels deep,
 * with its count. {@link keyCount} then answers in O(1): the number of keys an object was written
 * with, or `undefined` for an object the census did not register (a small one, one too deep, one
 * not parsed here). A walker asks before it enumerates ({@link keysWithin}, {@link isEmpty}), and
 * leaves a large object unread, saying how many keys it holds.
 *
 * The transport's frame decoder registers (it parses every frame with {@link parse}); the
 * protocol's walks read (`Json.keysWithin` and `Json.isEmpty` of `@warden/protocol` are
 * {@link keysWithin} and {@link isEmpty}). Both import this module, so there is one registry: a
 * `WeakMap` of this module, which holds no object alive. Should a program load two copies of this
 * package, a walk reading the other copy's registry would only enumerate a large object it could
 * have skipped: slower, never a different answer.
 *
 * A count is never below the object's real number of keys: a key written twice in one object is
 * counted twice, and where a key is written twice in an object along the path, JSON.parse keeps the
 * last value, whose own record (written later) wins; an earlier twin's larger count can only stay
 * on an object smaller than it says. Erring large only makes a walker read less (a bound, never a
 * wrong answer: what is not read is never allowed by a rule and shown as "N more").
 *
 * @since 0.1.0
 */
import * as CensusScan from "./internal/CensusScan.js"

/**
 * Texts shorter than this are parsed without a census (they hold fewer than ~11,000 keys in all).
 *
 * @since 0.1.0
 */
export const ScanFrom = 64 * 1024

/**
 * Objects with fewer keys are not registered (`keyCount` is `undefined`; reading them is cheap).
 *
 * @since 0.1.0
 */
export const MinKeys = 64

/**
 * Objects nested deeper than this (the text's value is level 1) are not registered.
 *
 * @since 0.1.0
 */
export const MaxDepth = 32

/** The registry: the key count of every object registered, by the object. The only one. */
const counts = new WeakMap<object, number>()

/**
 * The number of keys `value` was written with, when the census registered it (an object of
 * `MinKeys` keys or more from a text `parse` scanned, or one given to `note`), else `undefined`.
 *
 * @since 0.1.0
 */
export const keyCount = (value: object): number | undefined => counts.get(value)

/**
 * Register the number of keys of an object built rather than parsed (an embedder's, a test's), so
 * walks leave it unread past their budgets as they do a frame's. Safe whatever the number: a count
 * above the real one only makes walks read less; one below it is found out when the keys are read
 * (`keysWithin` counts them).
 *
 * @since 0.1.0
 */
export const note = (value: object, keys: number): void => {
  counts.set(value, keys)
}

/**
 * One object `scan` found: where it is (keys as JSON string literals, array indices as numbers),
 * and its count.
 *
 * @since 0.1.0
 */
export type Found = CensusScan.Found

/**
 * Every object of `MinKeys` keys or more in a valid JSON text, up to `MaxDepth` levels, innermost
 * first in the order they close, without registering them. One pass, linear in the text.
 *
 * @since 0.1.0
 */
export const scan = (text: string): ReadonlyArray<Found> => CensusScan.scan(text, MinKeys, MaxDepth)

/**
 * The census of `value`, which is `JSON.parse(text)`: registers its large objects (for a text of
 * `ScanFrom` characters or more; a shorter one has nothing to register). `parse` is both steps;
 * this one is for a caller that times them apart.
 *
 * @since 0.1.0
 */
export const census = (text: string, value: unknown): void => {
  if (text.length < ScanFrom || typeof value !== "object" || value === null) return
  for (const { keys, path } of scan(text)) {
    const object = CensusScan.objectAt(value, path)
    if (object !== undefined) counts.set(object, keys)
  }
}

/**
 * `JSON.parse(text)`, and for a text of `ScanFrom` characters or more, the census of its large
 * objects (`keyCount`). Throws what `JSON.parse` throws.
 *
 * @example
 * ```ts
 * import { JsonCensus } from "@warden/json"
 *
 * const frame = JsonCensus.parse(line) as { params: object }
 * const { keys, count } = JsonCensus.keysWithin(frame.params, 100)
 * // keys is undefined when params has more than 100 keys: they were never enumerated
 * ```
 *
 * @since 0.1.0
 */
export const parse = (text: string): unknown => {
  const value: unknown = JSON.parse(text)
  census(text, value)
  return value
}

/**
 * The keys of an object, read only when there are few enough (`keysWithin`).
 *
 * @since 0.1.0
 */
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
 *
 * @since 0.1.0
 */
export const keysWithin = (value: object, max: number): Keys => {
  const known = counts.get(value)
  if (known !== undefined && known > max) return { keys: undefined, count: known }
  const keys = Object.keys(value)
  return { keys: keys.length > max ? undefined : keys, count: keys.length }
}

/**
 * Has `value` no own enumerable key? A registered object has `MinKeys` or more: it is never
 * enumerated here, so this is constant time for a large object of a frame.
 *
 * @since 0.1.0
 */
export const isEmpty = (value: object): boolean => {
  if (counts.has(value)) return false
  for (const key in value) if (Object.hasOwn(value, key)) return false
  return true
}
