/**
 * One unreachable runner delays nobody else's decisions (real codex 0.171.0): two `warden runner`
 * processes on a throwaway PostgreSQL and `warden submit --approvals stdin` with 16 items, each
 * asking one command approval. Once every card is open, runner A (and its codex) is paused with
 * SIGSTOP, and the submitter is given the decision for one of A's cards first, then B's. Each
 * decision is delivered on its own: B's cards are answered while A's decision still waits, which
 * one-at-a-time routing (the submitter before this test) could not do. A is then continued and
 * every item completes.
 */
import { assert, describe, it } from "@effect/vitest"
import { ProcessTree, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as CliProcess from "./support/CliProcess.js"
import { submitArgs, twoRunnerFleet, until } from "./support/Fleet.js"
import * as Codex from "./support/Codex.js"

const ITEMS = 16

describe("decisions in a fleet (real codex 0.171.0)", () => {
  it.scopedLive(
    "a paused runner's pending decision holds back no decision for another runner's cards",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({
          lanes: Object.fromEntries(
            Array.from({ length: ITEMS }, (_, i) => [
              `d${i}`,
              [
                Step.execCommand({
                  cmd: `echo warden-decision-${i}`,
                  escalated: true,
                  justification: "decisions test"
                }),
                Step.message(`done ${i}`)
              ]
            ])
          )
        })
        const { a, b, pg } = yield* twoRunnerFleet(codex.launch, ["--concurrency", String(ITEMS)])

        const submit = yield* CliProcess.spawn(
          submitArgs({
            cluster: pg.url,
            workspace: codex.launch.workspace,
            lanes: Array.from({ length: ITEMS }, (_, i) => `d${i}`)
          }),
          { env: codex.env }
        )
        const opened = () => submit.json().filter((l) => l.type === "card.opened")
        yield* until(`the ${ITEMS} cards open`, () => opened().length >= ITEMS)
        const cardsOf = (address: string) =>
          opened()
            .filter((l) => l["runner"] === address)
            .map((l) => String(l["card"]))
        const cardsA = cardsOf(a.address)
        const cardsB = cardsOf(b.address)
        // 16 items over two runners holding 150 shards each: both hold some (all on one: 2 in 65,536).
        assert.isNotEmpty(cardsA, "runner A holds a card")
        assert.isNotEmpty(cardsB, "runner B holds a card")

        // A and its codex stop answering anything; its card's decision goes first.
        process.kill(-a.cli.pid, "SIGSTOP")
        const answered = (card: string) => submit.json().some((l) => l.type === "card.answer" && l["card"] === card)
        const decide = (card: string) => submit.write(`${JSON.stringify({ cardId: card, decision: "accept" })}\n`)
        yield* decide(cardsA[0]!)
        for (const card of cardsB) yield* decide(card)
        yield* until("B's cards answered", () => cardsB.every(answered), "60 seconds").pipe(
          Effect.ensuring(Effect.sync(() => process.kill(-a.cli.pid, "SIGCONT")))
        )
        // B's answers came while A's decision still waited: delivered on its own, not in line.
        const lines = submit.json()
        const firstOfA = lines.findIndex((l) => l.type === "card.answer" && l["card"] === cardsA[0])
        const lastOfB = Math.max(
          ...cardsB.map((card) => lines.findIndex((l) => l.type === "card.answer" && l["card"] === card))
        )
        assert.isTrue(
          firstOfA === -1 || firstOfA > lastOfB,
          `A's decision answered at line ${firstOfA}, B's by ${lastOfB}`
        )
        for (const card of cardsB) {
          const line = lines.find((l) => l.type === "card.answer" && l["card"] === card)
          assert.strictEqual(line?.["result"], "Settled", JSON.stringify(line))
        }

        // A continues (or its items moved to B meanwhile); the rest are answered; every item completes.
        for (const card of cardsA.slice(1)) yield* decide(card)
        yield* until(
          "submit's run.finished",
          () => {
            for (const l of opened()) {
              const card = String(l["card"])
              if (!cardsA.includes(card) && !cardsB.includes(card) && !answered(card)) {
                cardsB.push(card)
                Effect.runSync(decide(card))
              }
            }
            return submit.json().some((l) => l.type === "run.finished")
          },
          "300 seconds"
        )
        yield* submit.endStdin
        const exit = yield* submit.exited("60 seconds")
        assert.deepStrictEqual(exit, { code: 0, signal: null }, submit.stderr())
        const results = submit.json().filter((l) => l.type === "item.result")
        assert.strictEqual(results.length, ITEMS)
        for (const r of results) assert.strictEqual(r["status"], "completed", JSON.stringify(r))

        for (const r of [a, b]) {
          const tree = ProcessTree.descendants(r.cli.pid)
          process.kill(-r.cli.pid, "SIGTERM")
          const e = yield* r.cli.exited("60 seconds")
          assert.notStrictEqual(e.signal, "SIGKILL")
          yield* until("the runner's codex gone", () => tree.every((pid) => !ProcessTree.isAlive(pid)), "60 seconds")
        }
      }),
    600_000
  )
})
