/**
 * Invariants 3, 4 and 6: the connection's end and every deadline on our side. Schedules lean on
 * faults at any point (garbage, oversized and non-object frames, invalid UTF-8, truncation, write
 * and read failures, exits with and without drain), stops of work items and of the supervisor,
 * client requests answered with errors, overload or silence, and time across their deadlines.
 */
import { assert, describe, it } from "@effect/vitest"
import { property } from "./Properties.js"

describe("schedules: ends and deadlines", () => {
  const family = property({
    invariants: [3, 4, 6],
    title: "ends",
    weights: {
      start: 3,
      clientOps: 4,
      reply: 6,
      notify: 2,
      complete: 2,
      request: 4,
      resolve: 1,
      decide: 2,
      handler: 2,
      advance: 6,
      fault: 4,
      stopSupervisor: 2
    },
    runs: 3_000,
    maxSteps: 24,
    minWarm: 1,
    maxWarm: 3,
    scriptedHandler: 50
  })

  // Every schedule of this family must end its connection (faults, stops, teardown), or invariants
  // 3, 4 and 6 would have nothing to check.
  it("its schedules ran and each one ended its connection", () => {
    assert.isAtLeast(family.stats.schedules, family.runs)
    assert.isAtLeast(family.stats.connectionEnds, family.runs)
    assert.isAbove(family.stats.timeouts, 0)
  })
})
