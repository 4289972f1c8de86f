/**
 * The `warden` CLI as a user runs it, as a real child process (the test kit's `TestProcess`: its
 * own process group, stdout line by line, stderr as text; closing the scope stops the group and
 * what it started: SIGTERM, 8 s, SIGKILL): `node apps/cli/node_modules/.cache/warden-test/bin.mjs
 * ARGS`, the working tree's sources compiled into one module when the vitest run starts
 * (scripts/test-bundle.mjs: ~0.3 s to start where tsx takes ~3.4 s of CPU), or with `via: "tsx"`
 * `node --import tsx apps/cli/src/bin.ts ARGS` (`pnpm warden`'s and `pnpm demo`'s path).
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { repoRoot } from "@warden/test-support/Processes"
import * as Watchdog from "@warden/test-support/Watchdog"
import { ProcessTree, TestProcess } from "@warden/testkit"
import { Effect } from "effect"
import type { Scope } from "effect"

export { repoRoot }
/** The CLI's entry in the sources (what tsx runs). */
export const source = Path.join("apps", "cli", "src", "bin.ts")
/** The CLI compiled from the sources for this vitest run (scripts/test-bundle.mjs, vitest's global set-up). */
export const bin = Path.join("apps", "cli", "node_modules", ".cache", "warden-test", "bin.mjs")

/** The command line that starts `warden ARGS` (for a shell: the tmux tests). */
export const command = (args: ReadonlyArray<string>, via: "bundle" | "tsx" = "bundle"): ReadonlyArray<string> => {
  if (via === "tsx") return [process.execPath, "--import", "tsx", source, ...args]
  if (!Fs.existsSync(Path.join(repoRoot, bin))) {
    throw new Error(
      `${bin} is missing: vitest's global set-up (scripts/test-bundle.mjs) builds it; run the tests with vitest (pnpm test)`
    )
  }
  return [process.execPath, bin, ...args]
}

/** The process running the CLI's own code (the spawned node process; its child if something else was spawned). */
export const cliPid = (cli: { readonly pid: number }): number | undefined => {
  const line = ProcessTree.commandLine(cli.pid)
  return line.includes(bin) || line.includes(source)
    ? cli.pid
    : [...ProcessTree.find(cli.pid, bin), ...ProcessTree.find(cli.pid, source)][0]
}

export type JsonLine = TestProcess.JsonLine & { readonly ts: string }
export type Exited = TestProcess.Exited

export interface Cli extends Omit<TestProcess.TestProcess, "waitForJson"> {
  /** Every stdout line so far, parsed (throws on a line that is not JSON: `--json` promises none). */
  readonly json: () => ReadonlyArray<JsonLine>
  /** The first JSON line (from the start) matching `predicate`, waiting for it. */
  readonly waitForJson: (
    what: string,
    predicate: (line: JsonLine) => boolean,
    timeout?: Parameters<TestProcess.TestProcess["waitForJson"]>[2]
  ) => Effect.Effect<JsonLine, TestProcess.TestProcessError>
}

export interface Options {
  readonly env?: Readonly<Record<string, string>>
  /** `pipe` (default) or `ignore` (stdin is /dev/null). */
  readonly stdin?: "pipe" | "ignore"
  /** `bundle` (default): the sources compiled for this run; `tsx`: the sources through tsx (`pnpm warden`). */
  readonly via?: "bundle" | "tsx"
  /**
   * Subject to files' permissions as any user is: when the tests run as root, `warden` runs as
   * root without the capabilities that override them (`setpriv` drops `dac_override`,
   * `dac_read_search` and `fowner` from its bounding set), so a file's mode applies to it as to its
   * owner. (Another user id would also need to reach the checkout, which a checkout in a private
   * directory does not allow.) Not root: nothing to drop.
   */
  readonly filePermissions?: true
  /**
   * Run on another host of a fleet test (`@warden/test-support/Hosts`): the command goes through
   * `host.exec` (`ip netns exec NS ...`, which execs, so the pid is still the CLI's).
   */
  readonly on?: { readonly exec: (argv: ReadonlyArray<string>) => ReadonlyArray<string> }
}

/**
 * Where `warden run` keeps its ledger by default in these tests (`XDG_STATE_HOME`), one directory
 * per test process, so that no test writes the user's state directory. Removed at exit.
 */
export const stateHome = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-cli-state-"))
process.on("exit", () => Fs.rmSync(stateHome, { recursive: true, force: true }))

/** `warden ARGS` from the sources; the scope's end stops it and whatever it started (codex runs in a process group of its own). */
export const spawn = (args: ReadonlyArray<string>, options?: Options): Effect.Effect<Cli, never, Scope.Scope> => {
  const line = command(args, options?.via)
  const local =
    options?.filePermissions === true && process.getuid?.() === 0
      ? ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", ...line]
      : line
  const [file, ...rest] = options?.on === undefined ? local : options.on.exec(local)
  return Effect.map(
    // Killed with its group if this process dies first (Ctrl-C: its group is not the terminal's).
    Effect.tap(
      TestProcess.spawn(file!, rest, {
        cwd: repoRoot,
        env: { ...process.env, XDG_STATE_HOME: stateHome, ...options?.env },
        stdin: options?.stdin ?? "pipe",
        stopTimeout: "8 seconds"
      }),
      (child) => Watchdog.killOnDeath(child.pid)
    ),
    (child): Cli => ({
      ...child,
      json: () => child.lines().map((l) => JSON.parse(l) as JsonLine),
      waitForJson: (what, predicate, timeout) =>
        child.waitForJson(what, (line) => predicate(line as JsonLine), timeout) as Effect.Effect<
          JsonLine,
          TestProcess.TestProcessError
        >
    })
  )
}

/** Run to completion with stdin from /dev/null; returns the exit and the outputs. */
export const runToEnd = (args: ReadonlyArray<string>, options?: Omit<Options, "stdin">) =>
  Effect.scoped(
    Effect.gen(function* () {
      const cli = yield* spawn(args, { ...options, stdin: "ignore" })
      const exited = yield* cli.exited()
      return { exited, stdout: cli.lines(), stderr: cli.stderr(), json: cli.json }
    })
  )

/** A temporary directory for one test, removed when its scope closes. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-cli-test-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)
