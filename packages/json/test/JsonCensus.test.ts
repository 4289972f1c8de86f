import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { afterEach, vi } from "vitest"
import * as JsonCensus from "../src/JsonCensus.js"

/** `text` padded with blanks to the length from which `parse` takes a census (JSON allows them). */
const padded = (text: string) => text + " ".repeat(Math.max(0, JsonCensus.ScanFrom - text.length))

const wide = (n: number, key = (i: number) => `k${i}`) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [key(i), i]))

/** Every object of `value` with its depth (the value itself is level 1), up to `max` levels. */
const objects = (
  value: unknown,
  max: number,
  depth = 1,
  out: Array<[object, number]> = []
): Array<[object, number]> => {
  if (typeof value !== "object" || value === null || depth > max) return out
  if (!Array.isArray(value)) out.push([value, depth])
  for (const child of Array.isArray(value) ? value : Object.values(value)) objects(child, max, depth + 1, out)
  return out
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe("JsonCensus: the key counts of a text's large objects, without enumerating them", () => {
  it("every object of MinKeys keys or more is registered with its count; smaller ones are not", () => {
    // keys of any printable characters (quotes, backslashes, braces, `__proto__`), objects around MinKeys, nested in arrays and objects
    const key = fc.oneof(
      fc.string({ maxLength: 6 }),
      fc.constantFrom("__proto__", '"', "\\", "{", "}", "[", "]", ",", ":", '\\"')
    )
    const leaf = fc.oneof(fc.integer(), fc.string({ maxLength: 8 }), fc.constant(null), fc.boolean())
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: "small", withCrossShrink: true }, leaf, tie("array"), tie("object"), tie("large")),
      array: fc.array(tie("value"), { maxLength: 4 }),
      object: fc.dictionary(key, tie("value"), { maxKeys: 4 }),
      large: fc.dictionary(key, leaf, { minKeys: JsonCensus.MinKeys - 2, maxKeys: JsonCensus.MinKeys + 2 })
    }))
    fc.assert(
      fc.property(value, (v) => {
        const parsed = JsonCensus.parse(padded(JSON.stringify(v)))
        for (const [o, depth] of objects(parsed, JsonCensus.MaxDepth)) {
          const n = Object.keys(o).length
          assert.strictEqual(
            JsonCensus.keyCount(o),
            n >= JsonCensus.MinKeys && depth <= JsonCensus.MaxDepth ? n : undefined
          )
        }
      }),
      { numRuns: 200 }
    )
  })

  it("a key written twice: the count is never below the object JSON.parse keeps", () => {
    const big = JSON.stringify(wide(70))
    const first = JsonCensus.parse(padded(`{"a":${big},"a":{}}`)) as { a: object }
    assert.isAtLeast(JsonCensus.keyCount(first.a)!, Object.keys(first.a).length) // 70 for {}: it is read less, never more
    const last = JsonCensus.parse(padded(`{"a":{},"a":${big}}`)) as { a: object }
    assert.strictEqual(JsonCensus.keyCount(last.a), 70)
    const twice = JsonCensus.parse(padded(`{"b":{${Array.from({ length: 70 }, () => '"k":1').join(",")}}}`)) as {
      b: object
    }
    assert.strictEqual(Object.keys(twice.b).length, 1)
    assert.strictEqual(JsonCensus.keyCount(twice.b), 70)
  })

  it("objects deeper than MaxDepth and texts shorter than ScanFrom are not registered", () => {
    const big = JSON.stringify(wide(100))
    const deep = JsonCensus.parse(padded(`${"[".repeat(JsonCensus.MaxDepth)}${big}${"]".repeat(JsonCensus.MaxDepth)}`))
    const inner = (v: unknown): object => (Array.isArray(v) ? inner(v[0]) : (v as object))
    assert.strictEqual(JsonCensus.keyCount(inner(deep)), undefined)
    const atMax = JsonCensus.parse(
      padded(`${"[".repeat(JsonCensus.MaxDepth - 1)}${big}${"]".repeat(JsonCensus.MaxDepth - 1)}`)
    )
    assert.strictEqual(JsonCensus.keyCount(inner(atMax)), 100)
    assert.strictEqual(JsonCensus.keyCount(JsonCensus.parse(big) as object), undefined)
  })

  it("keysWithin: a registered object with more keys than asked is never enumerated; the answer is the same without the census", () => {
    const text = padded(JSON.stringify({ big: wide(5_000), small: wide(70), tiny: { a: 1 } }))
    const censused = JsonCensus.parse(text) as Record<string, object>
    const plain = JSON.parse(text) as Record<string, object>
    const keys = vi.spyOn(Object, "keys")
    try {
      assert.deepStrictEqual(JsonCensus.keysWithin(censused["big"]!, 1_000), { keys: undefined, count: 5_000 })
      assert.strictEqual(keys.mock.calls.length, 0)
      assert.isFalse(JsonCensus.isEmpty(censused["big"]!))
      assert.strictEqual(keys.mock.calls.length, 0)
    } finally {
      keys.mockRestore()
    }
    for (const name of ["big", "small", "tiny"]) {
      for (const max of [0, 1, 70, 1_000, 10_000]) {
        assert.deepStrictEqual(
          JsonCensus.keysWithin(censused[name]!, max),
          JsonCensus.keysWithin(plain[name]!, max),
          `${name} ${max}`
        )
      }
    }
    assert.isTrue(JsonCensus.isEmpty({}))
  })

  it("scan tells where each large object is; note registers an object built rather than parsed", () => {
    const text = JSON.stringify({ 'a"b': [1, { inner: wide(70) }], top: wide(64), small: wide(63) })
    assert.deepStrictEqual(JsonCensus.scan(text), [
      { path: ['"a\\"b"', 1, '"inner"'], keys: 70 },
      { path: ['"top"'], keys: 64 }
    ])
    const built = { a: 1 }
    assert.strictEqual(JsonCensus.keyCount(built), undefined)
    JsonCensus.note(built, 1_000)
    assert.strictEqual(JsonCensus.keyCount(built), 1_000)
    assert.deepStrictEqual(JsonCensus.keysWithin(built, 10), { keys: undefined, count: 1_000 })
  })
})
