/**
 * 2. Approval round trip: a server request in, the answer out.
 *
 * The real Supervisor (approvals engine, connection actor, thread runner, connection cards) on the in-memory
 * transport, with `approvals.handler: () => Effect.succeed(Decision.Accept)`. A BenchPeer plays
 * the server: one work item's thread is started and its turn is running; then, one at a time,
 * each in its own macrotask (as a pipe delivers it), the peer writes an
 * `item/commandExecution/requestApproval` (a real 0.171.0 frame, re-addressed) and the clock runs
 * from the moment the bytes reach the transport's `data` handler (`unsafeSendRaw`) until the
 * client's answer reaches the peer (the writer handed it to the pipe: `onClientWrite`); then the
 * peer sends `serverRequest/resolved`, as codex does, and the next request follows. Live clock
 * (every card also arms its real 15-minute deadline timer).
 *
 * Ledger on: the same supervisor with a ledger (SQLite in a temp file, as `warden run --state`)
 * built before it and attached to it, recording every card, settlement and work event (and
 * journaling every answer before it is written); its writer runs on its own thread, as in every
 * build (see FramePipeline.ts); after each block it finishes (untimed) before the next
 * contender's block. Beside it, reported, not a target: the same ledger without its answer
 * journal, which shows the journal's `write(2)` apart from the rest of the ledger's work.
 *
 * Reference, in the same run, in blocks interleaved with Warden's: the plain-callback client
 * (bench/support/PlainReader.ts) answering the same bytes from its callback, synchronously, each
 * request in its own macrotask too (its clock from the `data` call to its `write`).
 *
 * What the clock covers was fixed in issue 14 (docs/performance.md): the plain client ran its
 * round trips back to back in one synchronous loop (hot caches: 3.7 µs, against 5.3 µs one per
 * macrotask, as Warden's arrive), Warden's clock started before the test double's
 * `Effect.runSync(peer.sendRaw(...))` (a fiber of the bench's own) and stopped when the test
 * double's program fiber got to read the answer (a scheduler hop of the peer's, after the pipe
 * had it).
 *
 * `--profile DIR`: after the measured blocks, a CPU profile of 5,000 more round trips of the
 * Warden contender (ledger off), untimed (approval-round-trip-N.cpuprofile in DIR).
 */
import { Decision } from "@warden/protocol"
import { Supervisor } from "@warden/supervisor"
import { Effect, Exit, Scope } from "effect"
import * as BenchLedger from "./support/BenchLedger.js"
import * as BenchPeer from "./support/BenchPeer.js"
import * as Mix from "./support/Mix.js"
import { PlainClient } from "./support/PlainReader.js"
import type { BenchResult } from "./support/Report.js"
import { repeated, ratioCell } from "./support/Report.js"
import { macrotask, max, mean, nowMs, nowUs, percentile, round } from "./support/Stats.js"
import { profiled } from "./support/Profile.js"

export interface Options {
  readonly quick: boolean
  readonly log: (line: string) => void
  /** `--profile DIR`: a CPU profile of Warden's round trips after the measurement. */
  readonly profile?: string | undefined
}

const encoder = new TextEncoder()

/** The request template, re-addressed; `id` is spliced in per card. */
export const requestFrames = (threadId: string, turnId: string) => {
  const template = Mix.loadTemplates().get("item/commandExecution/requestApproval")
  if (template === undefined) throw new Error(`no item/commandExecution/requestApproval frame in ${Mix.FixturesDir}`)
  const params = { ...template["params"], threadId, turnId, itemId: "call_bench" }
  return {
    request: (id: number) => encoder.encode(JSON.stringify({ method: template["method"], id, params }) + "\n"),
    resolved: (id: number) =>
      encoder.encode(JSON.stringify({ method: "serverRequest/resolved", params: { threadId, requestId: id } }) + "\n")
  }
}

