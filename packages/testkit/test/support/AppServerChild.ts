/**
 * A deliberately raw driver for the real `codex app-server`, for the testkit's own smoke tests (not
 * the supervisor's transport): spawn with node:child_process inside a scope, write JSON lines, keep
 * every frame read, wait for frames by predicate.
 *
 * Stop on scope close: end stdin (codex exits on EOF), bounded wait; SIGTERM to the child's process
 * group, bounded wait; SIGKILL to the group.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Readline from "node:readline"
import { Data, Deferred, Duration, Effect } from "effect"
import type { Scope } from "effect"
import { WokenWait } from "../../src/index.js"
import type { RealCodex } from "../../src/index.js"

export type Frame = Readonly<Record<string, unknown>> & {
  readonly id?: number | string
  readonly method?: string
  readonly params?: any
  readonly result?: any
  readonly error?: any
}

export class DriverError extends Data.TaggedError("DriverError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

export interface Exited {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface AppServerChild {
  readonly pid: number
  readonly startedAt: number
  readonly send: (frame: Readonly<Record<string, unknown>>) => Effect.Effect<void>
  /** Sends a request and waits for its response's `result` (fails on an error frame). */
  readonly request: (method: string, params?: unknown) => Effect.Effect<any, DriverError>
  readonly notify: (method: string, params?: unknown) => Effect.Effect<void>
  readonly respond: (id: number | string, result: unknown) => Effect.Effect<void>
  /** The first frame (from the very start) matching `predicate`, waiting for it if needed. */
  readonly waitFor: (
    what: string,
    predicate: (frame: Frame) => boolean,
    timeout?: Duration.DurationInput
  ) => Effect.Effect<Frame, DriverError>
  readonly frames: Effect.Effect<ReadonlyArray<Frame>>
  readonly stderrTail: () => string
  readonly exited: Effect.Effect<Exited>
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  // a zombie is dead; it only waits for its parent to reap it
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    return true
  }
}

/** Every live descendant of `pid` (Linux /proc; empty elsewhere). */
export const descendants = (pid: number): Array<number> => {
  if (!Fs.existsSync("/proc")) return []
  const parentOf = new Map<number, number>()
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      parentOf.set(Number(entry), Number(fields[1]))
    } catch {
      // gone meanwhile
    }
  }
  const out: Array<number> = []
  const frontier = [pid]
  while (frontier.length > 0) {
    const p = frontier.pop()!
    for (const [child, parent] of parentOf) {
      if (parent === p) {
        out.push(child)
        frontier.push(child)
      }
    }
  }
  return out
}

export const isAlive = alive

/** The command line of `pid`, NUL separators as spaces ("" if unknown). */
export const commandLine = (pid: number): string => {
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ")
  } catch {
    return ""
  }
}

const killGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    try {
      process.kill(pid, signal)
    } catch {
      // already gone
    }
  }
}

export const spawn = (
  launch: RealCodex.Launch,
  options?: { readonly graceMs?: number }
): Effect.Effect<AppServerChild, DriverError, Scope.Scope> =>
  Effect.gen(function* () {
    // plain array + woken waits: callbacks from node streams push synchronously, in order
    const frames: Array<Frame> = []
    const waits = WokenWait.make()
    const exitedDeferred = yield* Deferred.make<Exited>()
    const stderr: Array<string> = []
    const grace = Duration.millis(options?.graceMs ?? 3_000)

    const child = yield* Effect.acquireRelease(
      Effect.async<ChildProcess.ChildProcessWithoutNullStreams, DriverError>((resume) => {
        const proc = ChildProcess.spawn(launch.command, [...launch.args], {
          cwd: launch.cwd,
          env: { ...launch.env },
          stdio: ["pipe", "pipe", "pipe"],
          detached: true // its own process group, so the group can be signalled
        })
        proc.once("error", (e) => resume(Effect.fail(new DriverError({ detail: `spawn failed: ${String(e)}` }))))
        proc.once("spawn", () => resume(Effect.succeed(proc)))
      }),
      (proc) => {
        const waitExit = (d: Duration.Duration) => Effect.timeout(Deferred.await(exitedDeferred), d)
        return Effect.sync(() => proc.stdin.end()).pipe(
          Effect.zipRight(waitExit(grace)),
          Effect.catchAll(() =>
            Effect.sync(() => killGroup(proc.pid!, "SIGTERM")).pipe(Effect.zipRight(waitExit(grace)))
          ),
          Effect.catchAll(() =>
            Effect.sync(() => killGroup(proc.pid!, "SIGKILL")).pipe(Effect.zipRight(waitExit(grace)))
          ),
          Effect.ignore,
          // anything left in its process group goes too
          Effect.zipRight(Effect.sync(() => killGroup(proc.pid!, "SIGKILL")))
        )
      }
    )
    const startedAt = Date.now()
    child.stdin.on("error", () => {}) // writes after exit are the test's problem, not a crash
    child.once("exit", (code, signal) => Deferred.unsafeDone(exitedDeferred, Effect.succeed({ code, signal })))
    child.stderr.setEncoding("utf8")
    let partial = ""
    child.stderr.on("data", (chunk: string) => {
      const lines = (partial + chunk).split("\n")
      partial = lines.pop()!
      stderr.push(...lines)
      if (stderr.length > 200) stderr.splice(0, stderr.length - 200)
    })
    const rl = Readline.createInterface({ input: child.stdout })
    rl.on("line", (line) => {
      let frame: Frame
      try {
        frame = JSON.parse(line) as Frame
      } catch {
        frame = { __unparsed: line }
      }
      frames.push(frame)
      waits.wake()
    })

    let nextId = 1
    const send = (frame: Readonly<Record<string, unknown>>) =>
      Effect.sync(() => {
        child.stdin.write(JSON.stringify(frame) + "\n")
      })

    const stderrTail = () => stderr.slice(-15).join("\n")

    const waitFor = (
      what: string,
      predicate: (frame: Frame) => boolean,
      timeout: Duration.DurationInput = "20 seconds"
    ) =>
      Effect.suspend(() => {
        let scanned = 0 // frames before it did not match: each wake reads only the new ones
        return waits.until(
          () => {
            for (; scanned < frames.length; scanned++) if (predicate(frames[scanned]!)) return frames[scanned]!
            return undefined
          },
          timeout,
          () =>
            new DriverError({
              detail:
                `timed out waiting for ${what}\nlast frames:\n` +
                frames
                  .slice(-8)
                  .map((f) => JSON.stringify(f).slice(0, 300))
                  .join("\n") +
                `\nstderr tail:\n${stderrTail()}`
            })
        )
      })

    const request = (method: string, params?: unknown) =>
      Effect.suspend(() => {
        const id = nextId++
        return send({ id, method, ...(params === undefined ? {} : { params }) }).pipe(
          Effect.zipRight(waitFor(`response to ${method} (id ${id})`, (f) => f.id === id && f.method === undefined)),
          Effect.flatMap((f) =>
            f.error !== undefined
              ? Effect.fail(new DriverError({ detail: `${method} failed: ${JSON.stringify(f.error)}` }))
              : Effect.succeed(f.result)
          )
        )
      })

    return {
      pid: child.pid!,
      startedAt,
      send,
      request,
      notify: (method, params) => send({ method, ...(params === undefined ? {} : { params }) }),
      respond: (id, result) => send({ id, result }),
      waitFor,
      frames: Effect.sync(() => [...frames]),
      stderrTail,
      exited: Deferred.await(exitedDeferred)
    }
  })
