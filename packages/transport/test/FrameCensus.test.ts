/**
 * The transport takes the census of `@warden/json` of every frame it parses, and its
 * `JsonCensus` (moved to `@warden/json`, re-exported for one release) is that census: the same
 * functions, one registry.
 */
import { assert, describe, it } from "@effect/vitest"
import { JsonCensus } from "@warden/json"
import * as Moved from "@warden/transport/JsonCensus"
import { JsonCensus as FromIndex } from "../src/index.js"
import * as FrameDecoder from "../src/internal/FrameDecoder.js"

const wide = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]))

describe("the transport and the census of @warden/json", () => {
  it("FrameDecoder takes the census of every frame of ScanFrom characters or more", () => {
    const frame = JSON.stringify({ id: 1, method: "m", params: { big: wide(20_000) } })
    assert.isAbove(frame.length, JsonCensus.ScanFrom)
    const batch = FrameDecoder.make().push(new TextEncoder().encode(`${frame}\n`))
    const params = batch.frames[0]!["params"] as { big: object }
    assert.strictEqual(JsonCensus.keyCount(params.big), 20_000)
  })

  it("the transport's JsonCensus (its index and its ./JsonCensus entry point) re-exports it", () => {
    for (const moved of [Moved, FromIndex]) {
      for (const name of [
        "census",
        "isEmpty",
        "keyCount",
        "keysWithin",
        "MaxDepth",
        "MinKeys",
        "note",
        "parse",
        "scan",
        "ScanFrom"
      ] as const) {
        assert.strictEqual(moved[name], JsonCensus[name], name)
      }
    }
  })
})
