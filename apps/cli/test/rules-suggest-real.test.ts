/**
 * `warden rules suggest` on a record made by the real codex 0.171.0 (a ScriptedModel): commands
 * run outside the sandbox, files written outside the workspace, an MCP tool that asks approval,
 * each accepted three times; `git push --force` declined three times; `rm -rf` accepted once.
 * The proposals: an allow per kind (a command's words, the directory, the MCP tool), a deny for
 * the push, never the deletion. The file, passed to `warden run --rules` as it is, decides the
 * same asks of new work items on the real codex; the deletion is still asked (refused: no one
 * to ask here).
 */
import { assert, describe, it } from "@effect/vitest"
import { McpServer, ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"
import { answerEveryCard } from "./support/LedgerCodex.js"

const McpName = "suggesting"

/** A directory outside the workspace and outside the sandbox's writable roots (/tmp is one of them). */
const outsideDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join("/var/tmp", "warden-suggest-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

describe("warden rules suggest on a record of the real codex 0.171.0", () => {
  it.scopedLive(
    "commands, file writes outside the workspace and an MCP tool, accepted three times, become rules; a decline a deny; the deletion never",
    () =>
      Effect.gen(function* () {
        const outside = yield* outsideDir
        const say = Step.message("done")
        const command = (cmd: string) => [
          Step.execCommand({ cmd, escalated: true, justification: "rules suggest test" }),
          say
        ]
        // Phase 1 is recorded and answered by a person; phase 2 asks the same of new items.
        const lanes: Record<string, ReadonlyArray<Step.Step>> = {}
        for (const phase of [1, 2]) {
          // Three of each to record; one of each to ask again.
          for (let i = 0; i < (phase === 1 ? 3 : 1); i++) {
            lanes[`cmd${phase}${i}`] = command("echo warden-suggest")
            lanes[`file${phase}${i}`] = [Step.applyPatch(Path.join(outside, `note-${phase}-${i}.txt`), "a note\n"), say]
            lanes[`mcp${phase}${i}`] = [Step.mcpCall(McpName, McpServer.tools.needsApproval, { why: "suggest" }), say]
            lanes[`push${phase}${i}`] = command("git push --force")
          }
          lanes[`rm${phase}`] = command(`rm -rf ${outside}/junk`)
        }
        const codex = yield* Codex.setup({ lanes }, { mcp: McpName })
        const prompts = (phase: number) =>
          Object.keys(lanes)
            .filter((lane) => Number(lane.match(/\d/)![0]) === phase)
            .map((lane) => `${ScriptedModel.laneMarker(lane)} do it`)
        const dir = yield* CliProcess.tempDir
        const db = Path.join(dir, "ledger.db")

        const run = yield* CliProcess.spawn(
          ["run", ...codex.flags, "--json", "--approvals", "stdin", "--state", db, "--concurrency", "4", ...prompts(1)],
          { env: codex.env }
        )
        yield* answerEveryCard(
          run,
          (l) => (String(l["summary"]).includes("git push") ? "decline" : "accept"),
          "300 seconds"
        )
        yield* run.endStdin
        assert.deepStrictEqual(yield* run.exited("60 seconds"), { code: 0, signal: null }, run.stderr().slice(-3000))
        const kinds = run
          .json()
          .filter((l) => l.type === "card.opened")
          .map((l) => String(l["kind"]))
        assert.strictEqual(kinds.length, 13, JSON.stringify(kinds))

        const json = (yield* CliProcess.runToEnd(["rules", "suggest", "--state", db, "--json"])).json()
        const proposed = json.filter((l) => l.type === "rule.proposed").map((l) => l["rule"])
        const allows = proposed.filter((r) => r.effect === "allow").map((r) => r.match)
        assert.deepInclude(allows, { command: { argvPrefix: ["echo", "warden-suggest"] } }, JSON.stringify(proposed))
        assert.isTrue(
          allows.some((m) => m.path?.under === outside),
          `a directory rule for ${outside}: ${JSON.stringify(proposed)}`
        )
        assert.isTrue(
          allows.some((m) => m.mcp?.server === McpName && m.mcp?.tool === McpServer.tools.needsApproval),
          JSON.stringify(proposed)
        )
        assert.isTrue(
          proposed.some((r) => r.effect === "deny" && JSON.stringify(r.match).includes("push")),
          JSON.stringify(proposed)
        )
        assert.notInclude(JSON.stringify(proposed), "rm")
        const file = Path.join(dir, "suggested.yaml")
        const written = yield* CliProcess.runToEnd(["rules", "suggest", "--state", db, "--out", file])
        assert.deepStrictEqual(written.exited, { code: 0, signal: null }, written.stderr)

        // The file as it is, on new items of the same asks.
        const ruled = yield* CliProcess.runToEnd(
          [
            "run",
            ...codex.flags,
            "--json",
            "--approvals",
            "rules",
            "--rules",
            file,
            "--no-state",
            "--concurrency",
            "4",
            ...prompts(2)
          ],
          { env: codex.env }
        )
        const lines = ruled.json()
        const summaryOf = new Map(
          lines.filter((l) => l.type === "card.opened").map((l) => [l["cardId"], String(l["summary"])])
        )
        const settled = lines.filter((l) => l.type === "card.settled")
        assert.strictEqual(settled.length, 5, ruled.stderr.slice(-3000))
        for (const l of settled) {
          const summary = summaryOf.get(l["cardId"]) ?? ""
          const source = String(l["source"])
          if (summary.includes("rm -rf")) assert.isFalse(source.startsWith("rule:"), `${summary}: ${source}`)
          else if (summary.includes("git push")) assert.deepInclude(l, { outcome: "declined" }, `${summary}: ${source}`)
          else assert.deepInclude(l, { outcome: "accepted" }, `${summary}: ${source}`)
          if (!summary.includes("rm -rf")) assert.match(source, /^rule:suggested-/, summary)
        }
      }),
    420_000
  )
})
