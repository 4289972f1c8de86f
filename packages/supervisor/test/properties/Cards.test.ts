/**
 * Invariants 1, 2 and 8: what the wire carries for each server request. Schedules lean on server
 * requests of every kind (the ten methods and unknown ones, ids reused while open and after
 * settling), decisions by rules, handlers and people before, at and after deadlines, withdrawals
 * and turn ends. Every other invariant is checked too.
 */
import { assert, describe, it } from "@effect/vitest"
import { property } from "./Properties.js"

describe("schedules: answers and decisions", () => {
  const family = property({
    invariants: [1, 2, 8],
    title: "answers",
    weights: {
      start: 2,
      clientOps: 1,
      reply: 6,
      notify: 2,
      complete: 2,
      request: 8,
      resolve: 2,
      decide: 7,
      handler: 4,
      advance: 5,
      fault: 1,
      stopSupervisor: 1
    },
    runs: 3_500,
    maxSteps: 24,
    minWarm: 1,
    maxWarm: 3,
    scriptedHandler: 60
  })

  // The generator must keep producing what these invariants are about: a family that drifted to
  // trivial schedules would pass every invariant and prove nothing.
  it("its schedules ran and exercised answers, acceptances, deadlines and late decisions", () => {
    assert.isAtLeast(family.stats.schedules, family.runs)
    assert.isAbove(family.stats.answers, family.runs / 2)
    assert.isAbove(family.stats.acceptances, 0)
    assert.isAbove(family.stats.timeouts, 0)
    assert.isAbove(family.stats.late, 0)
  })
})
