import { assert, describe, it } from "@effect/vitest"
import { Config, RunId } from "@warden/supervisor"
import { Either, FastCheck as fc } from "effect"

const format = /^r[0-9a-z]{9}-[0-9a-f]{8}$/

describe("RunId", () => {
  it("is r, the time as 9 base-36 digits, -, 8 hex digits: no ':', and a valid SupervisorConfig.runId", () => {
    const id = RunId.make()
    assert.match(id, format)
    assert.match(RunId.make(0), /^r000000000-[0-9a-f]{8}$/)
    assert.strictEqual(
      RunId.make(Date.UTC(2026, 0, 1)).slice(0, 10),
      `r${Date.UTC(2026, 0, 1).toString(36).padStart(9, "0")}`
    )
    assert.isTrue(Either.isRight(Config.decode({ runId: id })))
  })

  it("its text order is its time order, across a change in the number of digits too", () => {
    const times = [
      0,
      35,
      36,
      1_295,
      1_296,
      Date.UTC(2026, 0, 1),
      Date.UTC(2026, 0, 1) + 1,
      36 ** 8 - 1,
      36 ** 8,
      36 ** 9 - 1
    ]
    const ids = times.map((t) => RunId.make(t))
    assert.deepStrictEqual([...ids].sort(), ids)
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 36 ** 9 - 2 }), fc.integer({ min: 1, max: 10 ** 12 }), (earlier, gap) => {
        const later = Math.min(earlier + gap, 36 ** 9 - 1)
        return RunId.make(earlier) < RunId.make(later)
      })
    )
  })

  it("ids made in the same millisecond differ", () => {
    const ids = new Set(Array.from({ length: 1_000 }, () => RunId.make(1_700_000_000_000)))
    assert.strictEqual(ids.size, 1_000)
  })
})
