import { assert, describe, it } from "@effect/vitest"
import { check, type Verdict } from "../src/internal/SafetyFilter.js"
import { decode, known, rawParams, request } from "./Captured.js"

const ids = { threadId: "t", turnId: "u", itemId: "i" }

const unsafeReason = (verdict: Verdict): string => {
  assert.strictEqual(verdict._tag, "Unsafe", "expected Unsafe")
  return verdict._tag === "Unsafe" ? verdict.reason : ""
}

/** A reason never repeats text the model or server wrote. */
const assertReasonHides = (verdict: Verdict, ...values: ReadonlyArray<string>) => {
  const reason = unsafeReason(verdict)
  assert.isAbove(reason.length, 0)
  for (const value of values) assert.notInclude(reason, value, `reason "${reason}" repeats a value`)
}

const form = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  known("mcpServer/elicitation/request", {
    threadId: "t",
    serverName: "probe",
    mode: "form",
    message: "Please fill this in",
    requestedSchema: { type: "object", properties, ...extra }
  })

const urlElicitation = (url: string) =>
  known("mcpServer/elicitation/request", {
    threadId: "t",
    serverName: "probe",
    mode: "url",
    message: "Sign in there",
    url,
    elicitationId: "e1"
  })

type Question = {
  id: string
  header: string
  question: string
  isOther?: boolean
  isSecret?: boolean
  options?: Array<{ label: string; description: string }> | null
}
const userInput = (questions: ReadonlyArray<Question>) => known("item/tool/requestUserInput", { ...ids, questions })
const q = (id: string, question: string, more: Partial<Question> = {}): Question => ({
  id,
  header: "Choice",
  question,
  options: [
    { label: "Yes", description: "Go ahead." },
    { label: "No", description: "Stop." }
  ],
  ...more
})

describe("SafetyFilter.check: real frames", () => {
  it("the captured form, questions and MCP tool-call approval are Safe", () => {
    assert.deepStrictEqual(check(request("e-elicit-accept")), { _tag: "Safe" })
    assert.deepStrictEqual(check(request("d-rui-flag")), { _tag: "Safe" })
    assert.deepStrictEqual(check(request("e-mcp-poke-accept")), { _tag: "Safe" })
  })

  it("command, file-change, permissions and dynamic-tool requests are always Safe here", () => {
    for (const scenario of ["a-cmd-accept", "b-patch-accept", "c-perm-grant-turn", "x-dynamic-tool"]) {
      assert.deepStrictEqual(check(request(scenario)), { _tag: "Safe" }, scenario)
    }
  })

  it("the MCP tool-call approval stays Safe when its message names keys or tokens (it asks consent, not the secret)", () => {
    const params = rawParams("e-mcp-poke-accept")
    params["message"] = 'Allow the probe MCP server to run tool "rotate_api_keys"?'
    assert.deepStrictEqual(check(known("mcpServer/elicitation/request", params)), { _tag: "Safe" })
  })

  it("unknown and malformed requests are Unsafe", () => {
    assert.strictEqual(check(decode("item/teleport", {}))._tag, "Unsafe")
    assert.strictEqual(check(decode("mcpServer/elicitation/request", { nope: true }))._tag, "Unsafe")
  })
})

