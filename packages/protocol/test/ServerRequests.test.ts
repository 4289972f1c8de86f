import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import { readFileSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { Decision, ServerRequests } from "../src/index.js"
import type { ServerRequestMethod } from "../src/ServerRequests.js"

const fixtures = process.env["WARDEN_FIXTURES"] ?? join(__dirname, "../../../fixtures/codex-0.171.0")

/** Every server request the real binary sent in the shared transcripts. */
const captured = readdirSync(fixtures)
  .filter((f) => f.endsWith(".jsonl"))
  .flatMap((f) =>
    readFileSync(join(fixtures, f), "utf8")
      .split("\n")
      .filter((l) => l.trim().length > 0)
      .map((l) => JSON.parse(l))
      .filter((r) => r.dir === "in" && r.frame && r.frame.method !== undefined && r.frame.id !== undefined)
      .map((r) => ({ file: f, frame: r.frame }))
  )

const firstOf = (method: ServerRequestMethod) => {
  const hit = captured.find((c) => c.frame.method === method)
  if (!hit) throw new Error(`no captured ${method}`)
  const decoded = ServerRequests.decode(hit.frame.id, hit.frame.method, hit.frame.params)
  if (decoded._tag !== "Known") throw new Error(`did not decode: ${JSON.stringify(decoded)}`)
  return decoded
}

const answer = (method: ServerRequestMethod, decision: Decision.Decision) =>
  ServerRequests.answerFor(firstOf(method), decision)
const ok = (r: Either.Either<ServerRequests.Reply, string>) => {
  if (Either.isLeft(r)) throw new Error(`refused: ${r.left}`)
  return r.right
}
const result = (r: Either.Either<ServerRequests.Reply, string>) => {
  const reply = ok(r)
  assert.strictEqual(reply._tag, "Result")
  return reply._tag === "Result" ? reply.result : undefined
}

describe("ServerRequests", () => {
  it("every server request in the transcripts decodes as Known", () => {
    assert.isAbove(captured.length, 20)
    for (const c of captured) {
      const d = ServerRequests.decode(c.frame.id, c.frame.method, c.frame.params)
      assert.strictEqual(d._tag, "Known", `${c.file}: ${c.frame.method}`)
    }
  })

  it("refusals are the vocabulary that keeps the turn going", () => {
    const refusal = (m: ServerRequestMethod) => ServerRequests.Specs[m].refusal
    assert.deepStrictEqual(refusal("item/commandExecution/requestApproval"), {
      _tag: "Result",
      result: { decision: "decline" }
    })
    assert.deepStrictEqual(refusal("item/fileChange/requestApproval"), {
      _tag: "Result",
      result: { decision: "decline" }
    })
    assert.deepStrictEqual(refusal("item/permissions/requestApproval"), {
      _tag: "Result",
      result: { permissions: {}, scope: "turn" }
    })
    assert.deepStrictEqual(refusal("mcpServer/elicitation/request"), { _tag: "Result", result: { action: "decline" } })
    assert.deepStrictEqual(refusal("item/tool/requestUserInput"), { _tag: "Result", result: { answers: {} } })
    assert.deepStrictEqual(refusal("item/tool/call"), { _tag: "Result", result: { contentItems: [], success: false } })
    assert.strictEqual(refusal("account/chatgptAuthTokens/refresh")._tag, "Error")
    assert.strictEqual(refusal("attestation/generate")._tag, "Error")
  })

  it("an unknown method decodes as Unknown and gets the error frame", () => {
    const d = ServerRequests.decode(7, "item/teleport/requestApproval", {})
    assert.strictEqual(d._tag, "Unknown")
    const reply = ServerRequests.refusalFor(d)
    assert.strictEqual(reply._tag, "Error")
    assert.deepStrictEqual(ServerRequests.replyFrame(7, reply), {
      jsonrpc: "2.0",
      id: 7,
      error: ServerRequests.unknownMethodError("item/teleport/requestApproval")
    })
  })

  it("a known method with bad params is Malformed (refused at once, never shown)", () => {
    const d = ServerRequests.decode(1, "item/commandExecution/requestApproval", { threadId: 5 })
    assert.strictEqual(d._tag, "Malformed")
  })

  it("command: accept, decline, cancel and the proposed execpolicy amendment", () => {
    const m = "item/commandExecution/requestApproval"
    assert.deepStrictEqual(result(answer(m, Decision.Accept)), { decision: "accept" })
    assert.deepStrictEqual(result(answer(m, Decision.Decline)), { decision: "decline" })
    assert.deepStrictEqual(result(answer(m, Decision.Cancel)), { decision: "cancel" })
    const req = firstOf(m)
    const proposed = (req.params as ServerRequests.CommandApprovalParams).proposedExecpolicyAmendment!
    assert.deepStrictEqual(result(answer(m, { _tag: "AcceptWithExecpolicyAmendment", amendment: proposed })), {
      decision: { acceptWithExecpolicyAmendment: { execpolicy_amendment: [...proposed] } }
    })
    assert.isTrue(Either.isLeft(answer(m, { _tag: "AcceptWithExecpolicyAmendment", amendment: ["rm", "-rf", "/"] })))
  })

  it("command: acceptForSession only where availableDecisions offers it", () => {
    const m = "item/commandExecution/requestApproval"
    const req = firstOf(m)
    // The captured request lists accept, an amendment and cancel: no acceptForSession.
    assert.isTrue(Either.isLeft(ServerRequests.answerFor(req, Decision.AcceptForSession)))
    assert.notInclude(ServerRequests.offersFor(req), "AcceptForSession")
    const offering = ServerRequests.decode(1, m, {
      ...(req.params as object),
      availableDecisions: ["accept", "acceptForSession"]
    })
    assert.strictEqual(offering._tag, "Known")
    if (offering._tag === "Known") {
      assert.deepStrictEqual(result(ServerRequests.answerFor(offering, Decision.AcceptForSession)), {
        decision: "acceptForSession"
      })
      // No amendment offered here any more.
      assert.isTrue(
        Either.isLeft(ServerRequests.answerFor(offering, { _tag: "AcceptWithExecpolicyAmendment", amendment: [] }))
      )
    }
  })

  it("abort is not a v2 decision anywhere", () => {
    for (const m of [
      "item/commandExecution/requestApproval",
      "item/fileChange/requestApproval",
      "item/permissions/requestApproval",
      "mcpServer/elicitation/request",
      "item/tool/requestUserInput",
      "item/tool/call"
    ] as const) {
      assert.isTrue(Either.isLeft(answer(m, { _tag: "Abort" })), m)
    }
  })

  it("forms: only the form's own fields (never inherited names), of the asked types, required ones present", () => {
    const m = "mcpServer/elicitation/request"
    const req = ServerRequests.decode(9, m, {
      threadId: "t",
      turnId: "u",
      serverName: "srv",
      mode: "form",
      message: "Fill in",
      requestedSchema: {
        type: "object",
        properties: {
          name: { type: "string" },
          count: { type: "integer" },
          ok: { type: "boolean" },
          tags: { type: "array", items: { type: "string", enum: ["a", "b"] } }
        },
        required: ["name"]
      }
    })
    if (req._tag !== "Known") throw new Error("did not decode")
    const accept = (content: Record<string, unknown>) =>
      ServerRequests.answerFor(req, { _tag: "Elicitation", action: "accept", content })
    for (const key of ["toString", "constructor", "hasOwnProperty", "__proto__", "valueOf"]) {
      const content = JSON.parse(`{"name": "x", ${JSON.stringify(key)}: "y"}`)
      const r = accept(content)
      assert.isTrue(Either.isLeft(r) && r.left.includes("does not ask for"), `${key}: ${JSON.stringify(r)}`)
    }
    assert.isTrue(Either.isLeft(accept({ name: 5 })), "a number where a string is asked")
    assert.isTrue(Either.isLeft(accept({ name: "x", count: 1.5 })), "a fraction where an integer is asked")
    assert.isTrue(Either.isLeft(accept({ name: "x", ok: "true" })), "a string where a boolean is asked")
    assert.isTrue(Either.isLeft(accept({ name: "x", tags: ["c"] })), "an item outside the array's choices")
    const missing = accept({ count: 2 })
    assert.isTrue(Either.isLeft(missing) && missing.left.includes("content.name is required"))
    assert.deepStrictEqual(result(accept({ name: "x", count: 2, ok: false, tags: ["a"] })), {
      action: "accept",
      content: { name: "x", count: 2, ok: false, tags: ["a"] }
    })
  })

  it("elicitation: acceptForSession is refused; persist only where _meta.persist offers it", () => {
    const m = "mcpServer/elicitation/request"
    assert.isTrue(Either.isLeft(answer(m, Decision.AcceptForSession)))
    const poke = captured.find((c) => c.frame.method === m && c.frame.params._meta?.persist)!
    const req = ServerRequests.decode(poke.frame.id, m, poke.frame.params)
    assert.strictEqual(req._tag, "Known")
    if (req._tag !== "Known") return
    assert.deepStrictEqual(result(ServerRequests.answerFor(req, Decision.Accept)), { action: "accept" })
    assert.deepStrictEqual(
      result(ServerRequests.answerFor(req, { _tag: "Elicitation", action: "accept", persist: "session" })),
      { action: "accept", _meta: { persist: "session" } }
    )
    const form = captured.find((c) => c.frame.method === m && c.frame.params._meta === null)!
    const formReq = ServerRequests.decode(form.frame.id, m, form.frame.params)
    if (formReq._tag !== "Known") throw new Error("form did not decode")
    assert.isTrue(
      Either.isLeft(
        ServerRequests.answerFor(formReq, {
          _tag: "Elicitation",
          action: "accept",
          persist: "session",
          content: { colour: "red" }
        })
      )
    )
    // A form with fields: plain Accept cannot say what was chosen.
    assert.isTrue(Either.isLeft(ServerRequests.answerFor(formReq, Decision.Accept)))
    assert.deepStrictEqual(
      result(
        ServerRequests.answerFor(formReq, { _tag: "Elicitation", action: "accept", content: { colour: "green" } })
      ),
      { action: "accept", content: { colour: "green" } }
    )
    assert.isTrue(
      Either.isLeft(
        ServerRequests.answerFor(formReq, { _tag: "Elicitation", action: "accept", content: { colour: "purple" } })
      )
    )
    assert.isTrue(
      Either.isLeft(
        ServerRequests.answerFor(formReq, { _tag: "Elicitation", action: "accept", content: { password: "x" } })
      )
    )
  })

  it("permissions: accept grants what was asked; decline is the empty grant; a wider grant refuses", () => {
    const m = "item/permissions/requestApproval"
    const req = firstOf(m)
    const asked = (req.params as ServerRequests.PermissionsApprovalParams).permissions as any
    const granted = result(answer(m, Decision.Accept)) as any
    assert.strictEqual(granted.scope, "turn")
    assert.deepStrictEqual(granted.permissions.fileSystem.write, asked.fileSystem.write)
    assert.strictEqual((result(answer(m, Decision.AcceptForSession)) as any).scope, "session")
    assert.deepStrictEqual(result(answer(m, Decision.Decline)), { permissions: {}, scope: "turn" })
    assert.isTrue(Either.isLeft(answer(m, { _tag: "Grant", permissions: { fileSystem: { write: ["/etc"] } } })))
    assert.isTrue(Either.isLeft(answer(m, Decision.Cancel)))
  })

  it("user input: answers only for asked questions, rebuilt; accept alone cannot be expressed", () => {
    const m = "item/tool/requestUserInput"
    const req = firstOf(m)
    const id = (req.params as ServerRequests.UserInputParams).questions[0]!.id
    assert.deepStrictEqual(result(answer(m, { _tag: "Answers", answers: { [id]: ["Blue"] } })), {
      answers: { [id]: { answers: ["Blue"] } }
    })
    assert.isTrue(Either.isLeft(answer(m, { _tag: "Answers", answers: { nope: ["x"] } })))
    assert.isTrue(Either.isLeft(answer(m, { _tag: "Answers", answers: { [id]: [1] } })))
    assert.isTrue(Either.isLeft(answer(m, Decision.Accept)))
    assert.deepStrictEqual(result(answer(m, Decision.Decline)), { answers: {} })
  })

  it("dynamic tool call: a checked tool result, or the failed empty result", () => {
    const m = "item/tool/call"
    assert.deepStrictEqual(
      result(
        answer(m, { _tag: "ToolResult", contentItems: [{ type: "inputText", text: "hi", extra: 1 }], success: true })
      ),
      {
        contentItems: [{ type: "inputText", text: "hi" }],
        success: true
      }
    )
    assert.isTrue(Either.isLeft(answer(m, { _tag: "ToolResult", contentItems: [{ type: "script" }], success: true })))
    assert.isTrue(Either.isLeft(answer(m, Decision.Accept)))
  })

  it("Decision.fromJson reads the CLI's words and structured answers", () => {
    assert.deepStrictEqual(Decision.fromJson("accept"), Decision.Accept)
    assert.deepStrictEqual(Decision.fromJson({ action: "accept", persist: "always" }), {
      _tag: "Elicitation",
      action: "accept",
      persist: "always"
    })
    assert.deepStrictEqual(Decision.fromJson({ answers: { a: ["b"] } }), { _tag: "Answers", answers: { a: ["b"] } })
    assert.strictEqual(Decision.fromJson("yes please"), undefined)
    assert.strictEqual(Decision.fromJson(42), undefined)
  })
})
