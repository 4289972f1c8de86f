/**
 * 5. Adversarial frames: the worst time one hostile server-request frame holds the read loop.
 *
 * Everything Warden does synchronously per server request runs on the connection's read loop, and
 * a model writes the commands and the tool arguments. Each shape of `Adversarial` (packages/testkit:
 * 64 KB commands of every nesting kind, 1 MiB masking traps, deep and wide JSON, 10,000+ file
 * patches, huge forms; 16 MiB frames, the transport's limit) goes through the same synchronous path
 * as `AppServerConnection` and `Desk.open` take it: `JSON.parse` of the frame (and of the
 * `item/started` whose file changes the request is about, then `Card.fileChangesOf`),
 * the transport's census of the frame's large objects (`JsonCensus`, part of what its FrameDecoder
 * does per line, timed beyond the parse), `ServerRequests.decode`, `ServerRequests.offersFor`,
 * `CardSummary.summarize`, `Policy.evaluate` (deny and allow rules of every kind),
 * `SafetyFilter.check`.
 *
 * Baseline: `JSON.parse` of the same frame, timed in the same pass (nothing can read a frame for
 * less). Each shape is measured in several rounds from a collected heap (`global.gc`, untimed);
 * medians with the spread. The normal mix's approval requests (bench/support/Mix.ts, the golden
 * transcripts' `item/commandExecution/requestApproval` frames) go through the same path for
 * comparison. The verdicts are checked: a command shape that hides `rm -rf ~` must be denied, a
 * file shape with a path outside the repository must be denied, else the benchmark fails.
 */
import { Card, Policy } from "@warden/approvals"
// Below the public surface (workspace-only subpaths: not published).
import * as CardSummary from "@warden/approvals/internal/CardSummary"
import * as SafetyFilter from "@warden/approvals/internal/SafetyFilter"
import { JsonCensus } from "@warden/json"
import { ServerRequests } from "@warden/protocol"
import { Adversarial } from "@warden/testkit"
import { Either } from "effect"
import * as Mix from "./support/Mix.js"
import type { BenchResult } from "./support/Report.js"
import { ratioCell } from "./support/Report.js"
import { collect, macrotask, max, median, min, nowMs, round } from "./support/Stats.js"

export interface Options {
  readonly quick: boolean
  readonly log: (line: string) => void
}

/** "Well under a second": the most one frame may hold the read loop beyond its own `JSON.parse`. */
const TargetMs = 1_000
/** The most a command line rules read in full (64 KB) may cost: the quadratic shapes took minutes. */
const CommandTargetMs = 250

const rules = (() => {
  const decoded = Policy.decodeRules({
    rules: [
      { id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } },
      { id: "no-curl-pipe", effect: "deny", match: { command: { argvPrefix: ["curl", "-fsSL"] } } },
      { id: "etc", effect: "deny", match: { path: { under: "/etc" } } },
      { id: "git-status", effect: "allow", match: { command: { argvPrefix: ["git", "status"] } } },
      { id: "sudo", effect: "allow", match: { command: { argvPrefix: ["sudo"] } } },
      { id: "repo", effect: "allow", match: { path: { under: "/work/repo" } } },
      { id: "probe", effect: "allow", match: { mcp: { server: "probe" } } }
    ]
  })
  if (Either.isLeft(decoded)) throw new Error(decoded.left)
  return decoded.right
})()

interface Timing {
  readonly parseMs: number
  /** Part of `decodeMs`: the transport's census of the frame's large objects (JsonCensus). */
  readonly censusMs: number
  readonly decodeMs: number
  readonly approvalsMs: number
  readonly verdict: Policy.Verdict
  readonly safety: SafetyFilter.Verdict["_tag"]
}

/** One frame through the read loop's synchronous path, timed in three parts. */
const pass = (frame: string, itemStarted: string | undefined): Timing => {
  const t0 = nowMs()
  const message = JSON.parse(frame) as { id: number | string; method: string; params: unknown }
  const started = itemStarted !== undefined ? (JSON.parse(itemStarted) as { params: { item: unknown } }) : undefined
  const t1 = nowMs()
  // the rest of what the transport's FrameDecoder does per line (JsonCensus.parse): the census
  JsonCensus.census(frame, message)
  if (started !== undefined) JsonCensus.census(itemStarted!, started)
  const tc = nowMs()
  const context: Card.CardContext =
    started !== undefined ? { fileChanges: Card.fileChangesOf(started.params.item) } : {}
  const request = ServerRequests.decode(message.id, message.method, message.params)
  const t2 = nowMs()
  // Desk.open: the card's offers, then (summary on first read) rules and the safety filter
  if (request._tag === "Known") ServerRequests.offersFor(request)
  CardSummary.summarize(request, context)
  const verdict = Policy.evaluate(rules, request, context)
  const safety = SafetyFilter.check(request)._tag
  const t3 = nowMs()
  return { parseMs: t1 - t0, censusMs: tc - t1, decodeMs: t2 - t1, approvalsMs: t3 - t2, verdict, safety }
}

