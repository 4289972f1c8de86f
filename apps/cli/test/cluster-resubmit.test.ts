/**
 * `warden submit --submission ID` (real codex 0.171.0, a runner on PostgreSQL): a submission made
 * again under the same name runs nothing twice. A submitter SIGKILLed with a card open is followed
 * by a second one: the finished item gives its stored result (the model is not asked again), the
 * open card reaches the second submitter and its accept runs the command, once. A third submission
 * finds everything finished and asks nobody anything.
 */
import { assert, describe, it } from "@effect/vitest"
import { Step } from "@warden/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import { oneRunnerFleet, submitArgs } from "./support/Fleet.js"

describe("warden submit --submission (real codex 0.171.0)", () => {
  it.scopedLive(
    "a submission made again attaches: a finished item is not run again, an open card of a dead submitter is answered by the next",
    () =>
      Effect.gen(function* () {
        const step = (word: string) => [
          Step.execCommand({ cmd: `echo ${word} >> ran.txt`, escalated: true, justification: "resubmit test" }),
          Step.message(`done ${word}`)
        ]
        const { codex, pg } = yield* oneRunnerFleet({ lanes: { first: step("first"), second: step("second") } })
        const args = (submission: string) =>
          submitArgs({ cluster: pg.url, workspace: codex.launch.workspace, lanes: ["first", "second"], submission })
        const cardOf = (cli: CliProcess.Cli, item: number) =>
          cli.waitForJson(`item ${item}'s card open`, (l) => l.type === "card.opened" && l["item"] === item)
        const accept = (cli: CliProcess.Cli, card: CliProcess.JsonLine) =>
          cli.write(`${JSON.stringify({ cardId: card["card"], decision: "accept" })}\n`)
        const ran = () =>
          Fs.existsSync(Path.join(codex.launch.workspace, "ran.txt"))
            ? Fs.readFileSync(Path.join(codex.launch.workspace, "ran.txt"), "utf8").split("\n").filter(Boolean)
            : []

        // The first submitter: item 1 accepted and finished; item 2's card open when it dies.
        const first = yield* CliProcess.spawn(args("job-7"), { env: codex.env })
        const told = yield* first.waitForJson("the submission line", (l) => l.type === "submission")
        assert.deepStrictEqual(told["items"], ["job-7-1", "job-7-2"])
        assert.deepStrictEqual(told["attached"], [])
        yield* accept(first, yield* cardOf(first, 1))
        yield* first.waitForJson("item 1's result", (l) => l.type === "item.result" && l["item"] === 1, "120 seconds")
        const openCard = yield* cardOf(first, 2)
        process.kill(first.pid, "SIGKILL")
        yield* first.exited("30 seconds")
        assert.deepStrictEqual(ran(), ["first"])
        const asked = (yield* codex.model.requests).length

        // The second submitter, same name: attaches to both, answers the card the first left open.
        const second = yield* CliProcess.spawn(args("job-7"), { env: codex.env })
        const attached = yield* second.waitForJson("the submission line", (l) => l.type === "submission")
        assert.deepStrictEqual(attached["attached"], ["job-7-1", "job-7-2"])
        const reopened = yield* cardOf(second, 2)
        assert.strictEqual(reopened["card"], openCard["card"], "the open card is the same card, not a new one")
        yield* accept(second, reopened)
        yield* second.waitForJson("run.finished", (l) => l.type === "run.finished", "120 seconds")
        yield* second.endStdin
        assert.deepStrictEqual(yield* second.exited("60 seconds"), { code: 0, signal: null }, second.stderr())
        const results = second.json().filter((l) => l.type === "item.result")
        assert.sameMembers(
          results.map((r) => `${r["item"]}:${r["status"]}`),
          ["1:completed", "2:completed"]
        )
        assert.deepStrictEqual(ran(), ["first", "second"], "each command ran once")
        const requests = yield* codex.model.requests
        assert.strictEqual(
          requests.slice(asked).filter((r) => r.lane === "first").length,
          0,
          "the finished item was not run again"
        )

        // A third time: everything finished; nothing runs, nobody is asked.
        const third = yield* CliProcess.runToEnd(args("job-7"), { env: codex.env })
        assert.deepStrictEqual(third.exited, { code: 0, signal: null }, third.stderr)
        // The items' earlier lines may be shown again; every card in them is settled, none waits.
        const settledCards = new Set(
          third
            .json()
            .filter((l) => l.type === "card.settled")
            .map((l) => l["card"])
        )
        for (const l of third.json().filter((l) => l.type === "card.opened"))
          assert.isTrue(settledCards.has(l["card"]), `card ${l["card"]} shown open and never settled`)
        assert.deepStrictEqual(third.json().find((l) => l.type === "submission")?.["attached"], ["job-7-1", "job-7-2"])
        assert.sameMembers(
          third
            .json()
            .filter((l) => l.type === "item.result")
            .map((r) => `${r["item"]}:${r["status"]}`),
          ["1:completed", "2:completed"]
        )
        assert.strictEqual((yield* codex.model.requests).length, requests.length, "the model was not asked again")
        assert.deepStrictEqual(ran(), ["first", "second"])

        // A name that cannot be part of an item id is a usage error, before anything is submitted.
        const bad = yield* CliProcess.runToEnd(["submit", "--cluster", pg.url, "--submission", "job 7/x", "p"], {
          env: codex.env
        })
        assert.strictEqual(bad.exited.code, 2, bad.stderr)
        assert.include(bad.stderr, "--submission takes letters, digits")
      }),
    300_000
  )
})
