/**
 * A real child process for a test, in its own process group, its output watched: stdout kept line
 * by line, stderr as text (its last `stderrLimit` characters). Waiting for a line or for stderr is
 * woken by the output itself and bounded, never a poll or a sleep. Closing the scope stops the whole
 * group (SIGTERM, a bounded wait, SIGKILL) and every process it started (read from `/proc`, see
 * `ProcessTree`), so a test leaves nothing running however it ends. (A process the child started
 * in a group of its own and left behind when it exited by itself is no longer under it, and not
 * found: a test that cares checks for it, as the CLI's "nothing left running" tests do.)
 *
 * @example
 * ```ts
 * import { TestProcess } from "@warden/testkit"
 * import { Effect } from "effect"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const child = yield* TestProcess.spawn("node", ["-e", "console.log(JSON.stringify({ type: 'ready' }))"])
 *   yield* child.waitForJson("the ready line", (line) => line.type === "ready")
 *   return yield* child.exited()
 * }))
 * ```
 */
import * as ChildProcess from "node:child_process"
import type { Duration } from "effect"
import { Data, Deferred, Effect } from "effect"
import type { Scope } from "effect"
import * as WokenWait from "./internal/WokenWait.js"
import * as ProcessTree from "./ProcessTree.js"

/** A wait timed out, or the process did not exit in time; `detail` ends with the output's last lines. */
export class TestProcessError extends Data.TaggedError("TestProcessError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

/** A stdout line that parsed as a JSON object with a `type`. */
export type JsonLine = { readonly type: string } & Record<string, any>

/** How the process ended. */
export interface Exited {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** How `spawn` starts the child and stops it. */
export interface Options {
  readonly cwd?: string
  /** The whole environment of the child (default: this process's). */
  readonly env?: Readonly<Record<string, string | undefined>>
  /** `pipe` (default: `write` and `endStdin` work) or `ignore` (stdin is /dev/null). */
  readonly stdin?: "pipe" | "ignore"
  /** How long the group has after SIGTERM, when the scope closes or on `stop`, before SIGKILL (default 10 s). */
  readonly stopTimeout?: Duration.DurationInput
  /** How much of stderr is kept, in characters, the latest (default 1,000,000). */
  readonly stderrLimit?: number
  /**
   * How long after the exit its stdout and stderr may stay open before the exit is told anyway (a
   * process it left running may hold them), in ms (default 2,000). Until then `exited` waits for
   * everything the child wrote to be read.
   */
  readonly drainGraceMs?: number
}

/** A spawned child: its output so far, waits on it, its stdin, its exit, and two ways to end it. */
export interface TestProcess {
  readonly pid: number
  /** Every complete stdout line so far. */
  readonly lines: () => ReadonlyArray<string>
  /** stderr so far (its last `stderrLimit` characters). */
  readonly stderr: () => string
  /** The first stdout line (from the start) that is a JSON object matching `predicate`, waiting for it; other lines are skipped. */
  readonly waitForJson: (
    what: string,
    predicate: (line: JsonLine) => boolean,
    timeout?: Duration.DurationInput
  ) => Effect.Effect<JsonLine, TestProcessError>
  /** Waits until `predicate` holds for stderr; the stderr text then. */
  readonly waitForStderr: (
    what: string,
    predicate: (text: string) => boolean,
    timeout?: Duration.DurationInput
  ) => Effect.Effect<string, TestProcessError>
  /**
   * Waits until `probe` returns a value, asked again at every output (and at the exit); fails at
   * once when the process ended without it (all its output read), else at `timeout`.
   */
  readonly waitUntil: <A>(
    what: string,
    probe: () => A | undefined,
    timeout?: Duration.DurationInput
  ) => Effect.Effect<A, TestProcessError>
  readonly write: (text: string) => Effect.Effect<void>
  readonly endStdin: Effect.Effect<void>
  /** Waits for the exit (bounded, default 45 s), and for its stdout and stderr to be read (see `Options.drainGraceMs`). */
  readonly exited: (timeout?: Duration.DurationInput) => Effect.Effect<Exited, TestProcessError>
  /** SIGKILL the group and what it started, now; waits for the exit. */
  readonly kill: Effect.Effect<Exited>
  /** SIGTERM the group, wait (bounded), then SIGKILL the group and what it started; how it ended. */
  readonly stop: Effect.Effect<Exited>
}

const signalGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    // already gone
  }
}

const killAll = (pids: Iterable<number>) => {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // gone
    }
  }
}

const parseJson = (line: string): JsonLine | undefined => {
  try {
    const value: unknown = JSON.parse(line)
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as JsonLine) : undefined
  } catch {
    return undefined
  }
}

