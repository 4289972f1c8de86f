/**
 * The screen without a terminal: the lines of one turn of the event loop go out together (one
 * write per run of lines for the same stream), and the CLI exits only once stdout and stderr took
 * them (`Screen.whenWritten`): in a real child process whose stdout and stderr are pipes, a
 * `process.exit` right after ~400 KB of lines loses their tail (the pipe holds 64 KB; Node keeps
 * the rest in the process); through `whenWritten` every line arrives, in order, on its stream.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnTsx } from "@warden/test-support/Processes"
import { Effect } from "effect"
import * as Path from "node:path"

const script = Path.join("apps", "cli", "test", "fixtures", "screen-lines.ts")
const n = 20_000

const run = (exit: "when-written" | "at-once") =>
  Effect.gen(function* () {
    const child = yield* spawnTsx(script, { WARDEN_TEST_LINES: String(n), WARDEN_TEST_EXIT: exit })
    const exited = yield* child.exited()
    return {
      code: exited.code,
      out: child.json().map((l) => l["i"]),
      err: child
        .stderr()
        .split("\n")
        .filter((l) => l.startsWith("human "))
    }
  })

describe("Screen without a terminal", () => {
  it.scopedLive(
    "every line written before the exit arrives, in order, on its stream, and the exit code is kept",
    () =>
      Effect.gen(function* () {
        const { code, out, err } = yield* run("when-written")
        expect(code).toBe(1)
        expect(out).toEqual(Array.from({ length: n }, (_, i) => i).filter((i) => i % 7 < 4))
        expect(err).toEqual(
          Array.from({ length: n }, (_, i) => i)
            .filter((i) => i % 7 >= 4)
            .map((i) => `human ${i}`)
        )
      }),
    60_000
  )

  it.scopedLive(
    "exiting at once instead (as the CLI did when an item failed) loses the tail of stdout: why the CLI waits",
    () =>
      Effect.gen(function* () {
        const { code, out } = yield* run("at-once")
        expect(code).toBe(1)
        expect(out.length).toBeLessThan(Array.from({ length: n }, (_, i) => i).filter((i) => i % 7 < 4).length)
      }),
    60_000
  )
})
