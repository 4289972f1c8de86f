/**
 * 3. Scale on one connection: many threads, many open cards, then the connection fails.
 *
 * The real Supervisor on a BenchPeer (in-memory transport), one app-server connection:
 * 1. start 1,000 work items (admission wide enough for all): each starts its thread and its turn
 *    through the peer and then idles in the turn (route registered, thread runner waiting, stall
 *    watchdog armed);
 * 2. open 10,000 cards (10 per thread): the peer writes 10,000 `item/commandExecution/requestApproval`
 *    frames, cut into 64 KiB chunks, one per macrotask; no handler, so every card waits for a
 *    person (its 15-minute deadline armed);
 * 3. put 1,000 requests of ours in flight (one `turn/steer` per work item; the peer never answers),
 *    then measure as many callers of the same shape waiting on nothing of Warden's (released
 *    before the exit): a pending request's heap is given with its caller, and as Warden's part;
 * 4. the peer exits: time until every card has settled `connection-lost` (nothing written), every
 *    pending request has failed with ConnectionLost, and no card of the connection is open.
 * The heap is measured after full collections (`global.gc`, node --expose-gc) between phases.
 *
 * The in-memory peer keeps a log of every frame the client wrote (2 per thread, 1 per steer): that
 * is the test double's memory, not Warden's; it is measured (the same frames, parsed and held) and
 * subtracted, and reported.
 */
import type { ApprovalEvent } from "@warden/approvals"
import { Supervisor } from "@warden/supervisor"
import { Effect, Either, Exit, Queue, Scope } from "effect"
import { requestFrames } from "./ApprovalRoundTrip.js"
import * as BenchPeer from "./support/BenchPeer.js"
import { CHUNK_BYTES } from "./support/Mix.js"
import type { BenchResult } from "./support/Report.js"
import { repeated } from "./support/Report.js"
import { heapAfterGc, macrotask, nowMs, round } from "./support/Stats.js"
import { profiled } from "./support/Profile.js"

export interface Options {
  readonly quick: boolean
  readonly log: (line: string) => void
  /** `--profile DIR`: a CPU profile of the window from the peer's exit to every caller failed (scale-loss-N.cpuprofile). */
  readonly profile?: string | undefined
  /**
   * `--heap-snapshots DIR`: a V8 heap snapshot right after each heap measurement (connected,
   * threads, cards, requests, after the failure), as DIR/scale-N-PHASE.heapsnapshot, to see by
   * constructor where the bytes of a phase went (first run only). Written after the figure was
   * taken: not measured.
   */
  readonly heapSnapshots?: string | undefined
}

let snapshotRuns = 0
/** Write a heap snapshot of this phase when `--heap-snapshots` asked for them. */
const snapshotter = (dir: string | undefined) => {
  const run = ++snapshotRuns
  return async (phase: string): Promise<void> => {
    if (dir === undefined || run !== 1) return
    const { mkdirSync } = await import("node:fs")
    const { writeHeapSnapshot } = await import("node:v8")
    mkdirSync(dir, { recursive: true })
    writeHeapSnapshot(`${dir}/scale-${run}-${phase}.heapsnapshot`)
  }
}

const WAIT_LIMIT_MS = 120_000

const until = async (what: string, done: () => boolean, describe: () => string): Promise<void> => {
  const started = nowMs()
  while (!done()) {
    if (nowMs() - started > WAIT_LIMIT_MS) throw new Error(`scale: timed out waiting for ${what}: ${describe()}`)
    await macrotask()
  }
}

/** Cut a byte stream into pipe-sized chunks. */
const chunked = (bytes: Uint8Array): Array<Uint8Array> => {
  const chunks: Array<Uint8Array> = []
  for (let at = 0; at < bytes.length; at += CHUNK_BYTES)
    chunks.push(bytes.subarray(at, Math.min(bytes.length, at + CHUNK_BYTES)))
  return chunks
}

/** Heap held by `frames` once parsed and kept in an array (what the peer's log holds for them). */
const heapOfLog = async (frames: ReadonlyArray<unknown>): Promise<number> => {
  const text = frames.map((f) => JSON.stringify(f))
  const before = await heapAfterGc()
  const held = text.map((t) => JSON.parse(t) as unknown)
  const after = await heapAfterGc()
  if (held.length !== frames.length) throw new Error("unreachable")
  return after - before
}

/**
 * Heap held by `count` callers shaped like the bench's steer callers
 * (`Effect.runPromise(Effect.either(...))`) waiting on nothing of Warden's: an `Effect.async` with
 * no canceler whose resume the bench keeps. Measured and then released (every caller resumed and
 * ended) before the function returns.
 */
