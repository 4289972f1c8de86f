/**
 * What an offer costs the event loop at a person's acceptance (`Offers.after`), over a ledger of N
 * cards (a third of them acceptances of one command, the rest of 500 others):
 *
 *   node --import tsx packages/ledger/test/measure-offers.ts 10000
 *
 * Prints the time of reading the newest 10,000 cards (`ledger.cards`), then of three offers, each
 * with the longest the event loop went without a turn meanwhile (a 1 ms interval's gaps). Not a
 * test: numbers for docs/ledger.md; run it on a quiet machine.
 */
import { Effect } from "effect"
import * as Path from "node:path"
import { Ledger, Offers, Remembering } from "../src/index.js"
import { acceptCommand, attachedRun, script, tempDir } from "./support.js"

const N = Number(process.argv[2] ?? 10_000)

const program = Effect.gen(function* () {
  const filename = Path.join(yield* tempDir, "ledger.db")
  const s = yield* script()
  yield* Effect.gen(function* () {
    const { ledger, run } = yield* attachedRun(s.source)
    let last = ""
    for (let i = 0; i < N; i++) {
      const line = i % 3 === 0 ? "make check" : `cat file-${i % 500}.txt`
      last = yield* acceptCommand(s, line, `turn_${i}`)
      if (i % 1000 === 999) yield* ledger.flush
    }
    yield* ledger.flush
    for (let k = 0; k < 2; k++) {
      const t0 = performance.now()
      const cards = yield* ledger.cards({ newest: true, limit: 10_000 })
      console.log(`ledger.cards: the newest ${cards.length} in ${(performance.now() - t0).toFixed(0)} ms`)
    }
    const remembering = yield* Remembering.make(ledger, run.id)
    const offers = Offers.make(ledger, remembering, run.id, { rules: { rules: [] } })
    for (let k = 0; k < 3; k++) {
      let longest = 0
      let previous = performance.now()
      const timer = setInterval(() => {
        const now = performance.now()
        longest = Math.max(longest, now - previous)
        previous = now
      }, 1)
      const t0 = performance.now()
      const offer = yield* offers.after(last)
      const took = performance.now() - t0
      clearInterval(timer)
      longest = Math.max(longest, performance.now() - previous)
      console.log(
        `offer over ${N} cards: ${took.toFixed(0)} ms, the event loop held ${longest.toFixed(0)} ms at most: ${offer?.summary ?? "none"}`
      )
    }
  }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
})

Effect.runPromise(Effect.scoped(program)).catch((error) => {
  console.error(error)
  process.exit(1)
})