const verdictText = (v: Policy.Verdict) => (v._tag === "NoMatch" ? "no match" : `${v._tag.toLowerCase()} (${v.ruleId})`)

/** The verdict a shape must get; the benchmark refuses to report numbers for wrong answers. */
const check = (shape: Adversarial.Shape, verdict: Policy.Verdict): void => {
  const hidesPayload =
    shape.target === "shell" && (shape.command?.includes(Adversarial.Payload) ?? shape.name === "legacy-exec-argv")
  if (hidesPayload && !(verdict._tag === "Deny" && verdict.ruleId === "no-rm")) {
    throw new Error(`adversarial frame ${shape.name}: expected a deny by no-rm, got ${JSON.stringify(verdict)}`)
  }
  if (shape.target === "fileChange" && !(verdict._tag === "Deny" && verdict.ruleId === "etc")) {
    throw new Error(`adversarial frame ${shape.name}: expected a deny by etc, got ${JSON.stringify(verdict)}`)
  }
}

interface Row {
  readonly name: string
  readonly target: string
  readonly mib: number
  readonly parseMs: number
  readonly censusMs: number
  readonly decodeMs: number
  readonly approvalsMs: number
  /** Per round: decode + approvals. */
  readonly beyond: ReadonlyArray<number>
  readonly verdict: string
  readonly safety: string
}