const heapOfWaitingCallers = async (count: number): Promise<number> => {
  const resumes: Array<(outcome: Effect.Effect<never, string>) => void> = new Array(count)
  const before = await heapAfterGc()
  const callers: Array<Promise<Either.Either<never, string>>> = new Array(count)
  for (let i = 0; i < count; i++) {
    callers[i] = Effect.runPromise(
      Effect.either(
        Effect.async<never, string>((resume) => {
          resumes[i] = resume
        })
      )
    )
  }
  const after = await heapAfterGc()
  for (const resume of resumes) resume(Effect.fail("released"))
  const ended = await Promise.all(callers)
  if (ended.length !== count || !ended.every(Either.isLeft)) throw new Error("scale: a baseline caller did not end")
  return after - before
}

const runOnce = async (options: Options): Promise<BenchResult> => {
  const threads = options.quick ? 100 : 1_000
  const cardsPerThread = 10
  const cards = threads * cardsPerThread
  options.log(`scale: ${threads} threads, ${cards} open cards, ${threads} pending requests`)

  const snapshot = snapshotter(options.heapSnapshots)
  const peer = BenchPeer.make()
  const scope = Effect.runSync(Scope.make())
  const run = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => Effect.runPromise(Scope.extend(effect, scope))
  try {
    const supervisor = await run(
      Supervisor.make({ concurrency: threads + 1, restart: { policy: "fail", maxAttempts: 0 } }).pipe(
        Effect.provide(peer.memory.layer)
      )
    )
    await Effect.runPromise(supervisor.ready)

    // Count approval events as they happen (a subscriber fiber in the scope).
    const counts = { opened: 0, settled: 0, connectionLost: 0, otherOutcomes: 0 }
    /** Set when the subscriber sees the `settleTarget`-th settlement (monotonic ms). */
    let settleTarget = Number.POSITIVE_INFINITY
    let allCardsSettledAt = 0
    /** The latest `settledAt` (the engine's clock, epoch ms) among the settlements seen. */
    let lastSettledAt = 0
    const events = await run(supervisor.subscribeApprovals)
    await run(
      Effect.forkScoped(
        Effect.forever(
          // takeBetween(1, ...) waits for at least one event (takeAll alone would not wait: a busy loop).
          Effect.map(Queue.takeBetween(events, 1, Number.MAX_SAFE_INTEGER), (batch) => {
            for (const e of batch as Iterable<ApprovalEvent.ApprovalEvent>) {
              if (e._tag === "CardOpened") counts.opened++
              else if (e._tag === "CardSettled") {
                counts.settled++
                lastSettledAt = Math.max(lastSettledAt, e.settlement.settledAt)
                if (e.settlement.outcome === "connection-lost" && !e.settlement.written) counts.connectionLost++
                else counts.otherOutcomes++
              }
            }
            if (allCardsSettledAt === 0 && counts.settled >= settleTarget) allCardsSettledAt = nowMs()
          })
        )
      )
    )

    const heap0 = await heapAfterGc()
    await snapshot("0-connected")

    // 1. Threads.
    const t1 = nowMs()
    const handles = await run(
      Effect.forEach(
        Array.from({ length: threads }, (_, i) => i),
        (i) => supervisor.start({ id: i, prompt: `bench thread ${i}`, cwd: "/tmp/bench" })
      )
    )
    const threadIds = await Effect.runPromise(Effect.forEach(handles, (h) => h.threadId))
    await until(
      "every turn to start",
      () => peer.turnsStarted() >= threads,
      () => `${peer.turnsStarted()}/${threads} turns`
    )
    const threadsMs = nowMs() - t1
    const heap1 = await heapAfterGc()
    await snapshot("1-threads")
    const threadLog = await heapOfLog(peer.memory.peer.writtenSoFar())

    // 2. Cards: 10 per thread, interleaved across threads, as pipe chunks. The bytes are made in a
    // function of their own and sent by index, so that nothing of the bench's input is still
    // reachable when the heap is measured (it was: ~1 KiB per card of frame bytes, twice over).
    const chunks = ((): Array<Uint8Array> => {
      const parts: Array<Uint8Array> = []
      let id = 1_000_000
      for (let k = 0; k < cardsPerThread; k++) {
        for (const threadId of threadIds)
          parts.push(requestFrames(threadId, peer.turnOf(threadId) ?? "turn_?").request(id++))
      }
      const stream = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
      let at = 0
      for (const p of parts) {
        stream.set(p, at)
        at += p.length
      }
      return chunked(stream)
    })()
    const chunkCount = chunks.length
    const t2 = nowMs()
    while (chunks.length > 0) {
      Effect.runSync(peer.memory.peer.sendRaw(chunks.shift()!))
      await macrotask()
    }
    await until(
      "every card to open",
      () => counts.opened >= cards,
      () => `${counts.opened}/${cards} opened, ${counts.settled} settled`
    )
    const openMs = nowMs() - t2
    if (counts.settled !== 0)
      throw new Error(`scale: ${counts.settled} cards settled before the failure (expected all open)`)
    const openCards = (await Effect.runPromise(supervisor.inbox.open)).length
    if (openCards !== cards) throw new Error(`scale: ${openCards} open cards in the inbox, expected ${cards}`)
    const heap2 = await heapAfterGc()
    await snapshot("2-cards")

    // 3. Requests of ours in flight: one turn/steer per work item, never answered.
    const steers = handles.map((h) => Effect.runPromise(Effect.either(h.steer("bench steer"))))
    await until(
      "every steer to reach the peer",
      () => peer.silent("turn/steer") >= threads,
      () => `${peer.silent("turn/steer")}/${threads}`
    )
    const heap3 = await heapAfterGc()
    await snapshot("3-requests")
    const steerLog = (await heapOfLog(peer.memory.peer.writtenSoFar())) - threadLog
    // The same number of callers of the same shape, waiting on the cheapest wait Effect has (an
    // `Effect.async` with no canceler, resumed by the bench): what a caller costs whatever it waits
    // for, measured in the same run; Warden's part of a pending request is the difference.
    const callerHeap = await heapOfWaitingCallers(threads)

    // 4. The peer exits.
    let steersFailed = 0
    let steersConnectionLost = 0
    let allRequestsFailedAt = 0
    for (const s of steers) {
      void s.then((result) => {
        steersFailed += Either.isLeft(result) ? 1 : 0
        steersConnectionLost += Either.isLeft(result) && result.left._tag === "ConnectionLost" ? 1 : 0
        if (steersFailed === threads) allRequestsFailedAt = nowMs()
      })
    }
    settleTarget = counts.settled + cards
    const exitWall = Date.now()
    const t4 = nowMs()
    await profiled(options.profile, "scale-loss", 100, async () => {
      Effect.runSync(peer.memory.peer.exit(1))
      await until(
        "every card and request to settle",
        () => allCardsSettledAt > 0 && allRequestsFailedAt > 0,
        () => `${counts.settled}/${cards} cards settled, ${steersFailed}/${threads} requests failed`
      )
    })
    // Decided: the engine's own record of when the last card settled (its clock, 1 ms resolution).
    const engineSettledMs = lastSettledAt - exitWall
    // Seen: the moment a subscriber saw the last settlement, and a caller saw its request fail.
    const cardsSettledMs = allCardsSettledAt - t4
    const settleMs = Math.max(allCardsSettledAt, allRequestsFailedAt) - t4
    // Quiet: the event loop got a turn again, so the follow-up work (card scopes closed, deadline
    // timers cancelled, work items told) has run.
    const quietMs = nowMs() - t4
    const stillOpen = (await Effect.runPromise(supervisor.inbox.open)).length
    const results = await Promise.all(
      handles.map((h) => Effect.runPromise(Effect.exit(h.await)).then((exit) => Exit.isFailure(exit)))
    )
    const itemsFailed = results.filter((failed) => failed).length
    const itemsMs = nowMs() - t4
    const heap4 = await heapAfterGc()
    await snapshot("4-failed")

    const verified =
      counts.connectionLost === cards &&
      counts.otherOutcomes === 0 &&
      steersConnectionLost === threads &&
      stillOpen === 0 &&
      itemsFailed === threads
    if (!verified) {
      throw new Error(
        `scale: after the exit, ${counts.connectionLost}/${cards} cards settled connection-lost (${counts.otherOutcomes} otherwise), ` +
          `${steersConnectionLost}/${threads} requests failed with ConnectionLost, ${stillOpen} cards still open, ${itemsFailed}/${threads} work items failed`
      )
    }

    const perThread = (heap1 - heap0 - threadLog) / threads
    const perCard = (heap2 - heap1) / cards
    const perRequest = (heap3 - heap2 - steerLog) / threads
    const perCaller = callerHeap / threads
    const perRequestWarden = perRequest - perCaller
    const kib = (bytes: number) => bytes / 1024
    return {
      name: "scale",
      title: "3. Scale on one connection",
      params: {
        threads,
        cards,
        pendingRequests: threads,
        chunkBytes: CHUNK_BYTES,
        handler: "none (cards wait for a person)"
      },
      metrics: {
        heapPerIdleThreadBytes: perThread,
        heapPerOpenCardBytes: perCard,
        heapPerPendingRequestBytes: perRequest,
        heapPerWaitingCallerBytes: perCaller,
        heapPerPendingRequestWardenBytes: perRequestWarden,
        peerLogPerThreadBytes: threadLog / threads,
        startThreadsMs: threadsMs,
        openCardsMs: openMs,
        openCardsPerSec: cards / (openMs / 1000),
        cardsSettledAfterExitEngineMs: engineSettledMs,
        cardsSettledAfterExitMs: cardsSettledMs,
        allSettledAfterExitMs: settleMs,
        quietAfterExitMs: quietMs,
        workItemsEndedAfterExitMs: itemsMs,
        heapBaselineMiB: heap0 / 2 ** 20,
        heapWithThreadsMiB: heap1 / 2 ** 20,
        heapWithCardsMiB: heap2 / 2 ** 20,
        heapWithRequestsMiB: heap3 / 2 ** 20,
        heapAfterSettleMiB: heap4 / 2 ** 20
      },
      ratios: {},
      targets: [
        {
          name: "peer exit → every card settled, engine clock (ms)",
          target: "<= 100 ms",
          value: round(engineSettledMs, 3),
          met: engineSettledMs <= 100
        },
        {
          name: "peer exit → every settlement seen and every caller failed, caller's clock (ms)",
          target: "<= 100 ms",
          value: round(settleMs, 3),
          met: settleMs <= 100
        },
        { name: "heap per open card (KiB)", target: "<= 2 KiB", value: round(kib(perCard), 3), met: kib(perCard) <= 2 },
        {
          name: "heap per idle thread (KiB)",
          target: "<= 16 KiB",
          value: round(kib(perThread), 3),
          met: kib(perThread) <= 16
        },
        {
          name: "heap per pending request, Warden's part (KiB)",
          target: "<= 4 KiB",
          value: round(kib(perRequestWarden), 3),
          met: kib(perRequestWarden) <= 4
        }
      ],
      tables: [
        {
          title: `Scale: ${threads.toLocaleString("en-US")} threads, ${cards.toLocaleString("en-US")} open cards and ${threads.toLocaleString("en-US")} pending requests on one connection`,
          columns: ["measure", "value"],
          rows: [
            ["heap per idle thread (work item, route, runner, turn), KiB", kib(perThread)],
            ["heap per open card (connection cards, inbox, view and summary, deadline entry), KiB", kib(perCard)],
            ["heap per pending request of ours, with its caller (`runPromise(either(steer))`), KiB", kib(perRequest)],
            [
              "heap per caller of the same shape waiting on nothing (an `Effect.async`, no canceler), KiB",
              kib(perCaller)
            ],
            ["heap per pending request, Warden's part (the difference), KiB", kib(perRequestWarden)],
            [`start ${threads.toLocaleString("en-US")} threads (thread/start + turn/start each), ms`, threadsMs],
            [`open ${cards.toLocaleString("en-US")} cards (${chunkCount} chunks of 64 KiB), ms`, openMs],
            ["peer exit → every card settled connection-lost (engine's clock: last settledAt), ms", engineSettledMs],
            ["peer exit → a subscriber has seen every settlement, ms", cardsSettledMs],
            ["peer exit → ... and every caller of a pending request has seen ConnectionLost, ms", settleMs],
            ["peer exit → event loop free again (card scopes closed, timers cancelled), ms", quietMs],
            ["peer exit → every work item ended (failed), ms", itemsMs],
            [
              "heap: connected / +threads / +cards / +requests / after the failure, MiB",
              `${(heap0 / 2 ** 20).toFixed(1)} / ${(heap1 / 2 ** 20).toFixed(1)} / ${(heap2 / 2 ** 20).toFixed(1)} / ${(heap3 / 2 ** 20).toFixed(1)} / ${(heap4 / 2 ** 20).toFixed(1)}`
            ]
          ]
        }
      ],
      notes: [
        `Verified after the exit: ${counts.connectionLost.toLocaleString("en-US")} of ${cards.toLocaleString("en-US")} cards settled connection-lost with nothing written, ${steersConnectionLost.toLocaleString("en-US")} of ${threads.toLocaleString("en-US")} pending requests failed with ConnectionLost, no card open, every work item failed.`,
        `Heap per thread excludes the in-memory peer's log of what the client wrote (${(threadLog / threads).toFixed(0)} bytes per thread, measured); after the failure the settled-card history (up to 10,000 settlements, for late answers) is still held.`
      ]
    }
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/** The benchmark, run 3 times (once in quick mode): every target is the median of the runs, with their spread. */
export const run = repeated(runOnce)