export interface Warden {
  readonly roundTrip: (id: number) => Promise<number>
  readonly close: () => Promise<void>
  readonly answersAccepted: () => number
  /** Wait until the ledger (if on) has written what was recorded. */
  readonly flush: () => Promise<void>
}

export const startWarden = async (options?: {
  readonly ledger?: boolean
  /** With the ledger: `false` leaves out its answer journal (its line before each answer). */
  readonly answerJournal?: false
}): Promise<Warden> => {
  const peer = BenchPeer.make()
  const scope = Effect.runSync(Scope.make())
  // The ledger is built first and closed last (as in the CLI).
  const ledger =
    options?.ledger === true
      ? await Effect.runPromise(
          Scope.extend(
            Effect.orDie(BenchLedger.make(options.answerJournal === false ? { answerJournal: false } : undefined)),
            scope
          )
        )
      : undefined
  const supervisor = await Effect.runPromise(
    Scope.extend(
      Supervisor.make({ approvals: { handler: () => Effect.succeed(Decision.Accept) } }).pipe(
        Effect.provide(peer.memory.layer)
      ),
      scope
    )
  )
  if (ledger !== undefined) await Effect.runPromise(ledger.run.attach(supervisor))
  const handle = await Effect.runPromise(Scope.extend(supervisor.start({ prompt: "bench", cwd: "/tmp/bench" }), scope))
  const threadId = await Effect.runPromise(handle.threadId)
  while (peer.turnsStarted() < 1) await macrotask()
  const frames = requestFrames(threadId, "turn_1")
  let accepted = 0
  let pending: { readonly id: number; readonly done: (t: number) => void } | undefined
  peer.onAnswer = (id, frame) => {
    const at = nowUs()
    if ((frame["result"] as { decision?: unknown } | undefined)?.decision === "accept") accepted++
    if (pending !== undefined && pending.id === id) {
      const p = pending
      pending = undefined
      p.done(at)
    }
  }
  // Synchronous, as a pipe's data event: the bytes are in the transport's decoder when it returns.
  const send = (bytes: Uint8Array) => peer.memory.peer.unsafeSendRaw(bytes)
  return {
    roundTrip: async (id) => {
      const bytes = frames.request(id)
      const answered = new Promise<number>((resolve) => {
        pending = { id, done: resolve }
      })
      // A request arrives as a pipe delivers it: in its own macrotask (an I/O callback), not at
      // the tail of the previous round trip's microtasks.
      await macrotask()
      const t0 = nowUs()
      send(bytes)
      const t1 = await answered
      send(frames.resolved(id))
      return t1 - t0
    },
    close: () => Effect.runPromise(Scope.close(scope, Exit.void)),
    answersAccepted: () => accepted,
    flush: () => (ledger === undefined ? Promise.resolve() : Effect.runPromise(ledger.flush))
  }
}

/** The hand-written client on the same bytes: callback answers, synchronously (time one with `roundTrip` after a macrotask). */
export const startPlain = () => {
  const frames = requestFrames("thr_1", "turn_1")
  let answeredAt = 0
  let lastAnswer = ""
  const client = new PlainClient({
    onThreadEvent: () => {},
    onConnectionEvent: () => {},
    onApproval: () => ({ decision: "accept" }),
    write: (line) => {
      // The peer reads it: parse, as the in-memory peer does for Warden's answers.
      lastAnswer = JSON.parse(line).result.decision
      answeredAt = nowUs()
    }
  })
  return {
    roundTrip: (id: number) => {
      const bytes = frames.request(id)
      const t0 = nowUs()
      client.onData(bytes)
      const t = answeredAt - t0
      client.onData(frames.resolved(id))
      if (lastAnswer !== "accept") throw new Error("the plain client did not accept")
      return t
    }
  }
}

