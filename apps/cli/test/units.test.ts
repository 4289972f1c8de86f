/** The CLI's small pure pieces: durations, the stdin decision protocol, exit codes, prompt checks. */
import { assert, describe, it } from "@effect/vitest"
import type { Approvals, Card } from "@warden/approvals"
import { Chunk, Deferred, Duration, Effect, Either, Exit, Option, Stream } from "effect"
import * as Durations from "../src/contract/Durations.js"
import * as ExitCodes from "../src/contract/ExitCodes.js"
import * as Prompting from "../src/answering/Prompting.js"
import * as RunCommand from "../src/commands/RunCommand.js"
import * as Screen from "../src/terminal/Screen.js"
import * as StatePath from "../src/state/StatePath.js"
import * as StdinDecisions from "../src/answering/StdinDecisions.js"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

describe("cli units", () => {
  it("durations: 300ms, 5s, 2m, 15m, 1h, 1m30s, 1d, up to 36500d; nonsense, zero and longer are refused", () => {
    const ms = (text: string) => Either.map(Durations.parse(text), Duration.toMillis)
    assert.deepStrictEqual(
      ["300ms", "5s", "2m", "15m", "1h", "1m30s", "1.5s", "1d", "1d12h", "36500d"].map(ms),
      [300, 5_000, 120_000, 900_000, 3_600_000, 90_000, 1_500, 86_400_000, 129_600_000, 3_153_600_000_000].map(
        Either.right
      )
    )
    for (const bad of [
      "",
      "5",
      "5x",
      "s",
      "0s",
      "-1s",
      "1 h",
      "0d",
      "1w",
      "36500d1ms",
      "100000000d",
      `${"9".repeat(400)}d`
    ])
      assert.isTrue(Either.isLeft(Durations.parse(bad)), bad)
    assert.deepStrictEqual(
      [Durations.clock(899_500), Durations.clock(3_723_000), Durations.short(2_000)],
      ["15:00", "1:02:03", "2s"]
    )
  })

  it("stdin lines: the four words and structured answers; everything else is invalid with a reason", () => {
    assert.deepStrictEqual(StdinDecisions.parseLine(`{"cardId":"c1","decision":"accept"}`), {
      _tag: "Decision",
      cardId: "c1",
      decision: { _tag: "Accept" }
    })
    assert.deepStrictEqual(
      StdinDecisions.parseLine(`{"cardId":"c2","decision":{"action":"accept","content":{"colour":"red"}}}`),
      {
        _tag: "Decision",
        cardId: "c2",
        decision: { _tag: "Elicitation", action: "accept", content: { colour: "red" } }
      }
    )
    assert.deepStrictEqual(StdinDecisions.parseLine("   "), { _tag: "Blank" })
    const reasons = ["{", "[]", `{"decision":"accept"}`, `{"cardId":"c1"}`, `{"cardId":"c1","decision":"yes"}`].map(
      (l) => {
        const v = StdinDecisions.parseLine(l)
        return v._tag === "Invalid" ? v.reason : `not invalid: ${l}`
      }
    )
    assert.match(reasons[0]!, /^not JSON/)
    assert.match(reasons[1]!, /not a JSON object/)
    assert.match(reasons[2]!, /no "cardId"/)
    assert.match(reasons[3]!, /no "decision"/)
    assert.match(reasons[4]!, /"yes" is not one of/)
  })

  it("exit codes: connection loss wins, then any failure; all completed is 0", () => {
    assert.strictEqual(ExitCodes.forItems(["completed", "completed"]), 0)
    assert.strictEqual(ExitCodes.forItems(["completed", "interrupted"]), 1)
    assert.strictEqual(ExitCodes.forItems(["failed", "stalled"]), 1)
    assert.strictEqual(ExitCodes.forItems(["failed", "connection-lost"]), 3)
    assert.strictEqual(ExitCodes.forItems([]), 1)
  })

  it.effect("a PROMPT that looks like an option is refused unless it follows --", () =>
    Effect.gen(function* () {
      const refused = yield* Effect.exit(
        RunCommand.checkPrompts(["--modle", "x"], ["node", "bin", "run", "--modle", "x"])
      )
      assert.isTrue(Exit.isFailure(refused))
      assert.isTrue(
        Exit.isSuccess(
          yield* Effect.exit(RunCommand.checkPrompts(["--modle"], ["node", "bin", "run", "--", "--modle"]))
        )
      )
      assert.isTrue(
        Exit.isSuccess(
          yield* Effect.exit(RunCommand.checkPrompts(["- a list", "x"], ["node", "bin", "run", "- a list", "x"]))
        )
      )
    })
  )

  it("board lines are cut to the terminal width, styles kept and reset", () => {
    assert.strictEqual(Screen.fit("short", 10), "short")
    assert.strictEqual(Screen.fit("\u001b[1mabcdefghij\u001b[22m", 5), "\u001b[1mabcd…\u001b[0m")
  })

  it.effect(
    "--state: a path that cannot hold a file is a usage error (exit 2), checked without creating anything",
    () =>
      Effect.gen(function* () {
        const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-statepath-"))
        try {
          const aFile = Path.join(dir, "a-file")
          Fs.writeFileSync(aFile, "")
          const refused = (path: string) => Effect.flip(StatePath.forRun(Option.some(path), false))
          const proc = yield* refused("/proc/warden-none/ledger.db")
          assert.strictEqual(proc.code, ExitCodes.Usage)
          assert.match(
            proc.message ?? "",
            /--state \/proc\/warden-none\/ledger\.db: cannot hold the ledger: \/proc is on a proc filesystem/
          )
          assert.match((yield* refused("/sys/warden.db")).message ?? "", /\/sys is on a sysfs filesystem/)
          assert.match((yield* refused(dir)).message ?? "", /exists and is not a regular file/)
          assert.match((yield* refused("/dev/null")).message ?? "", /exists and is not a regular file/)
          assert.match((yield* refused(Path.join(aFile, "x", "ledger.db"))).message ?? "", /a-file is not a directory/)
          const fine = Path.join(dir, "new", "deeper", "ledger.db")
          assert.strictEqual(yield* StatePath.forRun(Option.some(fine), false), fine)
          assert.isFalse(Fs.existsSync(Path.join(dir, "new")), "nothing was created")
          assert.strictEqual(yield* StatePath.forRun(Option.none(), true), undefined)
        } finally {
          Fs.rmSync(dir, { recursive: true, force: true })
        }
      })
  )

  describe("the terminal prompt's open cards", () => {
    const card = (id: string, openedAt: number) => ({ id, openedAt }) as unknown as Card.CardView
    const opened = (c: Card.CardView): Approvals.InboxUpdate => ({ _tag: "Opened", card: c })
    const settled = (c: Card.CardView) =>
      ({ _tag: "Settled", settlement: { card: c } }) as unknown as Approvals.InboxUpdate
    const ids = (cards: ReadonlyArray<Card.CardView>) => cards.map((c) => c.id)
    const c1 = card("c1", 1)
    const c2 = card("c2", 2)
    const c3 = card("c3", 3)

    it("a batch is applied whole: a card opened and settled in one batch is never open", () => {
      const snapshot = Prompting.afterUpdates([], [{ _tag: "Snapshot", cards: [c2, c1] }])
      assert.deepStrictEqual(ids(snapshot), ["c1", "c2"], "oldest first")
      assert.deepStrictEqual(ids(Prompting.afterUpdates(snapshot, [opened(c3), settled(c3)])), ["c1", "c2"])
      assert.deepStrictEqual(
        ids(Prompting.afterUpdates(snapshot, [opened(c2), opened(c3), settled(c1)])),
        ["c2", "c3"],
        "an Opened of a card already there adds nothing"
      )
    })

    it.scoped(
      "the prompt's state changes once per chunk of inbox updates: it never holds a card opened and settled in one chunk",
      () =>
        Effect.gen(function* () {
          const go = yield* Deferred.make<void>()
          const updates = Stream.fromChunks(
            Chunk.of<Approvals.InboxUpdate>({ _tag: "Snapshot", cards: [c1] }),
            Chunk.make(opened(c2), settled(c2)),
            Chunk.of(settled(c1))
          )
          const open = yield* Prompting.openCards(
            Stream.concat(Stream.drain(Stream.fromEffect(Deferred.await(go))), updates)
          )
          const states: Array<ReadonlyArray<string>> = []
          yield* open.changes.pipe(
            Stream.runForEach((cards) => Effect.sync(() => states.push(ids(cards)))),
            Effect.forkScoped
          )
          yield* Effect.yieldNow().pipe(Effect.repeat({ until: () => states.length > 0, times: 100 }))
          yield* Deferred.succeed(go, undefined)
          yield* Effect.yieldNow().pipe(Effect.repeat({ until: () => states.length >= 4, times: 100 }))
          assert.deepStrictEqual(states, [[], ["c1"], ["c1"], []])
        })
    )
  })
})
