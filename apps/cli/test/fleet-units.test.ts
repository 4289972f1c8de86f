/** The CLI's fleet pieces without a process: stdin group lines, the summary's worktree table, the board's grouped cards. */
import { assert, describe, it } from "@effect/vitest"
import type { Card } from "@warden/approvals"
import { Effect } from "effect"
import * as Board from "../src/terminal/Board.js"
import * as StdinDecisions from "../src/answering/StdinDecisions.js"
import * as Summary from "../src/terminal/Summary.js"
import * as RunState from "@warden/inbox/RunState"
import { unclaimedDrivers } from "./support/Fleet.js"

const commandCard = (id: string, item: number, command: string): Card.CardView => ({
  id,
  requestId: id,
  method: "item/commandExecution/requestApproval",
  threadId: `thr_${item}`,
  turnId: "turn_1",
  workItem: item,
  summary: { kind: "command", command, argv: command.split(" "), cwd: `/w/${item}`, reason: undefined },
  title: `run: ${command}`,
  offers: ["Accept", "Decline"],
  openedAt: 0,
  deadlineAt: 60_000
})

describe("cli fleet units", () => {
  it('stdin group lines: a group id and a decision; "always" and bad ids are refused with a reason', () => {
    assert.deepStrictEqual(StdinDecisions.parseLine(`{"group":"g0123456789abcdef","decision":"accept"}`), {
      _tag: "Group",
      group: "g0123456789abcdef",
      decision: { _tag: "Accept" }
    })
    const reason = (line: string) => {
      const v = StdinDecisions.parseLine(line)
      return v._tag === "Invalid" ? v.reason : `not invalid: ${line}`
    }
    assert.match(reason(`{"group":"c1","decision":"accept"}`), /not a group id/)
    assert.match(reason(`{"group":"g0123456789abcdef","decision":"always"}`), /one card at a time/)
    assert.match(reason(`{"group":"g0123456789abcdef"}`), /no "decision"/)
    assert.match(reason(`{"group":"g0123456789abcdef","decision":"sure"}`), /is not a decision/)
  })

  it("the summary lists each item's worktree: changed and kept, unchanged and removed, kept as it was on a git failure", () => {
    const tally = RunState.make(["a", "b", "c"], 0)
    const summary = (path: string, changed: boolean, kept: boolean, error?: string) => ({
      path,
      branch: `warden/r/${path}`,
      base: "b",
      head: "h",
      changed,
      kept,
      diffstat: "",
      files: changed ? 2 : 0,
      insertions: changed ? 3 : 0,
      deletions: changed ? 1 : 0,
      ...(error !== undefined ? { error } : {})
    })
    tally.items[0]!.worktree = summary("0", true, true)
    tally.items[1]!.worktree = summary("1", false, false)
    tally.items[2]!.worktree = summary("2", false, true, "git add: fatal")
    const lines = Summary.lines(tally, 0)
    const table = lines.slice(lines.findIndex((l) => l.startsWith("ITEM  BRANCH")))
    assert.match(table[1]!, /^0 +warden\/r\/0 +2 files \+3 -1, kept at 0$/)
    assert.match(table[2]!, /^1 +warden\/r\/1 +no change, removed$/)
    assert.match(table[3]!, /^2 +warden\/r\/2 +kept as it was: git add: fatal$/)
  })

  it.scoped("the board shows cards asking the same thing as one line with their count and items", () =>
    Effect.gen(function* () {
      const tally = RunState.make(["a", "b", "c", "d"], 0)
      for (const card of [
        commandCard("c1", 0, "pnpm test"),
        commandCard("c2", 1, "make lint"),
        commandCard("c3", 2, "pnpm test"),
        commandCard("c4", 3, "pnpm test")
      ]) {
        RunState.applyApprovalEvent(tally, { _tag: "CardOpened", card, at: 0 } as never)
      }
      let region: ReadonlyArray<string> = []
      // A terminal's screen: the board draws its rows only where they are shown.
      const screen = {
        live: true,
        region: (lines: ReadonlyArray<string>) => void (region = lines),
        err: () => {},
        out: () => {}
      } as never
      const board = yield* Board.make(screen, tally, { title: "t", now: () => 0 })
      board.redraw()
      const cardLines = region.filter((l) => /^ c\d/.test(l))
      assert.strictEqual(cardLines.length, 2)
      assert.match(cardLines[0]!, /^ c1 +3 items command +closes in +1:00 +run: pnpm test — 3 items \(0, 2, 3\)$/)
      assert.match(cardLines[1]!, /^ c2 +item 1 +command +closes in +1:00 +run: make lint$/)

      // Without a terminal (stderr a pipe) nothing is drawn, and the rows are not even worked out
      // (one per item at every event: a fleet's CPU for nobody).
      let asked = 0
      const pipe = { live: false, region: () => void asked++, err: () => {}, out: () => {} } as never
      const quiet = yield* Board.make(pipe, tally, { title: "t", now: () => 0 })
      quiet.redraw()
      assert.strictEqual(asked, 0)
    })
  )

  it("the summary keeps the last settlements (RunState.SettledKept) but counts every card per item, and says what it left out", () => {
    const tally = RunState.make(["a", "b"], 0)
    const total = RunState.SettledKept + 5
    for (let i = 0; i < total; i++) {
      const card = commandCard(`c${i}`, i % 2, "echo x")
      RunState.applyApprovalEvent(tally, { _tag: "CardOpened", card, at: 0 } as never)
      RunState.applyApprovalEvent(tally, {
        _tag: "CardSettled",
        settlement: {
          card,
          outcome: i % 2 === 0 ? "accepted" : "declined",
          source: { _tag: "Deadline" },
          written: true,
          settledAt: 1,
          latencyMs: 1
        }
      } as never)
    }
    assert.strictEqual(tally.settled.length, RunState.SettledKept)
    assert.strictEqual(tally.settled[0]!.card.id, "c5", "the oldest went first")
    assert.strictEqual(tally.settledCount, total)
    const lines = Summary.lines(tally, 0)
    assert.match(lines.find((l) => l.startsWith("0 "))!, / 503 accepted /)
    assert.match(lines.find((l) => l.startsWith("1 "))!, / 502 declined /)
    assert.include(lines, `(the last 1,000 of 1,005 cards; the ledger has them all: warden audit)`)
  })

  it("two drivers: a lane may change host only to a later claim of its item, taken before the request arrived", () => {
    const A = "10.0.0.1"
    const B = "10.0.0.2"
    const req = (seq: number, host: string, at: number) => ({ seq, lane: "i0", remoteAddress: host, receivedAtMs: at })
    const claim = (epoch: number, host: string, at: number) => ({
      item: "x",
      epoch,
      runner: `${host}:7100`,
      claimedAt: at
    })
    const item = () => "x"
    // A, then B after its claim (a move): fine.
    assert.deepStrictEqual(
      unclaimedDrivers([req(1, A, 10), req(2, B, 30)], [claim(1, A, 5), claim(2, B, 20)], item),
      []
    )
    // A, B, then A again with a claim back (the paused host got its shard back): fine.
    const back = [claim(1, A, 5), claim(2, B, 20), claim(3, A, 40)]
    assert.deepStrictEqual(unclaimedDrivers([req(1, A, 10), req(2, B, 30), req(3, A, 50)], back, item), [])
    // A again after B with no claim back: the woken host drove a thread it had lost.
    assert.lengthOf(
      unclaimedDrivers([req(1, A, 10), req(2, B, 30), req(3, A, 35)], [claim(1, A, 5), claim(2, B, 20)], item),
      1
    )
    // A's claim back came after A's request arrived: that request was sent before A held the item.
    assert.lengthOf(unclaimedDrivers([req(1, A, 10), req(2, B, 30), req(3, A, 35)], back, item), 1)
    // A request from a host that never held the item, and requests out of arrival order, sorted by seq.
    assert.lengthOf(unclaimedDrivers([req(2, B, 30), req(1, A, 10)], [claim(1, A, 5)], item), 1)
  })
})