describe("SafetyFilter.check: secrets", () => {
  it("a password field is refused; the reason names the field, not the text", () => {
    const v = check(form({ password: { type: "string", title: "Your GitHub password please" } }))
    assertReasonHides(v, "Your GitHub password please")
    assert.include(unsafeReason(v), '"password"')
  })

  it("a field whose title or description asks for a secret is refused", () => {
    assertReasonHides(check(form({ value: { type: "string", title: "API key" } })), "API key")
    assertReasonHides(
      check(form({ value: { type: "string", description: "Paste the one-time code we texted you" } })),
      "Paste the one-time code"
    )
    assertReasonHides(check(form({ pin: { type: "string" } })))
    assertReasonHides(check(form({ session_cookie: { type: "string" } })))
    assertReasonHides(check(form({ code: { type: "string", title: "Verification code" } })), "Verification code")
  })

  it("a form message asking for a secret is refused when the form has fields", () => {
    const r = known("mcpServer/elicitation/request", {
      threadId: "t",
      serverName: "probe",
      mode: "form",
      message: "Type your access token below",
      requestedSchema: { type: "object", properties: { value: { type: "string" } } }
    })
    assertReasonHides(check(r), "Type your access token below")
  })

  it("fields marked secret (isSecret, writeOnly, format password) are refused", () => {
    for (const marker of [{ isSecret: true }, { writeOnly: true }, { format: "password" }]) {
      const v = check(form({ answer: { type: "string", title: "Answer", ...marker } }))
      assert.include(unsafeReason(v), "marked secret")
    }
  })

  it("a question asking for a token is refused; the reason names the question id only", () => {
    const v = check(userInput([q("deploy", "What is your GitHub token for deploying?", { options: null })]))
    assertReasonHides(v, "What is your GitHub token", "GitHub")
    assert.include(unsafeReason(v), '"deploy"')
  })

  it("a question marked isSecret is refused", () => {
    const v = check(userInput([q("colour", "Which colour?", { isSecret: true })]))
    assertReasonHides(v, "Which colour?")
    assert.include(unsafeReason(v), "marked secret")
  })

  it("a free-text (isOther) answer to a secret question is refused", () => {
    const v = check(userInput([q("login", "Pick a login method, or type your password", { isOther: true })]))
    assertReasonHides(v, "type your password")
    assert.include(unsafeReason(v), "free-text")
  })

  it("a secret-looking id or header is refused; an innocent free-text question is not", () => {
    assertReasonHides(check(userInput([q("api_key", "Which one?")])), "Which one?")
    assertReasonHides(check(userInput([q("x", "Which one?", { header: "Password" })])), "Which one?")
    assert.deepStrictEqual(check(userInput([q("colour", "Which colour should the probe use?", { isOther: true })])), {
      _tag: "Safe"
    })
    assert.deepStrictEqual(
      check(userInput([q("pin_version", "Should I pin the dependency version?")]))._tag,
      "Unsafe",
      "a label word is judged strictly"
    )
    assert.deepStrictEqual(
      check(userInput([q("deps", "Should I pin the dependency version?")])),
      { _tag: "Safe" },
      "prose 'pin' is a verb"
    )
    assert.strictEqual(check(userInput([q("deps", "What is your PIN?")]))._tag, "Unsafe")
  })

  it("words hidden with invisible characters are refused", () => {
    assertReasonHides(check(userInput([q("x", "Enter your pass\u200Bword")])), "pass")
    assertReasonHides(check(form({ value: { type: "string", title: "pass\u200Bword" } })))
  })
})

describe("SafetyFilter.check: bounds", () => {
  it("too many questions", () => {
    const questions = Array.from({ length: 9 }, (_, i) => q(`q${i}`, `Question number ${i}?`))
    const v = check(userInput(questions))
    assertReasonHides(v, "Question number")
    assert.include(unsafeReason(v), "9 questions (limit 8)")
    assert.deepStrictEqual(check(userInput(questions.slice(0, 8))), { _tag: "Safe" })
    assert.deepStrictEqual(check(userInput(questions), { maxQuestions: 9 }), { _tag: "Safe" })
  })

  it("too many fields", () => {
    const properties = Object.fromEntries(
      Array.from({ length: 9 }, (_, i) => [`f${i}`, { type: "boolean", title: `Flag ${i}` }])
    )
    assert.include(unsafeReason(check(form(properties))), "9 fields (limit 8)")
  })

  it("too many choices (question and field)", () => {
    const options = Array.from({ length: 33 }, (_, i) => ({ label: `Option ${i}`, description: `Choice ${i}` }))
    const v = check(userInput([q("many", "Pick one", { options })]))
    assertReasonHides(v, "Option 1", "Pick one")
    assert.include(unsafeReason(v), "33 choices (limit 32)")
    const field = check(form({ colour: { type: "string", enum: Array.from({ length: 40 }, (_, i) => `c${i}`) } }))
    assert.include(unsafeReason(field), "40 choices (limit 32)")
  })

  it("text too long", () => {
    const long = "Why? ".repeat(500)
    assertReasonHides(check(userInput([q("why", long)])), "Why?")
    assertReasonHides(check(form({ a: { type: "string", description: long } })), "Why?")
  })

  it("questions with repeated or odd ids, and empty question lists", () => {
    assert.strictEqual(check(userInput([q("a", "One?"), q("a", "Two?")]))._tag, "Unsafe")
    assertReasonHides(check(userInput([q("not an id!", "One?")])), "not an id!")
    assert.strictEqual(check(userInput([]))._tag, "Unsafe")
  })
})

