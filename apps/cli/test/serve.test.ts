/**
 * `warden serve`: a standing supervisor with the web inbox, on the real pinned codex and a
 * ScriptedModel. Work items arrive through the inbox's API (`POST /api/items`, token required);
 * their cards are answered there; the process runs until it is stopped, and a stop (SIGTERM) is
 * its normal end: exit 0 after every item was reported, nothing left running.
 */
import { assert, describe, it } from "@effect/vitest"
import { ProcessTree, ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"
import * as Inbox from "./support/Inbox.js"
import { linkOf } from "./support/InboxPage.js"

const post = (url: string, token: string | undefined, body: unknown) =>
  Inbox.call(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token !== undefined ? { "x-warden-token": token } : {}) },
    body: JSON.stringify(body)
  })

describe("warden serve (real codex 0.171.0)", () => {
  it.scopedLive(
    "items submitted through the inbox run on their own threads; a card is accepted through the inbox; SIGTERM ends it with exit 0 and nothing left",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({
          lanes: {
            cmd: [
              Step.execCommand({ cmd: "echo served-and-accepted", escalated: true, justification: "test serve" }),
              Step.message("cmd done")
            ],
            plain: [Step.message("plain done")]
          }
        })
        const cli = yield* CliProcess.spawn(["serve", ...codex.flags, "--json", "--no-state", "--inbox", "0"], {
          env: codex.env,
          stdin: "ignore"
        })
        const { url, token } = yield* linkOf(cli)
        yield* cli.waitForJson("connection.ready", (l) => l.type === "connection.ready", "90 seconds")
        const info = yield* Inbox.call(`${url}api/info`, { headers: { "x-warden-token": token } })
        assert.strictEqual(JSON.parse(info.text).accepting, true)

        // Without the token nothing is submitted; a bad body is refused; neither becomes an item.
        assert.strictEqual((yield* post(`${url}api/items`, undefined, { prompt: "never" })).status, 401)
        assert.strictEqual((yield* post(`${url}api/items`, token, { prompt: "" })).status, 400)
        assert.strictEqual((yield* post(`${url}api/items`, token, { nope: 1 })).status, 400)

        const first = yield* post(`${url}api/items`, token, {
          prompt: `${ScriptedModel.laneMarker("cmd")} run the command`
        })
        assert.strictEqual(first.status, 202, first.text)
        assert.deepStrictEqual(JSON.parse(first.text), { item: 0 })
        const second = yield* post(`${url}api/items`, token, {
          prompt: `${ScriptedModel.laneMarker("plain")} just answer`
        })
        assert.deepStrictEqual(JSON.parse(second.text), { item: 1 })

        const opened = yield* cli.waitForJson("card.opened", (l) => l.type === "card.opened", "90 seconds")
        assert.strictEqual(opened.item, 0)
        const decided = yield* post(`${url}api/cards/${opened.cardId}/decision`, token, { decision: "accept" })
        assert.strictEqual(decided.status, 200, decided.text)
        const finished = yield* Effect.forEach([0, 1], (item) =>
          cli.waitForJson(`item ${item} finished`, (l) => l.type === "item.finished" && l.item === item, "90 seconds")
        )
        assert.deepStrictEqual(
          finished.map((l) => l.status),
          ["completed", "completed"]
        )
        assert.strictEqual(finished[0]!.finalMessage, "cmd done")
        assert.strictEqual(finished[1]!.finalMessage, "plain done")
        const outputs = (yield* codex.model.awaitRequests(3)).flatMap((r) => ScriptedModel.functionCallOutputs(r))
        assert.include(JSON.stringify(outputs), "served-and-accepted", "the accepted command ran")

        // The board the page reads has both, with their prompts.
        const items = JSON.parse(
          (yield* Inbox.call(`${url}api/items`, { headers: { "x-warden-token": token } })).text
        ).items
        assert.deepStrictEqual(
          items.map((i: { item: number; status: string }) => [i.item, i.status]),
          [
            [0, "completed"],
            [1, "completed"]
          ]
        )

        const tree = ProcessTree.liveDescendants(cli.pid)
        const node = CliProcess.cliPid(cli)
        assert.isDefined(node, "the CLI's node process")
        process.kill(node!, "SIGTERM")
        const exited = yield* cli.exited("90 seconds")
        assert.deepStrictEqual(exited, { code: 0, signal: null }, cli.stderr())
        const lines = cli.json()
        assert.deepStrictEqual(
          lines.filter((l) => l.type === "item.submitted").map((l) => [l.item, l.prompt]),
          [
            [0, `${ScriptedModel.laneMarker("cmd")} run the command`],
            [1, `${ScriptedModel.laneMarker("plain")} just answer`]
          ]
        )
        assert.deepInclude(lines.find((l) => l.type === "card.settled")!, {
          cardId: opened.cardId,
          outcome: "accepted",
          channel: "web"
        })
        assert.deepInclude(lines[lines.length - 1]!, {
          type: "run.finished",
          exitCode: 0,
          items: [
            { item: 0, status: "completed" },
            { item: 1, status: "completed" }
          ]
        })
        assert.deepStrictEqual(tree.filter(ProcessTree.isAlive), [], "nothing the server started is left")
      }),
    240_000
  )

  it.scopedLive(
    "with --approvals rules nobody is asked: a rule accepts the card; a secret in a submitted prompt is masked in --json and the API",
    () =>
      Effect.gen(function* () {
        const secret = "ghp_4f8Gk2Lm9Qz1Xw7Vb3Nc6Rt0Ys5Hu8Jp2Ke1"
        const codex = yield* Codex.setup({
          lanes: {
            cmd: [
              Step.execCommand({ cmd: "echo ruled-by-serve", escalated: true, justification: "test serve rules" }),
              Step.message("ruled")
            ]
          }
        })
        const rules = Path.join(codex.launch.home, "rules.yaml")
        Fs.writeFileSync(
          rules,
          "rules:\n  - id: echo-ok\n    effect: allow\n    match: { command: { argvPrefix: [echo] } }\n"
        )
        const cli = yield* CliProcess.spawn(
          ["serve", ...codex.flags, "--json", "--no-state", "--inbox", "0", "--approvals", "rules", "--rules", rules],
          { env: codex.env, stdin: "ignore" }
        )
        const { url, token } = yield* linkOf(cli)
        const submitted = yield* post(`${url}api/items`, token, {
          prompt: `${ScriptedModel.laneMarker("cmd")} use token ${secret} to run it`
        })
        assert.strictEqual(submitted.status, 202, submitted.text)
        const settled = yield* cli.waitForJson("card.settled", (l) => l.type === "card.settled", "90 seconds")
        assert.deepInclude(settled, { outcome: "accepted", source: "rule:echo-ok" })
        const finished = yield* cli.waitForJson("item.finished", (l) => l.type === "item.finished", "90 seconds")
        assert.strictEqual(finished.status, "completed")
        const items = (yield* Inbox.call(`${url}api/items`, { headers: { "x-warden-token": token } })).text
        assert.include(items, "use token")
        assert.notInclude(items, secret)
        process.kill(CliProcess.cliPid(cli)!, "SIGTERM")
        assert.deepStrictEqual(yield* cli.exited("90 seconds"), { code: 0, signal: null }, cli.stderr())
        const line = cli.json().find((l) => l.type === "item.submitted")!
        assert.include(line.prompt, "use token")
        assert.notInclude(cli.lines().join("\n"), secret)
        assert.notInclude(cli.stderr(), secret)
      }),
    240_000
  )

  it.scopedLive(
    "usage: without --inbox it is exit 2 and nothing starts",
    () =>
      Effect.gen(function* () {
        const result = yield* CliProcess.runToEnd(["serve", "--codex", process.execPath, "--no-state"])
        assert.strictEqual(result.exited.code, 2, result.stderr)
        assert.include(result.stderr, "warden serve needs --inbox")
      }),
    60_000
  )
})
