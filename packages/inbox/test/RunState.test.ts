/** The run's state: one reducer for an item's row, shared by the CLI's board and the inbox's item list. */
import { assert, describe, it } from "@effect/vitest"
import { Exit } from "effect"
import * as Board from "../src/internal/Board.js"
import * as RunState from "../src/RunState.js"

describe("RunState", () => {
  it("one reducer for an item's row: the inbox's item list and the run state agree on status, activity, tokens and times", () => {
    const tally = RunState.make(["fix it"], 0)
    const board = Board.make([{ id: 0, prompt: "fix it" }])
    const events: ReadonlyArray<Parameters<typeof RunState.applySupervisorEvent>[1]> = [
      { _tag: "Work", event: { _tag: "ThreadReady", item: 0, threadId: "thr_1", resumed: false } } as never,
      {
        _tag: "Work",
        event: { _tag: "TurnStarted", item: 0, threadId: "thr_1", turnId: "t1", prompt: "fix it" }
      } as never,
      {
        _tag: "Work",
        event: {
          _tag: "Notification",
          item: 0,
          threadId: "thr_1",
          method: "item/started",
          params: { item: { type: "commandExecution", command: "pnpm test" } }
        }
      } as never,
      {
        _tag: "Work",
        event: {
          _tag: "Notification",
          item: 0,
          threadId: "thr_1",
          method: "thread/tokenUsage/updated",
          params: { tokenUsage: { total: { totalTokens: 1234 } } }
        }
      } as never,
      { _tag: "Work", event: { _tag: "ThreadStartedFresh", item: 0, threadId: "thr_2" } } as never
    ]
    events.forEach((event, i) => {
      RunState.applySupervisorEvent(tally, event, 100 + i)
      const row = board.onSupervisorEvent(event, 100 + i)
      assert.isDefined(row, `event ${i} changed the row`)
      const item = tally.items[0]!
      assert.deepInclude(row!, {
        status: item.status,
        threadId: item.threadId ?? null,
        activity: item.activity,
        tokens: item.tokens ?? null,
        startedAt: item.startedAt ?? null
      })
    })
    assert.strictEqual(tally.items[0]!.activity, "starting a new thread")
    // The same token count again changes nothing (no event for the page).
    assert.isUndefined(board.onSupervisorEvent(events[3]!, 200))
    const finished = { _tag: "ItemFinished", item: 0, exit: Exit.interrupt(0 as never) } as never
    RunState.applySupervisorEvent(tally, finished, 300)
    assert.deepInclude(board.onSupervisorEvent(finished, 300)!, {
      status: "interrupted",
      finishedAt: 300,
      error: "the work item was stopped"
    })
    assert.strictEqual(tally.items[0]!.status, "interrupted")
  })
})
