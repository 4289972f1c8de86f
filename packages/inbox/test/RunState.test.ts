/** The run's state: one reducer for an item's row, shared by the CLI's board and the inbox's item list. */
import { assert, describe, it } from "@effect/vitest"
import { Exit, FastCheck } from "effect"
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

  it("what an item waits for is its open cards in the order they opened, however cards of several items open and settle", () => {
    // The reference: every open card read, as the run state did before it kept them by item.
    const expected = (open: ReadonlyArray<{ id: string; item: number }>, item: number) => {
      const ids = open.filter((c) => c.item === item).map((c) => c.id)
      return ids.length > 0 ? `waiting for approval (${ids.join(", ")})` : undefined
    }
    const step = FastCheck.oneof(
      FastCheck.record({ kind: FastCheck.constant("open" as const), item: FastCheck.integer({ min: 0, max: 2 }) }),
      FastCheck.record({ kind: FastCheck.constant("settle" as const), pick: FastCheck.nat() }),
      FastCheck.record({ kind: FastCheck.constant("work" as const), item: FastCheck.integer({ min: 0, max: 2 }) })
    )
    FastCheck.assert(
      FastCheck.property(FastCheck.array(step, { maxLength: 40 }), (steps) => {
        const tally = RunState.make(["a", "b", "c"], 0)
        const open: Array<{ id: string; item: number }> = []
        let n = 0
        for (const s of steps) {
          if (s.kind === "open") {
            const id = `c${n++}`
            // An item's id as a number or as a string of digits: the same item.
            const card = { id, workItem: n % 2 === 0 ? s.item : String(s.item) }
            RunState.applyApprovalEvent(tally, { _tag: "CardOpened", card } as never)
            open.push({ id, item: s.item })
            assert.strictEqual(tally.items[s.item]!.activity, expected(open, s.item))
          } else if (s.kind === "settle") {
            if (open.length === 0) continue
            const [gone] = open.splice(s.pick % open.length, 1)
            const card = { id: gone!.id, workItem: gone!.item }
            RunState.applyApprovalEvent(tally, {
              _tag: "CardSettled",
              settlement: { card, outcome: "accepted" }
            } as never)
            assert.strictEqual(
              tally.items[gone!.item]!.activity,
              expected(open, gone!.item) ?? `card ${gone!.id} accepted`
            )
          } else {
            RunState.applySupervisorEvent(
              tally,
              {
                _tag: "Work",
                event: { _tag: "Notification", item: s.item, threadId: "t", method: "item/completed", params: {} }
              } as never,
              1
            )
            assert.strictEqual(tally.items[s.item]!.activity, expected(open, s.item) ?? "working")
          }
        }
        assert.strictEqual(tally.openCards.size, open.length)
      })
    )
  })
})
