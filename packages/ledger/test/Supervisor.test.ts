/**
 * The ledger attached to a real supervisor on a fake app-server: a work item whose card a person
 * accepts, whose app-server dies mid-turn and whose thread is resumed on the next one (its
 * generation), and a work item whose card is still open when the supervisor shuts down (the
 * refusal its shutdown writes is recorded: the ledger outlives the supervisor). Every card ends
 * with exactly one settlement.
 */
import { assert, describe, it } from "@effect/vitest"
import { Supervisor } from "@warden/supervisor"
import { FakeAppServer } from "@warden/testkit"
import { Decision } from "@warden/protocol"
import { Chunk, Clock, Duration, Effect, Exit, Queue, Scope, TestClock } from "effect"
import * as Path from "node:path"
import { Ledger, LedgerEvent } from "../src/index.js"
import { commandParams, tempDir } from "./support.js"

/** Advance the TestClock once something sleeps until within `duration` (a sleep registered later would never fire). */
const advance = (duration: Duration.DurationInput) =>
  Effect.gen(function* () {
    const millis = Duration.toMillis(Duration.decode(duration))
    for (let spins = 0; ; spins++) {
      const now = yield* Clock.currentTimeMillis
      if (Chunk.toReadonlyArray(yield* TestClock.sleeps()).some((at) => at <= now + millis)) break
      if (spins > 100_000) return yield* Effect.dieMessage(`nothing sleeps within ${millis} ms`)
      yield* Effect.yieldNow()
    }
    yield* TestClock.adjust(duration)
  })

const until = <A>(queue: Queue.Dequeue<A>, predicate: (a: A) => boolean) =>
  Effect.gen(function* () {
    while (true) {
      const a = yield* Queue.take(queue)
      if (predicate(a)) return a
    }
  })

describe("attached to a supervisor", () => {
  // A supervisor as it is (its events and its engine's observed as they are published), through
  // its two subscriptions only (pumps), and with its events observed but its engine's read from
  // the subscription: each records the same.
  const variants: ReadonlyArray<readonly [string, (s: Supervisor.SupervisorShape) => Ledger.EventSource]> = [
    ["observed", (s) => s],
    ["pumped", (s) => ({ subscribe: s.subscribe, subscribeApprovals: s.subscribeApprovals })],
    [
      "events observed, approvals pumped",
      (s) => ({ subscribe: s.subscribe, observe: s.observe, subscribeApprovals: s.subscribeApprovals })
    ]
  ]
  for (const [name, sourceOf] of variants) {
    it.scoped(
      `records a supervised run (${name}): a card accepted, a restart with resume, a card refused at shutdown`,
      () =>
        Effect.gen(function* () {
          const filename = Path.join(yield* tempDir, "ledger.db")
          const runId = yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            const run = yield* ledger.beginRun({ label: "supervised" })
            const supervisorScope = yield* Scope.make()
            const fake = FakeAppServer.make({ turns: "manual" })
            const supervisor = yield* Supervisor.make({
              restart: { policy: "resume", maxAttempts: 2, backoff: "1 second" }
            }).pipe(Effect.provide(fake.layer), Effect.orDie, Scope.extend(supervisorScope))
            yield* run.attach(sourceOf(supervisor))
            const events = yield* supervisor.subscribe
            const approvals = yield* supervisor.subscribeApprovals

            const first = { id: 1, prompt: "fix it", cwd: "/repo" }
            run.record(LedgerEvent.itemSubmitted(first))
            const one = yield* supervisor.start(first).pipe(Scope.extend(supervisorScope))
            const thread1 = yield* one.threadId
            yield* fake.nextRequest("turn/start")
            yield* fake.request(
              "item/commandExecution/requestApproval",
              commandParams(thread1, "turn_1", "/bin/bash -lc 'make test'")
            )
            const opened = yield* until(approvals, (e) => e._tag === "CardOpened")
            assert.strictEqual(opened._tag === "CardOpened" && opened.card.workItem, 1)
            yield* supervisor.inbox.answer(opened._tag === "CardOpened" ? opened.card.id : "", Decision.Accept)

            // The app-server dies mid-turn; the thread is resumed on the next one and its turn run again.
            yield* fake.peer.exit(1)
            yield* until(events, (e) => e._tag === "ConnectionRestarting")
            yield* advance("1 second")
            yield* fake.nextRequest("thread/resume")
            yield* fake.nextRequest("turn/start")
            yield* fake.completeTurn(thread1, "turn_2", "completed", { message: "fixed after a restart" })
            const result = yield* one.await
            assert.strictEqual(result.resumes, 1)

            const second = { id: 2, prompt: "deploy it", cwd: "/repo" }
            run.record(LedgerEvent.itemSubmitted(second))
            const two = yield* supervisor.start(second).pipe(Scope.extend(supervisorScope))
            const thread2 = yield* two.threadId
            yield* fake.nextRequest("turn/start")
            yield* fake.request(
              "item/commandExecution/requestApproval",
              commandParams(thread2, "turn_3", "make deploy")
            )
            yield* until(approvals, (e) => e._tag === "CardOpened")

            // The supervisor stops with the card open: what it settles while closing is recorded.
            yield* Scope.close(supervisorScope, Exit.void)
            return run.id
          }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

          yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            const items = yield* ledger.workItems(runId)
            assert.deepStrictEqual(
              items.map((i) => [i.item, i.status, i.resumes, i.turnsDone, i.resultStatus ?? i.failureReason]),
              [
                ["1", "finished", 1, 1, "completed"],
                ["2", "stopped", 0, 0, "stopped"]
              ]
            )
            assert.strictEqual(items[0]!.finalMessage, "fixed after a restart")
            const threads = yield* ledger.threads(runId)
            assert.deepStrictEqual(
              threads.map((t) => [t.item, t.generation]),
              [
                ["1", 1],
                ["2", 0]
              ]
            )
            const turns = yield* ledger.turns(runId)
            assert.deepStrictEqual(
              turns.slice(0, 2).map((t) => [t.turnId, t.status]),
              [
                ["turn_1", "connection-lost"],
                ["turn_2", "completed"]
              ]
            )

            const cards = yield* ledger.cards({ runId })
            assert.strictEqual(cards.length, 2)
            assert.deepStrictEqual(
              [cards[0]!.workItem, cards[0]!.settlement?.outcome, cards[0]!.settlement?.source],
              ["1", "accepted", "person"]
            )
            assert.strictEqual(cards[1]!.workItem, "2")
            assert.include(["shutdown", "refused"], cards[1]!.settlement?.outcome)
            // Which closing step refused it first depends on the order scopes close in; some did, with a refusal.
            assert.include(["shutdown", "thread-stopped", "turn-ended"], cards[1]!.settlement?.source)
            const accounting = yield* ledger.accounting(runId)
            assert.deepStrictEqual(
              [accounting.cards, accounting.open, accounting.settled, accounting.stranded],
              [2, 0, 2, 0]
            )
            assert.deepStrictEqual(yield* ledger.unfinishedItems(runId), [])
          }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
        })
    )
  }
})
