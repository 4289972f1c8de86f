/**
 * `warden runner` takes the card options of `warden run` (real codex 0.171.0): `--rules FILE`
 * decides a card on the runner, with no person; `--approval-timeout` refuses a card nobody
 * answers (the submitter here never answers). Without them a card opened under a submitter that
 * died would wait the default 15 minutes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Invariants } from "@warden/cluster"
import { ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import { oneRunnerFleet, submitArgs } from "./support/Fleet.js"

describe("warden runner --rules / --approval-timeout (real codex 0.171.0)", () => {
  it.scopedLive(
    "a rule on the runner accepts a card with no person; a card nobody answers is refused at the runner's deadline",
    () =>
      Effect.gen(function* () {
        const step = (cmd: string) => [
          Step.execCommand({ cmd, escalated: true, justification: "runner cards test" }),
          Step.message("done")
        ]
        const { codex, pg } = yield* oneRunnerFleet(
          {
            lanes: {
              ruled: step("echo warden-runner-rule"),
              unanswered: step("touch /var/tmp/warden-runner-unanswered")
            }
          },
          (codex) => {
            const rules = Path.join(codex.launch.home, "rules.yaml")
            Fs.writeFileSync(
              rules,
              "rules:\n  - id: echo-ok\n    effect: allow\n    match: { command: { argvPrefix: [echo] } }\n"
            )
            return ["--rules", rules, "--approval-timeout", "3s"]
          }
        )
        const submit = yield* CliProcess.runToEnd(
          submitArgs({ cluster: pg.url, workspace: codex.launch.workspace, lanes: ["ruled", "unanswered"] }),
          { env: codex.env }
        )
        assert.deepStrictEqual(submit.exited, { code: 0, signal: null }, submit.stderr.slice(-3000))
        const lines = submit.json()
        const settled = lines.filter((l) => l.type === "card.settled")
        const byItem = new Map(settled.map((l) => [Number(l["item"]), l]))
        // The fleet's lines name a settlement's source by its kind (`Rule`, `Deadline`, `Person`, ...).
        assert.deepInclude(byItem.get(1)!, { outcome: "accepted", source: "Rule" }, JSON.stringify(settled))
        assert.deepInclude(byItem.get(2)!, { outcome: "timeout", source: "Deadline" }, JSON.stringify(settled))
        assert.isAtLeast(Number(byItem.get(2)!["latencyMs"]), 3000)
        // No person decided anything: the invariants hold with no decision given.
        assert.deepStrictEqual(Invariants.check({ lines, decisions: new Map(), dead: [], items: [1, 2] }), [])
        // The model saw the accepted command's output, and the refused one never ran.
        const outputs = (lane: string) =>
          Effect.map(codex.model.requests, (requests) =>
            requests
              .filter((r) => r.lane === lane)
              .flatMap((r) => ScriptedModel.functionCallOutputs(r).map((o) => JSON.stringify(o)))
          )
        assert.isTrue((yield* outputs("ruled")).some((o) => o.includes("warden-runner-rule")))
        assert.isFalse(Fs.existsSync("/var/tmp/warden-runner-unanswered"))
        for (const r of lines.filter((l) => l.type === "item.result")) assert.strictEqual(r["status"], "completed")
      }),
    300_000
  )
})
