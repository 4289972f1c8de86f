import { assert, describe, it } from "@effect/vitest"
import { JsonRpc } from "../src/index.js"

describe("JsonRpc.classify", () => {
  it("a request with id 0 is a request (0 is an id)", () => {
    const c = JsonRpc.classify({ id: 0, method: "item/commandExecution/requestApproval", params: { a: 1 } })
    assert.strictEqual(c._tag, "Request")
    assert.strictEqual(c._tag === "Request" && c.id, 0)
  })
  it("string ids are ids; jsonrpc may be present or absent", () => {
    assert.strictEqual(JsonRpc.classify({ jsonrpc: "2.0", id: "a", result: {} })._tag, "Response")
    assert.strictEqual(JsonRpc.classify({ id: "a", result: null })._tag, "Response")
  })
  it("a notification has a method and no id", () => {
    const c = JsonRpc.classify({ method: "turn/started", params: { threadId: "t" }, emittedAtMs: 1 })
    assert.deepStrictEqual(c, { _tag: "Notification", method: "turn/started", params: { threadId: "t" } })
  })
  it("an error response carries code, message and data", () => {
    const c = JsonRpc.classify({ id: 3, error: { code: -32001, message: "Server overloaded; retry later.", data: 1 } })
    assert.deepStrictEqual(c, {
      _tag: "ErrorResponse",
      id: 3,
      error: { code: -32001, message: "Server overloaded; retry later.", data: 1 }
    })
  })
  it("ids must be exact: numbers beyond 2^53 - 1 (which JSON.parse rounds) and fractions are refused, never collapsed", () => {
    const a = JSON.parse('{"id": 9007199254740993, "method": "item/commandExecution/requestApproval", "params": {}}')
    const b = JSON.parse('{"id": 9007199254740992, "method": "item/commandExecution/requestApproval", "params": {}}')
    assert.strictEqual(a.id, b.id, "JSON.parse made two different ids one")
    for (const frame of [a, b, { id: 1.5, method: "x" }, { id: -(2 ** 53), result: {} }]) {
      const c = JsonRpc.classify(frame)
      assert.strictEqual(c._tag, "Invalid", JSON.stringify(frame))
      assert.include(c._tag === "Invalid" ? c.detail : "", "not an exact integer")
    }
    assert.strictEqual(JsonRpc.classify({ id: Number.MAX_SAFE_INTEGER, method: "x" })._tag, "Request")
    assert.strictEqual(
      JsonRpc.classify({ id: "9007199254740993", method: "x" })._tag,
      "Request",
      "as a string it is exact"
    )
  })
  it("anything else is Invalid with a readable detail", () => {
    for (const frame of [
      {},
      { id: null },
      { id: 1 },
      { method: 5 },
      { id: {}, method: "x" },
      { id: 1, error: "boom" },
      { id: true, result: 1 }
    ]) {
      const c = JsonRpc.classify(frame)
      assert.strictEqual(c._tag, "Invalid", JSON.stringify(frame))
      assert.isTrue(c._tag === "Invalid" && c.detail.length > 10)
    }
  })
  it("encoders produce JSON-RPC 2.0 frames", () => {
    assert.deepStrictEqual(JsonRpc.request(1, "initialize", { a: 1 }), {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { a: 1 }
    })
    assert.deepStrictEqual(JsonRpc.notification("initialized"), { jsonrpc: "2.0", method: "initialized" })
    assert.deepStrictEqual(JsonRpc.response(0, { decision: "decline" }), {
      jsonrpc: "2.0",
      id: 0,
      result: { decision: "decline" }
    })
  })
})
