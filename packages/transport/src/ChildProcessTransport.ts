/**
 * The Transport over a child process (`codex app-server`) speaking NDJSON on stdio.
 *
 * Built on node:child_process directly, NOT on @effect/platform `Command`, for three measured
 * reasons (see the house pitfalls): its executor's finalizer waits without a bound for a child that
 * ignores SIGTERM, so scope close can hang forever; its line streams decode each chunk on its own
 * and turn a UTF-8 character split across chunks into U+FFFD; and we need the `data` callback to
 * decode each chunk synchronously, in order, with no stream or fiber hop between the pipe and the
 * frames (routing above depends on that order).
 *
 * The child is spawned `detached: true`, so it leads a new process group, and every signal goes to
 * the whole group (`process.kill(-pid, sig)`): the commands codex runs die with it. A caveat: a
 * grandchild that moves itself to another group (setsid/setpgid) escapes the group kill.
 */
import { spawn } from "node:child_process"
import type { ChildProcessWithoutNullStreams } from "node:child_process"
import type { Duration } from "effect"
import { Effect, Layer } from "effect"
import * as ChildEnv from "./ChildEnv.js"
import * as ConnectionCore from "./internal/ConnectionCore.js"
import { SpawnFailed } from "./ConnectionEnded.js"
import { Transport } from "./Transport.js"
import type { TransportShape } from "./Transport.js"

/**
 * How to start the child, and the bounds of its connection.
 *
 * The command line, its environment and working directory, the longest accepted frame, the stderr
 * tail kept, and the graces of the stop sequence. Only `command` and `args` are required.
 */
export interface Options {
  /** The executable (looked up on PATH if it has no slash). */
  readonly command: string
  /** Its arguments, passed as given (no shell: nothing is split, expanded or quoted). */
  readonly args: ReadonlyArray<string>
  /**
   * The child's WHOLE environment (Node semantics: not merged with ours). Default: ours. Either way
   * it goes through {@link ChildEnv.make}: Warden's own variables (`WARDEN_*`) and withheld secrets
   * never reach the child.
   */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /** The child's working directory. Default: ours. */
  readonly cwd?: string | undefined
  /** Longest accepted stdout line, in UTF-8 bytes. Default 16 MiB. */
  readonly maxFrameBytes?: number | undefined
  /** How much of stderr is kept for the end report. Default 64 KiB. */
  readonly stderrTailBytes?: number | undefined
  /**
   * How long the child (and its process group) gets after SIGTERM before SIGKILL; also the bound on
   * flushing queued frames at close and on the exit after SIGKILL. Default 2 s.
   */
  readonly killGrace?: Duration.DurationInput | undefined
  /** After the exit, how long stdout/stderr may stay open before the end is reported anyway. Default 500 ms. */
  readonly drainGrace?: Duration.DurationInput | undefined
}

const commandLine = (options: Options): string =>
  [options.command, ...options.args].map((part) => (/^[\w./:=@-]+$/.test(part) ? part : JSON.stringify(part))).join(" ")

const spawnFailure = (options: Options, error: unknown): SpawnFailed => {
  let detail = ConnectionCore.describeError(error)
  if (error instanceof Error && "code" in error && error.code === "ENOENT") {
    detail +=
      options.cwd === undefined
        ? `: the executable was not found (searched PATH for ${JSON.stringify(options.command)})`
        : `: the executable was not found, or the working directory ${JSON.stringify(options.cwd)} does not exist`
  }
  return new SpawnFailed({ command: commandLine(options), detail })
}

/** Signals the child's process group; a group that is already gone is fine. */
const signalGroup = (child: ChildProcessWithoutNullStreams, signal: ConnectionCore.Signal | 0): boolean => {
  const pid = child.pid
  if (pid === undefined) return false
  try {
    process.kill(-pid, signal)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false
    if (signal !== 0) child.kill(signal) // EPERM on the group: at least the leader
    return true
  }
}

const control = (child: ChildProcessWithoutNullStreams): ConnectionCore.PeerControl => ({
  write: (text, onWritten) => child.stdin.write(text, onWritten),
  onDrain: (wake) => {
    const once = () => {
      cancel()
      wake()
    }
    const cancel = () => {
      child.stdin.off("drain", once)
      child.stdin.off("close", once)
    }
    child.stdin.on("drain", once)
    child.stdin.on("close", once)
    return cancel
  },
  endStdin: () => {
    child.stdin.end()
  },
  signal: (signal) => {
    signalGroup(child, signal)
  },
  anyAlive: () => signalGroup(child, 0)
})

