/**
 * `--approvals stdin` decides only within what was asked: a permissions grant may not reach a path
 * asked as deny and keeps the asked carve-outs; a form answer may only fill the form's own fields.
 * The fake app-server records exactly what it was answered.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"

const tempDir = CliProcess.tempDir

const asked = {
  fileSystem: {
    write: ["/repo"],
    entries: [
      { path: { type: "path", path: "/home/u/.ssh" }, access: "deny" },
      { path: { type: "path", path: "/repo/.git/hooks" }, access: "deny" }
    ]
  }
}

const fakeCodex = (answersFile: string) => `#!${process.execPath}
const fs = require("node:fs")
const out = (f) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...f }) + "\\n")
const asked = ${JSON.stringify(asked)}
let answered = 0
require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const m = JSON.parse(line)
  if (m.method === undefined && m.id !== undefined) {
    fs.appendFileSync(${JSON.stringify(answersFile)}, line + "\\n")
    if (++answered === 3) out({ method: "turn/completed", params: { threadId: "thr_1", turn: { id: "turn_1", status: "completed", items: [], error: null } } })
    return
  }
  if (m.method === "initialize") out({ id: m.id, result: { userAgent: "stdin-test/0.171.0", codexHome: "/tmp" } })
  if (m.method === "thread/start") out({ id: m.id, result: { thread: { id: "thr_1" } } })
  if (m.method === "thread/unsubscribe") out({ id: m.id, result: { status: "unsubscribed" } })
  if (m.method === "turn/start") {
    out({ id: m.id, result: { turn: { id: "turn_1", status: "inProgress", items: [] } } })
    const base = { threadId: "thr_1", turnId: "turn_1", cwd: "/repo", reason: "needs the repo" }
    out({ id: 200, method: "item/permissions/requestApproval", params: { ...base, itemId: "p1", permissions: asked } })
    out({ id: 201, method: "item/permissions/requestApproval", params: { ...base, itemId: "p2", permissions: asked } })
    out({ id: 202, method: "mcpServer/elicitation/request", params: { threadId: "thr_1", turnId: "turn_1", serverName: "srv", mode: "form", message: "Your name?", requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] }, _meta: null } })
  }
})
`

describe("warden run --approvals stdin: answers within what was asked", () => {
  it.scopedLive(
    "a grant of a path asked as deny is refused; a grant that drops the carve-outs keeps them; a form answer with an inherited key is refused",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const script = Path.join(dir, "codex")
        const answersFile = Path.join(dir, "answers.jsonl")
        Fs.writeFileSync(script, fakeCodex(answersFile), { mode: 0o755 })
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
        const opened: Array<CliProcess.JsonLine> = []
        for (let i = 0; i < 3; i++) {
          opened.push(
            yield* cli.waitForJson(
              `card ${i + 1}`,
              (l) => l.type === "card.opened" && !opened.some((o) => o.cardId === l.cardId)
            )
          )
        }
        const [sshGrant, dropDenies, form] = opened
        const decide = (cardId: string, decision: unknown) => cli.write(JSON.stringify({ cardId, decision }) + "\n")
        yield* decide(sshGrant!.cardId, { permissions: { fileSystem: { read: ["/home/u/.ssh"] } }, scope: "turn" })
        yield* decide(dropDenies!.cardId, { permissions: { fileSystem: { write: ["/repo"] } }, scope: "turn" })
        yield* decide(form!.cardId, { action: "accept", content: JSON.parse('{"name": "x", "toString": "y"}') })
        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 0, signal: null }, cli.stderr())
        const settled = cli.json().filter((l) => l.type === "card.settled")
        const outcomeOf = (cardId: string) => settled.find((l) => l.cardId === cardId)?.outcome
        assert.strictEqual(outcomeOf(sshGrant!.cardId), "refused")
        assert.strictEqual(outcomeOf(dropDenies!.cardId), "accepted")
        assert.strictEqual(outcomeOf(form!.cardId), "refused")
        const answers = new Map(
          Fs.readFileSync(answersFile, "utf8")
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l))
            .map((f) => [f.id, f.result])
        )
        assert.deepStrictEqual(answers.get(200), { permissions: {}, scope: "turn" }, "nothing granted")
        assert.deepStrictEqual(
          answers.get(201),
          {
            permissions: {
              fileSystem: {
                write: ["/repo"],
                entries: [
                  { path: { type: "path", path: "/home/u/.ssh" }, access: "deny" },
                  { path: { type: "path", path: "/repo/.git/hooks" }, access: "deny" }
                ]
              }
            },
            scope: "turn"
          },
          "the asked denies are kept"
        )
        assert.deepStrictEqual(answers.get(202), { action: "decline" })
      }),
    60_000
  )
})
