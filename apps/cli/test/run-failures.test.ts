/**
 * `warden run` when things go wrong: the app-server dies under an open card, the codex binary
 * fails at start (exit 3, with its stderr), and usage errors (exit 2).
 */
import { assert, describe, it } from "@effect/vitest"
import { ProcessTree, ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"

const tempDir = CliProcess.tempDir

describe("warden run: connection loss and usage errors", () => {
  it.scopedLive(
    "the codex child is killed while a card is open: the card settles connection-lost, exit 3, no process left",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({
          lanes: {
            cmd: [
              Step.execCommand({ cmd: "echo never", escalated: true, justification: "test" }),
              Step.message("unreachable")
            ]
          }
        })
        const cli = yield* CliProcess.spawn(
          [
            "run",
            ...codex.flags,
            "--json",
            "--approvals",
            "stdin",
            "--restarts",
            "0",
            `${ScriptedModel.laneMarker("cmd")} go`
          ],
          { env: codex.env }
        )
        const opened = yield* cli.waitForJson("card.opened", (l) => l.type === "card.opened")
        const [app] = ProcessTree.find(cli.pid, codex.launch.command, "app-server")
        assert.isDefined(app, "the CLI runs codex app-server")
        const tree = ProcessTree.liveDescendants(cli.pid)
        process.kill(app!, "SIGKILL")

        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 3, signal: null }, cli.stderr())
        const lines = cli.json()
        const lost = lines.find((l) => l.type === "connection.lost")!
        assert.include(lost.reason, "SIGKILL")
        assert.isString(lost.stderrTail)
        assert.deepInclude(lines.find((l) => l.type === "card.settled")!, {
          cardId: opened.cardId,
          outcome: "connection-lost",
          written: false
        })
        assert.deepInclude(lines.find((l) => l.type === "item.finished")!, {
          item: 0,
          status: "connection-lost",
          threadId: opened.threadId
        })
        assert.include(lines.find((l) => l.type === "item.finished")!.error, "SIGKILL")
        assert.deepInclude(lines[lines.length - 1]!, {
          type: "run.finished",
          exitCode: 3,
          items: [{ item: 0, status: "connection-lost" }]
        })
        assert.deepStrictEqual(tree.filter(ProcessTree.isAlive), [], "nothing the run started is left")
      }),
    60_000
  )

  it.scopedLive(
    "SIGINT (Ctrl-C) with a card open: the card is refused as shutdown, the run stops, run.finished, exit 1",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({
          lanes: {
            cmd: [
              Step.execCommand({ cmd: "echo never", escalated: true, justification: "test" }),
              Step.message("unreachable")
            ]
          }
        })
        const cli = yield* CliProcess.spawn(
          ["run", ...codex.flags, "--json", "--approvals", "stdin", `${ScriptedModel.laneMarker("cmd")} go`],
          { env: codex.env }
        )
        const opened = yield* cli.waitForJson("card.opened", (l) => l.type === "card.opened")
        const tree = ProcessTree.liveDescendants(cli.pid)
        assert.isAbove(ProcessTree.find(cli.pid, codex.launch.command, "app-server").length, 0)
        // SIGINT to the CLI's own process (not the group: codex has a process group of its own anyway).
        const node = CliProcess.cliPid(cli)
        assert.isDefined(node, "the CLI's node process")
        process.kill(node!, "SIGINT")

        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 1, signal: null }, cli.stderr())
        const lines = cli.json()
        assert.deepInclude(lines.find((l) => l.type === "card.settled")!, {
          cardId: opened.cardId,
          outcome: "shutdown",
          source: "shutdown",
          written: true
        })
        // The refusal is written while codex can hear it, so the turn may still complete before the stop.
        const finished = lines.find((l) => l.type === "item.finished")!
        assert.include(["interrupted", "completed"], finished.status)
        assert.deepInclude(lines[lines.length - 1]!, {
          type: "run.finished",
          exitCode: 1,
          items: [{ item: 0, status: finished.status }]
        })
        assert.deepStrictEqual(tree.filter(ProcessTree.isAlive), [], "nothing the run started is left")
      }),
    60_000
  )

  it.scopedLive(
    "a codex that writes to stderr and exits 1: connection.lost with its stderr tail, one restart, then exit 3",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const script = Path.join(dir, "codex")
        Fs.writeFileSync(script, "#!/bin/sh\necho 'codex: refusing to start (test)' >&2\nexit 1\n", { mode: 0o755 })
        const result = yield* CliProcess.runToEnd(["run", "--codex", script, "--json", "--restarts", "1", "hello"])
        assert.deepStrictEqual(result.exited, { code: 3, signal: null }, result.stderr)
        const lines = result.json()
        const lost = lines.filter((l) => l.type === "connection.lost")
        assert.strictEqual(lost.length, 2, "the first start and the one restart")
        for (const l of lost) assert.include(l.stderrTail, "codex: refusing to start (test)")
        assert.deepInclude(lines.find((l) => l.type === "connection.restarting")!, { attempt: 1 })
        assert.isDefined(lines.find((l) => l.type === "connection.gave-up"))
        assert.deepInclude(lines.find((l) => l.type === "item.finished")!, { item: 0, status: "connection-lost" })
        assert.deepInclude(lines[lines.length - 1]!, { type: "run.finished", exitCode: 3 })
        assert.include(result.stderr, "codex: refusing to start (test)")
      }),
    60_000
  )

  it.scopedLive(
    "a codex that closes its stdout and stays alive with a card open: connection.lost names it, the card settles connection-lost, exit 3, the child is stopped",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const script = Path.join(dir, "codex")
        const pidFile = Path.join(dir, "pid")
        // Answers the handshake, starts a thread and a turn, asks for an approval, then closes its
        // stdout and stays alive: nothing it asks can be answered any more.
        Fs.writeFileSync(
          script,
          `#!${process.execPath}
const fs = require("node:fs")
fs.writeFileSync(${JSON.stringify(pidFile)}, String(process.pid))
const out = (f) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...f }) + "\\n")
require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const m = JSON.parse(line)
  if (m.method === "initialize") out({ id: m.id, result: { userAgent: "stdout-closer/0.171.0", codexHome: "/tmp" } })
  if (m.method === "thread/start") out({ id: m.id, result: { thread: { id: "thr_1" } } })
  if (m.method === "thread/unsubscribe") out({ id: m.id, result: { status: "unsubscribed" } })
  if (m.method === "turn/start") {
    out({ id: m.id, result: { turn: { id: "turn_1", status: "inProgress", items: [] } } })
    out({ id: 0, method: "item/commandExecution/requestApproval", params: { threadId: "thr_1", turnId: "turn_1", itemId: "c1", startedAtMs: 0, command: "echo hi", cwd: "/tmp" } })
    process.stdout.end()
    process.stderr.write("stdout-closer: stdout closed, staying alive\\n")
    setInterval(() => {}, 60000)
  }
})
`,
          { mode: 0o755 }
        )
        const cli = yield* CliProcess.spawn([
          "run",
          "--codex",
          script,
          "--json",
          "--approvals",
          "stdin",
          "--restarts",
          "0",
          "hello"
        ])
        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 3, signal: null }, cli.stderr())
        const lines = cli.json()
        const opened = lines.find((l) => l.type === "card.opened")
        assert.isDefined(opened, "the card was opened before stdout closed")
        const lost = lines.find((l) => l.type === "connection.lost")!
        assert.include(lost.reason, "closed its stdout without exiting")
        assert.include(lost.stderrTail, "stdout-closer: stdout closed")
        assert.deepInclude(lines.find((l) => l.type === "card.settled")!, {
          cardId: opened!.cardId,
          outcome: "connection-lost",
          written: false
        })
        assert.deepInclude(lines.find((l) => l.type === "item.finished")!, { item: 0, status: "connection-lost" })
        assert.deepInclude(lines[lines.length - 1]!, { type: "run.finished", exitCode: 3 })
        const pid = Number(Fs.readFileSync(pidFile, "utf8"))
        assert.isFalse(ProcessTree.isAlive(pid), "the codex child was stopped")
      }),
    60_000
  )

  it.live(
    "usage errors exit 2 with a message that says what to fix",
    () =>
      Effect.gen(function* () {
        // A rules file that decodes as YAML but not as rules: the configuration is decoded before anything starts.
        const badRules = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-bad-rules-")), "rules.yaml")
        Fs.writeFileSync(
          badRules,
          "rules:\n  - id: maybe-rm\n    effect: maybe\n    match: { command: { argvPrefix: [rm] } }\n"
        )
        const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
          [["run"], "Missing argument <PROMPT>"],
          [["run", "--approval-timeout", "soon", "x"], "invalid duration"],
          [["run", "--codex", "/nonexistent/codex", "x"], "npm i -g @openai/codex@0.171.0"],
          [["run", "--codex", process.execPath, "--approvals", "rules", "x"], "--approvals rules needs --rules FILE"],
          [["run", "--codex", process.execPath, "--approvals", "prompt", "x"], "needs a terminal on stdin"],
          [["run", "--no-such-option", "x"], "unknown option --no-such-option"],
          [["run", "--codex", process.execPath, "--rules", badRules, "x"], "effect"],
          [
            ["run", "--codex", process.execPath, "--approvals", "deny", "--audit", "/nonexistent/dir/audit.jsonl", "x"],
            "--audit /nonexistent/dir/audit.jsonl: cannot append"
          ]
        ]
        const results = yield* Effect.forEach(cases, ([args]) => CliProcess.runToEnd(args), { concurrency: 2 })
        results.forEach((result, i) => {
          const [args, message] = cases[i]!
          assert.deepStrictEqual(result.exited, { code: 2, signal: null }, `${args.join(" ")}: ${result.stderr}`)
          assert.include(result.stderr, message, args.join(" "))
          assert.deepStrictEqual(result.stdout, [], "nothing on stdout")
        })
        Fs.rmSync(Path.dirname(badRules), { recursive: true, force: true })
      }),
    180_000
  )

  it.live(
    "no codex on PATH: exit 2 and how to install the tested version",
    () =>
      Effect.gen(function* () {
        const result = yield* CliProcess.runToEnd(["run", "x"], { env: { PATH: Path.dirname(process.execPath) } })
        assert.deepStrictEqual(result.exited, { code: 2, signal: null }, result.stderr)
        assert.include(result.stderr, "no `codex` on PATH")
        assert.include(result.stderr, "npm i -g @openai/codex@0.171.0")
      }),
    60_000
  )
})