/** Spawn, wire every event to the core synchronously, and wait for `spawn` or `error`. */
const spawnChild = (options: Options, core: ConnectionCore.Core) =>
  Effect.async<ChildProcessWithoutNullStreams, SpawnFailed>((resume) => {
    let child: ChildProcessWithoutNullStreams
    try {
      child = spawn(options.command, options.args, {
        cwd: options.cwd,
        env: ChildEnv.make(options.env ?? process.env),
        stdio: ["pipe", "pipe", "pipe"],
        detached: true
      })
    } catch (error) {
      return resume(Effect.fail(spawnFailure(options, error))) // e.g. a NUL byte in an argument
    }
    let spawned = false
    child.stdout.on("data", core.stdoutData)
    child.stdout.on("end", core.stdoutEnd)
    child.stdout.on("close", core.stdoutEnd)
    child.stdout.on("error", (error) => core.fail({ _tag: "ReadFailed", detail: ConnectionCore.describeError(error) }))
    child.stderr.on("data", core.stderrData)
    child.stderr.on("end", core.stderrEnd)
    child.stderr.on("close", core.stderrEnd)
    child.stderr.on("error", () => {}) // tracing, not protocol: its loss costs the tail, not the connection
    child.stdin.on("error", (error) => core.fail({ _tag: "WriteFailed", detail: ConnectionCore.describeError(error) }))
    child.on("exit", core.exited)
    child.on("error", (error) => {
      if (!spawned) return resume(Effect.fail(spawnFailure(options, error)))
      // After a successful spawn Node raises this only when signalling fails; we cannot stop it.
      core.fail({ _tag: "ReadFailed", detail: `the child process failed: ${ConnectionCore.describeError(error)}` })
    })
    child.once("spawn", () => {
      spawned = true
      resume(Effect.succeed(child))
    })
  })

/**
 * A Transport whose every `connect` spawns a new child from `options` (in a process group of its
 * own) and speaks NDJSON over its stdin and stdout.
 *
 * `connect` succeeds once the child has spawned, and fails with `SpawnFailed` when it cannot be
 * (a missing executable, a working directory that does not exist, permission denied, a NUL byte in
 * an argument); the message names the command line. Every later failure (an exit, a broken pipe,
 * a frame that is not a JSON object or is longer than `maxFrameBytes`, stdout closed while the
 * child lives) is not an error of `connect`: it ends the connection, and `Connection.ended`
 * reports it as a `ConnectionEnded` with the stderr tail. Closing the connection's scope stops the
 * child: queued frames are flushed (bounded), stdin is ended, SIGTERM goes to the process group,
 * and SIGKILL follows after `killGrace` if anything of the group is still alive.
 *
 * Usually provided as {@link layer}; `@warden/supervisor`'s `CodexCommand.transportLayer` builds
 * the options for `codex app-server`.
 *
 * @example
 * ```ts
 * import { ChildProcessTransport } from "@warden/transport"
 * import { Effect } from "effect"
 *
 * const transport = ChildProcessTransport.make({ command: "codex", args: ["app-server"] })
 * const program = Effect.scoped(
 *   Effect.gen(function*() {
 *     const connection = yield* transport.connect // SpawnFailed if codex is not on PATH
 *     yield* connection.send({ id: 0, method: "initialize", params: { clientInfo: { name: "me", version: "1.0.0" } } })
 *     const [frames] = yield* connection.incoming.takeAll // the response, once it arrived
 *     return frames
 *   }) // scope closed: stdin ended, SIGTERM, bounded wait, SIGKILL
 * )
 * ```
 */
export const make = (options: Options): TransportShape => ({
  // Uninterruptible from spawn until the stop finalizer is registered: no window for a leaked child.
  // Forks inside are `Effect.interruptible` (ConnectionCore), so they do not inherit this.
  connect: Effect.uninterruptible(
    Effect.gen(function* () {
      const core = yield* ConnectionCore.make(options)
      const child = yield* spawnChild(options, core)
      return yield* core.start(control(child))
    })
  )
})

/**
 * The `make` transport as a layer providing the `Transport` service.
 *
 * Each `connect` spawns a new child (and fails with `SpawnFailed` when it cannot); building the
 * layer itself starts nothing and cannot fail.
 *
 * @example
 * ```ts
 * import { ChildProcessTransport, Transport } from "@warden/transport"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const transport = yield* Transport.Transport
 *   const connection = yield* transport.connect
 *   const ended = yield* connection.ended // waits for the child to exit
 *   return ended.message // e.g. "the app-server exited with code 0 (stderr was empty)"
 * })
 *
 * Effect.runPromise(
 *   program.pipe(
 *     Effect.scoped,
 *     Effect.provide(ChildProcessTransport.layer({ command: "codex", args: ["app-server"], killGrace: "5 seconds" }))
 *   )
 * )
 * ```
 */
export const layer = (options: Options): Layer.Layer<Transport> => Layer.succeed(Transport, make(options))