/** Spawns `command args` in a process group of its own, stopped (with what it started) when the scope closes. */
export const spawn = (
  command: string,
  args: ReadonlyArray<string>,
  options: Options = {}
): Effect.Effect<TestProcess, never, Scope.Scope> =>
  Effect.gen(function* () {
    const stdoutLines: Array<string> = []
    let stderrText = ""
    const stderrLimit = options.stderrLimit ?? 1_000_000
    const waits = WokenWait.make()
    const exit = yield* Deferred.make<Exited>()
    /** Every process seen under the child, so that what outlives it (a reparented grandchild) is killed too. */
    const tree = new Set<number>()
    let child!: ChildProcess.ChildProcess
    const stopTimeout = options.stopTimeout ?? "10 seconds"

    const kill = Effect.gen(function* () {
      for (const pid of ProcessTree.descendants(child.pid!)) tree.add(pid)
      signalGroup(child.pid!, "SIGKILL")
      killAll(tree)
      return yield* Deferred.await(exit)
    })
    const stop = Effect.gen(function* () {
      for (const pid of ProcessTree.descendants(child.pid!)) tree.add(pid)
      if (!(yield* Deferred.isDone(exit))) {
        signalGroup(child.pid!, "SIGTERM")
        // `stop` runs as a finalizer, uninterruptible: a timeout there only fires when what it
        // bounds may be interrupted (else it waits for it to end), so the wait is made interruptible.
        const stopped = yield* Deferred.await(exit).pipe(Effect.interruptible, Effect.timeoutOption(stopTimeout))
        if (stopped._tag === "None") {
          signalGroup(child.pid!, "SIGKILL")
          yield* Deferred.await(exit).pipe(Effect.interruptible, Effect.timeoutOption("5 seconds"))
        }
      }
      signalGroup(child.pid!, "SIGKILL")
      killAll(tree)
      return yield* Deferred.await(exit)
    })

    child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(command, [...args], {
          ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
          env: options.env ?? process.env,
          stdio: [options.stdin ?? "pipe", "pipe", "pipe"],
          detached: true
        })
      ),
      () => stop
    )
    child.stdin?.on("error", () => {})
    // The exit is told once what the child wrote has been read: Node may report the exit before
    // the last chunks of its stdout and stderr (a busy machine makes that likely), and a caller
    // that reads `lines()` after `exited` must see everything. So the exit waits for the pipes to
    // close ("close"), for at most `drainGrace` (a process the child left running may hold them).
    const drainGraceMs = options.drainGraceMs ?? 2_000
    /** How the child ended, once everything it wrote has been read (see `told`). */
    let ended: Exited | undefined
    const told = (code: number | null, signal: NodeJS.Signals | null) => {
      ended ??= { code, signal }
      Deferred.unsafeDone(exit, Effect.succeed({ code, signal }))
      waits.wake()
    }
    child.on("exit", (code, signal) => {
      setTimeout(() => told(code, signal), drainGraceMs).unref()
    })
    child.on("close", (code, signal) => told(code, signal))
    let partial = ""
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (chunk: string) => {
      const parts = (partial + chunk).split("\n")
      partial = parts.pop()!
      stdoutLines.push(...parts)
      waits.wake()
    })
    child.stderr!.setEncoding("utf8")
    child.stderr!.on("data", (chunk: string) => {
      stderrText += chunk
      if (stderrText.length > stderrLimit) stderrText = stderrText.slice(-stderrLimit)
      waits.wake()
    })

    const outputTail = () => `stdout:\n${stdoutLines.slice(-20).join("\n")}\nstderr:\n${stderrText.slice(-3000)}`

    // A wait the child's exit did not satisfy never will (its output is all read by then): it fails
    // at once, saying so, instead of at its timeout.
    const waitUntil = <A>(what: string, probe: () => A | undefined, timeout: Duration.DurationInput = "30 seconds") =>
      Effect.flatMap(
        waits.until(
          (): { readonly found: A } | { readonly ended: Exited } | undefined => {
            const found = probe()
            if (found !== undefined) return { found }
            return ended === undefined ? undefined : { ended }
          },
          timeout,
          () => new TestProcessError({ detail: `timed out waiting for ${what}\n${outputTail()}` })
        ),
        (result) =>
          "found" in result
            ? Effect.succeed(result.found)
            : Effect.fail(
                new TestProcessError({
                  detail: `the process ended (${result.ended.signal ?? `exit ${result.ended.code}`}) before ${what}\n${outputTail()}`
                })
              )
      )

    return {
      pid: child.pid!,
      lines: () => [...stdoutLines],
      stderr: () => stderrText,
      waitUntil,
      waitForJson: (what, predicate, timeout) =>
        waitUntil(
          what,
          () => {
            for (const line of stdoutLines) {
              const parsed = parseJson(line)
              if (parsed !== undefined && predicate(parsed)) return parsed
            }
            return undefined
          },
          timeout
        ),
      waitForStderr: (what, predicate, timeout) =>
        waitUntil(what, () => (predicate(stderrText) ? stderrText : undefined), timeout),
      write: (text) =>
        Effect.sync(() => {
          child.stdin?.write(text)
        }),
      endStdin: Effect.sync(() => {
        child.stdin?.end()
      }),
      exited: (timeout = "45 seconds") =>
        Deferred.await(exit).pipe(
          Effect.interruptible, // bounded in a finalizer too
          Effect.timeoutFail({
            duration: timeout,
            onTimeout: () => new TestProcessError({ detail: `the process did not exit\n${outputTail()}` })
          })
        ),
      kill,
      stop
    }
  })
