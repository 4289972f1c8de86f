/**
 * 7. Start-up: how long the published `warden` takes before it does anything, against `node -e 0`
 * (Node's own start-up on this machine) measured in the same rounds.
 *
 * The CLI is built first (`node scripts/build.mjs apps/cli`: tsc is incremental; the bundle and its
 * code cache are made again), then run as the published package runs it: `node
 * apps/cli/dist/bin.cjs`, which for these two commands loads only Node's built-ins and files of its
 * own `dist/` (the bundled `warden run` and its code cache), so the workspace and an npm install
 * run the same bytes.
 *
 * - `warden --version`: spawn to exit.
 * - `warden run` until codex is spawned: `warden run --codex FAKE --restarts 0 --approvals deny
 *   PROMPT`, where FAKE is a bash script that appends bash's `$EPOCHREALTIME` (microseconds) to a
 *   file and exits; timed from just before the spawn of `warden` (`Date.now()`, the same clock) to
 *   that timestamp. Warden then sees its app-server gone and exits 3 (checked). With the ledger
 *   (the default, under this benchmark's own XDG_STATE_HOME) and with `--no-state`: the ledger
 *   opens after the spawn (beside codex's start-up), so the two should be close.
 *
 * Rounds are interleaved (who goes first rotates), after untimed warm-up rounds; medians with min
 * and max. The target is on the medians: ≤ 300 ms wall each.
 */
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { bin, build, bundle, cleanEnv, root } from "./support/BuiltCli.js"
import { pathToFileURL } from "node:url"
import type { BenchResult } from "./support/Report.js"
import { ratioCell } from "./support/Report.js"
import { max, median, min, nowMs, percentile } from "./support/Stats.js"

export interface Options {
  readonly quick: boolean
  readonly log: (line: string) => void
}

/** The target, ms of wall time (median). */
export const TargetMs = 300

const fakeCodex = `#!/usr/bin/env bash
t="\${EPOCHREALTIME:-$(date +%s.%N)}"
printf '%s\\n' "$t" >> "$BENCH_CODEX_SPAWNED"
`

/** Whether a plain `node` accepts the bundle's code cache (V8 rejects one made by another version or under other flags). */
const codeCacheAccepted = (): boolean => {
  const codeCache = Path.join(root, "apps", "cli", "dist", "startup", "CodeCache.js")
  const probe = spawnSync(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `import { load } from ${JSON.stringify(pathToFileURL(codeCache).href)}; process.stdout.write(String(load(${JSON.stringify(bundle)}).cached))`
    ],
    { cwd: root, env: cleanEnv(), encoding: "utf8" }
  )
  return probe.stdout.trim() === "true"
}

interface Contender {
  readonly name: string
  readonly args: ReadonlyArray<string>
  /** One run: its wall time in ms, checked. */
  readonly time: () => number
}

