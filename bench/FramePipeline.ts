/**
 * 1. Frame pipeline throughput: frames/s from stdout bytes to routed events.
 *
 * Warden: the real read loop. A BenchPeer (in-memory transport: the real ConnectionCore and
 * FrameDecoder, as for a child process) feeds the mix's 64 KiB chunks, one per macrotask as a pipe
 * delivers them, into a real `AppServerConnection` (handshake done) with one registered thread
 * route per thread of the mix and an approvals engine whose handler accepts at once. A pass ends
 * when every thread notification was offered to its route's mailbox, every approval request was
 * answered and the answer reached the peer, and no card of the connection is open. The routes' mailboxes are the
 * read loop's output; draining them (the thread runners' work) is outside the timed section, as
 * the baseline's listeners only collect too.
 *
 * Baseline: `PlainClient` (bench/support/PlainReader.ts), a hand-written callback reader, on the
 * same chunks with the same macrotask between chunks; its approval callback answers at once.
 * Raw limit: split + JSON.parse of the same chunks, nothing else, two ways (bench/support/PlainReader.ts):
 * StringDecoder + `split("\n")`, and lines cut on the bytes then decoded one by one; the limit is
 * the faster of the two.
 *
 * Ledger on: the same Warden read loop with a ledger (`@warden/ledger`, SQLite in a temp file, as
 * `warden run --state` opens it) recording the approvals engine's events (every card opened and
 * settled: the mix's thread notifications never reach the ledger, which drops them at record
 * time). Its writer runs on its own thread, as in every build (`WARDEN_LEDGER_WORKER`, which
 * bench/run.ts sets to a bundle of the sources; `off` puts it on the main thread). The pass is
 * timed as Warden's; the writer then finishes (`flush`, timed apart, untimed for the ratio) before
 * the next contender runs, so nobody pays for its leftovers. Beside it, reported, not a target:
 * the same ledger without its answer journal (its line before each answer), which shows the
 * journal apart from the rest of the ledger's work.
 *
 * Rounds interleave the contenders (rotating who goes first), each pass starting from a fully
 * collected heap (`global.gc`, untimed); ratios are between the medians of the same run. A
 * second ratio from CPU time (`process.cpuUsage`, all threads: GC helpers included) is reported
 * beside the wall-clock one.
 */
import { loadavg } from "node:os"
import { Approvals } from "@warden/approvals"
import { Decision } from "@warden/protocol"
// The connection itself, below the public surface (a workspace-only subpath: not published).
import * as AppServerConnection from "@warden/supervisor/internal/AppServerConnection"
import type * as ThreadRoute from "@warden/supervisor/internal/ThreadRoute"
import { Effect, ExecutionStrategy, Exit, Logger, PubSub, Scope } from "effect"
import * as BenchLedger from "./support/BenchLedger.js"
import * as BenchPeer from "./support/BenchPeer.js"
import * as Mix from "./support/Mix.js"
import { PlainClient, rawLimit, rawLimitBytes } from "./support/PlainReader.js"
import type { BenchResult } from "./support/Report.js"
import { repeated, ratioCell } from "./support/Report.js"
import { collect, macrotask, max, median, min, nowMs, round } from "./support/Stats.js"

export interface Options {
  readonly quick: boolean
  readonly log: (line: string) => void
}

type Contender =
  | "warden"
  | "wardenLedger"
  | "wardenLedgerNoJournal"
  | "baseline"
  | "raw"
  | "rawBytes"
  | "wardenQuiet"
  | "baselineQuiet"

/** A contender set up once; `pass` feeds the whole mix and resolves when it is fully handled. */
interface Runner {
  readonly pass: () => Promise<void>
  readonly close: () => Promise<void>
  /** After a timed pass, untimed: let background work finish (the ledger's writer); its ms. */
  readonly after?: () => Promise<number>
}

const feed = async (chunks: ReadonlyArray<Uint8Array>, sink: (chunk: Uint8Array) => void) => {
  for (const chunk of chunks) {
    sink(chunk)
    await macrotask()
  }
}

const WAIT_LIMIT_MS = 60_000

/**
 * `telemetry`: the connection as a supervisor with `Telemetry` builds it (read-loop lag measured,
 * every card's span a child of its thread's span); without it, as one without (the default).
 */
