/**
 * 6. Fleet: N real threads on one app-server (the pinned codex and a ScriptedModel), each raising
 * one command approval that a handler accepts, all at once. Warden runs in its own process
 * (bench/support/FleetDriver.ts, bundled with esbuild into plain JavaScript first, so that neither
 * tsx's loader nor a module loaded lazily during the run counts) so that its CPU is its own: the
 * model serves from this process. Measured over the same window, from the first submit to the last item
 * finished: Warden's CPU (`process.cpuUsage` in the driver) against the app-server's own (utime +
 * stime of the codex process, from /proc: the agent runtime, which the target is about), and,
 * separately, against the app-server with the commands it ran (the user's workload: here mostly
 * `bash -lc`'s login profile). Module loading and the handshake are outside the window (start-up
 * has its own row).
 *
 * N is 100 in a full run, 10 in quick mode, or `--fleet N`. `--profile DIR` runs the driver with
 * `--cpu-prof` into DIR (open the .cpuprofile in Chrome's DevTools or speedscope).
 */
import { RealCodex, ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as esbuild from "esbuild"
import { spawn } from "node:child_process"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as BuiltCli from "./support/BuiltCli.js"
import * as CliFleet from "./support/CliFleet.js"
import type { DriverInput, DriverOutput } from "./support/FleetDriver.js"
import type { BenchResult } from "./support/Report.js"
import { ratioCell } from "./support/Report.js"
import { max, median, min, round } from "./support/Stats.js"

export interface Options {
  readonly quick: boolean
  readonly log: (line: string) => void
  readonly fleet?: number | undefined
  readonly profile?: string | undefined
}

const here = dirname(fileURLToPath(import.meta.url))
const driver = join(here, "support", "FleetDriver.ts")

/** The driver as one ESM file of plain JavaScript (with a source map, for profiles). */
const bundleDriver = async (dir: string): Promise<string> => {
  const outfile = join(dir, "fleet-driver.mjs")
  await esbuild.build({
    entryPoints: [driver],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    sourcemap: true,
    outfile,
    logLevel: "error",
    // Bundled CommonJS dependencies (ajv, yaml) may call require().
    banner: {
      js: "import { createRequire as __warden_cr } from 'node:module'; const require = __warden_cr(import.meta.url);"
    }
  })
  return outfile
}

const runDriver = (bundle: string, input: DriverInput, profile: string | undefined): Promise<DriverOutput> =>
  new Promise((resolve, reject) => {
    const args = [...(profile ? ["--cpu-prof", "--cpu-prof-dir", profile] : []), bundle, JSON.stringify(input)]
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    child.stdout.on("data", (chunk) => (out += chunk))
    child.stderr.on("data", (chunk) => (err += chunk))
    child.on("error", reject)
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`fleet driver exited ${code}: ${err.slice(-2_000)}`))
      try {
        resolve(JSON.parse(out.trim().split("\n").pop() ?? "") as DriverOutput)
      } catch (error) {
        reject(new Error(`fleet driver printed no result: ${String(error)}; stderr: ${err.slice(-2_000)}`))
      }
    })
  })

/**
 * Which Warden drives the fleet: the library in its own process, the built CLI with its defaults,
 * the built CLI without its ledger (`--no-state`), and with its defaults and telemetry
 * (`--otlp` to a collector in this process that takes everything and keeps nothing).
 */
type Path = "library" | "cli" | "cliNoLedger" | "cliOtlp"
const Paths: ReadonlyArray<Path> = ["library", "cli", "cliNoLedger", "cliOtlp"]

