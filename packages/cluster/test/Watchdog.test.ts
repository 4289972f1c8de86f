/**
 * What a test starts does not outlive a test process that dies before its scope closes (vitest
 * stopped by Ctrl-C, or killed): `@warden/test-support/Watchdog` stops the throwaway PostgreSQL
 * server (a daemon in a session of its own) and removes its directory, and kills a child started
 * in a process group of its own (`spawnTsx`, the CLI's `warden`), which a Ctrl-C at the terminal
 * does not reach. Without it both stay running.
 */
import { assert, describe, it } from "@effect/vitest"
import { killedAfterAll } from "@warden/test-support/KilledAfterAll"
import { until } from "@warden/test-support/Polling"
import { spawnTsx } from "@warden/test-support/Processes"
import { onDeath } from "@warden/test-support/Watchdog"
import { ProcessTree } from "@warden/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

const orphan = Path.join(__dirname, "fixtures", "orphan.ts")
const started = killedAfterAll()

describe("what a test started", () => {
  it.live(
    "is stopped when the test process dies before its scope closes: the PostgreSQL server (its directory removed) and a child in its own process group",
    () =>
      Effect.gen(function* () {
        const proc = yield* spawnTsx(orphan, {})
        started.add(proc.pid)
        const line = () => proc.json().find((l) => typeof l["child"] === "number")
        yield* until("the server's pid", () => line() !== undefined, "120 seconds")
        const { pid, dir, child } = line() as unknown as { pid: number; dir: string; child: number }
        started.add(pid)
        started.add(child)
        assert.isTrue(ProcessTree.isAlive(pid), "the postmaster runs")
        assert.isTrue(ProcessTree.isAlive(child), "the child runs")
        assert.isTrue(Fs.existsSync(dir))
        // The test process dies at once, its scope not closed: its process group SIGKILLed, as a
        // Ctrl-C or a kill reaches it (the server and the watchdog are in sessions of their own;
        // `proc.kill` would also kill every descendant, the watchdog among them).
        process.kill(-proc.pid, "SIGKILL")
        yield* proc.exited("30 seconds")
        yield* until("the postmaster gone", () => !ProcessTree.isAlive(pid), "60 seconds")
        yield* until("its directory removed", () => !Fs.existsSync(dir), "30 seconds")
        yield* until("the child gone", () => !ProcessTree.isAlive(child), "30 seconds")
      }).pipe(Effect.scoped),
    180_000
  )

  it.live("a watchdog that cannot start says so on stderr, and the test goes on", () =>
    Effect.gen(function* () {
      const said: Array<string> = []
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          const write = process.stderr.write
          process.stderr.write = ((chunk: string | Uint8Array, ...rest: Array<never>) => {
            said.push(String(chunk))
            return write.call(process.stderr, chunk, ...rest)
          }) as typeof process.stderr.write
          return write
        }),
        (write) =>
          Effect.sync(() => {
            process.stderr.write = write
          })
      )
      // No `sh` on this PATH: the watchdog's process cannot be made.
      yield* onDeath("true", { PATH: Path.join(__dirname, "no-such-directory") })
      yield* until("the warning", () => said.some((s) => s.includes("a watchdog could not start")), "10 seconds")
    }).pipe(Effect.scoped)
  )
})
