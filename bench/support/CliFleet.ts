/**
 * The fleet through the built CLI with its default options, as a user runs it:
 * `node apps/cli/dist/bin.cjs run --json --approvals stdin --concurrency N` on the launch's codex,
 * one prompt per item, every card accepted on stdin as its `card.opened` line arrives. The ledger
 * is on (its default file, under the launch's HOME), every line is masked and written: the default
 * path. Measured from `connection.ready` (modules loaded, codex spawned, the handshake done): the
 * CLI process's own CPU until `run.finished` (its ledger written, codex stopped), and its
 * app-server's (utime + stime from /proc) until the last `item.finished` (codex is stopped before
 * `run.finished`), with and without the commands it ran.
 */
import { RealCodex, ScriptedModel } from "@warden/testkit"
import { spawn } from "node:child_process"
import { bin } from "./BuiltCli.js"
import type { DriverOutput } from "./FleetDriver.js"
import { childPids, cpuOfPid, treeCpu } from "./ProcCpu.js"

export const run = (
  items: number,
  launch: RealCodex.Launch,
  profile: string | undefined,
  /** More options for `warden run` (`--no-state`, `--otlp URL`): the other CLI contenders. */
  extra: ReadonlyArray<string> = []
): Promise<DriverOutput> =>
  new Promise((resolve, reject) => {
    const prompts = Array.from(
      { length: items },
      (_, i) => `${ScriptedModel.laneMarker(`t${i}`)} run the fleet command`
    )
    const args = [
      ...(profile ? ["--cpu-prof", "--cpu-prof-dir", profile] : []),
      bin,
      "run",
      "--json",
      "--approvals",
      "stdin",
      "--concurrency",
      String(items),
      ...RealCodex.wardenRunFlags(launch),
      ...extra,
      ...prompts
    ]
    // The launch's environment is whole (HOME, CODEX_HOME, PATH, the dummy key): no NODE_OPTIONS.
    const child = spawn(process.execPath, args, { cwd: launch.cwd, env: { ...launch.env }, stdio: "pipe" })
    let buffered = ""
    let err = ""
    let start: { at: number; cli: number; server: number; tree: number } | undefined
    let result: DriverOutput | undefined
    let appServerPids: Array<number> = []
    let completed = 0
    let accepted = 0
    let cards = 0
    let finished = 0
    let server: { own: number; tree: number } | undefined
    const cliPid = child.pid!
    const serverOwn = () => appServerPids.reduce((s, p) => s + cpuOfPid(p, true), 0)
    const serverTree = () => appServerPids.reduce((s, p) => s + treeCpu(p), 0)
    const onLine = (text: string) => {
      let line: Record<string, unknown>
      try {
        line = JSON.parse(text)
      } catch {
        return
      }
      switch (line["type"]) {
        case "connection.ready":
          if (start === undefined) {
            appServerPids = childPids(cliPid)
            start = { at: performance.now(), cli: cpuOfPid(cliPid, true), server: serverOwn(), tree: serverTree() }
          }
          break
        case "card.opened":
          child.stdin.write(`${JSON.stringify({ cardId: line["cardId"], decision: "accept" })}\n`)
          break
        case "card.settled":
          cards++
          if (line["outcome"] === "accepted" && line["written"] === true) accepted++
          break
        case "item.finished":
          if (line["status"] === "completed") completed++
          // The app-server's CPU is read while it lives: it is stopped before run.finished.
          if (++finished === items) server = { own: serverOwn(), tree: serverTree() }
          break
        case "run.finished":
          if (start !== undefined)
            result = {
              items,
              completed,
              accepted,
              cards,
              wallMs: performance.now() - start.at,
              wardenCpuMs: cpuOfPid(cliPid, true) - start.cli,
              appServerCpuMs: (server?.own ?? serverOwn()) - start.server,
              appServerWithCommandsCpuMs: (server?.tree ?? serverTree()) - start.tree,
              appServerPids
            }
          child.stdin.end()
          break
      }
    }
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk: string) => {
      buffered += chunk
      let newline = buffered.indexOf("\n")
      while (newline >= 0) {
        onLine(buffered.slice(0, newline))
        buffered = buffered.slice(newline + 1)
        newline = buffered.indexOf("\n")
      }
    })
    child.stderr.on("data", (chunk) => (err += chunk))
    child.stdin.on("error", () => {
      // the CLI ended first
    })
    // A CLI that never ends fails the row instead of holding the benchmark.
    const stuck = setTimeout(() => child.kill("SIGKILL"), 10 * 60_000)
    // A benchmark that dies (an exception, a signal) stops its CLI, which stops its codex: with its
    // stdin closed and its cards unanswered it would otherwise wait out their deadlines (15 min).
    const stopChild = () => child.kill("SIGTERM")
    process.once("exit", stopChild)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(stuck)
      process.off("exit", stopChild)
      if (result === undefined)
        return reject(new Error(`warden run (fleet) ended with ${code} before run.finished: ${err.slice(-2_000)}`))
      resolve(result)
    })
  })