export const wardenRunner = async (
  mix: Mix.Mix,
  options: {
    readonly ledger?: boolean
    /** With the ledger: `false` leaves out its answer journal. */
    readonly answerJournal?: false
    readonly telemetry?: boolean
  } = {}
): Promise<Runner & { readonly answers: () => number; readonly records: () => number }> => {
  const scope = Effect.runSync(Scope.make())
  const keptSignals: Array<Array<ThreadRoute.ThreadSignal>> = []
  let records = 0
  const countingLogger = Logger.make(() => {
    records++
  })
  const peer = BenchPeer.make()
  const { routes, server, ledger } = await Effect.runPromise(
    Scope.extend(
      Effect.gen(function* () {
        // Built first, closed last (as in the CLI).
        const ledger =
          options?.ledger === true
            ? yield* Effect.orDie(
                BenchLedger.make(options.answerJournal === false ? { answerJournal: false } : undefined)
              )
            : undefined
        const approvals = yield* Approvals.make({ handler: () => Effect.succeed(Decision.Accept) })
        if (ledger !== undefined) {
          const none = yield* PubSub.unbounded<never>()
          // As a supervisor is attached: its engine too (its events observed, its answers journaled).
          yield* ledger.run.attach({
            subscribe: PubSub.subscribe(none),
            subscribeApprovals: approvals.subscribe,
            approvals
          })
        }
        const connection = yield* peer.memory.transport.connect
        const server = yield* AppServerConnection.make(
          connection,
          approvals,
          undefined,
          () => {},
          options.telemetry === true ? { readLoopLag: true } : undefined
        )
        const traceParent = options.telemetry === true ? yield* Effect.makeSpan("bench.thread") : undefined
        const routes: Array<ThreadRoute.ThreadRoute> = []
        for (const threadId of mix.threadIds) {
          // What a runner keeps between turns (a thread with no turn watched keeps its signals):
          // the runners' own bookkeeping is not part of this row, as before (their mailboxes).
          const kept: Array<ThreadRoute.ThreadSignal> = []
          keptSignals.push(kept)
          const route: ThreadRoute.ThreadRoute = {
            threadId,
            receive: (signal) => void kept.push(signal),
            cardScope: yield* Scope.fork(scope, ExecutionStrategy.sequential),
            workItem: threadId,
            fileChanges: new Map(),
            runningCommands: new Set(),
            routed: 0,
            ...(traceParent !== undefined ? { traceParent } : {})
          }
          server.registerThread(route)
          routes.push(route)
        }
        return { routes, server, ledger }
      }).pipe(
        // Telemetry's log records go to the collector's logger: here one that counts them (what
        // Warden builds and hands to a logger is measured, not a console's or an exporter's work).
        options.telemetry === true
          ? Effect.provide(Logger.replace(Logger.defaultLogger, countingLogger))
          : (effect) => effect
      ),
      scope
    )
  )
  const routed = () => routes.reduce((n, r) => n + r.routed, 0)
  const send = (chunk: Uint8Array) => Effect.runSync(peer.memory.peer.sendRaw(chunk))
  return {
    pass: async () => {
      const routedBefore = routed()
      const answersBefore = peer.answers()
      await feed(mix.chunks, send)
      const started = nowMs()
      while (
        routed() - routedBefore < mix.threadNotifications ||
        peer.answers() - answersBefore < mix.requests ||
        server.connectionCards.size() > 0
      ) {
        if (nowMs() - started > WAIT_LIMIT_MS || !server.isOpen()) {
          throw new Error(
            `warden pass incomplete: routed ${routed() - routedBefore}/${mix.threadNotifications}, answers ${peer.answers() - answersBefore}/${mix.requests}, open cards ${server.connectionCards.size()}, connection open: ${server.isOpen()}`
          )
        }
        await macrotask()
      }
      // Telemetry: the settled cards' spans still waiting for their batch are described (their
      // masked titles, their log records), within the pass: what they cost is the pass's.
      if (options.telemetry === true) server.connectionCards.describeSettled()
      // The thread runners' side, untimed: empty what the routes kept.
      for (const kept of keptSignals) kept.length = 0
    },
    close: () => Effect.runPromise(Scope.close(scope, Exit.void)),
    answers: peer.answers,
    records: () => records,
    ...(ledger !== undefined
      ? {
          after: async () => {
            const t0 = nowMs()
            await Effect.runPromise(ledger.flush)
            return nowMs() - t0
          }
        }
      : {})
  }
}

