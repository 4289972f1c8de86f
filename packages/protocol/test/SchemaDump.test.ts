import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as SchemaDump from "../src/SchemaDump.js"

/** A miniature of the real bundle's layout: envelopes at the top, v2 types nested under v2. */
const bundle = {
  $schema: "http://json-schema.org/draft-07/schema#",
  definitions: {
    ServerRequest: {
      oneOf: [
        {
          properties: {
            id: { $ref: "#/definitions/RequestId" },
            method: { enum: ["item/ask"], type: "string" },
            params: { $ref: "#/definitions/AskParams" }
          }
        }
      ]
    },
    ClientRequest: {
      oneOf: [
        { properties: { method: { enum: ["thread/start"] }, params: { $ref: "#/definitions/v2/ThreadStartParams" } } },
        { properties: { method: { enum: ["account/logout"] } } }
      ]
    },
    ServerNotification: {
      properties: { emittedAtMs: { type: "integer", format: "int64" } },
      oneOf: [{ properties: { method: { enum: ["turn/started"] }, params: { $ref: "#/definitions/v2/TurnStarted" } } }]
    },
    ClientNotification: { oneOf: [{ properties: { method: { enum: ["initialized"] } } }] },
    RequestId: { anyOf: [{ type: "string" }, { type: "integer", format: "int64" }] },
    AskParams: { type: "object" },
    AskResponse: {
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      properties: { decision: { $ref: "#/definitions/Decision" }, count: { type: "integer", format: "uint8" } },
      required: ["decision"]
    },
    Decision: {
      oneOf: [
        { enum: ["yes"], type: "string" },
        { enum: ["no"], type: "string" }
      ]
    },
    v2: {
      ThreadStartParams: { type: "object" },
      ThreadStartResponse: {
        type: "object",
        properties: { thread: { $ref: "#/definitions/v2/Thread" } },
        required: ["thread"]
      },
      Thread: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
      TurnStarted: { type: "object" },
      Kind: { oneOf: [{ properties: { type: { enum: ["a"] } } }, { properties: { type: { enum: ["b"] } } }] }
    }
  }
}

const dumpOf = (b: unknown) => Either.getOrThrow(SchemaDump.fromBundle(b))

describe("SchemaDump.fromBundle", () => {
  it("lists each direction's methods and finds responses next to their params (also under v2)", () => {
    const dump = dumpOf(bundle)
    assert.deepStrictEqual(dump.serverRequestMethods, ["item/ask"])
    assert.deepStrictEqual(dump.serverRequests, [
      { method: "item/ask", paramsRef: "#/definitions/AskParams", responseRef: "#/definitions/AskResponse" }
    ])
    assert.deepStrictEqual(dump.clientRequests, [
      {
        method: "thread/start",
        paramsRef: "#/definitions/v2/ThreadStartParams",
        responseRef: "#/definitions/v2/ThreadStartResponse"
      },
      { method: "account/logout", paramsRef: null, responseRef: null }
    ])
    assert.deepStrictEqual(dump.serverNotificationMethods, ["turn/started"])
    assert.deepStrictEqual(dump.clientNotificationMethods, ["initialized"])
    assert.deepStrictEqual(SchemaDump.enumValues(dump, "Decision"), ["yes", "no"])
    assert.deepStrictEqual(SchemaDump.tagValues(dump, "Kind", "type"), ["a", "b"])
    assert.strictEqual(SchemaDump.findDefinition(dump, "Thread")?.ref, "#/definitions/v2/Thread")
  })

  it("fails loudly when the layout changes", () => {
    const noResponse = structuredClone(bundle) as { definitions: Record<string, unknown> }
    delete noResponse.definitions["AskResponse"]
    const missing = SchemaDump.fromBundle(noResponse)
    assert.isTrue(Either.isLeft(missing))
    if (Either.isLeft(missing)) {
      assert.strictEqual(missing.left.reason, "LayoutChanged")
      assert.include(missing.left.message, "item/ask")
    }
    const noEnvelope = structuredClone(bundle) as { definitions: Record<string, unknown> }
    delete noEnvelope.definitions["ServerRequest"]
    const gone = SchemaDump.fromBundle(noEnvelope)
    assert.isTrue(Either.isLeft(gone) && gone.left.message.includes("ServerRequest"))
    assert.isTrue(Either.isLeft(SchemaDump.fromBundle([])))
  })
})

describe("SchemaDump.makeValidator", () => {
  const validator = SchemaDump.makeValidator(dumpOf(bundle))

  it("validates server request answers through $ref chains, with the dump's integer formats", () => {
    assert.deepStrictEqual(validator.serverRequestResponse("item/ask", { decision: "yes" }), { _tag: "Valid" })
    assert.deepStrictEqual(validator.serverRequestResponse("item/ask", { decision: "no", count: 255, extra: 1 }), {
      _tag: "Valid"
    })
    const wrongWord = validator.serverRequestResponse("item/ask", { decision: "maybe" })
    assert.strictEqual(wrongWord._tag, "Invalid")
    assert.include(wrongWord._tag === "Invalid" ? wrongWord.errors : "", "value/decision")
    assert.strictEqual(validator.serverRequestResponse("item/ask", { decision: "yes", count: 256 })._tag, "Invalid")
    assert.strictEqual(validator.serverRequestResponse("item/ask", { decision: "yes", count: 1.5 })._tag, "Invalid")
    assert.strictEqual(validator.serverRequestResponse("item/ask", {})._tag, "Invalid")
  })

  it("says Unavailable, not Valid, when there is nothing to check against", () => {
    assert.strictEqual(validator.serverRequestResponse("item/other", {})._tag, "Unavailable")
    assert.strictEqual(validator.clientRequestResult("account/logout", {})._tag, "Unavailable")
    assert.strictEqual(validator.ref("#/definitions/Nope", {})._tag, "Unavailable")
  })

  it("validates client results and arbitrary refs", () => {
    assert.deepStrictEqual(validator.clientRequestResult("thread/start", { thread: { id: "t" } }), { _tag: "Valid" })
    assert.strictEqual(validator.clientRequestResult("thread/start", { threadId: "t" })._tag, "Invalid")
    assert.deepStrictEqual(validator.ref("#/definitions/v2/Thread", { id: "t" }), { _tag: "Valid" })
  })
})

describe("SchemaDump.load / generate failures", () => {
  it.live("a directory without a dump is ReadFailed", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(SchemaDump.load("/nonexistent/warden-dump"))
      assert.strictEqual(error.reason, "ReadFailed")
      assert.include(error.message, SchemaDump.BundleFile)
    })
  )

  it.live("a binary that cannot run, or exits non-zero, is GenerateFailed naming the command", () =>
    Effect.gen(function* () {
      const missing = yield* Effect.flip(SchemaDump.generate("/nonexistent/codex"))
      assert.strictEqual(missing.reason, "GenerateFailed")
      assert.include(missing.message, "/nonexistent/codex app-server generate-json-schema")
      const failing = yield* Effect.flip(SchemaDump.generate("/bin/false"))
      assert.strictEqual(failing.reason, "GenerateFailed")
    })
  )
})
