/**
 * Adaptive admission against the real pinned codex (0.171.0): a scripted storm of HTTP 429 answers
 * from the model makes codex give up on one turn (`codexErrorInfo` `responseTooManyFailedAttempts`
 * with status 429, measured); admission drops to 1 of 2 (`admission.changed` in `--json`), the
 * queued items run one at a time, and after a quiet `--admission-recovery` it is back to 2. Every
 * other item completes.
 */
import { assert, describe, it } from "@effect/vitest"
import { ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"

describe("warden run: adaptive admission (real codex 0.171.0)", () => {
  it.scopedLive(
    "a 429 storm lowers admission, and it recovers after; every other item completes",
    () =>
      Effect.gen(function* () {
        const storm = Array.from({ length: 6 }, () => Step.httpError(429, "Rate limit reached for requests"))
        // Each calm item streams for at least 900 ms: b and c, run one at a time once admission is 1,
        // outlast the 1 s recovery, so the run sees it.
        const slow = (text: string) => [Step.message(text, { stream: true, chunkSize: 2, chunkDelayMs: 300 })]
        const codex = yield* Codex.setup({
          lanes: { storm: storm, a: slow("a done"), b: slow("b done"), c: slow("c done") }
        })
        const prompts = ["storm", "a", "b", "c"].map((lane) => `${ScriptedModel.laneMarker(lane)} go`)
        const run = yield* CliProcess.runToEnd(
          [
            "run",
            ...codex.flags,
            "--json",
            "--approvals",
            "deny",
            "--no-state",
            "--concurrency",
            "2",
            "--admission-recovery",
            "1s",
            ...prompts
          ],
          { env: codex.env }
        )
        const lines = run.json()
        const finished = lines.filter((l) => l.type === "item.finished").sort((x, y) => x.item - y.item)
        assert.deepStrictEqual(
          finished.map((l) => l.status),
          ["failed", "completed", "completed", "completed"],
          run.stderr
        )
        assert.include(finished[0]!.error, "429")
        assert.strictEqual(run.exited.code, 1, run.stderr)

        const changes = lines.filter((l) => l.type === "admission.changed")
        assert.isAtLeast(changes.length, 2, run.stderr)
        assert.deepStrictEqual([changes[0]!.limit, changes[0]!.max], [1, 2])
        assert.match(changes[0]!.reason, /HTTP 429/)
        assert.deepStrictEqual([changes[1]!.limit, changes[1]!.max, changes[1]!.reason], [2, 2, "recovered"])
        // The board (stderr) says so too.
        assert.include(run.stderr, "admission lowered to 1 of 2 running items")
        assert.include(run.stderr, "admission back up to 2 of 2")
      }),
    180_000
  )
})