export const baselineRunner = (mix: Mix.Mix): Runner => {
  const inboxes = new Map<string, Array<{ method: string; params: unknown }>>()
  for (const threadId of mix.threadIds) inboxes.set(threadId, [])
  const connectionEvents: Array<{ method: string; params: unknown }> = []
  const written: Array<string> = []
  let routed = 0
  const client = new PlainClient({
    onThreadEvent: (threadId, method, params) => {
      const inbox = inboxes.get(threadId)
      if (inbox) {
        inbox.push({ method, params })
        routed++
      } else connectionEvents.push({ method, params })
    },
    onConnectionEvent: (method, params) => {
      connectionEvents.push({ method, params })
    },
    onApproval: () => ({ decision: "accept" }),
    write: (line) => {
      written.push(line)
    }
  })
  return {
    pass: async () => {
      routed = 0
      written.length = 0
      await feed(mix.chunks, (chunk) => client.onData(chunk))
      if (routed !== mix.threadNotifications || written.length !== mix.requests) {
        throw new Error(
          `baseline pass incomplete: routed ${routed}/${mix.threadNotifications}, answers ${written.length}/${mix.requests}`
        )
      }
      for (const inbox of inboxes.values()) inbox.length = 0
      connectionEvents.length = 0
    },
    close: async () => {}
  }
}

export const rawRunner = (mix: Mix.Mix, make: typeof rawLimit = rawLimit): Runner => ({
  pass: async () => {
    const raw = make()
    await feed(mix.chunks, raw.onData)
    if (raw.frames() !== mix.frames) throw new Error(`raw pass parsed ${raw.frames()}/${mix.frames} frames`)
  },
  close: async () => {}
})

