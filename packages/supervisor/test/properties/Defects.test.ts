/**
 * Invariants 0, 4 and 9 under defects: handlers that throw, return a number, return a Promise
 * (resolving or rejecting), die, never return or sit in an uninterruptible region; the embedder's
 * tracer throwing on the read loop (a card's span created) or inside a card's settlement (its span
 * ended, from a decision, a close or the deadline timer's callback); the app-server closing its
 * stdout and staying alive (trapping SIGTERM or not); and every ordinary fault. The slot restarts
 * (policy "fail"): after the steps a new work item must be served (invariant 9). Every other
 * invariant is checked too.
 */
import { assert, describe, it } from "@effect/vitest"
import { property } from "./Properties.js"

describe("schedules: defects and restarts", () => {
  const family = property({
    invariants: [0, 4, 9],
    title: "defects",
    defects: true,
    weights: {
      start: 2,
      clientOps: 2,
      reply: 6,
      notify: 2,
      complete: 2,
      request: 8,
      resolve: 1,
      decide: 3,
      handler: 3,
      advance: 6,
      fault: 2,
      stopSupervisor: 0,
      defect: 4
    },
    runs: 1_500,
    maxSteps: 20,
    minWarm: 1,
    maxWarm: 2,
    scriptedHandler: 80
  })

  // The generator must keep producing the defects this family is about, and the restarts after them.
  it("its schedules ran, injected every kind of defect, restarted the app-server and served new work after it", () => {
    assert.isAtLeast(family.stats.schedules, family.runs)
    const injected = family.stats.injected
    // Each kind is a few percent of the schedules: checked when there are enough of them.
    if (family.runs >= 300) {
      for (const kind of [
        "handler throw",
        "handler number",
        "handler promise",
        "handler reject",
        "handler pending",
        "handler never",
        "handler stubborn",
        "handler stubbornSleep",
        "stdout closed, peer alive",
        "tracer: card span created",
        "tracer: card span ended",
        "tracer: card span ended by the deadline timer"
      ]) {
        assert.isAbove(injected[kind] ?? 0, 0, `no "${kind}" was injected`)
      }
      assert.isAbove(family.stats.endReasons["InternalDefect"] ?? 0, 0)
      assert.isAbove(family.stats.endReasons["StdoutClosed"] ?? 0, 0)
    }
    assert.isAbove(family.stats.reconnects, 0)
    assert.isAbove(family.stats.servedAfterRestart, 0)
    assert.isAtLeast(family.stats.served, family.runs / 2)
  })
})