/** A collector for `--otlp`: answers every export 200, keeps nothing. Its URL. */
const collector = (): Promise<{ readonly url: string; readonly close: () => Promise<void> }> =>
  new Promise((resolve) => {
    const server = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${address.port}`,
        close: () => new Promise<void>((done) => server.close(() => done()))
      })
    })
  })

/** One fleet: a fresh model with a lane per thread and a fresh codex home, then the driver or the CLI. */
const once = (
  path: Path,
  bundle: string,
  items: number,
  profile: string | undefined,
  otlp: string
): Promise<DriverOutput> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const lanes: Record<string, ReadonlyArray<typeof Step.Step.Encoded>> = {}
        for (let i = 0; i < items; i++) {
          lanes[`t${i}`] = [
            Step.execCommand({
              cmd: `echo fleet-${i}`,
              escalated: true,
              justification: "the fleet benchmark needs one approval"
            }),
            Step.message(`item ${i} done.`)
          ] as never
        }
        const model = yield* ScriptedModel.make({ lanes })
        const launch = yield* RealCodex.make({ baseUrl: model.baseUrl })
        if (path !== "library") {
          const extra = path === "cliNoLedger" ? ["--no-state"] : path === "cliOtlp" ? ["--otlp", otlp] : []
          return yield* Effect.promise(() => CliFleet.run(items, launch, profile, extra))
        }
        return yield* Effect.promise(() =>
          runDriver(
            bundle,
            {
              items,
              command: launch.command,
              args: launch.args,
              env: launch.env,
              cwd: launch.cwd,
              workspace: launch.workspace
            },
            profile
          )
        )
      })
    )
  )

export const run = async (options: Options): Promise<BenchResult> => {
  const items = options.fleet ?? (options.quick ? 10 : 100)
  const runs = options.quick ? 1 : 3
  const codex = await Effect.runPromise(RealCodex.version)
  options.log(
    `fleet: codex ${codex}, ${items} threads on one app-server, ${runs} run(s) each through the library and the built CLI (defaults, --no-state, --otlp)`
  )
  BuiltCli.build()
  const outputs: Record<Path, Array<DriverOutput>> = { library: [], cli: [], cliNoLedger: [], cliOtlp: [] }
  const dir = mkdtempSync(join(tmpdir(), "warden-fleet-"))
  const bundle = await bundleDriver(dir)
  const sink = await collector()
  try {
    for (let i = 0; i < runs; i++) {
      // Interleaved, who goes first rotating: a noisy minute slows them alike.
      const order = Paths.map((_, k) => Paths[(i + k) % Paths.length]!)
      for (const path of order) {
        const output = await once(
          path,
          bundle,
          items,
          options.profile ? join(options.profile, path) : undefined,
          sink.url
        )
        options.log(
          `  run ${i + 1}, ${path}: ${output.completed}/${items} completed, ${output.accepted} accepted; Warden ${Math.round(output.wardenCpuMs)} ms CPU, app-server ${Math.round(output.appServerCpuMs)} ms CPU (${Math.round(output.appServerWithCommandsCpuMs)} ms with its commands), ${Math.round(output.wallMs)} ms wall`
        )
        outputs[path].push(output)
      }
    }
  } finally {
    await sink.close()
    rmSync(dir, { recursive: true, force: true })
  }
  const of = (path: Path) => {
    const o = outputs[path]
    const ratios = o.map((x) => x.wardenCpuMs / x.appServerCpuMs)
    return {
      o,
      ratios,
      ratio: median(ratios),
      withCommands: median(o.map((x) => x.wardenCpuMs / x.appServerWithCommandsCpuMs)),
      allSettled: o.every((x) => x.completed === items && x.accepted === items),
      perItem: median(o.map((x) => x.wardenCpuMs / items))
    }
  }
  const library = of("library")
  const cli = of("cli")
  const cliNoLedger = of("cliNoLedger")
  const cliOtlp = of("cliOtlp")
  const label: Record<Path, string> = {
    library: "library (Supervisor, a handler accepts)",
    cli: "built CLI, defaults (warden run --json --approvals stdin: ledger, JSON lines)",
    cliNoLedger: "built CLI, --no-state (no ledger)",
    cliOtlp: "built CLI, defaults and --otlp (telemetry on)"
  }
  /** Warden's CPU per item without `what` ÷ with it: as "on ÷ off" throughput, 1 when it costs nothing. */
  const onVsOff = (name: string, off: ReturnType<typeof of>, on: ReturnType<typeof of>) => {
    const value = off.perItem / on.perItem
    const perRun = off.o.map((o, i) => o.wardenCpuMs / (on.o[i]?.wardenCpuMs ?? Number.NaN))
    return {
      name: `fleet of ${items} through the built CLI: ${name} on ÷ off (the CLI's CPU per item, off ÷ on)`,
      target: ">= 0.9x",
      value: round(value, 3),
      met: value >= 0.9 && off.allSettled && on.allSettled,
      alsoRequires: "every item completed and its card accepted",
      spread: { min: min(perRun), max: max(perRun), runs }
    }
  }
  const target = (path: Path, r: ReturnType<typeof of>) => ({
    name: `fleet of ${items} through the ${path === "cli" ? "built CLI (default options)" : "library"}: Warden CPU ÷ the app-server's own CPU`,
    target: "≤ 0.10",
    value: round(r.ratio, 3),
    met: r.ratio <= 0.1 && r.allSettled,
    alsoRequires: "every item completed and its card accepted",
    spread: { min: min(r.ratios), max: max(r.ratios), runs }
  })
  return {
    name: "fleet",
    title: "6. Fleet on one real app-server",
    params: {
      items,
      runs,
      codex,
      turn: "exec_command (escalated) → approval accepted (a handler; on stdin for the CLI) → message",
      window: "library: first submit → last item finished; CLI: connection.ready → run.finished"
    },
    metrics: {
      wardenCpuMsMedian: median(library.o.map((o) => o.wardenCpuMs)),
      appServerCpuMsMedian: median(library.o.map((o) => o.appServerCpuMs)),
      appServerWithCommandsCpuMsMedian: median(library.o.map((o) => o.appServerWithCommandsCpuMs)),
      wardenCpuMsPerItemMedian: library.perItem,
      wallMsMedian: median(library.o.map((o) => o.wallMs)),
      cliCpuMsMedian: median(cli.o.map((o) => o.wardenCpuMs)),
      cliAppServerCpuMsMedian: median(cli.o.map((o) => o.appServerCpuMs)),
      cliCpuMsPerItemMedian: cli.perItem,
      cliWallMsMedian: median(cli.o.map((o) => o.wallMs)),
      cliNoLedgerCpuMsPerItemMedian: cliNoLedger.perItem,
      cliOtlpCpuMsPerItemMedian: cliOtlp.perItem,
      completedMin: min(Paths.flatMap((p) => outputs[p]).map((o) => o.completed)),
      acceptedMin: min(Paths.flatMap((p) => outputs[p]).map((o) => o.accepted))
    },
    ratios: {
      wardenCpuVsAppServerCpu: library.ratio,
      wardenCpuVsAppServerCpuMin: min(library.ratios),
      wardenCpuVsAppServerCpuMax: max(library.ratios),
      wardenCpuVsAppServerWithCommandsCpu: library.withCommands,
      cliCpuVsAppServerCpu: cli.ratio,
      cliCpuVsAppServerCpuMin: min(cli.ratios),
      cliCpuVsAppServerCpuMax: max(cli.ratios),
      cliCpuVsAppServerWithCommandsCpu: cli.withCommands,
      cliPerItemVsLibrary: cli.perItem / library.perItem,
      cliLedgerOnVsOff: cliNoLedger.perItem / cli.perItem,
      cliTelemetryOnVsOff: cli.perItem / cliOtlp.perItem,
      // The same two, each run's Warden CPU divided by its app-server's first (see the notes).
      cliLedgerOnVsOffPerAppServerCpu: cliNoLedger.ratio / cli.ratio,
      cliTelemetryOnVsOffPerAppServerCpu: cli.ratio / cliOtlp.ratio
    },
    targets: [
      target("library", library),
      target("cli", cli),
      onVsOff("the ledger", cliNoLedger, cli),
      onVsOff("telemetry (--otlp)", cli, cliOtlp),
      {
        name: `fleet of ${items}: items completed and cards accepted, fewest of the runs (library and CLI)`,
        target: `${items} each`,
        value: Math.min(...Paths.flatMap((p) => outputs[p]).map((o) => Math.min(o.completed, o.accepted))),
        met: Paths.every((p) => of(p).allSettled),
        alsoRequires: "every item completed and its card accepted"
      }
    ],
    tables: [
      {
        title: `${items} threads at once on one codex ${codex}, one approval each; ${runs} run(s) of each, interleaved`,
        columns: [
          "Warden",
          "run",
          "completed",
          "accepted",
          "Warden CPU ms",
          "app-server CPU ms",
          "Warden ÷ app-server",
          "app-server + commands CPU ms",
          "Warden ÷ (app-server + commands)",
          "Warden CPU ms per item",
          "wall ms"
        ],
        rows: Paths.flatMap((path) =>
          outputs[path].map((o, i) => [
            label[path],
            i + 1,
            o.completed,
            o.accepted,
            o.wardenCpuMs,
            o.appServerCpuMs,
            ratioCell(o.wardenCpuMs / o.appServerCpuMs),
            o.appServerWithCommandsCpuMs,
            ratioCell(o.wardenCpuMs / o.appServerWithCommandsCpuMs),
            o.wardenCpuMs / items,
            o.wallMs
          ])
        )
      }
    ],
    notes: [
      `Median Warden ÷ the app-server's own CPU: library ${library.ratio.toFixed(3)} (runs: ${library.ratios.map((r) => r.toFixed(3)).join(", ")}), ` +
        `built CLI ${cli.ratio.toFixed(3)} (runs: ${cli.ratios.map((r) => r.toFixed(3)).join(", ")}); ÷ the app-server with the commands it ran: ${library.withCommands.toFixed(3)} and ${cli.withCommands.toFixed(3)}. ` +
        `The CLI spends ${(cli.perItem / library.perItem).toFixed(1)}x the library's CPU per item (${cli.perItem.toFixed(1)} against ${library.perItem.toFixed(1)} ms); ` +
        `without its ledger ${cliNoLedger.perItem.toFixed(1)} ms, with --otlp ${cliOtlp.perItem.toFixed(1)} ms. ` +
        "The library's CPU is the driver process's own (supervisor, approvals, transport; the scripted model runs in the benchmark's process); the CLI's is the `warden run` process's own, with its defaults: the ledger, JSON lines, masking, stdin decisions. " +
        "The app-server's own CPU is the agent runtime's; its commands are the user's workload (each `bash -lc` spends ~0.5 s in the login profile here), so the targets are against the first. " +
        "The windows leave out module loading and the handshake (start-up has its own row). " +
        `The CLI's on ÷ off rows compare CPU per item; a run in which codex spends more CPU is one in which Warden does too (the machine's speed moves both), so they are also given with each run's Warden CPU divided by its app-server's first (reported, not the target): the ledger ${(cliNoLedger.ratio / cli.ratio).toFixed(3)}, telemetry ${(cli.ratio / cliOtlp.ratio).toFixed(3)}.`
    ]
  }
}
