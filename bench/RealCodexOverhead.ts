/**
 * 4. Real codex overhead: the same scripted turn with one approval, through Warden and through a
 * minimal direct driver, against the pinned binary (codex 0.171.0) and a ScriptedModel.
 *
 * The turn: the model asks to run `echo` outside the sandbox (an approval request, accepted at
 * once), then answers. Each run gets a fresh ScriptedModel and fresh CODEX_HOME/HOME/workspace
 * (RealCodex.make), built before the clock starts. Timed: spawn to `initialize` response (ready),
 * and spawn to the turn's completion (total). Warden: `Supervisor.make` over ChildProcessTransport
 * with `approvals.handler: () => Effect.succeed(Decision.Accept)`, `supervisor.run(...)`. Direct:
 * bench/support/DirectDriver.ts. Stopping the child is outside the timed section (both stop it).
 * Runs alternate (Warden first, then direct first) so drift on a noisy machine hits both.
 */
import type { ApprovalEvent } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import { Supervisor } from "@warden/supervisor"
import { RealCodex, ScriptedModel, Step } from "@warden/testkit"
import { ChildProcessTransport } from "@warden/transport"
import { Effect, Queue } from "effect"
import type { Scope } from "effect"
import * as DirectDriver from "./support/DirectDriver.js"
import type { BenchResult } from "./support/Report.js"
import { ratioCell } from "./support/Report.js"
import { max, median, min, nowMs, round } from "./support/Stats.js"

export interface Options {
  readonly quick: boolean
  readonly log: (line: string) => void
}

const PROMPT = "run the benchmark command"

interface Run {
  readonly readyMs: number
  readonly totalMs: number
}

/** A fresh model and codex home for one run (removed when the scope closes). */
const fixture: Effect.Effect<RealCodex.Launch, unknown, Scope.Scope> = Effect.gen(function* () {
  const model = yield* ScriptedModel.make([
    Step.execCommand({ cmd: "echo warden-bench", escalated: true, justification: "the benchmark needs one approval" }),
    Step.message("The command ran; done.")
  ])
  return yield* RealCodex.make({ baseUrl: model.baseUrl })
})

const throughWarden = (launch: RealCodex.Launch): Effect.Effect<Run, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const started = nowMs()
    const supervisor = yield* Supervisor.make({ approvals: { handler: () => Effect.succeed(Decision.Accept) } }).pipe(
      Effect.provide(
        ChildProcessTransport.layer({ command: launch.command, args: launch.args, env: launch.env, cwd: launch.cwd })
      )
    )
    const approvals = yield* supervisor.subscribeApprovals
    yield* supervisor.ready
    const readyMs = nowMs() - started
    const result = yield* supervisor.run({ prompt: PROMPT, cwd: launch.workspace, sandbox: "workspace-write" })
    const totalMs = nowMs() - started
    const events = Array.from(yield* Queue.takeAll(approvals)) as Array<ApprovalEvent.ApprovalEvent>
    const accepted = events.filter(
      (e) => e._tag === "CardSettled" && e.settlement.outcome === "accepted" && e.settlement.written
    ).length
    if (result.status !== "completed" || accepted !== 1) {
      return yield* Effect.fail(
        new Error(`Warden run: turn ${result.status}, ${accepted} approvals accepted (expected completed, 1)`)
      )
    }
    return { readyMs, totalMs }
  })

const direct = (launch: RealCodex.Launch): Effect.Effect<Run, unknown> =>
  Effect.flatMap(
    Effect.tryPromise(() => DirectDriver.run(launch, PROMPT)),
    (r) =>
      r.status === "completed" && r.approvals === 1
        ? Effect.succeed({ readyMs: r.readyMs, totalMs: r.totalMs })
        : Effect.fail(new Error(`direct run: turn ${r.status}, ${r.approvals} approvals (expected completed, 1)`))
  )

const once = (which: "warden" | "direct"): Promise<Run> =>
  Effect.runPromise(
    Effect.scoped(Effect.flatMap(fixture, (launch) => (which === "warden" ? throughWarden(launch) : direct(launch))))
  )

export const run = async (options: Options): Promise<BenchResult> => {
  const runs = options.quick ? 2 : 9
  const warmups = options.quick ? 0 : 2
  options.log(`real codex: ${await Effect.runPromise(RealCodex.version)}, ${warmups} warm-up + ${runs} runs each`)
  const warden: Array<Run> = []
  const plain: Array<Run> = []
  for (let i = 0; i < warmups; i++) {
    await once("warden")
    await once("direct")
  }
  for (let i = 0; i < runs; i++) {
    const order = i % 2 === 0 ? (["warden", "direct"] as const) : (["direct", "warden"] as const)
    for (const which of order) (which === "warden" ? warden : plain).push(await once(which))
  }
  const total = (xs: ReadonlyArray<Run>) => xs.map((r) => r.totalMs)
  const ready = (xs: ReadonlyArray<Run>) => xs.map((r) => r.readyMs)
  /** After the handshake: thread/start, the turn, the approval (spawn noise left out). */
  const work = (xs: ReadonlyArray<Run>) => xs.map((r) => r.totalMs - r.readyMs)
  const ratio = median(total(warden)) / median(total(plain))
  const overheadPct = (ratio - 1) * 100
  const workRatio = median(work(warden)) / median(work(plain))
  const row = (name: string, xs: ReadonlyArray<Run>) => [
    name,
    median(total(xs)),
    min(total(xs)),
    max(total(xs)),
    median(ready(xs)),
    median(work(xs)),
    ratioCell(median(total(xs)) / median(total(plain))),
    ratioCell(median(work(xs)) / median(work(plain)))
  ]
  return {
    name: "realCodexOverhead",
    title: "4. Real codex overhead",
    params: {
      runs,
      warmups,
      codex: await Effect.runPromise(RealCodex.version),
      turn: "exec_command (escalated) → approval accepted → message"
    },
    metrics: {
      wardenTotalMsMedian: median(total(warden)),
      directTotalMsMedian: median(total(plain)),
      wardenReadyMsMedian: median(ready(warden)),
      directReadyMsMedian: median(ready(plain)),
      wardenAfterInitializeMsMedian: median(work(warden)),
      directAfterInitializeMsMedian: median(work(plain)),
      overheadPercent: overheadPct
    },
    ratios: { wardenVsDirect: ratio, wardenVsDirectAfterInitialize: workRatio },
    targets: [
      { name: "overhead vs direct driver (%)", target: "< 5 %", value: round(overheadPct, 3), met: overheadPct < 5 }
    ],
    tables: [
      {
        title: `Real codex (${await Effect.runPromise(RealCodex.version)}), one scripted turn with one approval, spawn to turn completed; median of ${runs} runs each, alternating`,
        columns: [
          "driver",
          "total ms (median)",
          "min",
          "max",
          "spawn → initialize ms",
          "initialize → turn completed ms",
          "total ÷ direct",
          "after initialize ÷ direct"
        ],
        rows: [
          row("Warden (Supervisor + ChildProcessTransport)", warden),
          row("direct driver (child_process + readline)", plain)
        ]
      }
    ],
    notes: [
      `Warden's overhead on the whole run: ${overheadPct.toFixed(1)} % (${((workRatio - 1) * 100).toFixed(1)} % after the handshake). The codex process dominates both; ` +
        `on a loaded 2-core machine the spread between runs (min to max) is larger than the difference.`
    ]
  }
}