export const run = async (options: Options): Promise<BenchResult> => {
  // Quick mode is the test suite's smoke run: every shape once, on frames a quarter of a MiB.
  const frameBytes = options.quick ? 256 * 1024 : 16 * 1024 * 1024 - 4096
  const rounds = options.quick ? 1 : 3
  const lazy = Adversarial.lazyShapes({ frameBytes })
  options.log(
    `adversarial frames: ${lazy.length} shapes of up to ${(frameBytes / 2 ** 20).toFixed(1)} MiB, ${rounds} rounds each`
  )

  // Warm-up (untimed): every path once on small frames, so the first shape does not pay the JIT.
  for (const shape of Adversarial.shapes({ frameBytes: 64 * 1024, commandChars: 8 * 1024 }))
    pass(shape.frame, shape.itemStarted)

  const rows: Array<Row> = []
  const started = nowMs()
  for (const spec of lazy) {
    const shape = spec.build()
    const timings: Array<Timing> = []
    for (let r = 0; r < rounds; r++) {
      collect()
      await macrotask()
      timings.push(pass(shape.frame, shape.itemStarted))
    }
    check(shape, timings[0]!.verdict)
    rows.push({
      name: shape.name,
      target: shape.target,
      mib: (shape.frame.length + (shape.itemStarted?.length ?? 0)) / 2 ** 20,
      parseMs: median(timings.map((t) => t.parseMs)),
      censusMs: median(timings.map((t) => t.censusMs)),
      decodeMs: median(timings.map((t) => t.decodeMs)),
      approvalsMs: median(timings.map((t) => t.approvalsMs)),
      beyond: timings.map((t) => t.decodeMs + t.approvalsMs),
      verdict: verdictText(timings[0]!.verdict),
      safety: timings[0]!.safety
    })
  }
  const elapsedS = (nowMs() - started) / 1000

  // The normal mix: the approval requests of the frame-pipeline mix, through the same path.
  const mix = Mix.build(options.quick ? { threads: 4, turnsPerThread: 4 } : { threads: 8, turnsPerThread: 24 })
  const requests = Buffer.from(mix.bytes)
    .toString("utf8")
    .split("\n")
    .filter((line) => {
      if (line.length === 0) return false
      const frame = JSON.parse(line) as { id?: unknown; method?: unknown }
      return frame.id !== undefined && typeof frame.method === "string"
    })
  const mixRounds = options.quick ? 3 : 10
  const perFrame: Array<Timing> = []
  const mixRoundUs: Array<number> = []
  for (let r = 0; r < mixRounds; r++) {
    collect()
    await macrotask()
    const t0 = nowMs()
    for (const line of requests) {
      const t = pass(line, undefined)
      if (r === mixRounds - 1) perFrame.push(t)
    }
    mixRoundUs.push(((nowMs() - t0) * 1000) / requests.length)
  }
  const mixParseUs = median(perFrame.map((t) => t.parseMs * 1000))
  const mixBeyondUs = median(perFrame.map((t) => (t.decodeMs + t.approvalsMs) * 1000))
  const mixWorstBeyondMs = max(perFrame.map((t) => t.decodeMs + t.approvalsMs))

  const beyondMedian = (row: Row) => median(row.beyond)
  const worst = rows.reduce((a, b) => (beyondMedian(b) > beyondMedian(a) ? b : a))
  const worstApprovals = rows.reduce((a, b) => (b.approvalsMs > a.approvalsMs ? b : a))
  const commandRows = rows.filter((row) => row.target === "shell" && row.mib < 1)
  const worstCommand = commandRows.reduce((a, b) => (beyondMedian(b) > beyondMedian(a) ? b : a))
  const worstCommandMs = beyondMedian(worstCommand)
  const worstTotal = rows.reduce((a, b) => (b.parseMs + beyondMedian(b) > a.parseMs + beyondMedian(a) ? b : a))
  const worstBeyondMs = beyondMedian(worst)
  const worstApprovalsMs = worstApprovals.approvalsMs
  const ratio = (row: Row) => (row.parseMs + beyondMedian(row)) / row.parseMs

  return {
    name: "adversarialFrames",
    title: "5. Adversarial frames (the worst a hostile frame holds the read loop)",
    params: { shapes: rows.length, frameBytes, rounds, mixRequests: requests.length, mixRounds },
    metrics: {
      worstBeyondParseMs: worstBeyondMs,
      worstApprovalsMs,
      worstCensusMs: max(rows.map((row) => row.censusMs)),
      worstCommandMs,
      worstTotalMs: worstTotal.parseMs + beyondMedian(worstTotal),
      worstTotalParseMs: worstTotal.parseMs,
      mixPerFrameUs: median(mixRoundUs),
      mixParseUs,
      mixBeyondParseUs: mixBeyondUs,
      mixWorstBeyondParseMs: mixWorstBeyondMs,
      elapsedS
    },
    ratios: {
      worstBeyondParseVsMix: worstBeyondMs / (mixBeyondUs / 1000),
      worstTotalVsParse: (worstTotal.parseMs + beyondMedian(worstTotal)) / worstTotal.parseMs
    },
    targets: [
      {
        name: `worst work beyond JSON.parse per frame (${worst.name}), ms`,
        target: `< ${TargetMs} ms`,
        value: round(worstBeyondMs, 3),
        met: worstBeyondMs < TargetMs
      },
      {
        name: `worst work beyond JSON.parse per 64 KB command (${worstCommand.name}), ms`,
        target: `< ${CommandTargetMs} ms`,
        value: round(worstCommandMs, 3),
        met: worstCommandMs < CommandTargetMs
      }
    ],
    tables: [
      {
        title: `Adversarial frames: ${rows.length} shapes of up to ${(frameBytes / 2 ** 20).toFixed(1)} MiB (commands ${Math.round(65_000 / 1000)} KB), ms per frame, median of ${rounds} rounds from a collected heap`,
        columns: [
          "shape",
          "kind",
          "MiB",
          "JSON.parse (baseline)",
          "census + decode",
          "(census)",
          "offers + summary + rules + filter",
          "beyond parse",
          "min",
          "max",
          "total ÷ parse",
          "verdict",
          "filter"
        ],
        rows: [...rows]
          .sort((a, b) => beyondMedian(b) - beyondMedian(a))
          .map((row) => [
            row.name,
            row.target,
            row.mib,
            row.parseMs,
            row.decodeMs,
            row.censusMs,
            row.approvalsMs,
            beyondMedian(row),
            min(row.beyond),
            max(row.beyond),
            ratioCell(ratio(row)),
            row.verdict,
            row.safety
          ])
      },
      {
        title: "The normal mix next to the worst adversarial frame (same path, same rules)",
        columns: ["frames", "per frame: JSON.parse", "beyond parse", "worst beyond parse"],
        rows: [
          [
            `normal mix: ${requests.length} command approvals (golden transcripts), µs`,
            mixParseUs,
            mixBeyondUs,
            mixWorstBeyondMs * 1000
          ],
          [
            `adversarial: worst of ${rows.length} shapes (${worst.name}), µs`,
            worst.parseMs * 1000,
            worstBeyondMs * 1000,
            max(worst.beyond) * 1000
          ]
        ]
      }
    ],
    notes: [
      "beyond parse: the census (JsonCensus: the transport's scan of a frame of 64 KiB or more that registers its large objects' key counts) + decode (ServerRequests.decode, and Card.fileChangesOf of the item/started) + ServerRequests.offersFor + CardSummary.summarize + Policy.evaluate + SafetyFilter.check; the frame's own JSON.parse is the baseline no reader avoids.",
      `deep shapes nest at most ${Adversarial.MaxNesting.toLocaleString("en-US")} levels: deeper only measures JSON.parse (about a second per million levels); command shapes are ~64 KB, just under Policy.MaxCommandLength (a longer line is not read).`,
      `verdicts are checked: every command shape hiding \`${Adversarial.Payload}\` is denied by no-rm, every file shape by etc (a path outside the repository); a wrong verdict fails the benchmark.`
    ]
  }
}
