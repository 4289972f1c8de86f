/**
 * Every schedule that ever failed, replayed on every run (regressions.json): fixed engine bugs and
 * past false alarms of the checker must pass; known bugs are replayed without tolerance and must
 * still break the invariant they broke (when one is fixed, its entry flips to "fixed").
 */
import { assert, describe, it } from "@effect/vitest"
import { yieldNow } from "@warden/test-support/EventLoop"
import { loadRegressions } from "./Properties.js"
import { emptyStats, runSchedule, Strict, Violation } from "./World.js"

describe("schedules that once failed", () => {
  for (const regression of loadRegressions()) {
    it(`${regression.status}: ${regression.name}`, async () => {
      await yieldNow()
      if (regression.status !== "known-bug") {
        await runSchedule(regression.schedule, emptyStats())
        return
      }
      let broke: Violation | undefined
      try {
        await runSchedule(regression.schedule, emptyStats(), Strict)
      } catch (error) {
        if (!(error instanceof Violation)) throw error
        broke = error
      }
      assert.isDefined(broke, "this known bug no longer reproduces: mark it fixed (and drop its tolerance in World.ts)")
      assert.strictEqual(broke?.invariant, regression.invariant, broke?.message)
    })
  }
})
