/**
 * What `warden resume` takes from the ledger besides the prompts: each item's config and thread
 * params (as recorded at submission), refused when they were stored masked; and the dead run's codex
 * flags (`recordedFlags`), refused when masked.
 */
import { assert, describe, it } from "@effect/vitest"
import { Ledger, LedgerEvent } from "@warden/ledger"
import { Context, Effect, Either, Layer } from "effect"
import * as ChildProcess from "node:child_process"
import * as Os from "node:os"
import * as Path from "node:path"
import * as StateLedger from "../src/state/StateLedger.js"
import * as CliProcess from "./support/CliProcess.js"

describe("warden resume: what an item was started with", () => {
  it.scopedLive(
    "config and thread params recorded at submission are used at resume; masked ones make the item not run",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* CliProcess.tempDir, "ledger.db")
        // A run recorded by a process that is gone (its pid exited), left `running`, as after a SIGKILL.
        const deadPid = ChildProcess.spawnSync(process.execPath, ["-e", ""]).pid
        const ledger = Context.get(yield* Layer.build(Ledger.layerSqlite({ filename })), Ledger.Ledger)
        const run = yield* ledger.beginRun({
          label: "warden run",
          pid: deadPid,
          host: Os.hostname(),
          info: { codex: { config: ["a=1"], enable: [], disable: [] } }
        })
        run.record(
          LedgerEvent.itemSubmitted({
            id: 0,
            prompt: "fix it",
            cwd: "/repo",
            model: "gpt-test",
            config: { model_reasoning_effort: "low" },
            threadParams: { baseInstructions: "be brief" }
          })
        )
        run.record(
          LedgerEvent.itemSubmitted({
            id: 1,
            prompt: "deploy",
            config: { env: { OPENAI_API_KEY: "sk-proj-Zq3vB7xK9mT2wR5nL8pD4fH6jY1cA0sE" } }
          })
        )
        yield* ledger.flush

        const resumed = yield* Effect.scoped(
          StateLedger.resume(filename, { runId: undefined, info: {}, flags: { config: [], enable: [], disable: [] } })
        )
        assert.isTrue(Either.isRight(resumed), Either.isLeft(resumed) ? resumed.left : "")
        const r = Either.getOrThrow(resumed)
        assert.strictEqual(r.deadRunId, run.id)
        assert.deepStrictEqual(r.items, [
          {
            prompt: "fix it",
            cwd: "/repo",
            model: "gpt-test",
            config: { model_reasoning_effort: "low" },
            threadParams: { baseInstructions: "be brief" }
          }
        ])
        assert.deepStrictEqual(
          r.notResumed.map((n) => [n.item, n.reason]),
          [["1", "options-masked"]]
        )
        assert.match(r.notResumed[0]!.detail, /^its config or thread params held a secret/)
        assert.deepStrictEqual(r.codexFlags, { config: ["a=1"], enable: [], disable: [] })
      }),
    60_000
  )

  it("the dead run's codex flags: taken as recorded; masked ones are refused; none recorded is none", () => {
    assert.deepStrictEqual(
      StateLedger.recordedFlags({ codex: { config: ["x=1"], enable: ["f"], disable: [] } }),
      Either.right({ config: ["x=1"], enable: ["f"], disable: [] })
    )
    assert.deepStrictEqual(StateLedger.recordedFlags({ cwd: "/repo" }), Either.right(undefined))
    assert.deepStrictEqual(StateLedger.recordedFlags(undefined), Either.right(undefined))
    const masked = StateLedger.recordedFlags({ codex: { config: ["api_key=•••"], enable: [], disable: [] } })
    assert.isTrue(Either.isLeft(masked))
    assert.match(Either.isLeft(masked) ? masked.left : "", /stored masked; give them again/)
  })
})
