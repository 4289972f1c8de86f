import { assert, describe, it } from "@effect/vitest"
import { ProcessTree, TestProcess } from "@warden/testkit"
import { Effect, Exit, Schedule } from "effect"

/** A node child that prints a line that is not JSON and one that is, writes to stderr, then waits for `quit` on stdin. */
const script = [
  "console.log('not json')",
  "console.log(JSON.stringify({ type: 'ready' }))",
  "console.error('to stderr')",
  "process.stdin.on('data', (d) => { if (String(d).includes('quit')) process.exit(7) })"
].join("\n")

/** The same, starting a grandchild in a process group of its own (as codex runs) that would outlive it, and printing its pid. */
const withGrandchild = [
  "const { spawn } = require('node:child_process')",
  "const g = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore', detached: true })",
  "console.log(JSON.stringify({ type: 'grandchild', pid: g.pid }))",
  script
].join("\n")

describe("TestProcess", () => {
  it.live("exited: everything the child wrote has been read (its exit can be reported before its last output)", () =>
    Effect.gen(function* () {
      // 20 runs of a child that writes ~1 MiB in bursts and exits at once: with the exit told on
      // Node's "exit" event, the last chunks were read after it often enough to fail here.
      const lines = 20_000
      const burst = `const line = "x".repeat(50); for (let i = 0; i < ${lines}; i++) process.stdout.write(line + "\\n"); process.stderr.write("done\\n")`
      for (let run = 0; run < 20; run++) {
        const got = yield* Effect.scoped(
          Effect.gen(function* () {
            const child = yield* TestProcess.spawn(process.execPath, ["-e", burst], { stdin: "ignore" })
            const exited = yield* child.exited("60 seconds")
            return { exited, lines: child.lines().length, stderr: child.stderr() }
          })
        )
        assert.deepStrictEqual(got, { exited: { code: 0, signal: null }, lines, stderr: "done\n" }, `run ${run}`)
      }
    })
  )

  it.live("waits on output (skipping lines that are not JSON), writes stdin, and reports the exit", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const child = yield* TestProcess.spawn(process.execPath, ["-e", script])
        const ready = yield* child.waitForJson("ready", (l) => l.type === "ready")
        assert.strictEqual(ready.type, "ready")
        yield* child.waitForStderr("the stderr line", (t) => t.includes("to stderr"))
        assert.deepStrictEqual(child.lines().slice(0, 2), ["not json", '{"type":"ready"}'])
        yield* child.write("quit\n")
        const exited = yield* child.exited()
        assert.deepStrictEqual(exited, { code: 7, signal: null })
      })
    )
  )

  it.live("a wait the exit did not satisfy fails at the exit, saying how it ended, not at its timeout", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const child = yield* TestProcess.spawn(process.execPath, ["-e", "console.log('bye'); process.exit(3)"], {
          stdin: "ignore"
        })
        const failed = yield* Effect.exit(child.waitForJson("a ready line", (l) => l.type === "ready", "10 minutes"))
        assert.isTrue(Exit.isFailure(failed))
        const error = Exit.isFailure(failed) ? String(failed.cause) : ""
        assert.include(error, "the process ended (exit 3) before a ready line")
        assert.include(error, "bye")
        // Not the timeout's failure: the exit's (a 10-minute wait would have failed the test's own timeout).
        assert.notInclude(error, "timed out")
        // A wait begun after the exit fails the same way; one the output satisfies still succeeds.
        const late = yield* Effect.exit(child.waitForStderr("anything on stderr", (t) => t.length > 0))
        assert.include(
          Exit.isFailure(late) ? String(late.cause) : "",
          "the process ended (exit 3) before anything on stderr"
        )
        assert.strictEqual(yield* child.waitUntil("the line", () => child.lines().find((l) => l === "bye")), "bye")
      })
    )
  )

  it.live("a wait that times out fails with the output's last lines", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const child = yield* TestProcess.spawn(process.execPath, ["-e", script])
        yield* child.waitForJson("ready", (l) => l.type === "ready")
        const failed = yield* Effect.exit(
          child.waitForJson("a line that never comes", (l) => l.type === "never", "200 millis")
        )
        assert.isTrue(Exit.isFailure(failed))
        const error = Exit.isFailure(failed) ? String(failed.cause) : ""
        assert.include(error, "timed out waiting for a line that never comes")
        assert.include(error, "not json")
      })
    )
  )

  it.live("closing the scope stops the child and what it started, even a grandchild outside its group's reach", () =>
    Effect.gen(function* () {
      const pids = yield* Effect.scoped(
        Effect.gen(function* () {
          const child = yield* TestProcess.spawn(process.execPath, ["-e", withGrandchild])
          const line = yield* child.waitForJson("the grandchild's pid", (l) => l.type === "grandchild")
          const grandchild = line["pid"] as number
          assert.isTrue(ProcessTree.isAlive(grandchild))
          return { child: child.pid, grandchild }
        })
      )
      assert.isFalse(ProcessTree.isAlive(pids.child), "the child")
      // SIGKILLed when the scope closed; the kernel reaps it on its own schedule: asked again, bounded.
      const gone = yield* Effect.suspend(() =>
        ProcessTree.isAlive(pids.grandchild) ? Effect.fail("alive") : Effect.succeed(true)
      ).pipe(
        Effect.retry(Schedule.spaced("10 millis")),
        Effect.timeoutFail({
          duration: "5 seconds",
          onTimeout: () => new Error(`the grandchild ${pids.grandchild} is still running`)
        })
      )
      assert.isTrue(gone, "the grandchild")
    })
  )

  it.live(
    "a child that ignores SIGTERM is SIGKILLed after stopTimeout when the scope closes (the finalizer's wait is bounded)",
    () =>
      Effect.gen(function* () {
        const pid = yield* Effect.scoped(
          Effect.gen(function* () {
            const child = yield* TestProcess.spawn(
              process.execPath,
              [
                "-e",
                "process.on('SIGTERM', () => console.log(JSON.stringify({ type: 'term' }))); console.log(JSON.stringify({ type: 'ready' })); setInterval(() => {}, 1000)"
              ],
              { stopTimeout: "300 millis" }
            )
            yield* child.waitForJson("ready", (l) => l.type === "ready")
            return child.pid
          })
        ).pipe(
          Effect.timeoutFail({
            duration: "20 seconds",
            onTimeout: () =>
              new Error("closing the scope never ended: the wait for a child that ignores SIGTERM was not bounded")
          })
        )
        assert.isFalse(ProcessTree.isAlive(pid))
      })
  )
})
