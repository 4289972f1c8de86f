/**
 * Helpers for running things "outside": child processes with a clean environment (no workspace
 * `node_modules/.bin` on PATH, no pnpm or vitest variables), each in its own process group and
 * stopped when its scope closes; the module trace written by `consumer/trace.mjs`; and the
 * processes still running from a directory.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { ProcessTree } from "@warden/testkit"
import { Data, Deferred, Duration, Effect } from "effect"

export const repoRoot = Fs.realpathSync(Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../.."))
export const consumerDir = Path.join(repoRoot, "packaging", "consumer")

export class RunError extends Data.TaggedError("RunError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

export interface Ran {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

export type Env = Readonly<Record<string, string>>

/** `path` is `dir` or inside it. */
export const isInside = (path: string, dir: string): boolean =>
  path === dir || path.startsWith(dir.endsWith(Path.sep) ? dir : dir + Path.sep)

/** What a user's shell would have: PATH without any `node_modules/.bin` nor anything in the workspace, plus
 * what npm needs to reach its registry. No pnpm, npm-script, vitest or NODE_OPTIONS variables. */
export const outsideEnv = (extra: Env = {}): Env => {
  const keep = [
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NPM_CONFIG_REGISTRY",
    "NPM_CONFIG_CACHE",
    "NPM_CONFIG_USERCONFIG",
    "NPM_CONFIG_CAFILE",
    "npm_config_registry",
    "npm_config_cache",
    "npm_config_userconfig",
    "npm_config_cafile"
  ]
  const env: Record<string, string> = {}
  for (const key of keep) {
    const value = process.env[key]
    if (value !== undefined) env[key] = value
  }
  const path = (process.env["PATH"] ?? "")
    .split(Path.delimiter)
    .filter(
      (dir) => dir !== "" && !dir.split(Path.sep).includes("node_modules") && !isInside(Path.resolve(dir), repoRoot)
    )
  // The Node that runs this test first, so npm, npx and the installed `warden` run on it.
  env["PATH"] = [Path.dirname(process.execPath), ...path].join(Path.delimiter)
  env["npm_config_update_notifier"] = "false"
  env["npm_config_fund"] = "false"
  env["npm_config_audit"] = "false"
  return { ...env, ...extra }
}

const killGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    // the group is gone
  }
}

/**
 * Runs `command args` to its end (stdin is /dev/null: not a terminal) and returns its exit and
 * output. A run that outlives `timeout` fails with the tails of its output. However it ends, its
 * process group and every descendant still alive are stopped (SIGTERM, a bounded wait, SIGKILL).
 */
export const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: Env; readonly timeout: Duration.DurationInput }
): Effect.Effect<Ran, RunError> =>
  Effect.scoped(
    Effect.gen(function* () {
      const what = [command, ...args].join(" ")
      const exited = yield* Deferred.make<
        { readonly code: number | null; readonly signal: NodeJS.Signals | null },
        RunError
      >()
      let stdout = ""
      let stderr = ""
      const child = yield* Effect.acquireRelease(
        Effect.sync(() =>
          ChildProcess.spawn(command, args, {
            cwd: options.cwd,
            env: options.env,
            stdio: ["ignore", "pipe", "pipe"],
            detached: true
          })
        ),
        (child) =>
          Effect.gen(function* () {
            if (child.pid === undefined) return
            const pid = child.pid
            const tree = ProcessTree.descendants(pid)
            if (!(yield* Deferred.isDone(exited))) {
              killGroup(pid, "SIGTERM")
              yield* Deferred.await(exited).pipe(Effect.timeoutOption("10 seconds"), Effect.ignore)
            }
            killGroup(pid, "SIGKILL")
            for (const p of [...tree, ...ProcessTree.descendants(pid)]) {
              try {
                process.kill(p, "SIGKILL")
              } catch {
                // gone
              }
            }
          })
      )
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        stdout += chunk
      })
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
        stderr += chunk
      })
      child.on("error", (error) =>
        Deferred.unsafeDone(exited, Effect.fail(new RunError({ detail: `${what}: ${error.message}` })))
      )
      child.on("close", (code, signal) => Deferred.unsafeDone(exited, Effect.succeed({ code, signal })))
      const ended = yield* Deferred.await(exited).pipe(
        Effect.timeoutFail({
          duration: options.timeout,
          onTimeout: () =>
            new RunError({
              detail:
                `${what} (in ${options.cwd}) did not end within ${Duration.format(Duration.decode(options.timeout))}\n` +
                `stdout:\n${stdout.slice(-3000)}\nstderr:\n${stderr.slice(-3000)}`
            })
        })
      )
      return { ...ended, stdout, stderr }
    })
  )

/** `run`, then fail unless it exited 0. */
export const runOk = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: Env; readonly timeout: Duration.DurationInput }
): Effect.Effect<Ran, RunError> =>
  Effect.flatMap(run(command, args, options), (ran) =>
    ran.code === 0
      ? Effect.succeed(ran)
      : Effect.fail(
          new RunError({
            detail:
              `${[command, ...args].join(" ")} (in ${options.cwd}) exited ${ran.code ?? ran.signal}\n` +
              `stdout:\n${ran.stdout.slice(-4000)}\nstderr:\n${ran.stderr.slice(-4000)}`
          })
        )
  )

/** The files (realpaths) of every `file:` module a traced process resolved (see consumer/trace.mjs). */
export const tracedFiles = (traceFile: string): ReadonlyArray<string> =>
  Fs.readFileSync(traceFile, "utf8")
    .split("\n")
    .filter((line) => line.startsWith("file:"))
    .map((url) => {
      const path = fileURLToPath(url)
      try {
        return Fs.realpathSync(path)
      } catch {
        return path
      }
    })

/** Pids of the processes (other than this one) whose command line mentions `dir`, from Linux /proc. */
export const processesMentioning = (dir: string): ReadonlyArray<number> => {
  if (!Fs.existsSync("/proc")) return []
  const found: Array<number> = []
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      if (Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(dir) && ProcessTree.isAlive(Number(entry)))
        found.push(Number(entry))
    } catch {
      // gone meanwhile
    }
  }
  return found
}

/** Waits (bounded) until no process mentions `dir`; returns those still there. */
export const settledProcesses = (dir: string): Effect.Effect<ReadonlyArray<number>> =>
  Effect.gen(function* () {
    for (let i = 0; i < 50; i++) {
      if (processesMentioning(dir).length === 0) return []
      yield* Effect.sleep("200 millis")
    }
    return processesMentioning(dir)
  })
