/**
 * Throughput of a fleet, for docs/scaling.md: for each runner count given (default 1 2 3), a
 * throwaway PostgreSQL, that many `warden runner` processes over the pinned codex 0.171.0 (one
 * shared CODEX_HOME), and one `warden submit --approvals stdin` of ITEMS items (default 30), each
 * raising one command approval that this script accepts as soon as `card.opened` is printed.
 *
 * Prints one JSON line per runner count: items per minute (first `item.placed` → `run.finished`),
 * inbox latency as the submitter sees it (its `card.opened` line → its `card.settled` line) and as
 * the runner measures it (`latencyMs`: card opened → settled), medians and 90th percentiles.
 *
 *   node_modules/.bin/tsx apps/cli/test/support/ClusterBench.ts 1 2 3
 */
import { untilEffect } from "@warden/test-support/Polling"
import * as Postgres from "@warden/test-support/Postgres"
import { freePort } from "@warden/test-support/Processes"
import { RealCodex, ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as Os from "node:os"
import * as CliProcess from "./CliProcess.js"
import * as Codex from "./Codex.js"
import { lastShards } from "./Fleet.js"

const ITEMS = Number(process.env["ITEMS"] ?? 30)

const until = (what: string, condition: () => boolean) =>
  untilEffect(what, Effect.sync(condition), { timeout: "600 seconds", every: "100 millis" })

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

const measure = (runnerCount: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const lanes = Object.fromEntries(
        Array.from({ length: ITEMS }, (_, i) => [
          `i${i}`,
          [
            Step.execCommand({ cmd: `echo bench-${i}`, escalated: true, justification: "bench" }),
            Step.message(`done ${i}`)
          ]
        ])
      )
      const codex = yield* Codex.setup({ lanes })
      const pg = yield* Postgres.start()
      const runners: Array<CliProcess.Cli> = []
      for (let i = 0; i < runnerCount; i++) {
        const port = yield* freePort
        const cli = yield* CliProcess.spawn(
          [
            "runner",
            "--cluster",
            pg.url,
            "--listen",
            `127.0.0.1:${port}`,
            ...RealCodex.wardenFlags(codex.launch),
            "--concurrency",
            String(ITEMS)
          ],
          { env: codex.env, stdin: "ignore" }
        )
        yield* cli.waitForJson("ready", (l) => l.type === "runner.ready", "120 seconds")
        runners.push(cli)
        yield* until(
          "shards split",
          () => runners.every((r) => lastShards(r) > 0) && runners.reduce((n, r) => n + lastShards(r), 0) === 300
        )
      }
      const prompts = Array.from({ length: ITEMS }, (_, i) => `${ScriptedModel.laneMarker(`i${i}`)} run the command`)
      const submit = yield* CliProcess.spawn(
        [
          "submit",
          "--cluster",
          pg.url,
          "--json",
          "--approvals",
          "stdin",
          "--cwd",
          codex.launch.workspace,
          "--sandbox",
          "workspace-write",
          ...prompts
        ],
        { env: codex.env }
      )
      const answered = new Set<string>()
      yield* until("run.finished", () => {
        for (const l of submit.json()) {
          if (l.type === "card.opened" && !answered.has(String(l["card"]))) {
            answered.add(String(l["card"]))
            Effect.runSync(submit.write(`${JSON.stringify({ cardId: l["card"], decision: "accept" })}\n`))
          }
        }
        return submit.json().some((l) => l.type === "run.finished")
      })
      yield* submit.endStdin
      yield* submit.exited("60 seconds")
      const lines = submit.json()
      const at = (l: CliProcess.JsonLine) => Date.parse(l.ts)
      const firstPlaced = Math.min(...lines.filter((l) => l.type === "item.placed").map(at))
      const finished = at(lines.find((l) => l.type === "run.finished")!)
      const opened = new Map(lines.filter((l) => l.type === "card.opened").map((l) => [String(l["card"]), at(l)]))
      const seen = lines
        .filter((l) => l.type === "card.settled")
        .map((l) => at(l) - (opened.get(String(l["card"])) ?? NaN))
        .filter(Number.isFinite)
      const engine = lines.filter((l) => l.type === "card.settled").map((l) => Number(l["latencyMs"]))
      const completed = lines.filter((l) => l.type === "item.result" && l["status"] === "completed").length
      return {
        runners: runnerCount,
        items: ITEMS,
        completed,
        seconds: Number(((finished - firstPlaced) / 1000).toFixed(1)),
        itemsPerMinute: Number((ITEMS / ((finished - firstPlaced) / 60_000)).toFixed(1)),
        inboxLatencyMs: { median: quantile(seen, 0.5), p90: quantile(seen, 0.9) },
        cardLatencyMs: { median: quantile(engine, 0.5), p90: quantile(engine, 0.9) },
        load: Os.loadavg().map((n) => Number(n.toFixed(1)))
      }
    })
  )

const counts = process.argv
  .slice(2)
  .map(Number)
  .filter((n) => n > 0)
Effect.runPromise(
  Effect.forEach(counts.length > 0 ? counts : [1, 2, 3], (n) =>
    measure(n).pipe(Effect.tap((r) => Effect.sync(() => console.log(JSON.stringify(r)))))
  )
).catch((e) => {
  console.error(e)
  process.exitCode = 1
})
