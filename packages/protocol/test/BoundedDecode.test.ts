import { assert, describe, it } from "@effect/vitest"
import { ServerRequests } from "../src/index.js"

// Decoding a server request runs on the connection's read loop. Counted here, never timed: how
// many items of a hostile array are read, how many times a hostile object's keys are read.

const ids = { threadId: "t", turnId: "u", itemId: "i" }

/** An array of `n` copies of `item` that counts the items read (`get` of an index). */
const countedArray = (n: number, item: unknown) => {
  let reads = 0
  const proxy = new Proxy(
    Array.from({ length: n }, () => item),
    {
      get: (t, key, receiver) => {
        if (typeof key === "string" && /^[0-9]+$/.test(key)) reads++
        return Reflect.get(t, key, receiver)
      }
    }
  )
  return { proxy, reads: () => reads }
}

/** An object of `n` keys that counts the reads of its key list (`ownKeys`) and of its values. */
const countedObject = (n: number) => {
  let reads = 0
  const proxy = new Proxy(Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i])), {
    ownKeys: (t) => {
      reads += n
      return Reflect.ownKeys(t)
    },
    get: (t, key, receiver) => {
      if (typeof key === "string" && key.startsWith("k")) reads++
      return Reflect.get(t, key, receiver)
    }
  })
  return { proxy, reads: () => reads }
}

describe("decoding a request: bounded work, whatever its size", () => {
  it("arrays of objects are decoded only up to MaxItems: a longer one is malformed, its items unread", () => {
    const questions = countedArray(ServerRequests.MaxItems + 1, { id: "q", header: "h", question: "q" })
    const decoded = ServerRequests.decode(1, "item/tool/requestUserInput", { ...ids, questions: questions.proxy })
    assert.strictEqual(decoded._tag, "Malformed")
    assert.include(
      decoded._tag === "Malformed" ? decoded.detail : "",
      `questions: expected an array of at most ${ServerRequests.MaxItems} items`
    )
    assert.strictEqual(questions.reads(), 0)

    const options = countedArray(100_000, { label: "l", description: "d" })
    const one = ServerRequests.decode(1, "item/tool/requestUserInput", {
      ...ids,
      questions: [{ id: "q", header: "h", question: "q", options: options.proxy }]
    })
    assert.strictEqual(one._tag, "Malformed")
    assert.strictEqual(options.reads(), 0)

    const amendments = countedArray(100_000, { host: "a", action: "allow" })
    const command = ServerRequests.decode(1, "item/commandExecution/requestApproval", {
      ...ids,
      command: "ls",
      proposedNetworkPolicyAmendments: amendments.proxy
    })
    assert.strictEqual(command._tag, "Malformed")
    assert.strictEqual(amendments.reads(), 0)

    // at the bound, decoded as before
    const atMost = ServerRequests.decode(1, "item/tool/requestUserInput", {
      ...ids,
      questions: Array.from({ length: ServerRequests.MaxItems }, () => ({ id: "q", header: "h", question: "q" }))
    })
    assert.strictEqual(atMost._tag, "Known")
  })

  it("a malformed request's detail never formats the value it read (the formatter wrote each one whole, once per union member)", () => {
    const actions = countedObject(50_000) // an object where an array belongs
    const decoded = ServerRequests.decode(1, "item/commandExecution/requestApproval", {
      ...ids,
      command: "ls",
      commandActions: actions.proxy
    })
    assert.strictEqual(decoded._tag, "Malformed")
    assert.strictEqual(
      decoded._tag === "Malformed" ? decoded.detail : "",
      "commandActions: expected an array; commandActions: expected null; commandActions: expected undefined"
    )
    assert.strictEqual(actions.reads(), 0)
  })
})
