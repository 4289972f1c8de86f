/**
 * The reading side of the transport's census of a frame's large objects (`JsonCensus` of
 * `@warden/transport`): how many keys an object the census registered has, known without
 * enumerating it (in V8 even a `for...in` that stops at once reads every key first).
 *
 * The transport registers the counts when it parses a frame; the protocol only asks. The two share
 * one registry per process (Effect's `globalValue` under the same name), not an import: the
 * protocol is pure data and never imports the transport, nor the transport the protocol
 * (docs/architecture.md, "Layering"). `keysWithin` and `isEmpty` here answer as the transport's
 * functions of the same names do (packages/protocol/test/KeyCensus.test.ts holds them together).
 */
import { GlobalValue } from "effect"

/** The census's registry (the transport's `JsonCensus` writes it): an object's key count, by the object. */
const counts = GlobalValue.globalValue(Symbol.for("@warden/JsonCensus/counts"), () => new WeakMap<object, number>())

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
 * come from a text the census scanned: then this costs what `Object.keys` costs). The answer is
 * the same either way, only the work differs.
 */
export const keysWithin = (value: object, max: number): Keys => {
  const known = counts.get(value)
  if (known !== undefined && known > max) return { keys: undefined, count: known }
  const keys = Object.keys(value)
  return { keys: keys.length > max ? undefined : keys, count: keys.length }
}

/** Has `value` no own enumerable key? (A registered object has 64 keys or more: never enumerated here.) */
export const isEmpty = (value: object): boolean => {
  if (counts.has(value)) return false
  for (const key in value) if (Object.prototype.hasOwnProperty.call(value, key)) return false
  return true
}
