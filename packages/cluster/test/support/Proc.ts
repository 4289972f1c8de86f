/**
 * A child process for the multi-process tests, in its own process group: stdout kept line by line
 * (JSON lines parsed), stderr as text. Closing the scope stops the whole group (SIGTERM, a bounded
 * wait, SIGKILL); `kill` SIGKILLs the group at once.
 */
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { ProcessTree } from "@warden/testkit"
import { Data, Deferred, Duration, Effect } from "effect"
import type { Scope } from "effect"

export const repoRoot = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../../..")
export const tsx = Path.join(repoRoot, "node_modules", ".bin", "tsx")

export class ProcError extends Data.TaggedError("ProcError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

export type JsonLine = { readonly type: string } & Record<string, any>

export interface Proc {
  readonly pid: number
  readonly json: () => ReadonlyArray<JsonLine>
  readonly stderr: () => string
  /** The first JSON line from the start matching `predicate`, waiting for it (woken by output, bounded). */
  readonly waitForJson: (what: string, predicate: (line: JsonLine) => boolean, timeout?: Duration.DurationInput) => Effect.Effect<JsonLine, ProcError>
  /** SIGKILL the process group now and wait for the exit. */
  readonly kill: Effect.Effect<void>
  /** SIGTERM the group and wait for the exit (bounded), then SIGKILL. */
  readonly stop: Effect.Effect<{ readonly code: number | null; readonly signal: string | null }>
  readonly exited: Effect.Effect<{ readonly code: number | null; readonly signal: string | null }>
}

const killGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    // already gone
  }
}

/** Spawn `tsx script` with `env` (added to a copy of this process's, minus the engine's `HOST`/`PORT`). */
export const spawnTsx = (script: string, env: Readonly<Record<string, string>>): Effect.Effect<Proc, never, Scope.Scope> =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    let stderrText = ""
    const waiters = new Set<() => void>()
    const wake = () => {
      for (const w of [...waiters]) w()
    }
    const exit = yield* Deferred.make<{ code: number | null; signal: string | null }>()
    const base = { ...process.env }
    for (const key of ["HOST", "PORT", "LISTEN_HOST", "LISTEN_PORT"]) delete base[key]
    const tree = new Set<number>()
    const stop = Effect.gen(function*() {
      for (const pid of ProcessTree.descendants(child.pid!)) tree.add(pid)
      if (!(yield* Deferred.isDone(exit))) {
        killGroup(child.pid!, "SIGTERM")
        const stopped = yield* Deferred.await(exit).pipe(Effect.timeoutOption("20 seconds"))
        if (stopped._tag === "None") {
          killGroup(child.pid!, "SIGKILL")
          yield* Deferred.await(exit).pipe(Effect.timeoutOption("5 seconds"))
        }
      }
      killGroup(child.pid!, "SIGKILL")
      for (const pid of tree) {
        try {
          process.kill(pid, "SIGKILL")
        } catch {
          // gone
        }
      }
      return yield* Deferred.await(exit)
    })
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(tsx, [script], { cwd: repoRoot, env: { ...base, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true })
      ),
      () => stop
    )
    child.on("exit", (code, signal) => {
      Deferred.unsafeDone(exit, Effect.succeed({ code, signal }))
      wake()
    })
    let partial = ""
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (chunk: string) => {
      const parts = (partial + chunk).split("\n")
      partial = parts.pop()!
      lines.push(...parts)
      wake()
    })
    child.stderr!.setEncoding("utf8")
    child.stderr!.on("data", (chunk: string) => {
      stderrText += chunk
      if (stderrText.length > 200_000) stderrText = stderrText.slice(-100_000)
      wake()
    })
    const json = () =>
      lines.flatMap((l) => {
        try {
          return [JSON.parse(l) as JsonLine]
        } catch {
          return []
        }
      })
    return {
      pid: child.pid!,
      json,
      stderr: () => stderrText,
      waitForJson: (what, predicate, timeout = "60 seconds") =>
        Effect.async<JsonLine>((resume) => {
          const check = () => {
            const found = json().find(predicate)
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
            onTimeout: () => new ProcError({ detail: `timed out waiting for ${what}\nstdout:\n${lines.slice(-20).join("\n")}\nstderr:\n${stderrText.slice(-3000)}` })
          })
        ),
      kill: Effect.gen(function*() {
        for (const pid of ProcessTree.descendants(child.pid!)) tree.add(pid)
        killGroup(child.pid!, "SIGKILL")
        yield* Deferred.await(exit)
      }),
      stop,
      exited: Deferred.await(exit)
    }
  })
