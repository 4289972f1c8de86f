/**
 * The protocol reads the transport's census without importing the transport
 * (src/internal/KeyCensus.ts): what `JsonCensus` of `@warden/transport` registers, while it parses
 * a frame or by `note`, `Json.keysWithin` and `Json.isEmpty` see, and they answer as the
 * transport's own `keysWithin` and `isEmpty` do.
 */
import { assert, describe, it } from "@effect/vitest"
import * as JsonCensus from "@warden/transport/JsonCensus"
import { Json } from "../src/index.js"

const objectOf = (keys: number): Record<string, number> => Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, i]))

describe("Json reads the transport's census", () => {
  it("sees the counts the transport registered, by note or while it parsed a frame", () => {
    // A count above the real one (allowed: it only makes walks read less) shows whose answer it is.
    const noted = { a: 1 }
    JsonCensus.note(noted, 1_000)
    assert.deepStrictEqual(Json.keysWithin(noted, 10), { keys: undefined, count: 1_000 })
    assert.deepStrictEqual(Json.keysWithin({ a: 1 }, 10), { keys: ["a"], count: 1 })
    const proxy = new Proxy({}, { ownKeys: () => assert.fail("enumerated a registered object") })
    JsonCensus.note(proxy, 5_000)
    assert.deepStrictEqual(Json.keysWithin(proxy, 100), { keys: undefined, count: 5_000 })
    assert.isFalse(Json.isEmpty(proxy))

    const text = JSON.stringify({ big: objectOf(8_000), small: { a: 1 } })
    assert.isAtLeast(text.length, JsonCensus.ScanFrom)
    const frame = JsonCensus.parse(text) as { big: object; small: object }
    assert.strictEqual(JsonCensus.keyCount(frame.big), 8_000)
    assert.deepStrictEqual(Json.keysWithin(frame.big, 100), { keys: undefined, count: 8_000 })
    assert.deepStrictEqual(Json.keysWithin(frame.small, 100), JsonCensus.keysWithin(frame.small, 100))
  })

  it("answers as the transport's keysWithin and isEmpty on objects the census never saw", () => {
    for (const value of [{}, { a: 1 }, objectOf(10), objectOf(200), []]) {
      for (const max of [0, 1, 10, 1_000]) {
        assert.deepStrictEqual(Json.keysWithin(value, max), JsonCensus.keysWithin(value, max))
      }
      assert.strictEqual(Json.isEmpty(value), JsonCensus.isEmpty(value))
    }
  })
})
