/**
 * The child-process harness the cluster's and the CLI's multi-process tests share: the repository
 * root and its tsx, `tsx script` as the test kit's `TestProcess` (its own process group, stdout line
 * by line, stderr as text; closing the scope stops the whole group (SIGTERM, 20 s, SIGKILL) and what
 * it started; `kill` SIGKILLs them at once) and a free port. The CLI's own `warden` process
 * builds on the same root (apps/cli/test/support/CliProcess.ts). Nothing here imports vitest, so a
 * script run with plain tsx may use it (apps/cli/test/support/ClusterBench.ts does); the SIGKILL
 * of every process a test file started, a vitest hook, is `KilledAfterAll`.
 */
import * as Net from "node:net"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { TestProcess } from "@warden/testkit"
import { Effect, Either } from "effect"
import * as Watchdog from "./Watchdog.js"
import type { Duration, Scope } from "effect"

/** The repository's root directory (the working directory of every process started here). */
export const repoRoot = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
/** The workspace's tsx, which runs a TypeScript file from the sources. */
export const tsx = Path.join(repoRoot, "node_modules", ".bin", "tsx")

export type JsonLine = TestProcess.JsonLine

export interface Proc extends TestProcess.TestProcess {
  /** Every stdout line so far that is a JSON object (others are skipped). */
  readonly json: () => ReadonlyArray<JsonLine>
}

/** Spawn `tsx script` with `env` (added to a copy of this process's, minus the engine's `HOST`/`PORT`). */
export const spawnTsx = (
  script: string,
  env: Readonly<Record<string, string>>
): Effect.Effect<Proc, never, Scope.Scope> => {
  const base: Record<string, string | undefined> = { ...process.env }
  for (const key of ["HOST", "PORT", "LISTEN_HOST", "LISTEN_PORT"]) delete base[key]
  return Effect.map(
    // Killed with its group if this process dies first (Ctrl-C: its group is not the terminal's).
    Effect.tap(
      TestProcess.spawn(tsx, [script], {
        cwd: repoRoot,
        env: { ...base, ...env },
        stdin: "ignore",
        stopTimeout: "20 seconds",
        stderrLimit: 100_000
      }),
      (child) => Watchdog.killOnDeath(child.pid)
    ),
    (child): Proc => ({
      ...child,
      json: () =>
        child.lines().flatMap((l) => {
          try {
            const value: unknown = JSON.parse(l)
            return typeof value === "object" && value !== null && !Array.isArray(value) ? [value as JsonLine] : []
          } catch {
            return []
          }
        })
    })
  )
}

/** A free TCP port on 127.0.0.1 (the system's pick, closed again before it is given). */
export const freePort: Effect.Effect<number> = Effect.async<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

/**
 * `spawnTsx` of a process that listens on the port it is given in `env[portVariable]` (a
 * `freePort`), and its `ready` line. The port is free when `freePort` closes it, but another
 * process may take it before this one listens (on a busy machine, any connection's ephemeral
 * port): a process that ends before its ready line saying EADDRINUSE is started again on another
 * port, three times at most. `spawned` is told each process started (a `KilledAfterAll`'s `add`).
 */
export const spawnListening = (
  script: string,
  env: Readonly<Record<string, string>>,
  options: {
    readonly portVariable: string
    readonly what: string
    readonly ready: (line: JsonLine) => boolean
    readonly timeout: Duration.DurationInput
    readonly spawned?: (pid: number) => void
  }
): Effect.Effect<{ readonly proc: Proc; readonly ready: JsonLine }, TestProcess.TestProcessError, Scope.Scope> =>
  Effect.gen(function* () {
    for (let attempt = 1; ; attempt++) {
      const proc = yield* spawnTsx(script, { ...env, [options.portVariable]: String(yield* freePort) })
      options.spawned?.(proc.pid)
      const ready = yield* Effect.either(proc.waitForJson(options.what, options.ready, options.timeout))
      if (Either.isRight(ready)) return { proc, ready: ready.right }
      const taken = proc.lines().some((l) => l.includes("EADDRINUSE")) || proc.stderr().includes("EADDRINUSE")
      if (!taken || attempt >= 3) return yield* Effect.fail(ready.left)
    }
  })
