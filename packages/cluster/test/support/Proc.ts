/**
 * A child process for the multi-process tests: `tsx script` as the test kit's `TestProcess` (its
 * own process group, stdout line by line, stderr as text). Closing the scope stops the whole group
 * (SIGTERM, 20 s, SIGKILL) and what it started; `kill` SIGKILLs them at once.
 */
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { TestProcess } from "@warden/testkit"
import { Effect } from "effect"
import type { Scope } from "effect"

export const repoRoot = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../../..")
export const tsx = Path.join(repoRoot, "node_modules", ".bin", "tsx")

export type JsonLine = TestProcess.JsonLine

export interface Proc extends TestProcess.TestProcess {
  /** Every stdout line so far that is a JSON object (others are skipped). */
  readonly json: () => ReadonlyArray<JsonLine>
}

/** Spawn `tsx script` with `env` (added to a copy of this process's, minus the engine's `HOST`/`PORT`). */
export const spawnTsx = (script: string, env: Readonly<Record<string, string>>): Effect.Effect<Proc, never, Scope.Scope> => {
  const base: Record<string, string | undefined> = { ...process.env }
  for (const key of ["HOST", "PORT", "LISTEN_HOST", "LISTEN_PORT"]) delete base[key]
  return Effect.map(
    TestProcess.spawn(tsx, [script], { cwd: repoRoot, env: { ...base, ...env }, stdin: "ignore", stopTimeout: "20 seconds", stderrLimit: 100_000 }),
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
