import { assert, describe, it } from "@effect/vitest"
import { ServerRequests } from "@warden/protocol"
import { PinnedSchema } from "@warden/testkit"
import { Effect, Scope, TestClock } from "effect"
import { Approvals } from "../src/index.js"
import { captured, recordingLine } from "./support.js"

// What a card writes when nobody decides, for every method of the union, checked against the
// response schema the pinned 0.171.0 binary publishes.
const synthetic: Record<string, unknown> = {
  "item/tool/call": { threadId: "t", turnId: "u", callId: "c", tool: "probe", arguments: {} },
  "account/chatgptAuthTokens/refresh": { reason: "unauthorized", previousAccountId: null },
  "attestation/generate": {},
  applyPatchApproval: { conversationId: "t", callId: "c", fileChanges: {}, reason: null, grantRoot: null },
  execCommandApproval: { conversationId: "t", callId: "c", command: ["ls"], cwd: "/", reason: null, parsedCmd: [] }
}

const requestFor = (method: ServerRequests.ServerRequestMethod, id: number) => {
  try {
    return captured(method, () => true, id)
  } catch {
    return ServerRequests.decode(id, method, synthetic[method])
  }
}

describe("refusals on the wire conform to the pinned schema", () => {
  it.scoped(
    "every method's deadline refusal validates (or is the error frame where the method has no refusal word)",
    () =>
      Effect.gen(function* () {
        const approvals = yield* Approvals.make({ deadlines: { default: "1 second" } })
        const wire = recordingLine()
        const connectionCards = approvals.cardsFor(wire.line)
        const thread = yield* Scope.make()
        let id = 0
        for (const method of ServerRequests.ServerRequestMethods) {
          const request = requestFor(method, id++)
          assert.strictEqual(request._tag, "Known", method)
          // Requests that name no thread are refused at once; the rest wait for the deadline.
          yield* connectionCards.open(request, { parent: thread })
        }
        yield* TestClock.adjust("1 second")
        assert.strictEqual(wire.written.length, ServerRequests.ServerRequestMethods.length)
        for (const frame of wire.written) {
          const method = ServerRequests.ServerRequestMethods[frame["id"] as number]!
          if ("error" in frame) {
            assert.include(
              ["account/chatgptAuthTokens/refresh", "attestation/generate"],
              method,
              `${method} got an error frame`
            )
            continue
          }
          const verdict = yield* PinnedSchema.validateAnswer(method, frame["result"])
          assert.deepStrictEqual(verdict, { _tag: "Valid" }, `${method}: ${JSON.stringify(frame["result"])}`)
        }
      }),
    60_000
  )
})