export const run = async (options: Options): Promise<BenchResult> => {
  const rounds = options.quick ? 3 : 20
  const warmups = options.quick ? 1 : 2
  const t0 = nowMs()
  build()
  const buildMs = nowMs() - t0
  const cached = codeCacheAccepted()
  options.log(
    `startup: CLI built in ${(buildMs / 1000).toFixed(1)} s; code cache ${cached ? "accepted" : "NOT accepted"}; ${warmups} warm-up + ${rounds} rounds`
  )

  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-bench-startup-"))
  try {
    const fake = Path.join(dir, "codex")
    Fs.writeFileSync(fake, fakeCodex, { mode: 0o755 })
    const spawned = Path.join(dir, "spawned.txt")
    const version = (
      JSON.parse(Fs.readFileSync(Path.join(root, "apps", "cli", "package.json"), "utf8")) as { version: string }
    ).version

    const wall = (
      args: ReadonlyArray<string>,
      check: (r: ReturnType<typeof spawnSync>) => string | undefined,
      env = cleanEnv()
    ) => {
      const started = nowMs()
      const ran = spawnSync(process.execPath, args, {
        cwd: dir,
        env,
        stdio: ["ignore", "pipe", "pipe"],
        encoding: "utf8"
      })
      const ms = nowMs() - started
      const problem = check(ran)
      if (problem !== undefined)
        throw new Error(`startup: node ${args.join(" ")}: ${problem}\n${String(ran.stderr).slice(-2000)}`)
      return ms
    }

    /**
     * `warden run` until the fake codex runs; the ledger (unless `--no-state`) is the default one
     * under this benchmark's own XDG_STATE_HOME (made by the warm-up rounds, as a user's is).
     */
    const untilSpawned = (name: string, extra: ReadonlyArray<string>): Contender => {
      const args = [bin, "run", "--codex", fake, "--restarts", "0", "--approvals", "deny", ...extra, "start-up"]
      return {
        name,
        args,
        time: () => {
          Fs.rmSync(spawned, { force: true })
          const started = Date.now()
          wall(
            args,
            (r) =>
              r.status === 3 && Fs.existsSync(spawned)
                ? undefined
                : `expected exit 3 after the fake codex ran; exit ${r.status}, fake ran: ${Fs.existsSync(spawned)}`,
            cleanEnv({ BENCH_CODEX_SPAWNED: spawned, XDG_STATE_HOME: Path.join(dir, "state") })
          )
          const first = Fs.readFileSync(spawned, "utf8").split("\n")[0]!.replace(",", ".")
          return Number(first) * 1000 - started
        }
      }
    }

    const contenders: ReadonlyArray<Contender> = [
      {
        name: "node -e 0 (baseline)",
        args: ["-e", "0"],
        time: () => wall(["-e", "0"], (r) => (r.status === 0 ? undefined : `exit ${r.status}`))
      },
      {
        name: "warden --version",
        args: [bin, "--version"],
        time: () =>
          wall([bin, "--version"], (r) =>
            r.status === 0 && String(r.stdout).trim() === version
              ? undefined
              : `exit ${r.status}, stdout ${JSON.stringify(r.stdout)}`
          )
      },
      untilSpawned("warden run, until codex is spawned", []),
      untilSpawned("warden run --no-state, until codex is spawned", ["--no-state"])
    ]

    const times: Array<Array<number>> = contenders.map(() => [])
    for (let r = 0; r < warmups + rounds; r++) {
      for (let k = 0; k < contenders.length; k++) {
        const i = (k + r) % contenders.length
        const ms = contenders[i]!.time()
        if (r >= warmups) times[i]!.push(ms)
      }
    }

    const [baseline, versionMs, runMs, noStateMs] = times as [
      Array<number>,
      Array<number>,
      Array<number>,
      Array<number>
    ]
    const base = median(baseline)
    const row = (c: Contender, xs: ReadonlyArray<number>) => [
      c.name,
      median(xs),
      min(xs),
      max(xs),
      percentile(xs, 90),
      c === contenders[0] ? "" : median(xs) - base,
      c === contenders[0] ? "" : ratioCell(median(xs) / base),
      c === contenders[0] ? "" : median(xs) <= TargetMs ? "yes" : "NO"
    ]
    return {
      name: "startup",
      title: "7. Start-up",
      params: {
        rounds,
        warmups,
        entry: "node apps/cli/dist/bin.cjs",
        codeCacheAccepted: cached,
        node: process.version
      },
      metrics: {
        baselineMsMedian: base,
        baselineMsMin: min(baseline),
        baselineMsMax: max(baseline),
        versionMsMedian: median(versionMs),
        versionMsMin: min(versionMs),
        versionMsMax: max(versionMs),
        versionBeyondBaselineMs: median(versionMs) - base,
        runToSpawnMsMedian: median(runMs),
        runToSpawnMsMin: min(runMs),
        runToSpawnMsMax: max(runMs),
        runToSpawnBeyondBaselineMs: median(runMs) - base,
        runNoStateToSpawnMsMedian: median(noStateMs),
        ledgerBeforeSpawnMs: median(runMs) - median(noStateMs),
        buildMs
      },
      ratios: {
        versionVsBaseline: median(versionMs) / base,
        runToSpawnVsBaseline: median(runMs) / base,
        runToSpawnLedgerOnVsOff: median(runMs) / median(noStateMs)
      },
      targets: [
        {
          name: "warden --version, wall (median, ms)",
          target: `<= ${TargetMs} ms`,
          value: Math.round(median(versionMs)),
          met: median(versionMs) <= TargetMs
        },
        {
          name: "warden run until codex is spawned, wall (median, ms)",
          target: `<= ${TargetMs} ms`,
          value: Math.round(median(runMs)),
          met: median(runMs) <= TargetMs
        }
      ],
      tables: [
        {
          title: `Start-up of the built CLI (node apps/cli/dist/bin.cjs), wall ms; ${rounds} interleaved rounds after ${warmups} warm-up`,
          columns: ["command", "median", "min", "max", "p90", "beyond node -e 0", "÷ node -e 0", `≤ ${TargetMs} ms`],
          rows: [
            row(contenders[0]!, baseline),
            row(contenders[1]!, versionMs),
            row(contenders[2]!, runMs),
            row(contenders[3]!, noStateMs)
          ]
        }
      ],
      notes: [
        `The code cache of the bundled \`warden run\` was ${cached ? "accepted" : "rejected (another Node/V8 version or other flags than the build's): the bundle was compiled from source"}.`,
        "Node's own start-up is in every number: the baseline row is what any `node` command pays on this machine at this load."
      ]
    }
  } finally {
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}
