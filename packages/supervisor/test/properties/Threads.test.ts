/**
 * Invariants 5 and 7: each thread's events, in order, not delayed by another thread's open card,
 * including the ones packed right behind a thread/start response and frames cut at any byte
 * (inside a multi-byte character too). Schedules lean on several work items, notifications of
 * every kind and cards left open on other threads.
 */
import { assert, describe, it } from "@effect/vitest"
import { property } from "./Properties.js"

describe("schedules: thread events", () => {
  const family = property({
    invariants: [5, 7],
    title: "events",
    weights: {
      start: 2,
      clientOps: 1,
      reply: 8,
      notify: 12,
      complete: 2,
      request: 6,
      resolve: 1,
      decide: 1,
      handler: 1,
      advance: 1,
      fault: 1,
      stopSupervisor: 1
    },
    runs: 2_000,
    maxSteps: 24,
    minWarm: 2,
    maxWarm: 3,
    scriptedHandler: 25
  })

  // Head-of-line blocking can only be seen if events are delivered while another thread's card is
  // open: the generator must keep producing that.
  it("its schedules ran and delivered events past other threads' open cards", () => {
    assert.isAtLeast(family.stats.schedules, family.runs)
    assert.isAbove(family.stats.delivered, family.runs)
    assert.isAbove(family.stats.deliveredPastOpenCards, 0)
  })
})
