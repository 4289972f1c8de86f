/**
 * `warden run --json` against the real pinned codex and a ScriptedModel started here: the event
 * stream and exit codes when a card is accepted (stdin), declined (deny), left to its deadline,
 * and decided by rules.
 */
import { assert, describe, it } from "@effect/vitest"
import { ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"

const escalated = (lane: string, cmd: string) => ({
  [lane]: [Step.execCommand({ cmd, escalated: true, justification: `test ${lane}` }), Step.message(`${lane} done`)]
})

const types = (lines: ReadonlyArray<CliProcess.JsonLine>) => lines.map((l) => l.type)

/** Every line has `type` and an ISO `ts`; run.finished is the last one. */
const assertWellFormed = (lines: ReadonlyArray<CliProcess.JsonLine>) => {
  assert.isAbove(lines.length, 0)
  for (const line of lines) {
    assert.isString(line.type)
    assert.strictEqual(new Date(line.ts).toISOString(), line.ts, `ts of ${line.type}`)
  }
  assert.strictEqual(lines[lines.length - 1]!.type, "run.finished")
}

/** The output the model got for the command's call (the request after the approval). */
const commandOutput = (model: ScriptedModel.Service) =>
  Effect.map(model.awaitRequests(2), (requests) => {
    const outputs = requests.flatMap((r) => ScriptedModel.functionCallOutputs(r))
    return outputs.map((o) => JSON.stringify(o.output)).join("\n")
  })

describe("warden run --json (real codex 0.171.0)", () => {
  it.scopedLive(
    "accept through --approvals stdin: bad lines are reported and change nothing; the command runs; exit 0; audit trail",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({ lanes: escalated("cmd", "echo warden-accepted-output") })
        const audit = Path.join(codex.launch.home, "audit.jsonl")
        const cli = yield* CliProcess.spawn(
          [
            "run",
            ...codex.flags,
            "--json",
            "--approvals",
            "stdin",
            "--audit",
            audit,
            `${ScriptedModel.laneMarker("cmd")} run the command`
          ],
          { env: codex.env }
        )
        const ready = yield* cli.waitForJson("connection.ready", (l) => l.type === "connection.ready")
        assert.strictEqual(ready.codexHome, codex.launch.codexHome)
        assert.include(ready.userAgent, "0.171.0")
        const opened = yield* cli.waitForJson("card.opened", (l) => l.type === "card.opened")
        assert.strictEqual(opened.item, 0)
        assert.strictEqual(opened.method, "item/commandExecution/requestApproval")
        assert.include(opened.summary, "echo warden-accepted-output")
        assert.include(opened.offers, "accept")
        assert.isString(opened.threadId)

        yield* cli.write("this is not json\n")
        yield* cli.write(`${JSON.stringify({ cardId: "c999", decision: "accept" })}\n`)
        yield* cli.write(`${JSON.stringify({ cardId: opened.cardId, decision: "maybe" })}\n`)
        yield* cli.waitForStderr("the three reports", (t) => t.includes("stdin line 3 ignored"))
        assert.include(cli.stderr(), "stdin line 1 ignored: not JSON")
        assert.include(cli.stderr(), "stdin line 2 ignored: no open card c999")
        assert.isFalse(
          cli.json().some((l) => l.type === "card.settled"),
          "nothing was settled by the bad lines"
        )

        yield* cli.write(`${JSON.stringify({ cardId: opened.cardId, decision: "accept" })}\n`)
        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 0, signal: null }, cli.stderr())

        const lines = cli.json()
        assertWellFormed(lines)
        const started = lines.find((l) => l.type === "item.started")!
        assert.deepStrictEqual([started.item, started.threadId], [0, opened.threadId])
        assert.include(started.prompt, "run the command")
        const settled = lines.find((l) => l.type === "card.settled")!
        assert.deepInclude(settled, {
          cardId: opened.cardId,
          item: 0,
          method: opened.method,
          outcome: "accepted",
          source: "person",
          decision: "accept"
        })
        const turn = lines.find((l) => l.type === "turn.completed")!
        assert.deepInclude(turn, { item: 0, threadId: opened.threadId, status: "completed" })
        assert.isString(turn.turnId)
        const finished = lines.find((l) => l.type === "item.finished")!
        assert.deepInclude(finished, {
          item: 0,
          threadId: opened.threadId,
          status: "completed",
          finalMessage: "cmd done",
          error: null
        })
        assert.deepStrictEqual(lines[lines.length - 1]!.items, [{ item: 0, status: "completed" }])
        assert.strictEqual(lines[lines.length - 1]!.exitCode, 0)
        assert.isBelow(types(lines).indexOf("card.opened"), types(lines).indexOf("card.settled"))
        assert.isBelow(types(lines).indexOf("card.settled"), types(lines).indexOf("item.finished"))

        const output = yield* commandOutput(codex.model)
        assert.include(output, "exited with code 0", "the accepted command ran")
        assert.include(output, "warden-accepted-output")
        const trail = Fs.readFileSync(audit, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
        assert.deepStrictEqual(
          trail.map((r) => [r.type, r.cardId, r.outcome]),
          [
            ["card.opened", opened.cardId, null],
            ["card.settled", opened.cardId, "accepted"]
          ]
        )
        assert.strictEqual(trail[1].source, "person")
      }),
    60_000
  )

  it.scopedLive(
    "--approvals deny: the card is declined by the handler, the command never runs, the turn goes on; exit 0",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({ lanes: escalated("cmd", "echo warden-denied-output") })
        const result = yield* CliProcess.runToEnd(
          ["run", ...codex.flags, "--json", "--approvals", "deny", `${ScriptedModel.laneMarker("cmd")} run it`],
          { env: codex.env }
        )
        assert.deepStrictEqual(result.exited, { code: 0, signal: null }, result.stderr)
        const lines = result.json()
        assertWellFormed(lines)
        assert.deepStrictEqual(
          types(lines).filter((t) => t.startsWith("card.")),
          ["card.opened", "card.settled"]
        )
        assert.deepInclude(lines.find((l) => l.type === "card.settled")!, {
          item: 0,
          outcome: "declined",
          source: "handler",
          decision: "decline"
        })
        assert.deepInclude(lines.find((l) => l.type === "item.finished")!, {
          status: "completed",
          finalMessage: "cmd done"
        })
        const output = yield* commandOutput(codex.model)
        assert.isAbove(output.length, 0, "the model heard back about the call")
        assert.notInclude(output, "exited with code", "the declined command did not run")
      }),
    60_000
  )

  it.scopedLive(
    "--approval-timeout 300ms with stdin and no answer: the card times out and is refused; exit 0",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({ lanes: escalated("cmd", "echo warden-timeout-output") })
        const cli = yield* CliProcess.spawn(
          [
            "run",
            ...codex.flags,
            "--json",
            "--approvals",
            "stdin",
            "--approval-timeout",
            "300ms",
            `${ScriptedModel.laneMarker("cmd")} run it`
          ],
          { env: codex.env }
        )
        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 0, signal: null }, cli.stderr())
        const lines = cli.json()
        assertWellFormed(lines)
        const opened = lines.find((l) => l.type === "card.opened")!
        const settled = lines.find((l) => l.type === "card.settled")!
        assert.deepInclude(settled, {
          cardId: opened.cardId,
          outcome: "timeout",
          source: "deadline",
          decision: null,
          written: true
        })
        assert.isAtLeast(settled.latencyMs, 300)
        assert.isBelow(Date.parse(opened.deadline) - Date.parse(opened.ts), 1_000)
        assert.deepInclude(lines.find((l) => l.type === "item.finished")!, { status: "completed" })
      }),
    60_000
  )

  it.scopedLive(
    "--approvals rules: a rule accepts one card, what no rule decides is refused",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({
          lanes: {
            ...escalated("allowed", "echo warden-rule-allowed"),
            ...escalated("other", "touch /var/tmp/warden-rule-other")
          }
        })
        const rules = Path.join(codex.launch.home, "rules.yaml")
        Fs.writeFileSync(
          rules,
          "rules:\n  - id: echo-ok\n    effect: allow\n    match: { command: { argvPrefix: [echo] } }\n"
        )
        const result = yield* CliProcess.runToEnd(
          [
            "run",
            ...codex.flags,
            "--json",
            "--approvals",
            "rules",
            "--rules",
            rules,
            `${ScriptedModel.laneMarker("allowed")} echo`,
            `${ScriptedModel.laneMarker("other")} touch`
          ],
          { env: codex.env }
        )
        assert.deepStrictEqual(result.exited, { code: 0, signal: null }, result.stderr)
        const lines = result.json()
        assertWellFormed(lines)
        const settled = lines.filter((l) => l.type === "card.settled")
        const byItem = new Map(settled.map((l) => [l.item, l]))
        assert.deepInclude(byItem.get(0)!, { outcome: "accepted", source: "rule:echo-ok" })
        assert.deepInclude(byItem.get(1)!, { outcome: "refused", source: "handler" })
        assert.include(byItem.get(1)!.detail, "no rule decides this card")
        assert.deepStrictEqual(lines[lines.length - 1]!.items, [
          { item: 0, status: "completed" },
          { item: 1, status: "completed" }
        ])
      }),
    60_000
  )

  it.scopedLive(
    "--approvals rules: a deny rule sees through a nested shell whose options take an argument (bash -o errexit -c), even beside an allow for bash",
    () =>
      Effect.gen(function* () {
        const target = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-nested-")), "keep")
        Fs.writeFileSync(target, "still here\n")
        const codex = yield* Codex.setup({
          lanes: escalated("nested", `bash -o errexit -c 'echo hi; rm -rf ${target}'`)
        })
        const rules = Path.join(codex.launch.home, "rules.yaml")
        Fs.writeFileSync(
          rules,
          "rules:\n  - id: bash-ok\n    effect: allow\n    match: { command: { argvPrefix: [bash] } }\n" +
            "  - id: no-rm\n    effect: deny\n    match: { command: { argvPrefix: [rm] } }\n"
        )
        const result = yield* CliProcess.runToEnd(
          [
            "run",
            ...codex.flags,
            "--json",
            "--approvals",
            "rules",
            "--rules",
            rules,
            `${ScriptedModel.laneMarker("nested")} clean up`
          ],
          { env: codex.env }
        )
        assert.deepStrictEqual(result.exited, { code: 0, signal: null }, result.stderr)
        const settled = result.json().find((l) => l.type === "card.settled")!
        assert.include(result.json().find((l) => l.type === "card.opened")!.summary, "errexit")
        assert.deepInclude(settled, { outcome: "declined", source: "rule:no-rm" })
        assert.isTrue(Fs.existsSync(target), "the command never ran")
        Fs.rmSync(Path.dirname(target), { recursive: true, force: true })
      }),
    60_000
  )
})
