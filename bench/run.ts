/**
 * `pnpm bench`: run Warden's benchmarks, print their tables, write bench/results/latest.json
 * (a quick run writes bench/results/quick.json, which git ignores).
 *
 *   pnpm bench                     the full run (a few minutes on 2 cores)
 *   pnpm bench -- --quick          smoke mode, seconds (also BENCH_QUICK=1)
 *   pnpm bench -- --only framePipeline,approvalRoundTrip
 *   pnpm bench -- --out /tmp/results.json   write the JSON elsewhere (the smoke test does)
 *   pnpm bench -- --only fleet --fleet 50 --profile /tmp/prof   the fleet's size; CPU profiles of its Warden process
 *   pnpm bench -- --only scale --heap-snapshots /tmp/snaps      heap snapshots after each of the scale row's phases
 *   pnpm bench:built               against the built packages (dist/, after `pnpm build`), not the
 *                                  sources through tsx; writes bench/results/latest-built.json
 *
 * Only a full run writes latest.json (latest-built.json); with --only or --fleet the results go to
 * bench/results/partial.json (ignored by git), unless --out names a file.
 *
 * framePipeline, approvalRoundTrip, scale and telemetry run 3 times in a full run (once in quick mode): each
 * target is the median of the runs, with their min and max (`spread`).
 *
 * Needs `--expose-gc` (the root script passes it to tsx): the scale benchmark measures the heap
 * after full collections. Absolute numbers depend on the machine and its load; the ratios between
 * contenders measured in the same run are the result. See docs/performance.md.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as AdversarialFrames from "./AdversarialFrames.js"
import * as ApprovalRoundTrip from "./ApprovalRoundTrip.js"
import * as Fleet from "./Fleet.js"
import * as FlatMemory from "./FlatMemory.js"
import * as JournalFile from "../packages/ledger/src/internal/JournalFile.js"
import * as FramePipeline from "./FramePipeline.js"
import * as RealCodexOverhead from "./RealCodexOverhead.js"
import * as Scale from "./Scale.js"
import * as Startup from "./Startup.js"
import * as Telemetry from "./Telemetry.js"
import type { BenchResult, Results } from "./support/Report.js"
import { finiteRecord, loadAvg, machine, markdown, render, roundedTable, targetsTable } from "./support/Report.js"
import { nowMs } from "./support/Stats.js"

export const benchmarks = {
  framePipeline: FramePipeline.run,
  approvalRoundTrip: ApprovalRoundTrip.run,
  scale: Scale.run,
  realCodexOverhead: RealCodexOverhead.run,
  adversarialFrames: AdversarialFrames.run,
  fleet: Fleet.run,
  startup: Startup.run,
  telemetry: Telemetry.run,
  flatMemory: FlatMemory.run
} as const

export type BenchName = keyof typeof benchmarks

interface Args {
  readonly quick: boolean
  readonly only: ReadonlyArray<BenchName>
  readonly out: string
  readonly fleet: number | undefined
  readonly profile: string | undefined
  readonly heapSnapshots: string | undefined
}

const here = dirname(fileURLToPath(import.meta.url))

/** Whether `@warden/*` resolve to the built packages here (`bench/support/built.mjs`) or to the sources. */
const modules: Results["modules"] = /\/dist\/[^/]+\.js$/.test(import.meta.resolve("@warden/supervisor"))
  ? "built"
  : "sources"

const parseArgs = (argv: ReadonlyArray<string>): Args => {
  let quick = process.env["BENCH_QUICK"] === "1" || process.env["BENCH_QUICK"] === "true"
  let only: Array<BenchName> = Object.keys(benchmarks) as Array<BenchName>
  let out: string | undefined
  let fleet: number | undefined
  let profile: string | undefined
  let heapSnapshots: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--") continue
    if (arg === "--quick") quick = true
    else if (arg === "--only") {
      const names = (argv[++i] ?? "").split(",").filter((n) => n.length > 0)
      const unknown = names.filter((n) => !(n in benchmarks))
      if (unknown.length > 0 || names.length === 0) {
        throw new Error(
          `--only takes a comma-separated list of ${Object.keys(benchmarks).join(", ")}; got ${JSON.stringify(argv[i] ?? "")}`
        )
      }
      only = names as Array<BenchName>
    } else if (arg === "--out") {
      const path = argv[++i]
      if (path === undefined) throw new Error("--out needs a file path")
      out = path
    } else if (arg === "--fleet") {
      fleet = Number(argv[++i])
      if (!Number.isInteger(fleet) || fleet < 1) throw new Error("--fleet takes a positive number of threads")
    } else if (arg === "--profile") {
      profile = argv[++i]
      if (profile === undefined) throw new Error("--profile needs a directory")
    } else if (arg === "--heap-snapshots") {
      heapSnapshots = argv[++i]
      if (heapSnapshots === undefined) throw new Error("--heap-snapshots needs a directory")
    } else
      throw new Error(
        `unknown argument ${JSON.stringify(arg)} (known: --quick, --only NAMES, --out FILE, --fleet N, --profile DIR, --heap-snapshots DIR)`
      )
  }
  // A quick (smoke) run is not a measurement: it never replaces the committed latest.json.
  // Only a full run replaces the committed results: a run of some benchmarks (`--only`), or with
  // another fleet size, writes partial.json (ignored by git) unless `--out` says otherwise.
  const partial = only.length < Object.keys(benchmarks).length || fleet !== undefined
  const file = quick
    ? "quick.json"
    : partial
      ? "partial.json"
      : modules === "built"
        ? "latest-built.json"
        : "latest.json"
  return { quick, only, out: out ?? join(here, "results", file), fleet, profile, heapSnapshots }
}

