/**
 * The `warden` CLI as a user runs it: `node_modules/.bin/tsx apps/cli/src/bin.ts ARGS` as a real
 * child process, in its own process group. Stdout is kept line by line (parsed as JSON where it
 * is), stderr as text. Closing the scope stops the whole group: SIGTERM, a bounded wait, SIGKILL.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { ProcessTree } from "@warden/testkit"
import { Data, Deferred, Duration, Effect } from "effect"
import type { Scope } from "effect"

export const repoRoot = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../../..")
export const tsx = Path.join(repoRoot, "node_modules", ".bin", "tsx")
export const bin = Path.join("apps", "cli", "src", "bin.ts")

export class CliError extends Data.TaggedError("CliError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

export type JsonLine = { readonly type: string; readonly ts: string } & Record<string, any>

export interface Exited {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface Cli {
  readonly pid: number
  /** Every stdout line so far. */
  readonly lines: () => ReadonlyArray<string>
  /** Every stdout line so far, parsed (throws on a line that is not JSON: `--json` promises none). */
  readonly json: () => ReadonlyArray<JsonLine>
  readonly stderr: () => string
  /** The first JSON line (from the start) matching `predicate`, waiting for it. */
  readonly waitForJson: (what: string, predicate: (line: JsonLine) => boolean, timeout?: Duration.DurationInput) => Effect.Effect<JsonLine, CliError>
  readonly waitForStderr: (what: string, predicate: (text: string) => boolean, timeout?: Duration.DurationInput) => Effect.Effect<string, CliError>
  readonly write: (text: string) => Effect.Effect<void>
  readonly endStdin: Effect.Effect<void>
  /** Waits for the exit (bounded). */
  readonly exited: (timeout?: Duration.DurationInput) => Effect.Effect<Exited, CliError>
}

const killGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    // already gone
  }
}

export interface Options {
  readonly env?: Readonly<Record<string, string>>
  /** `pipe` (default) or `ignore` (stdin is /dev/null). */
  readonly stdin?: "pipe" | "ignore"
}

/**
 * Where `warden run` keeps its ledger by default in these tests (`XDG_STATE_HOME`), one directory
 * per test process, so that no test writes the user's state directory. Removed at exit.
 */
export const stateHome = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-cli-state-"))
process.on("exit", () => Fs.rmSync(stateHome, { recursive: true, force: true }))

export const spawn = (args: ReadonlyArray<string>, options?: Options): Effect.Effect<Cli, never, Scope.Scope> =>
  Effect.gen(function*() {
    const stdoutLines: Array<string> = []
    let stderrText = ""
    const waiters = new Set<() => void>()
    const wake = () => {
      for (const w of [...waiters]) w()
    }
    const exit = yield* Deferred.make<Exited>()
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(tsx, [bin, ...args], {
          cwd: repoRoot,
          env: { ...process.env, XDG_STATE_HOME: stateHome, ...options?.env },
          stdio: [options?.stdin ?? "pipe", "pipe", "pipe"],
          detached: true
        })
      ),
      (child) =>
        Effect.gen(function*() {
          // Whatever the CLI started (codex runs in a process group of its own) is stopped too.
          const tree = ProcessTree.descendants(child.pid!)
          if (!(yield* Deferred.isDone(exit))) {
            killGroup(child.pid!, "SIGTERM")
            const stopped = yield* Deferred.await(exit).pipe(Effect.timeoutOption("8 seconds"))
            killGroup(child.pid!, "SIGKILL")
            if (stopped._tag === "None") yield* Deferred.await(exit).pipe(Effect.timeoutOption("2 seconds"))
          }
          killGroup(child.pid!, "SIGKILL")
          for (const pid of [...tree, ...ProcessTree.descendants(child.pid!)]) {
            try {
              process.kill(pid, "SIGKILL")
            } catch {
              // gone
            }
          }
        })
    )
    child.stdin?.on("error", () => {})
    child.on("exit", (code, signal) => {
      Deferred.unsafeDone(exit, Effect.succeed({ code, signal }))
      wake()
    })
    let partial = ""
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (chunk: string) => {
      const parts = (partial + chunk).split("\n")
      partial = parts.pop()!
      stdoutLines.push(...parts)
      wake()
    })
    child.stderr!.setEncoding("utf8")
    child.stderr!.on("data", (chunk: string) => {
      stderrText += chunk
      wake()
    })

    const json = () => stdoutLines.map((l) => JSON.parse(l) as JsonLine)

    const waitUntil = <A>(what: string, probe: () => A | undefined, timeout: Duration.DurationInput) =>
      Effect.async<A>((resume) => {
        const check = () => {
          const found = probe()
          if (found !== undefined) {
            waiters.delete(check)
            resume(Effect.succeed(found))
          }
        }
        waiters.add(check)
        check()
        return Effect.sync(() => waiters.delete(check))
      }).pipe(
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () =>
            new CliError({
              detail: `timed out waiting for ${what}\nstdout:\n${stdoutLines.slice(-20).join("\n")}\nstderr:\n${stderrText.slice(-3000)}`
            })
        })
      )

    return {
      pid: child.pid!,
      lines: () => [...stdoutLines],
      json,
      stderr: () => stderrText,
      waitForJson: (what, predicate, timeout = "30 seconds") =>
        waitUntil(what, () => {
          for (const line of stdoutLines) {
            let parsed: JsonLine
            try {
              parsed = JSON.parse(line) as JsonLine
            } catch {
              continue
            }
            if (predicate(parsed)) return parsed
          }
          return undefined
        }, timeout),
      waitForStderr: (what, predicate, timeout = "30 seconds") => waitUntil(what, () => (predicate(stderrText) ? stderrText : undefined), timeout),
      write: (text) =>
        Effect.sync(() => {
          child.stdin!.write(text)
        }),
      endStdin: Effect.sync(() => {
        child.stdin?.end()
      }),
      exited: (timeout = "45 seconds") =>
        Deferred.await(exit).pipe(
          Effect.timeoutFail({
            duration: timeout,
            onTimeout: () => new CliError({ detail: `the CLI did not exit\nstdout:\n${stdoutLines.slice(-20).join("\n")}\nstderr:\n${stderrText.slice(-3000)}` })
          })
        )
    }
  })

/** Run to completion with stdin from /dev/null; returns the exit and the outputs. */
export const runToEnd = (args: ReadonlyArray<string>, options?: Omit<Options, "stdin">) =>
  Effect.scoped(
    Effect.gen(function*() {
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
