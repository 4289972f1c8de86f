/**
 * What a test starts outside its own process tree (a daemon: the throwaway PostgreSQL server, a
 * private tmux server) is stopped by the test's scope, and that scope does not close when the test
 * process dies first: vitest stopped by Ctrl-C (its workers end without running their finalizers)
 * or killed. `onDeath` leaves behind a watchdog (`sh`, in a session of its own: a Ctrl-C at the
 * terminal does not reach it) that holds a pipe from the test process and runs a cleanup script
 * when that pipe ends without the word "done", which the scope writes when it closes: the test
 * process is gone, however it went.
 */
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import { Effect } from "effect"
import type { Scope } from "effect"

/**
 * Run `script` (sh) if this process dies before the caller's scope closes; `env` is added to its
 * environment (pass values there, not in the script's text: nothing is quoted).
 */
export const onDeath = (
  script: string,
  env: Readonly<Record<string, string>>
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.asVoid(
    Effect.acquireRelease(
      Effect.sync(() => {
        // A line ("done") means the scope closed; end of input without one, that this process is gone.
        const child = spawn("sh", ["-c", `if read -r line; then exit 0; fi\n${script}`], {
          detached: true,
          stdio: ["pipe", "ignore", "ignore"],
          env: { ...process.env, ...env }
        })
        // Neither the child nor its pipe keeps this process alive; the pipe is not inherited by
        // other children (libuv opens it close-on-exec), so it ends exactly when this process does.
        // A watchdog that cannot start (no `sh`, no process left to make) is said, not hidden: the
        // test goes on, its scope's own cleanup unchanged, without the cleanup on death.
        child.on("error", (error) => {
          process.stderr.write(
            `[test-support] a watchdog could not start (${error.message}): if this test process dies, what it started outside its own tree stays\n`
          )
        })
        child.stdin?.on("error", () => {})
        child.unref()
        ;(child.stdin as { unref?: () => void } | null)?.unref?.()
        return child
      }),
      (child) =>
        Effect.sync(() => {
          child.stdin?.end("done\n")
        })
    )
  )

/** A process's start time (`/proc/PID/stat`, field 22, clock ticks since boot); undefined when it is gone or there is no /proc. */
const startTime = (pid: number): string | undefined => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
  } catch {
    return undefined
  }
}

/**
 * SIGKILL `pid`'s process group and `pid` itself if this process dies before the caller's scope
 * closes: a child the test started in a process group of its own (`TestProcess`), which a Ctrl-C
 * at the terminal does not reach. Only if `pid` is still the process it was (its start time), so
 * a number used again by another process is left alone.
 */
export const killOnDeath = (pid: number): Effect.Effect<void, never, Scope.Scope> =>
  Effect.suspend(() => {
    const start = startTime(pid)
    if (start === undefined) return Effect.void
    return onDeath(
      'if [ "$(sed "s/.*) //" "/proc/$WK_PID/stat" 2>/dev/null | cut -d" " -f20)" = "$WK_START" ]; then kill -KILL -- "-$WK_PID" 2>/dev/null; kill -KILL "$WK_PID" 2>/dev/null; fi',
      { WK_PID: String(pid), WK_START: start }
    )
  })