const runOnce = async (options: Options): Promise<BenchResult> => {
  const cards = options.quick ? 500 : 10_000
  // `wardenP50FirstBlockUs` and `wardenP50LastBlockUs` below show whether the measured blocks are
  // alike (a warm-up too short, or an engine that slows down over a run, would show there).
  const warmup = options.quick ? 200 : 2_000
  const block = options.quick ? 250 : 1_000
  options.log(`approval round trip: ${warmup} warm-up cards, then ${cards} measured, in blocks of ${block}`)
  const warden = await startWarden()
  const withLedger = await startWarden({ ledger: true })
  const withoutJournal = await startWarden({ ledger: true, answerJournal: false })
  const plain = startPlain()
  const wardenUs: Array<number> = []
  const ledgerUs: Array<number> = []
  const noJournalUs: Array<number> = []
  const plainUs: Array<number> = []
  let id = 0
  let profiledCards = 0
  const started = nowMs()
  try {
    // Every contender gets each request in a macrotask of its own (Warden's roundTrip waits one).
    const plainRoundTrip = async (n: number) => {
      await macrotask()
      return plain.roundTrip(n)
    }
    for (let i = 0; i < warmup; i++) {
      await warden.roundTrip(id++)
      await withLedger.roundTrip(id++)
      await withoutJournal.roundTrip(id++)
      await plainRoundTrip(id++)
    }
    await withLedger.flush()
    await withoutJournal.flush()
    for (let done = 0; done < cards; done += block) {
      const n = Math.min(block, cards - done)
      // Who goes first alternates between blocks.
      const first = (done / block) % 2 === 0
      if (first) for (let i = 0; i < n; i++) wardenUs.push(await warden.roundTrip(id++))
      for (let i = 0; i < n; i++) ledgerUs.push(await withLedger.roundTrip(id++))
      await withLedger.flush()
      for (let i = 0; i < n; i++) noJournalUs.push(await withoutJournal.roundTrip(id++))
      await withoutJournal.flush()
      if (!first) for (let i = 0; i < n; i++) wardenUs.push(await warden.roundTrip(id++))
      for (let i = 0; i < n; i++) plainUs.push(await plainRoundTrip(id++))
    }
    if (options.profile !== undefined) {
      await profiled(options.profile, "approval-round-trip", 50, async () => {
        for (let i = 0; i < 5_000; i++) await warden.roundTrip(id++)
      })
      profiledCards += 5_000
    }
  } finally {
    await warden.close()
    await withLedger.close()
    await withoutJournal.close()
  }
  const elapsedS = (nowMs() - started) / 1000
  for (const [w, extra] of [
    [warden, profiledCards],
    [withLedger, 0],
    [withoutJournal, 0]
  ] as const) {
    if (w.answersAccepted() !== warmup + cards + extra) {
      throw new Error(`expected ${warmup + cards + extra} accept answers, the peer saw ${w.answersAccepted()}`)
    }
  }
  const summary = (xs: ReadonlyArray<number>) => ({
    p50: percentile(xs, 50),
    p90: percentile(xs, 90),
    p99: percentile(xs, 99),
    p999: percentile(xs, 99.9),
    max: max(xs),
    mean: mean(xs)
  })
  const w = summary(wardenUs)
  const l = summary(ledgerUs)
  const j = summary(noJournalUs)
  const p = summary(plainUs)
  const row = (name: string, s: ReturnType<typeof summary>) => [name, s.p50, s.p90, s.p99, s.p999, s.max, s.mean]
  /** A ledger contender's row of ratios to Warden with the ledger off. */
  const versusOff = (name: string, s: ReturnType<typeof summary>) => [
    name,
    ratioCell(s.p50 / w.p50),
    ratioCell(s.p90 / w.p90),
    ratioCell(s.p99 / w.p99),
    ratioCell(s.p999 / w.p999),
    "",
    ratioCell(s.mean / w.mean)
  ]
  return {
    name: "approvalRoundTrip",
    title: "2. Approval round trip",
    params: { cards, warmup, block, handler: "() => Effect.succeed(Decision.Accept)", clock: "live" },
    metrics: {
      wardenP50Us: w.p50,
      wardenP90Us: w.p90,
      wardenP99Us: w.p99,
      wardenP999Us: w.p999,
      wardenMaxUs: w.max,
      wardenMeanUs: w.mean,
      wardenCardsPerSec: 1e6 / w.mean,
      wardenP50FirstBlockUs: percentile(wardenUs.slice(0, block), 50),
      wardenP50LastBlockUs: percentile(wardenUs.slice(-block), 50),
      ledgerOnP50Us: l.p50,
      ledgerOnP99Us: l.p99,
      ledgerOnMeanUs: l.mean,
      ledgerWithoutJournalP50Us: j.p50,
      ledgerWithoutJournalP99Us: j.p99,
      plainP50Us: p.p50,
      plainP99Us: p.p99,
      elapsedSeconds: elapsedS
    },
    ratios: {
      wardenVsPlainP50: w.p50 / p.p50,
      wardenVsPlainP99: w.p99 / p.p99,
      ledgerOnVsOffP50: l.p50 / w.p50,
      ledgerOnVsOffP99: l.p99 / w.p99,
      ledgerOnVsOffMean: l.mean / w.mean,
      ledgerWithoutJournalVsOffP50: j.p50 / w.p50
    },
    targets: [
      {
        name: "p50 round trip, ratio vs plain callback",
        target: "<= 5x",
        value: round(w.p50 / p.p50, 3),
        met: w.p50 / p.p50 <= 5
      },
      { name: "p99 round trip (ms)", target: "< 1 ms", value: round(w.p99 / 1000, 3), met: w.p99 < 1000 },
      { name: "p99 round trip, ledger on (ms)", target: "< 1 ms", value: round(l.p99 / 1000, 3), met: l.p99 < 1000 },
      // Issue 31: the ledger (with its answer journal: a line per answer, before the answer)
      // costs the round trip at most 30 %.
      {
        name: "p50 round trip, ledger on ÷ off",
        target: "<= 1.3x",
        value: round(l.p50 / w.p50, 3),
        met: l.p50 / w.p50 <= 1.3
      }
    ],
    tables: [
      {
        title: `Approval round trip, µs: ${cards.toLocaleString("en-US")} cards one at a time (after ${warmup.toLocaleString("en-US")} warm-up), handler accepts at once, live clock`,
        columns: ["path", "p50", "p90", "p99", "p99.9", "max", "mean"],
        rows: [
          row("Warden (supervisor, connection cards, card race, writer)", w),
          row("Warden, ledger on (every card recorded)", l),
          row("Warden, ledger on without its answer journal", j),
          row("plain-callback client (reference)", p),
          [
            "Warden ÷ plain",
            ratioCell(w.p50 / p.p50),
            ratioCell(w.p90 / p.p90),
            ratioCell(w.p99 / p.p99),
            "",
            "",
            ratioCell(w.mean / p.mean)
          ],
          versusOff("ledger on ÷ off", l),
          versusOff("ledger on without its journal ÷ off", j)
        ]
      }
    ],
    notes: [
      `Warden: ${Math.round(1e6 / w.mean).toLocaleString("en-US")} cards/s one at a time (mean ${w.mean.toFixed(0)} µs).`,
      `The ledger's answer journal (a line per answer, before the answer, in a mapped file, or a write(2) where its native module is not built: docs/ledger.md, "Durability") is ${(l.p50 - j.p50).toFixed(1)} µs of the p50 (ledger on ${l.p50.toFixed(1)} µs, without its journal ${j.p50.toFixed(1)} µs, ${(j.p50 / w.p50).toFixed(2)}x off); the target is for the ledger as \`warden run\` opens it, with its journal.`
    ]
  }
}

/** The benchmark, run 3 times (once in quick mode): every target is the median of the runs, with their spread. */
export const run = repeated(runOnce)
