/**
 * `Json.keysWithin`, `Json.isEmpty` and `Json.Keys` are the census's of `@warden/json`: what it
 * registers (while the transport parses a frame, or by `note`) the protocol's walks see, through
 * one registry, with no copy of the rule.
 */
import { assert, describe, it } from "@effect/vitest"
import { JsonCensus } from "@warden/json"
import { Json } from "../src/index.js"

const objectOf = (keys: number): Record<string, number> =>
  Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, i]))

describe("Json reads the census of @warden/json", () => {
  it("is the census's keysWithin and isEmpty", () => {
    assert.strictEqual(Json.keysWithin, JsonCensus.keysWithin)
    assert.strictEqual(Json.isEmpty, JsonCensus.isEmpty)
  })

  it("a registered object is never enumerated", () => {
    const proxy = new Proxy({}, { ownKeys: () => assert.fail("enumerated a registered object") })
    JsonCensus.note(proxy, 5_000)
    assert.deepStrictEqual(Json.keysWithin(proxy, 100), { keys: undefined, count: 5_000 })
    assert.isFalse(Json.isEmpty(proxy))

    const text = JSON.stringify({ big: objectOf(8_000), small: { a: 1 } })
    assert.isAtLeast(text.length, JsonCensus.ScanFrom)
    const frame = JsonCensus.parse(text) as { big: object; small: object }
    assert.deepStrictEqual(Json.keysWithin(frame.big, 100), { keys: undefined, count: 8_000 })
    assert.deepStrictEqual(Json.keysWithin(frame.small, 100), { keys: ["a"], count: 1 })
  })
})
