/**
 * 8. Telemetry's cost on the read loop: the frame pipeline (FramePipeline.ts, the same mix and
 * the same real AppServerConnection) with the instrumentation off, as every run without
 * `--otlp` / `Observability.layer` has it, and on, as a supervisor with `Telemetry` builds the
 * connection: the read-loop lag measured per batch of frames (a clock read and a histogram update)
 * and every card's span a child of its thread's, describing its settlement (source, decision,
 * latency, kind, the masked title) and a log record for it, handed to a logger that counts them
 * (the connection describes settled cards in batches; each pass describes what still waits before
 * it ends, so all of it is the pass's). The tracer is Effect's own and the logger counts (no
 * exporter): what is measured is what Warden adds, not the network.
 *
 * Off, the read loop runs no telemetry code but one `performance.now()` per stdout chunk in the
 * transport and a property read per card: the "off" contender is the framePipeline row's Warden
 * read loop. Rounds interleave the two; the ratio is between the medians of the same run.
 */
import { wardenRunner } from "./FramePipeline.js"
import * as Mix from "./support/Mix.js"
import type { BenchResult } from "./support/Report.js"
import { repeated } from "./support/Report.js"
import { collect, macrotask, max, median, min, nowMs, round } from "./support/Stats.js"

export interface Options {
  readonly quick: boolean
  readonly log: (line: string) => void
}

type Contender = "off" | "on"

const runOnce = async (options: Options): Promise<BenchResult> => {
  const shape = options.quick
    ? { threads: 4, turnsPerThread: 4, largeDiffEvery: 4 }
    : { threads: 8, turnsPerThread: 24 }
  const mix = Mix.build(shape)
  const rounds = options.quick ? 3 : 12
  const warmups = options.quick ? 1 : 2
  options.log(
    `telemetry: ${mix.frames} frames, ${mix.requests} approval requests; ${rounds} rounds, off and on interleaved`
  )
  const runners = { off: await wardenRunner(mix), on: await wardenRunner(mix, { telemetry: true }) }
  const order: ReadonlyArray<Contender> = ["off", "on"]
  const times: Record<Contender, Array<number>> = { off: [], on: [] }
  try {
    for (let i = 0; i < warmups; i++) for (const c of order) await runners[c].pass()
    for (let r = 0; r < rounds; r++) {
      for (let k = 0; k < order.length; k++) {
        const c = order[(r + k) % order.length]!
        collect()
        await macrotask()
        const t0 = nowMs()
        await runners[c].pass()
        times[c].push(nowMs() - t0)
      }
    }
    // Every card's log record was built and handed to the logger (the pass describes what waits).
    const passes = warmups + rounds
    if (runners.on.records() < passes * mix.requests) {
      throw new Error(`telemetry: ${runners.on.records()} log records for ${passes * mix.requests} cards`)
    }
  } finally {
    for (const c of order) await runners[c].close()
  }
  const fps = (c: Contender) => times[c].map((ms) => mix.frames / (ms / 1000))
  const onVsOff = median(fps("on")) / median(fps("off"))
  const perCardUs = ((median(times.on) - median(times.off)) * 1000) / mix.requests
  return {
    name: "telemetry",
    title: "8. Telemetry cost on the read loop",
    params: { frames: mix.frames, requests: mix.requests, chunks: mix.chunks.length, rounds, warmups },
    metrics: {
      offFramesPerSec: median(fps("off")),
      onFramesPerSec: median(fps("on")),
      offPassMsMedian: median(times.off),
      onPassMsMedian: median(times.on),
      onExtraUsPerCard: perCardUs
    },
    ratios: { onVsOff },
    targets: [
      { name: "telemetry on ÷ off (frames/s)", target: ">= 0.9x", value: round(onVsOff, 3), met: onVsOff >= 0.9 }
    ],
    tables: [
      {
        title: `Frame pipeline with the instrumentation off and on: ${mix.frames.toLocaleString("en-US")} frames, ${mix.requests} approval requests; median of ${rounds} interleaved rounds`,
        columns: ["read loop", "frames/s (median)", "min", "max", "pass ms", "÷ off"],
        rows: order.map((c) => [
          c === "off"
            ? "telemetry off (no Telemetry: every run without --otlp)"
            : "telemetry on (Telemetry: lag, card spans under the thread)",
          median(fps(c)),
          min(fps(c)),
          max(fps(c)),
          median(times[c]),
          median(fps(c)) / median(fps("off"))
        ])
      }
    ],
    notes: [
      "Off, nothing of the instrumentation runs on the loop but one performance.now() per stdout chunk (transport) and one property read per card: the off row is the framePipeline row's Warden read loop.",
      "On, each card's span also gets its settlement's attributes and the masked summary is built for its title, and its log record is built and handed to a logger (one that counts: every card's record is checked to be there), in batches of the connection's (64 cards or 20 ms), the rest at the end of each pass, inside its time; card metrics are counted by the supervisor's own fiber from the approval events, outside this loop."
    ]
  }
}

/** Run 3 times in a full run (once in quick mode): its row is as noisy as the frame pipeline's. */
export const run = repeated(runOnce)