const runOnce = async (options: Options): Promise<BenchResult> => {
  const shape = options.quick
    ? { threads: 4, turnsPerThread: 4, largeDiffEvery: 4 }
    : { threads: 8, turnsPerThread: 24 }
  const mix = Mix.build(shape)
  // The same turns without their approval requests: how much of the difference the cards make.
  const quiet = Mix.build({ ...shape, withoutRequests: true })
  const rounds = options.quick ? 3 : 12
  const warmups = options.quick ? 1 : 2
  options.log(
    `frame pipeline: ${mix.frames} frames, ${(mix.bytes.length / 2 ** 20).toFixed(1)} MiB, ${mix.chunks.length} chunks; ${rounds} rounds`
  )

  const runners: Record<Contender, Runner> = {
    warden: await wardenRunner(mix),
    wardenLedger: await wardenRunner(mix, { ledger: true }),
    wardenLedgerNoJournal: await wardenRunner(mix, { ledger: true, answerJournal: false }),
    baseline: baselineRunner(mix),
    raw: rawRunner(mix),
    rawBytes: rawRunner(mix, rawLimitBytes),
    wardenQuiet: await wardenRunner(quiet),
    baselineQuiet: baselineRunner(quiet)
  }
  const mixOf = (c: Contender) => (c === "wardenQuiet" || c === "baselineQuiet" ? quiet : mix)
  const order: ReadonlyArray<Contender> = [
    "warden",
    "wardenLedger",
    "wardenLedgerNoJournal",
    "baseline",
    "raw",
    "rawBytes",
    "wardenQuiet",
    "baselineQuiet"
  ]
  const times = Object.fromEntries(order.map((c) => [c, [] as Array<number>])) as Record<Contender, Array<number>>
  const cpu = Object.fromEntries(order.map((c) => [c, [] as Array<number>])) as Record<Contender, Array<number>>
  /** The ledger's writer after a pass: ms until everything the pass recorded was written. */
  const flushMs: Record<"wardenLedger" | "wardenLedgerNoJournal", Array<number>> = {
    wardenLedger: [],
    wardenLedgerNoJournal: []
  }
  try {
    for (let i = 0; i < warmups; i++) {
      for (const c of order) {
        await runners[c].pass()
        await runners[c].after?.()
      }
    }
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < order.length; k++) {
        const c = order[(round + k) % order.length]!
        // Each pass starts from a collected heap: no contender pays for another's garbage.
        collect()
        await macrotask()
        const c0 = process.cpuUsage()
        const t0 = nowMs()
        await runners[c].pass()
        times[c].push(nowMs() - t0)
        const used = process.cpuUsage(c0)
        cpu[c].push(used.user + used.system)
        const after = runners[c].after
        if (after !== undefined) {
          const ms = await after()
          if (c === "wardenLedger" || c === "wardenLedgerNoJournal") flushMs[c].push(ms)
        }
      }
    }
  } finally {
    for (const c of order) await runners[c].close()
  }

  const fps = (c: Contender) => times[c].map((ms) => mixOf(c).frames / (ms / 1000))
  const mibps = (c: Contender) => times[c].map((ms) => mixOf(c).bytes.length / 2 ** 20 / (ms / 1000))
  const med = (c: Contender) => median(fps(c))
  /** The raw limit: the faster of the two ways to split and parse. */
  const limit: Contender = med("rawBytes") >= med("raw") ? "rawBytes" : "raw"
  const vsBaseline = med("warden") / med("baseline")
  const vsRaw = med("warden") / med(limit)
  const baselineVsRaw = med("baseline") / med(limit)
  // The same ratios from CPU time (process.cpuUsage, every thread of the process).
  const cpuFps = (c: Contender) => median(cpu[c].map((us) => mixOf(c).frames / (us / 1e6)))
  const quietVsBaseline = med("wardenQuiet") / med("baselineQuiet")
  // The ledger's cost: Warden with the ledger on ÷ off, as the read loop sees it (the pass), and
  // with the writer's leftover work (pass + flush) counted in.
  const ledgerOnVsOff = med("wardenLedger") / med("warden")
  const ledgerOnVsOffCpu = cpuFps("wardenLedger") / cpuFps("warden")
  const ledgerWithFlushMs = times.wardenLedger.map((ms, i) => ms + (flushMs.wardenLedger[i] ?? 0))
  const ledgerWithoutJournalVsOff = med("wardenLedgerNoJournal") / med("warden")
  const ledgerOnVsOffWithFlush = median(times.warden) / median(ledgerWithFlushMs)
  // What the cards add to a pass, per card (both mixes differ by the requests and their resolutions).
  const perCardUs =
    ((median(times.warden) - median(times.wardenQuiet) - (median(times.baseline) - median(times.baselineQuiet))) *
      1000) /
    mix.requests

  const kinds = Object.entries(mix.byKind).sort((a, b) => b[1].frames - a[1].frames)
  const label: Record<Contender, string> = {
    warden: "Warden read loop (AppServerConnection)",
    wardenLedger: "Warden read loop, ledger on",
    wardenLedgerNoJournal: "Warden read loop, ledger on without its answer journal",
    baseline: "plain-callback reader (baseline)",
    raw: "split + JSON.parse, string split (raw)",
    rawBytes: "split + JSON.parse, byte split (raw)",
    wardenQuiet: "Warden, same turns without approval requests",
    baselineQuiet: "baseline, same turns without approval requests"
  }
  const main: ReadonlyArray<Contender> = ["warden", "baseline", "raw", "rawBytes"]
  return {
    name: "framePipeline",
    title: "1. Frame pipeline throughput",
    params: {
      frames: mix.frames,
      bytes: mix.bytes.length,
      chunks: mix.chunks.length,
      chunkBytes: Mix.CHUNK_BYTES,
      threads: mix.threadIds.length,
      requests: mix.requests,
      rounds,
      warmups
    },
    metrics: {
      wardenFramesPerSec: med("warden"),
      baselineFramesPerSec: med("baseline"),
      rawStringSplitFramesPerSec: med("raw"),
      rawByteSplitFramesPerSec: med("rawBytes"),
      rawLimitFramesPerSec: med(limit),
      wardenMiBPerSec: median(mibps("warden")),
      baselineMiBPerSec: median(mibps("baseline")),
      rawLimitMiBPerSec: median(mibps(limit)),
      wardenPassMsMedian: median(times.warden),
      baselinePassMsMedian: median(times.baseline),
      rawLimitPassMsMedian: median(times[limit]),
      wardenCpuFramesPerSec: cpuFps("warden"),
      baselineCpuFramesPerSec: cpuFps("baseline"),
      rawLimitCpuFramesPerSec: cpuFps(limit),
      wardenLedgerFramesPerSec: med("wardenLedger"),
      wardenLedgerPassMsMedian: median(times.wardenLedger),
      ledgerFlushAfterPassMsMedian: median(flushMs.wardenLedger),
      wardenLedgerNoJournalFramesPerSec: med("wardenLedgerNoJournal"),
      wardenNoApprovalsFramesPerSec: med("wardenQuiet"),
      baselineNoApprovalsFramesPerSec: med("baselineQuiet"),
      approvalCardExtraUsPerCard: perCardUs
    },
    ratios: {
      wardenVsBaseline: vsBaseline,
      wardenVsRaw: vsRaw,
      baselineVsRaw,
      wardenVsBaselineCpu: cpuFps("warden") / cpuFps("baseline"),
      wardenVsRawCpu: cpuFps("warden") / cpuFps(limit),
      wardenVsBaselineNoApprovals: quietVsBaseline,
      ledgerOnVsOff,
      ledgerOnVsOffCpu,
      ledgerOnVsOffWithFlush,
      ledgerWithoutJournalVsOff
    },
    targets: [
      {
        name: "ratio vs plain-callback baseline",
        target: ">= 1.0x",
        value: round(vsBaseline, 3),
        met: vsBaseline >= 1
      },
      { name: "ratio vs raw limit", target: ">= 0.5x", value: round(vsRaw, 3), met: vsRaw >= 0.5 },
      {
        name: "ledger on ÷ off (read loop)",
        target: ">= 0.9x",
        value: round(ledgerOnVsOff, 3),
        met: ledgerOnVsOff >= 0.9
      }
    ],
    tables: [
      {
        title: `Frame pipeline: ${mix.frames.toLocaleString("en-US")} frames, ${(mix.bytes.length / 2 ** 20).toFixed(1)} MiB in ${mix.chunks.length} chunks of 64 KiB, ${mix.threadIds.length} threads, ${mix.requests} approval requests; median of ${rounds} interleaved rounds`,
        columns: ["reader", "frames/s (median)", "min", "max", "MiB/s", "pass ms", "Warden ÷ this", "same, CPU time"],
        rows: main.map((c) => [
          label[c] + (c === limit ? " = limit" : ""),
          med(c),
          min(fps(c)),
          max(fps(c)),
          median(mibps(c)),
          median(times[c]),
          ratioCell(med("warden") / med(c)),
          ratioCell(cpuFps("warden") / cpuFps(c))
        ])
      },
      {
        title: `The ledger's cost: the same mix with a ledger recording every card (${mix.requests} cards opened and settled), SQLite in a temp file`,
        columns: [
          "reader",
          "frames/s (median)",
          "pass ms",
          "writer after the pass, ms",
          "ledger on ÷ off",
          "same, CPU time",
          "pass + writer, on ÷ off"
        ],
        rows: [
          [label.warden, med("warden"), median(times.warden), "", "", "", ""],
          [
            label.wardenLedger,
            med("wardenLedger"),
            median(times.wardenLedger),
            median(flushMs.wardenLedger),
            ratioCell(ledgerOnVsOff),
            ratioCell(ledgerOnVsOffCpu),
            ratioCell(ledgerOnVsOffWithFlush)
          ],
          [
            label.wardenLedgerNoJournal,
            med("wardenLedgerNoJournal"),
            median(times.wardenLedgerNoJournal),
            median(flushMs.wardenLedgerNoJournal),
            ratioCell(ledgerWithoutJournalVsOff),
            ratioCell(cpuFps("wardenLedgerNoJournal") / cpuFps("warden")),
            ""
          ]
        ]
      },
      {
        title: `Where the difference is: the same turns without their ${mix.requests} approval requests (${quiet.frames.toLocaleString("en-US")} frames)`,
        columns: ["reader", "frames/s (median)", "pass ms", "Warden ÷ baseline", "same, CPU time"],
        rows: [
          [
            label.wardenQuiet,
            med("wardenQuiet"),
            median(times.wardenQuiet),
            ratioCell(quietVsBaseline),
            ratioCell(cpuFps("wardenQuiet") / cpuFps("baselineQuiet"))
          ],
          [label.baselineQuiet, med("baselineQuiet"), median(times.baselineQuiet), "", ""],
          [`≈ what one card costs Warden beyond the baseline's callback, µs`, perCardUs, "", "", ""]
        ]
      },
      {
        title: "The mix (frames and bytes by kind)",
        columns: ["kind", "frames", "share of frames", "bytes", "share of bytes"],
        rows: kinds.map(([kind, s]) => [
          kind,
          s.frames,
          `${((100 * s.frames) / mix.frames).toFixed(1)} %`,
          s.bytes,
          `${((100 * s.bytes) / mix.bytes.length).toFixed(1)} %`
        ])
      }
    ],
    notes: [
      "frames/s: wall clock from the first chunk to the last frame handled (Warden: routed, every approval answered and the answer at the peer), one macrotask per chunk as a pipe delivers them.",
      `CPU-time column: the same ratio from process.cpuUsage() per pass, less sensitive to other processes (load average ${loadavg()[0]?.toFixed(2)} at the end of this benchmark).`
    ]
  }
}

/** The benchmark, run 3 times (once in quick mode): every target is the median of the runs, with their spread. */
export const run = repeated(runOnce)
