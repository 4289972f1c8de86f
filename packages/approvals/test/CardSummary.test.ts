import { assert, describe, it } from "@effect/vitest"
import { fileChangesOf } from "../src/Card.js"
import { summarize, Bounds } from "../src/internal/CardSummary.js"
import { Mask } from "../src/SecretMask.js"
import { decode, fileChangeContext, known, rawParams, request } from "./Captured.js"

const ids = { threadId: "t", turnId: "u", itemId: "i" }

describe("CardSummary.summarize (real frames)", () => {
  it("command: unwrapped argv, cwd, reason; title names the command and where", () => {
    const { summary, title } = summarize(request("a-cmd-accept"), {})
    assert.strictEqual(summary.kind, "command")
    if (summary.kind !== "command") return
    assert.deepStrictEqual(summary.argv, ["echo", "approved-output-accept"])
    assert.strictEqual(summary.cwd, "/tmp/rc-ws-a-cmd-accept-BOiw0A")
    assert.strictEqual(summary.reason, "probe: needs to run outside the sandbox")
    assert.isTrue(summary.command.startsWith("echo approved-output-accept; for i in 1 2 3"))
    assert.isTrue(title.startsWith("run: echo approved-output-accept; for i in 1 2 3"))
    assert.isTrue(title.endsWith("(in /tmp/rc-ws-a-cmd-accept-BOiw0A)"), title)
    assert.isAtMost(title.length, Bounds.title)
    assert.notInclude(title, "\n")
  })

  it("a short command: `run: git status (in /repo)`", () => {
    const r = known("item/commandExecution/requestApproval", {
      ...ids,
      command: "/bin/bash -lc 'git status'",
      cwd: "/repo"
    })
    assert.strictEqual(summarize(r, {}).title, "run: git status (in /repo)")
    assert.strictEqual(
      summarize(known("item/commandExecution/requestApproval", ids), {}).title,
      "run: (no command given)"
    )
  })

  it("a secret in a command reaches neither the summary nor the title", () => {
    const r = known("item/commandExecution/requestApproval", {
      ...ids,
      command: "password=hunter2 ./deploy.sh",
      cwd: "/repo"
    })
    const { summary, title } = summarize(r, {})
    assert.strictEqual(summary.kind === "command" && summary.command, `password=${Mask} ./deploy.sh`)
    assert.strictEqual(title, `run: password=${Mask} ./deploy.sh (in /repo)`)
  })

  it("fileChange: changes from the preceding item/started, reason, grantRoot", () => {
    const { summary, title } = summarize(request("b-patch-accept"), fileChangeContext("b-patch-accept"))
    assert.deepStrictEqual(summary, {
      kind: "fileChange",
      changes: [{ path: "/var/tmp/rc-probe-patch-accept.txt", kind: "add", diff: "hello from accept\n" }],
      reason: undefined,
      grantRoot: undefined
    })
    assert.strictEqual(title, "write 1 file: /var/tmp/rc-probe-patch-accept.txt")
  })

  it("fileChange titles: several files, moves, unknown changes", () => {
    const r = known("item/fileChange/requestApproval", { ...ids, grantRoot: "/repo" })
    const two = summarize(r, {
      fileChanges: [
        { path: "a.ts", kind: "update" },
        { path: "b.ts", kind: "add" }
      ]
    })
    assert.strictEqual(two.title, "write 2 files: a.ts, b.ts")
    assert.strictEqual(summarize(r, {}).title, "write under /repo (changes not known)")
    const many = summarize(r, { fileChanges: ["a", "b", "c", "d", "e"].map((p) => ({ path: p, kind: "add" })) })
    assert.strictEqual(many.title, "write 5 files: a, b, c +2 more")
    const moved = fileChangesOf({ changes: [{ path: "/r/a", kind: { type: "update", move_path: "/r/b" }, diff: "d" }] })
    assert.deepStrictEqual(moved, [
      { path: "/r/a", kind: "move-from", diff: "d" },
      { path: "/r/b", kind: "move-to" }
    ])
    assert.deepStrictEqual(fileChangesOf(null), [])
    assert.deepStrictEqual(fileChangesOf({ changes: [1, { path: "" }, { path: "/x", kind: "add" }] }), [
      { path: "/x", kind: "add" }
    ])
  })

  it("fileChange diffs are masked", () => {
    const r = known("item/fileChange/requestApproval", ids)
    const { summary } = summarize(r, {
      fileChanges: [{ path: "/r/.env", kind: "add", diff: "OPENAI_API_KEY=sk-proj-a1B2c3D4e5F6g7H8i9J0\n" }]
    })
    assert.strictEqual(summary.kind, "fileChange")
    if (summary.kind === "fileChange") assert.strictEqual(summary.changes[0]!.diff, `OPENAI_API_KEY=${Mask}\n`)
  })

  it("permissions: what was asked", () => {
    const { summary, title } = summarize(request("c-perm-grant-turn"), {})
    assert.strictEqual(summary.kind, "permissions")
    if (summary.kind !== "permissions") return
    assert.strictEqual(summary.cwd, "/tmp/rc-ws-c-perm-grant-turn-DJ3umt")
    assert.strictEqual(summary.reason, "probe wants to write /var/tmp/rc-probe-perm-grant-turn")
    assert.deepStrictEqual(summary.permissions, rawParams("c-perm-grant-turn")["permissions"])
    assert.strictEqual(title, "grant write /var/tmp/rc-probe-perm-grant-turn")
  })

  it("MCP tool call approval: server, tool, masked inputs, message", () => {
    const { summary, title } = summarize(request("e-mcp-poke-accept"), {})
    assert.deepStrictEqual(summary, {
      kind: "mcpToolCall",
      server: "probe",
      tool: "poke",
      inputs: { why: "probe" },
      message: 'Allow the probe MCP server to run tool "poke"?'
    })
    assert.strictEqual(title, "mcp probe.poke(why=probe)")

    const params = rawParams("e-mcp-poke-accept")
    const meta = params["_meta"] as Record<string, unknown>
    meta["tool_params"] = { why: "deploy", api_key: "hunter2", header: "Bearer abcdefgh12345678" }
    const masked = summarize(known("mcpServer/elicitation/request", params), {})
    assert.strictEqual(masked.summary.kind, "mcpToolCall")
    if (masked.summary.kind === "mcpToolCall") {
      assert.deepStrictEqual(masked.summary.inputs, { why: "deploy", api_key: Mask, header: `Bearer ${Mask}` })
    }
    assert.notInclude(masked.title, "hunter2")
    assert.notInclude(masked.title, "abcdefgh12345678")
  })

  it("form elicitation: fields with title, type, choices, required", () => {
    const { summary, title } = summarize(request("e-elicit-accept"), {})
    assert.deepStrictEqual(summary, {
      kind: "elicitation",
      server: "probe",
      message: "Probe MCP server asks: which colour?",
      mode: "form",
      fields: [{ name: "colour", title: "Colour", type: "string", choices: ["red", "green", "blue"], required: true }],
      url: undefined
    })
    assert.strictEqual(title, "form from probe: Probe MCP server asks: which colour?")
  })

  it("url elicitation: the url, with credentials and query values masked", () => {
    const r = known("mcpServer/elicitation/request", {
      threadId: "t",
      serverName: "gh",
      mode: "url",
      message: "Sign in",
      url: "https://user:pw@example.com/login?code=abc123#frag",
      elicitationId: "e1"
    })
    const { summary, title } = summarize(r, {})
    assert.strictEqual(summary.kind, "elicitation")
    if (summary.kind === "elicitation")
      assert.strictEqual(summary.url, `https://${Mask}:${Mask}@example.com/login?code=${Mask}#${Mask}`)
    assert.notInclude(title, "abc123")
    assert.notInclude(title, "pw@")
  })

  it("user input: the questions; title is the first question", () => {
    const { summary, title } = summarize(request("d-rui-flag"), {})
    assert.strictEqual(summary.kind, "userInput")
    if (summary.kind !== "userInput") return
    assert.deepStrictEqual(
      summary.questions.map((q) => q.id),
      ["colour_choice", "size_choice"]
    )
    assert.deepStrictEqual(summary.questions[0]!.options, [
      { label: "Red (Recommended)", description: "Warm." },
      { label: "Blue", description: "Cool." }
    ])
    assert.strictEqual(title, "question: Which colour should the probe use? (+1 more)")
  })

  it("dynamic tool: tool, namespace, masked arguments", () => {
    const { summary, title } = summarize(request("x-dynamic-tool"), {})
    assert.deepStrictEqual(summary, {
      kind: "dynamicTool",
      tool: "probe_dyn",
      namespace: undefined,
      arguments: { x: "hello" }
    })
    assert.strictEqual(title, "tool probe_dyn(x=hello)")
    const secret = known("item/tool/call", {
      ...ids,
      callId: "c",
      tool: "t",
      namespace: "ns",
      arguments: { token: "abc", q: "x" }
    })
    const s = summarize(secret, {})
    assert.deepStrictEqual(s.summary, {
      kind: "dynamicTool",
      tool: "t",
      namespace: "ns",
      arguments: { token: Mask, q: "x" }
    })
    assert.strictEqual(s.title, `tool ns.t(token=${Mask}, q=x)`)
  })

  it("other methods, unknown and malformed requests", () => {
    assert.deepStrictEqual(summarize(request("x-chatgpt-refresh"), {}), {
      summary: { kind: "other", method: "account/chatgptAuthTokens/refresh" },
      title: "account/chatgptAuthTokens/refresh"
    })
    assert.strictEqual(summarize(decode("item/teleport", {}), {}).title, "unknown method item/teleport")
    assert.strictEqual(
      summarize(decode("item/commandExecution/requestApproval", { nope: 1 }), {}).title,
      "malformed item/commandExecution/requestApproval"
    )
  })

  it("titles are one masked, bounded line", () => {
    const r = known("item/commandExecution/requestApproval", {
      ...ids,
      command: `bash -lc 'curl -H "Authorization: Bearer abcdefgh12345678" https://x\necho ${"x".repeat(500)}'`,
      cwd: "/repo"
    })
    const { summary, title } = summarize(r, {})
    assert.notInclude(title, "abcdefgh12345678")
    assert.notInclude(title, "\n")
    assert.isAtMost(title.length, Bounds.title)
    assert.isTrue(title.endsWith("(in /repo)"))
    assert.include(title, "…")
    if (summary.kind === "command") assert.notInclude(summary.command, "abcdefgh12345678")
  })
})