describe("SafetyFilter.check: URL elicitations", () => {
  it("a plain https URL is Safe", () => {
    assert.deepStrictEqual(check(urlElicitation("https://example.com/login")), { _tag: "Safe" })
  })

  it("URLs with credentials, query, fragment, other schemes or junk are refused without repeating the URL", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["https://alice:s3cr3tpw@example.com/login", "user name or password"],
      ["https://tok_abc123@example.com/login", "user name or password"],
      ["https://example.com/cb?code=abc123secret", "query"],
      ["https://example.com/cb?", "query"],
      ["https://example.com/login#access_token=abc123secret", "fragment"],
      ["http://example.com/login", "not https"],
      ["javascript:alert(document.cookie)", "not https"],
      ["data:text/html,<script>alert(1)</script>", "not https"],
      ["not a url", "spaces"],
      ["https://exa mple.com/", "spaces"]
    ]
    for (const [url, why] of cases) {
      const v = check(urlElicitation(url))
      const reason = unsafeReason(v)
      assert.include(reason, why, url)
      assert.notInclude(reason, url)
      for (const part of ["s3cr3tpw", "tok_abc123", "abc123secret", "alert", "example.com"])
        assert.notInclude(reason, part, url)
    }
  })

  it("a URL elicitation without a url is refused", () => {
    const r = known("mcpServer/elicitation/request", { threadId: "t", serverName: "probe", mode: "url", message: "Go" })
    assert.strictEqual(check(r)._tag, "Unsafe")
  })
})

describe("SafetyFilter.check: malformed schemas", () => {
  it("schemas that are not the flat MCP form are refused", () => {
    const bad = [
      known("mcpServer/elicitation/request", { threadId: "t", serverName: "p", mode: "form", message: "m" }),
      known("mcpServer/elicitation/request", {
        threadId: "t",
        serverName: "p",
        mode: "form",
        message: "m",
        requestedSchema: "x"
      }),
      form({}, { type: "array" }),
      form({ a: "not an object" }),
      form({ a: { type: "object" } }),
      form({ a: { type: "string", $ref: "#/x" } }),
      form({ a: { type: "string" } }, { required: ["b"] }),
      form({ a: { type: "string" } }, { definitions: {} }),
      form({ a: { type: "string", enum: [{ nested: true }] } }),
      form({ a: { type: "array", items: { type: "string" } } }),
      form({ a: { type: "string", format: "regex" } }),
      known("mcpServer/elicitation/request", {
        threadId: "t",
        serverName: "p",
        mode: "teleport",
        message: "m",
        requestedSchema: { type: "object", properties: {} }
      }),
      known("mcpServer/elicitation/request", {
        threadId: "t",
        serverName: "p",
        mode: "form",
        message: "m",
        requestedSchema: { type: "object", properties: {} },
        _meta: { codex_approval_kind: "something_new" }
      })
    ]
    for (const [i, r] of bad.entries()) assert.strictEqual(check(r)._tag, "Unsafe", `case ${i}`)
  })

  it("the MCP field shapes are accepted", () => {
    const ok = form(
      {
        colour: { type: "string", title: "Colour", enum: ["red", "blue"], enumNames: ["Red", "Blue"] },
        size: {
          type: "string",
          oneOf: [
            { const: "s", title: "Small" },
            { const: "l", title: "Large" }
          ]
        },
        count: { type: "integer", minimum: 1, maximum: 5, default: 2 },
        confirm: { type: "boolean", default: false },
        email: { type: "string", format: "email" },
        tags: { type: "array", items: { type: "string", enum: ["a", "b"] }, maxItems: 2 }
      },
      { required: ["colour"] }
    )
    assert.deepStrictEqual(check(ok), { _tag: "Safe" })
  })
})
