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
import { Effect } from "effect"
import * as Watchdog from "./Watchdog.js"
import type { Scope } from "effect"

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
