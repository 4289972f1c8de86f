/**
 * What recording costs (not a test: `node --import tsx packages/ledger/test/measure.ts [CARDS]`).
 *
 * 1. `Run.record` on the caller's fiber: a synchronous enqueue (µs per event).
 * 2. Cards opened and settled at once by rules through the real connection cards, with no ledger and with a
 *    ledger attached (the caller's time; then the time until the ledger has written them all).
 * 3. The writer: events written per second, events per transaction, and the longest a single
 *    batch held the event loop (better-sqlite3 is synchronous: a batch runs on the loop).
 */
import { Approvals } from "@warden/approvals"
import type { Approvals as ApprovalsTypes } from "@warden/approvals"
import { ServerRequests } from "@warden/protocol"
import { Effect, Exit, PubSub, Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { performance } from "node:perf_hooks"
import { Ledger, LedgerEvent } from "../src/index.js"
import { allowCmd, commandParams, denyCmd, rules } from "./support.js"

const cards = Number(process.argv[2] ?? 20_000)
const lines = [
  "git status",
  "/bin/bash -lc 'rm -rf build'",
  "make test && curl -H 'Authorization: Bearer abc123def456ghi789' https://x"
]

const openAll = (approvals: Approvals.ApprovalsShape, parent: Scope.Scope, n: number) =>
  Effect.gen(function* () {
    const line: ApprovalsTypes.Line = { write: () => true, isOpen: () => true }
    const connectionCards = approvals.cardsFor(line)
    for (let i = 0; i < n; i++) {
      yield* connectionCards.open(
        ServerRequests.decode(
          i,
          "item/commandExecution/requestApproval",
          commandParams("thr_1", "turn_1", lines[i % lines.length]!)
        ),
        {
          parent,
          context: { workItem: 1 }
        }
      )
    }
  })

const config = {
  rules: rules(denyCmd("no-rm", "rm"), allowCmd("git", "git"), denyCmd("no-curl", "curl"), allowCmd("make", "make"))
}

const program = Effect.gen(function* () {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-ledger-measure-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true })))
  const parent = yield* Scope.make()

  // Without a ledger.
  const plain = yield* Approvals.make(config)
  yield* openAll(plain, parent, 2_000) // warm up
  let t = performance.now()
  yield* openAll(plain, parent, cards)
  const withoutMs = performance.now() - t

  yield* Effect.gen(function* () {
    const ledger = yield* Ledger.Ledger
    const run = yield* ledger.beginRun()

    // 1. record(): the enqueue alone (each item an event; the writer writes them afterwards).
    const items = Array.from({ length: 100_000 }, (_, i) => LedgerEvent.itemSubmitted({ id: i, prompt: `p${i}` }))
    t = performance.now()
    for (const e of items) run.record(e)
    const recordUs = ((performance.now() - t) * 1000) / items.length
    t = performance.now()
    let stats = yield* ledger.flush
    const itemsMs = performance.now() - t

    // 2. Cards through the connection's cards with the ledger attached.
    const approvals = yield* Approvals.make(config)
    const quiet = yield* PubSub.unbounded<never>()
    yield* run.attach({ subscribe: PubSub.subscribe(quiet), subscribeApprovals: approvals.subscribe })
    yield* openAll(approvals, parent, 2_000)
    yield* ledger.flush
    const before = yield* ledger.stats
    t = performance.now()
    yield* openAll(approvals, parent, cards)
    const callerMs = performance.now() - t
    stats = yield* ledger.flush
    const totalMs = performance.now() - t
    const ops = stats.written - before.written
    const batches = stats.batches - before.batches

    // 3. While the writer writes: the longest gap between the turns of a timer on the event loop
    //    (what a child's stdout callback would wait) and between the turns of a fiber that only
    //    yields (what the read-loop fiber would wait).
    let lastTick = performance.now()
    let loopGapMs = 0
    const timer = setInterval(() => {
      const now = performance.now()
      loopGapMs = Math.max(loopGapMs, now - lastTick)
      lastTick = now
    }, 1)
    let fiberGapMs = 0
    let running = true
    const probe = yield* Effect.fork(
      Effect.gen(function* () {
        let last = performance.now()
        while (running) {
          yield* Effect.yieldNow()
          const now = performance.now()
          fiberGapMs = Math.max(fiberGapMs, now - last)
          last = now
        }
      })
    )
    yield* openAll(approvals, parent, cards)
    lastTick = performance.now()
    yield* ledger.flush
    running = false
    yield* probe.await
    clearInterval(timer)

    const out = {
      cards,
      recordUsPerEvent: Number(recordUs.toFixed(3)),
      workItemsWrittenPerSecond: Math.round(items.length / (itemsMs / 1000)),
      cardsWithoutLedgerUsPerCard: Number(((withoutMs * 1000) / cards).toFixed(2)),
      cardsWithLedgerCallerUsPerCard: Number(((callerMs * 1000) / cards).toFixed(2)),
      cardsWithLedgerUntilWrittenUsPerCard: Number(((totalMs * 1000) / cards).toFixed(2)),
      ledgerOpsPerCard: Number((ops / cards).toFixed(2)),
      opsPerTransaction: Math.round(ops / Math.max(1, batches)),
      writerLongestEventLoopGapMs: Number(loopGapMs.toFixed(2)),
      writerLongestFiberGapMs: Number(fiberGapMs.toFixed(2)),
      dbBytes:
        Fs.statSync(Path.join(dir, "ledger.db")).size +
        (Fs.existsSync(Path.join(dir, "ledger.db-wal")) ? Fs.statSync(Path.join(dir, "ledger.db-wal")).size : 0)
    }
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
  }).pipe(Effect.provide(Ledger.layerSqlite({ filename: Path.join(dir, "ledger.db") })))
  yield* Scope.close(parent, Exit.void)
})

Effect.runPromise(Effect.scoped(program)).catch((e) => {
  process.stderr.write(`${String(e)}\n`)
  process.exit(1)
})
