/**
 * `Offers` over a ledger that holds more cards than its window: the acceptance that asks is among
 * the cards an offer is made from (the newest), so a rule is still offered once the record has
 * grown past the window; `cards({ newest: true })` gives the newest, listed oldest first.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import * as Path from "node:path"
import { Ledger, Offers, Remembering } from "../src/index.js"
import { acceptCommand, attachedRun, script, tempDir } from "./support.js"

describe("offers", () => {
  it.scoped(
    "a rule is offered from the newest cards: a ledger larger than the window still offers at an acceptance",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        const s = yield* script()
        yield* Effect.gen(function* () {
          const { ledger, run } = yield* attachedRun(s.source)
          const accept = (line: string) => acceptCommand(s, line)
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

  it.scoped(
    "the record read in pages: `before` continues a read of the newest where the page before ended, ties of the opening time included, and an offer reads past one page",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        const s = yield* script()
        yield* Effect.gen(function* () {
          const { ledger, run } = yield* attachedRun(s.source)
          // More than a page; under the test clock every card opens at the same time, so the order
          // (and a page's end) is decided by the run and the card id alone.
          const total = Offers.PageSize + 234
          let last = ""
          for (let i = 0; i < total; i++) {
            const make = i % 2 === 0
            const id = yield* acceptCommand(s, make ? "make check" : `cat f-${i}`, `turn_${i}`)
            if (make) last = id
          }
          yield* ledger.flush
          const all = yield* ledger.cards({ newest: true, limit: total })
          assert.strictEqual(all.length, total)
          assert.strictEqual(new Set(all.map((c) => c.openedAt)).size, 1, "one opening time: every page ends in a tie")

          // Pages of 7 from the newest, each continuing before the oldest of the last: the whole read.
          const pages: Array<ReadonlyArray<Ledger.CardRecord>> = []
          let before: Ledger.CardPosition | undefined
          for (;;) {
            const page = yield* ledger.cards({ newest: true, limit: 7, ...(before ? { before } : {}) })
            if (page.length === 0) break
            pages.push(page)
            before = { openedAt: page[0]!.openedAt, runId: page[0]!.runId, cardId: page[0]!.cardId }
          }
          assert.deepStrictEqual(
            pages
              .reverse()
              .flat()
              .map((c) => c.cardId),
            all.map((c) => c.cardId)
          )
          // Before the oldest: nothing; before the newest: all the others, oldest first.
          const first = all[0]!
          assert.deepStrictEqual(
            yield* ledger.cards({ before: { openedAt: first.openedAt, runId: first.runId, cardId: first.cardId } }),
            []
          )
          const newest = all[all.length - 1]!
          assert.deepStrictEqual(
            (yield* ledger.cards({
              limit: total,
              before: { openedAt: newest.openedAt, runId: newest.runId, cardId: newest.cardId }
            })).map((c) => c.cardId),
            all.slice(0, -1).map((c) => c.cardId)
          )

          // An offer over a window wider than a page reads all of it (its replay says how many).
          const remembering = yield* Remembering.make(ledger, run.id)
          const offers = Offers.make(ledger, remembering, run.id, { rules: { rules: [] }, window: total + 100 })
          const offer = yield* offers.after(last)
          assert.isDefined(offer)
          assert.strictEqual(offer!.replay.cards, total)
          assert.strictEqual(offer!.evidence, total / 2)
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
      }),
    120_000
  )

  it.scoped("an offer over a ledger that cannot be read: none, and a warning that says why", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      const s = yield* script()
      const logged: Array<string> = []
      const capture = Logger.make(({ logLevel, message }) => {
        logged.push(`${logLevel.label} ${String(Array.isArray(message) ? message.join(" ") : message)}`)
      })
      yield* Effect.gen(function* () {
        const { ledger, run } = yield* attachedRun(s.source)
        const id = yield* acceptCommand(s, "make check")
        const remembering = yield* Remembering.make(ledger, run.id)
        // The same ledger, its reads failing (a file gone, a lock held past its timeout).
        const failing = {
          ...ledger,
          cards: () => Effect.fail(new Ledger.LedgerError({ reason: "Sql", detail: "the database is locked" }))
        }
        const offers = Offers.make(failing, remembering, run.id, { rules: { rules: [] }, min: 1 })
        assert.isUndefined(yield* offers.after(id).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture))))
        assert.deepStrictEqual(logged, [
          `WARN no rule is offered for card ${id}: the ledger could not be read (ledger: the database is locked)`
        ])
        // The same acceptance over the ledger itself offers the rule (what failed was the read).
        const offer = yield* Offers.make(ledger, remembering, run.id, { rules: { rules: [] }, min: 1 }).after(id)
        assert.isDefined(offer)
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
    })
  )

  it.scoped("a card filter whose numbers are not finite is refused (Invalid), never read as no card", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      const s = yield* script()
      yield* Effect.gen(function* () {
        const { ledger, run } = yield* attachedRun(s.source)
        const id = yield* acceptCommand(s, "make check")
        yield* ledger.flush
        const [card] = yield* ledger.cards({ runId: run.id })
        assert.strictEqual(card!.cardId, id)
        const refused = (filter: Ledger.CardFilter) =>
          Effect.map(Effect.flip(ledger.cards(filter)), (e) => [e.reason, e.detail] as const)
        assert.deepStrictEqual(yield* refused({ before: { openedAt: Number.NaN, runId: run.id, cardId: id } }), [
          "Invalid",
          "the card filter's before.openedAt is not a finite number (NaN)"
        ])
        assert.deepStrictEqual((yield* refused({ from: Number.POSITIVE_INFINITY }))[0], "Invalid")
        assert.deepStrictEqual((yield* refused({ limit: Number.NaN }))[0], "Invalid")
        assert.deepStrictEqual(
          yield* refused({ before: { openedAt: card!.openedAt } as unknown as Ledger.CardPosition }),
          ["Invalid", "the card filter's before needs the openedAt, runId and cardId of a card"]
        )
        assert.deepStrictEqual(
          (yield* refused({ before: { runId: run.id, cardId: id } as unknown as Ledger.CardPosition }))[0],
          "Invalid"
        )
        // A finite position reads as before: the card is not before itself, and is before a later time.
        assert.deepStrictEqual(
          yield* ledger.cards({ before: { openedAt: card!.openedAt, runId: run.id, cardId: id } }),
          []
        )
        assert.strictEqual(
          (yield* ledger.cards({ before: { openedAt: card!.openedAt + 1, runId: run.id, cardId: id } })).length,
          1
        )
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
    })
  )
})
