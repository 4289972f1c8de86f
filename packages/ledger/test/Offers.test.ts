/**
 * `Offers` over a ledger that holds more cards than its window: the acceptance that asks is among
 * the cards an offer is made from (the newest), so a rule is still offered once the record has
 * grown past the window; `cards({ newest: true })` gives the newest, listed oldest first.
 */
import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import { Effect } from "effect"
import * as Path from "node:path"
import { Ledger, Offers, Remembering } from "../src/index.js"
import { commandParams, script, tempDir } from "./support.js"

const Cmd = "item/commandExecution/requestApproval"

describe("offers", () => {
  it.scoped(
    "a rule is offered from the newest cards: a ledger larger than the window still offers at an acceptance",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        const s = yield* script()
        yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const run = yield* ledger.beginRun()
          yield* run.attach(s.source)
          const accept = (line: string) =>
            Effect.gen(function* () {
              const card = yield* s.open(Cmd, commandParams("thr_1", "turn_1", line))
              yield* s.approvals.answer(card.id, Decision.Accept, "web")
              return card.id
            })
          // An older history the window leaves out: six cards of other commands.
          for (const line of ["ls", "pwd", "date", "whoami", "uname -a", "id"]) yield* accept(line)
          const ids = [yield* accept("make check"), yield* accept("make check"), yield* accept("make check")]
          yield* ledger.flush

          const all = yield* ledger.cards({ runId: run.id })
          assert.strictEqual(all.length, 9)
          const newest = yield* ledger.cards({ runId: run.id, newest: true, limit: 4 })
          assert.deepStrictEqual(
            newest.map((c) => c.cardId),
            all.slice(-4).map((c) => c.cardId),
            "the newest four, oldest first"
          )
          assert.deepStrictEqual(
            (yield* ledger.cards({ runId: run.id, limit: 4 })).map((c) => c.cardId),
            all.slice(0, 4).map((c) => c.cardId),
            "without newest: the oldest four, as before"
          )

          const remembering = yield* Remembering.make(ledger, run.id)
          // A window of four: the three "make check" acceptances and one card before them. Read from
          // the oldest, the window held none of them and nothing was offered.
          const offers = Offers.make(ledger, remembering, run.id, { rules: { rules: [] }, window: 4 })
          const offer = yield* offers.after(ids[2]!)
          assert.isDefined(offer, "the third acceptance offers a rule")
          assert.include(offer!.summary, "make check")
          assert.strictEqual(offer!.evidence, 3)
          assert.strictEqual(offer!.replay.cards, 4, "replayed over the window")
          // A window of two holds two of the three acceptances: below `min`, nothing is offered.
          const narrow = Offers.make(ledger, remembering, run.id, { rules: { rules: [] }, window: 2 })
          assert.isUndefined(yield* narrow.after(ids[2]!))
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
      })
  )
})