export const main = async (argv: ReadonlyArray<string>): Promise<Results> => {
  const args = parseArgs(argv)
  if (typeof (globalThis as { gc?: unknown }).gc !== "function") {
    throw new Error("run the benchmarks with --expose-gc (pnpm bench does: tsx --expose-gc bench/run.ts)")
  }
  const load = loadAvg()
  const started = nowMs()
  const log = (line: string) => console.error(`[bench] ${line}`)
  // The ledger's writer runs on its own thread in every build of Warden (its worker script is in
  // dist/); a worker cannot load the TypeScript sources, so from the sources the benchmarks use
  // the same bundle of them as the test suite (scripts/test-bundle.mjs). `WARDEN_LEDGER_WORKER=off`
  // measures the writer on the main thread instead.
  if (modules === "sources" && process.env["WARDEN_LEDGER_WORKER"] === undefined) {
    const bundler = (await import(pathToFileURL(join(here, "..", "scripts", "test-bundle.mjs")).href)) as {
      readonly bundleLedgerWorker: () => Promise<string>
    }
    process.env["WARDEN_LEDGER_WORKER"] = await bundler.bundleLedgerWorker()
  }
  log(
    `the ledger's writer: ${process.env["WARDEN_LEDGER_WORKER"] === "off" ? "on the main thread" : `on its own thread (${process.env["WARDEN_LEDGER_WORKER"] ?? "dist/"})`}`
  )
  // The answer journal's module as the ledger loads it (the same file in both modes: the build
  // copies packages/ledger/build's into dist/internal/); the bench's files are on /tmp.
  const answerJournal: "mapped" | "write(2)" = JournalFile.loadNative() !== undefined ? "mapped" : "write(2)"
  log(
    `the ledger's answer journal: ${answerJournal === "mapped" ? "a mapped file (packages/ledger/native)" : "write(2)"}`
  )
  log(`${args.quick ? "quick" : "full"} run: ${args.only.join(", ")}`)
  const results: Record<string, BenchResult> = {}
  for (const name of args.only) {
    const t0 = nowMs()
    const result = await benchmarks[name]({
      quick: args.quick,
      log,
      fleet: args.fleet,
      profile: args.profile,
      heapSnapshots: args.heapSnapshots
    })
    results[name] = {
      ...result,
      metrics: finiteRecord(result.metrics),
      ratios: finiteRecord(result.ratios),
      // A target measured once says so: its spread is its value.
      targets: result.targets.map((t) =>
        t.spread !== undefined ? t : { ...t, spread: { min: t.value, max: t.value, runs: 1 } }
      ),
      tables: result.tables.map(roundedTable)
    }
    log(`${name} done in ${((nowMs() - t0) / 1000).toFixed(1)} s`)
    console.log(render(results[name]!))
  }
  const all = Object.values(results)
  console.log(markdown(targetsTable(all)))
  const output: Results = {
    schema: 1,
    date: new Date().toISOString(),
    quick: args.quick,
    durationSeconds: Math.round((nowMs() - started) / 100) / 10,
    modules,
    answerJournal,
    machine: machine(load),
    benchmarks: results
  }
  console.log(
    `\nmodules: ${modules === "built" ? "the built packages (dist/)" : "the sources through tsx"}; the answer journal: ${answerJournal}; machine: ${output.machine.cpu}, ${output.machine.cores} cores, ${output.machine.os}, node ${output.machine.node}; ` +
      `load average ${output.machine.loadAvgStart} at start, ${output.machine.loadAvgEnd} at end`
  )
  mkdirSync(dirname(args.out), { recursive: true })
  writeFileSync(args.out, JSON.stringify(output, null, 2) + "\n")
  log(`wrote ${args.out}`)
  return output
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    () => {
      // Timers of the real-codex benchmark's scopes are closed; nothing should keep us alive, but a
      // benchmark must never hang a build.
      setTimeout(() => process.exit(process.exitCode ?? 0), 1_000).unref()
    },
    (error) => {
      console.error(error)
      process.exit(1)
    }
  )
}
