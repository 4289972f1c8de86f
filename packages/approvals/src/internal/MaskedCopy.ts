/**
 * Masked copies of values (tool inputs, arguments, permissions, audit records): a value under a
 * secret-looking key is `Mask` whole, every string is masked as text (`Masking`).
 *
 * Inputs are never mutated and never trusted: objects are copied through property descriptors (a
 * getter is not called: it is masked), cycles are masked, non-plain objects (class instances,
 * Maps, Proxies that misbehave) are masked, depth, breadth and the copy's total size are bounded,
 * and a copy stops once its value and character budgets are spent (`MaskOptions`). Objects' keys
 * are read within a budget too (`maxKeys`): in V8, reading any of an object's keys reads all of
 * them, so a copy asks an object's size first (`Json.keysWithin`) and leaves a larger one unread.
 */
import { Json } from "@warden/protocol"
import type { MaskOptions } from "../SecretMask.js"
import { Elided, looksSecretShown, Mask, maskShown, maskText, truncate } from "./Masking.js"
import { isSecretKey } from "./SecretKeys.js"

const Defaults = {
  maxDepth: 8,
  maxEntries: 100,
  maxString: 2_000,
  maxValues: 2_000,
  maxTotal: 100_000,
  maxKeys: 20_000
} as const

const settings = (options: MaskOptions | undefined) => ({
  maxDepth: options?.maxDepth ?? Defaults.maxDepth,
  maxEntries: options?.maxEntries ?? Defaults.maxEntries,
  maxString: options?.maxString ?? Defaults.maxString,
  /** What is left of `maxValues`, `maxTotal` and `maxKeys` while one copy is made. */
  values: options?.maxValues ?? Defaults.maxValues,
  chars: options?.maxTotal ?? Defaults.maxTotal,
  keys: options?.maxKeys ?? Defaults.maxKeys
})

type Settings = ReturnType<typeof settings>

const define = (target: Record<string, unknown>, key: string, value: unknown) => {
  // A key named "__proto__" through defineProperty, so it is a plain key of the copy, not its
  // prototype; any other key by assignment (defineProperty on each key made a copy ~1.7x slower:
  // every JSON line and ledger row is made through here). The copy is a fresh plain object with no
  // setters, so an assignment defines an own, enumerable, writable property as defineProperty did.
  if (key === "__proto__")
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
  else target[key] = value
}

/** A string as a copy shows it: masked, cut to `maxString` and to what is left of `maxTotal`. */
const maskString = (value: string, s: Settings): string => {
  const max = Math.min(s.maxString, s.chars)
  if (max <= 0 && value.length > 0) return Elided
  const shown = maskShown(value, max)
  s.chars -= shown.length
  return shown
}

/**
 * The masked copy. Bounded whatever the input: `maxDepth` levels (so no deep input reaches the
 * stack), `maxEntries` per object or array, `maxValues` values and `maxTotal` characters of strings
 * in all, each string scanned over what can be shown (`maskShown`).
 */
const maskAny = (value: unknown, depth: number, ancestors: Array<object>, s: Settings): unknown => {
  if (s.values <= 0) return Elided
  s.values--
  switch (typeof value) {
    case "string":
      return maskString(value, s)
    case "number":
    case "boolean":
    case "undefined":
      return value
    case "bigint":
      return maskString(value.toString(), s)
    case "object":
      break
    default:
      return Mask // functions, symbols
  }
  if (value === null) return null
  if (depth >= s.maxDepth || ancestors.includes(value)) return Mask
  ancestors.push(value)
  try {
    if (Array.isArray(value)) {
      if (Object.getPrototypeOf(value) !== Array.prototype) return Mask
      const length = value.length
      const out: Array<unknown> = []
      let i = 0
      for (; i < Math.min(length, s.maxEntries) && s.values > 0; i++) {
        const d = Object.getOwnPropertyDescriptor(value, String(i))
        out.push(d === undefined ? undefined : "value" in d ? maskAny(d.value, depth + 1, ancestors, s) : Mask)
      }
      if (i < length) out.push(`… ${length - i} more`)
      return out
    }
    const proto = Object.getPrototypeOf(value)
    if (proto !== Object.prototype && proto !== null) return Mask
    const out: Record<string, unknown> = {}
    // Read only when its keys fit in what is left of the budget (a large object of a frame is not
    // enumerated at all: its size is known), and charged whole: reading costs every key.
    const read = Json.keysWithin(value, s.keys)
    if (read.keys === undefined) {
      define(out, "…", `${read.count} more keys`)
      return out
    }
    s.keys -= read.count
    const keys = read.keys
    let n = 0
    for (const key of keys) {
      if (n >= s.maxEntries || s.values <= 0) {
        define(out, "…", `${keys.length - n} more keys`)
        break
      }
      const d = Object.getOwnPropertyDescriptor(value, key)
      if (d === undefined) continue
      const shownKey = looksSecretShown(key, 200) ? `${Mask}${n}` : truncate(key, 200)
      if (isSecretKey(key) || !("value" in d)) {
        s.values-- // a masked value costs one value of the budget, as any other
        define(out, shownKey, Mask)
      } else {
        define(out, shownKey, maskAny(d.value, depth + 1, ancestors, s))
      }
      n++
    }
    return out
  } catch {
    return Mask
  } finally {
    ancestors.pop()
  }
}

/**
 * A JSON value as an exit writes it (an audit record, a `--json` line), masked.
 *
 * Every string and key goes through `maskText`, and a value under a secret-looking key is replaced
 * whole by `Mask` (what masking strings alone cannot know: `{password: "hunter2"}` has no
 * secret-looking string). Not cut or bounded otherwise; nesting deeper than `maxDepth` is `Elided`.
 */
export const maskJson = (value: unknown, maxDepth = 32): unknown => {
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return maskText(v)
    if (typeof v !== "object" || v === null) return v
    if (depth >= maxDepth) return Elided
    if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1))
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(v)) {
      define(out, maskText(key), isSecretKey(key) ? Mask : walk((v as Record<string, unknown>)[key], depth + 1))
    }
    return out
  }
  try {
    return walk(value, 0)
  } catch {
    return Mask
  }
}

/** The value stored under `key`, masked (all of it if the key looks secret, else what in it looks secret). */
export const maskValue = (key: string, value: unknown, options?: MaskOptions): unknown => {
  try {
    if (isSecretKey(key)) return Mask
    return maskAny(value, 0, [], settings(options))
  } catch {
    return Mask
  }
}

/**
 * A masked copy of a record (tool inputs, arguments). `null`/`undefined` give `{}`; a value that is
 * not a plain record is kept under the key `"(value)"`; a record that cannot be read gives
 * `{ "(value)": Mask }`.
 */
export const maskRecord = (obj: unknown, options?: MaskOptions): Readonly<Record<string, unknown>> => {
  if (obj === null || obj === undefined) return {}
  try {
    const masked = maskAny(obj, 0, [], settings(options))
    if (typeof masked === "object" && masked !== null && !Array.isArray(masked))
      return masked as Record<string, unknown>
    return { "(value)": masked }
  } catch {
    return { "(value)": Mask }
  }
}
