/**
 * An engine left open with nothing to do keeps nothing alive: once its cards are settled, no
 * timer of its (a watch on its owner, a handler fiber waiting for work) holds the event loop, so a
 * program that forgot to close it still exits. Its deadline timer sleeps until the next deadline
 * it was set for, then ends when no card is left (`DeadlineTimer`: one sleeping fiber reused from
 * card to card): the fixture's deadline is 1 s.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"

const root = Path.resolve(__dirname, "../../..")
const fixture = Path.join(__dirname, "fixtures", "idle-engine.ts")

describe("an engine left open", () => {
  it.live(
    "once its card is settled by the handler, the process exits by itself",
    () =>
      Effect.gen(function* () {
        const exited = yield* Effect.async<{
          readonly code: number | null
          readonly out: string
          readonly err: string
        }>((resume) => {
          const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", fixture], {
            cwd: root,
            stdio: ["ignore", "pipe", "pipe"]
          })
          let out = ""
          let err = ""
          child.stdout.on("data", (chunk: Buffer) => {
            out += chunk.toString("utf8")
          })
          child.stderr.on("data", (chunk: Buffer) => {
            err += chunk.toString("utf8")
          })
          child.on("close", (code) => resume(Effect.succeed({ code, out, err })))
          return Effect.sync(() => child.kill("SIGKILL"))
        }).pipe(
          // Held by a timer, it would never exit: the deadline fails the test (nothing is timed).
          Effect.timeoutFail({
            duration: "60 seconds",
            onTimeout: () => new Error("the process did not exit by itself")
          })
        )
        assert.strictEqual(exited.out, "settled accepted\n", exited.err)
        assert.strictEqual(exited.code, 0, exited.err)
      }),
    90_000
  )
})
