/**
 * An engine left open with nothing to do keeps nothing alive: once its cards are settled, no
 * timer of its (a watch on its owner, a handler fiber waiting for work) holds the event loop, so a
 * program that forgot to close it still exits. Its deadline timer sleeps until the next deadline
 * it was set for, then ends when no card is left (`DeadlineTimer`: one sleeping fiber reused from
 * card to card): the fixture's deadline is 1 s.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { runFixture } from "./support.js"

describe("an engine left open", () => {
  it.live(
    "once its card is settled by the handler, the process exits by itself",
    () =>
      Effect.gen(function* () {
        const exited = yield* runFixture("idle-engine.ts").pipe(
          // Held by a timer, it would never exit: the deadline fails the test (nothing is timed).
          Effect.timeoutFail({
            duration: "60 seconds",
            onTimeout: () => new Error("the process did not exit by itself")
          })
        )
        assert.strictEqual(exited.out, "settled accepted\n", exited.err)
        assert.strictEqual(exited.code, 0, exited.err)
      }),
    90_000
  )
})
