/**
 * End to end against the REAL pinned codex app-server: a work item that ends lets go of its thread
 * on its app-server, which stays alive, so that ANOTHER app-server process on the same CODEX_HOME
 * can resume the thread at once (a cluster runner that took the item over: docs/scaling.md).
 *
 * codex 0.171.0 holds a writer lock per loaded thread (a `flock` on
 * `$CODEX_HOME/thread-writer-locks/<thread>.lock`, the file removed on unload) and keeps a thread
 * loaded until it has had no subscriber for `thread_unload_delay_secs` (30 minutes by default);
 * meanwhile every other process's `thread/resume` is refused "thread … already has an active
 * writer". Without the release, both cases below wait here for minutes.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { ProcessTree, Step } from "@warden/testkit"
import { ChildProcessTransport } from "@warden/transport"
import { type Duration, Effect, Exit, Schedule } from "effect"
import { Supervisor } from "../../src/index.js"
import { item, withRealSupervisor } from "./support/RealSupervisor.js"

const escalated = (cmd: string, callId: string) =>
  Step.execCommand({ cmd, escalated: true, justification: "e2e: outside the sandbox", callId })

/** Poll until `check` holds, bounded (no event says a lock file went away). */
const eventually = (what: string, check: () => boolean, timeout: Duration.DurationInput = "10 seconds") =>
  Effect.suspend(() => (check() ? Effect.void : Effect.fail(new Error(`not yet: ${what}`)))).pipe(
    Effect.retry(Schedule.spaced("20 millis")),
    Effect.timeoutFail({ duration: timeout, onTimeout: () => new Error(`timed out waiting until ${what}`) })
  )

describe("a work item's thread is let go on its app-server when the item ends", () => {
  it.scopedLive(
    "completed, and stopped mid-turn with a card open: another app-server process resumes the thread at once while the first lives on",
    () =>
      withRealSupervisor(
        {
          name: "thread release",
          script: {
            lanes: {
              done: [Step.message("first done"), Step.message("second done")],
              stopped: [escalated("echo never", "call_s"), Step.message("resumed elsewhere")]
            }
          }
        },
        (real) =>
          Effect.gen(function* () {
            const lock = (threadId: string) =>
              Path.join(real.launch.codexHome, "thread-writer-locks", `${threadId}.lock`)
            yield* real.supervisor.ready
            const [pidA] = real.codexPids()
            assert.isDefined(pidA)

            // 1. An item that completes: its thread is unloaded on A.
            const done = yield* real.supervisor.run(item(real, "D", "done"))
            assert.strictEqual(done.status, "completed")
            yield* eventually(
              `A unloaded ${done.threadId} (its lock file gone)`,
              () => !Fs.existsSync(lock(done.threadId))
            )

            // 2. An item stopped while its card is open (as a runner's item whose shard moved): the
            // turn is interrupted, the card refused, the thread unloaded on A.
            const handle = yield* real.supervisor.start(item(real, "S", "stopped"))
            const stoppedThread = yield* handle.threadId
            yield* real.cardOf("S")
            assert.isTrue(Fs.existsSync(lock(stoppedThread)), "a running thread holds its lock")
            yield* handle.stop
            yield* eventually(
              `A unloaded ${stoppedThread} (its lock file gone)`,
              () => !Fs.existsSync(lock(stoppedThread))
            )
            assert.isTrue(ProcessTree.isAlive(pidA!), "A's app-server lives on")

            // Another app-server process on the same codex home resumes both threads at once.
            const b = yield* Supervisor.make().pipe(
              Effect.provide(
                ChildProcessTransport.layer({
                  command: real.launch.command,
                  args: real.launch.args,
                  env: real.launch.env,
                  cwd: real.launch.cwd
                })
              )
            )
            const again = yield* b
              .run(item(real, "D2", "done", { threadId: done.threadId }))
              .pipe(Effect.timeout("20 seconds"))
            assert.strictEqual(again.status, "completed")
            assert.strictEqual(again.finalMessage, "second done")
            const moved = yield* Effect.exit(
              b.run(item(real, "S2", "stopped", { threadId: stoppedThread })).pipe(Effect.timeout("20 seconds"))
            )
            assert.isTrue(Exit.isSuccess(moved), String(moved))
            if (Exit.isSuccess(moved)) {
              assert.strictEqual(moved.value.threadId, stoppedThread)
              assert.strictEqual(moved.value.finalMessage, "resumed elsewhere")
            }
          })
      ),
    120_000
  )
})
