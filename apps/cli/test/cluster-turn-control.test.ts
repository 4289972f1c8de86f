/**
 * `warden steer` and `warden interrupt` on a fleet (real codex 0.171.0, a runner on PostgreSQL):
 * each reaches the runner that drives the item, from another process than the submitter. A steer
 * while the item's card is open reaches the model with the turn's next request; an interrupt ends
 * the turn, its card is not accepted and its command never runs; an item with no running turn is
 * exit 1, saying so.
 */
import { assert, describe, it } from "@effect/vitest"
import { Step } from "@warden/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import { oneRunnerFleet, shardingFlags, submitArgs } from "./support/Fleet.js"

describe("warden steer / interrupt --cluster (real codex 0.171.0)", () => {
  it.scopedLive(
    "a steer reaches the model in the running turn; an interrupt ends the turn and its command never runs; no running turn is exit 1",
    () =>
      Effect.gen(function* () {
        const step = (cmd: string) => [
          Step.execCommand({ cmd, escalated: true, justification: "turn control test" }),
          Step.message("done")
        ]
        const { codex, pg } = yield* oneRunnerFleet({
          lanes: { steered: step("echo steered"), interrupted: step("touch interrupted.txt") }
        })
        const submit = yield* CliProcess.spawn(
          submitArgs({
            cluster: pg.url,
            workspace: codex.launch.workspace,
            lanes: ["steered", "interrupted"],
            submission: "tc"
          }),
          { env: codex.env }
        )
        const cardOf = (item: number) =>
          submit.waitForJson(`item ${item}'s card open`, (l) => l.type === "card.opened" && l["item"] === item)
        const control = (args: ReadonlyArray<string>) =>
          CliProcess.runToEnd([args[0]!, "--cluster", pg.url, ...shardingFlags, ...args.slice(1)], { env: codex.env })

        // Steer item 1 while its card is open; then accept the card: the model's next request holds the text.
        const steeredCard = yield* cardOf(1)
        const steered = yield* control(["steer", "tc-1", "also mention PINEAPPLE-42"])
        assert.deepStrictEqual(steered.exited, { code: 0, signal: null }, steered.stderr)
        assert.include(steered.stdout.join("\n"), "warden steer: tc-1: done")
        yield* submit.write(`${JSON.stringify({ cardId: steeredCard["card"], decision: "accept" })}\n`)

        // Interrupt item 2 while its card is open: the turn ends, the card is not accepted.
        yield* cardOf(2)
        const interrupted = yield* control(["interrupt", "tc-2"])
        assert.deepStrictEqual(interrupted.exited, { code: 0, signal: null }, interrupted.stderr)

        yield* submit.waitForJson("run.finished", (l) => l.type === "run.finished", "120 seconds")
        yield* submit.endStdin
        yield* submit.exited("60 seconds")
        const lines = submit.json()
        const result = (item: number) => lines.find((l) => l.type === "item.result" && l["item"] === item)
        assert.strictEqual(result(1)?.["status"], "completed", JSON.stringify(result(1)))
        const settled2 = lines.find((l) => l.type === "card.settled" && l["item"] === 2)
        assert.notStrictEqual(settled2?.["outcome"], "accepted", JSON.stringify(settled2))
        assert.isFalse(Fs.existsSync(Path.join(codex.launch.workspace, "interrupted.txt")), "the command never ran")
        const interruptedTurn = lines.find((l) => l.type === "turn.completed" && l["item"] === 2)
        assert.strictEqual(
          interruptedTurn?.["status"],
          "interrupted",
          JSON.stringify(lines.filter((l) => l["item"] === 2))
        )

        const requests = yield* codex.model.requests
        const steeredRequests = requests.filter((r) => r.lane === "steered")
        assert.include(
          JSON.stringify(steeredRequests[steeredRequests.length - 1]?.body),
          "PINEAPPLE-42",
          "the steer reached the model in the turn's next request"
        )

        // Item 1 is finished: nothing to steer or interrupt, exit 1 saying so.
        const late = yield* control(["interrupt", "tc-1"])
        assert.strictEqual(late.exited.code, 1, late.stderr)
        assert.include(late.stderr, "warden interrupt: tc-1: not done")

        // A hostile ITEM (a terminal escape sequence in it) is a usage error, shown escaped, sent nowhere.
        const hostile = yield* control(["steer", "tc-1\u001b]0;owned\u0007", "text"])
        assert.strictEqual(hostile.exited.code, 2, hostile.stderr)
        assert.include(hostile.stderr, "ITEM is a fleet item id")
        assert.include(hostile.stderr, "\\u001b]0;owned\\u0007")
        assert.notInclude(hostile.stderr + hostile.stdout.join("\n"), "\u001b")
      }),
    300_000
  )
})
