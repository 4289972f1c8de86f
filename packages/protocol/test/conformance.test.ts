/**
 * Conformance with the pinned codex binary's own schema (`generate-json-schema`, offline). When
 * the pin moves, these fail loudly with the difference spelled out.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  installedCodexVersion,
  PinnedCodexVersion,
  pinnedDump,
  pinnedValidator,
  validateAnswer
} from "@warden/test-support/PinnedCodex"
import { exchanges, serverMessages, transcripts } from "@warden/test-support/Transcripts"
import { Effect } from "effect"
import * as ClientMethods from "../src/ClientMethods.js"
import * as Events from "../src/Events.js"
import * as SchemaDump from "../src/SchemaDump.js"
import { ServerRequestMethods } from "../src/ServerRequests.js"
import * as ServerRequests from "../src/ServerRequests.js"
import { ThreadActiveFlags, ThreadStatusTypes } from "../src/Thread.js"
import * as ThreadItem from "../src/ThreadItem.js"
import { KnownCodexErrorCodes, TurnStatuses } from "../src/Turn.js"

const sorted = (values: Iterable<string>) => [...new Set(values)].sort()
const missingFrom = (values: Iterable<string>, from: ReadonlyArray<string>) =>
  sorted([...values].filter((v) => !from.includes(v)))

describe("conformance with the pinned codex schema", () => {
  it("the installed codex is the pinned version", () => {
    assert.strictEqual(installedCodexVersion(), PinnedCodexVersion)
  })

  it.live("every notification method Events maps explicitly exists in the dump", () =>
    Effect.gen(function* () {
      const dump = yield* pinnedDump
      assert.isAbove(dump.serverNotificationMethods.length, 50)
      assert.deepStrictEqual(missingFrom(Events.MappedNotificationMethods, dump.serverNotificationMethods), [])
    })
  )

  it.live("the dump's server requests are exactly ServerRequestMethods (a new or removed method fails here)", () =>
    Effect.gen(function* () {
      const dump = yield* pinnedDump
      assert.deepStrictEqual(
        {
          inDumpOnly: missingFrom(dump.serverRequestMethods, ServerRequestMethods),
          inOursOnly: missingFrom(ServerRequestMethods, dump.serverRequestMethods)
        },
        { inDumpOnly: [], inOursOnly: [] }
      )
      // Each has a response schema next to its params (e.g. CommandExecutionRequestApprovalResponse).
      for (const entry of dump.serverRequests) assert.isString(entry.responseRef, entry.method)
      assert.strictEqual(
        dump.serverRequests.find((e) => e.method === "item/commandExecution/requestApproval")?.responseRef,
        "#/definitions/CommandExecutionRequestApprovalResponse"
      )
    })
  )

  it.live("the client methods we type exist, and the server's real results for them match the dump", () =>
    Effect.gen(function* () {
      const dump = yield* pinnedDump
      const validator = yield* pinnedValidator
      assert.deepStrictEqual(missingFrom(ClientMethods.ClientMethodNames, dump.clientRequestMethods), [])
      assert.include(dump.clientNotificationMethods, ClientMethods.InitializedNotification)
      let checked = 0
      for (const t of transcripts) {
        for (const x of exchanges(t)) {
          if (!(ClientMethods.ClientMethodNames as ReadonlyArray<string>).includes(x.method) || !("result" in x))
            continue
          assert.deepStrictEqual(
            validator.clientRequestResult(x.method, x.result),
            { _tag: "Valid" },
            `${t.name} ${x.method}`
          )
          checked++
        }
      }
      assert.isAbove(checked, 150)
      // No transcript has thread/unsubscribe: its answer as measured on 0.171.0, and its params.
      assert.deepStrictEqual(validator.clientRequestResult("thread/unsubscribe", { status: "unsubscribed" }), {
        _tag: "Valid"
      })
      assert.notDeepEqual(validator.clientRequestResult("thread/unsubscribe", { status: "gone" }), { _tag: "Valid" })
    })
  )

  it.live("every frame the server sent in the transcripts matches the dump's ServerNotification / ServerRequest", () =>
    Effect.gen(function* () {
      const validator = yield* pinnedValidator
      let checked = 0
      for (const t of transcripts) {
        for (const m of serverMessages(t)) {
          const ref = m.id === undefined ? "#/definitions/ServerNotification" : "#/definitions/ServerRequest"
          assert.deepStrictEqual(validator.ref(ref, m.frame), { _tag: "Valid" }, `${t.name} ${m.method}`)
          checked++
        }
      }
      assert.isAbove(checked, 1000)
    })
  )

  it.live("the enums our decoders know match the dump's", () =>
    Effect.gen(function* () {
      const dump = yield* pinnedDump
      const enumOf = (name: string) => sorted(SchemaDump.enumValues(dump, name))
      assert.deepStrictEqual(sorted(TurnStatuses), enumOf("TurnStatus"))
      assert.deepStrictEqual(sorted(ThreadActiveFlags), enumOf("ThreadActiveFlag"))
      assert.deepStrictEqual(sorted(ThreadStatusTypes), sorted(SchemaDump.tagValues(dump, "ThreadStatus", "type")))
      assert.deepStrictEqual(sorted(ThreadItem.SubAgentActivityKinds), enumOf("SubAgentActivityKind"))
      assert.deepStrictEqual(sorted(ThreadItem.MessagePhases), enumOf("MessagePhase"))
      assert.deepStrictEqual(
        sorted(ThreadItem.PatchChangeKinds),
        sorted(SchemaDump.tagValues(dump, "PatchChangeKind", "type"))
      )
      assert.deepStrictEqual(sorted(Events.PlanStepStatuses), enumOf("TurnPlanStepStatus"))
      assert.deepStrictEqual(
        sorted(ClientMethods.SandboxPolicyTypes),
        sorted(SchemaDump.tagValues(dump, "SandboxPolicy", "type"))
      )
      assert.deepStrictEqual(
        sorted(ThreadItem.ItemStatuses),
        sorted(
          [
            "CommandExecutionStatus",
            "PatchApplyStatus",
            "McpToolCallStatus",
            "DynamicToolCallStatus",
            "CollabAgentToolCallStatus"
          ].flatMap((name) => SchemaDump.enumValues(dump, name))
        )
      )
      // Item kinds we decode all exist (the dump has more: those become `unknown`).
      assert.deepStrictEqual(
        missingFrom(ThreadItem.KnownItemTypes, SchemaDump.tagValues(dump, "ThreadItem", "type")),
        []
      )
      // codexErrorInfo: bare codes plus the keys of the object forms.
      const arms = SchemaDump.findDefinition(dump, "CodexErrorInfo")?.schema["anyOf"]
      const objectKeys = (Array.isArray(arms) ? arms : []).flatMap(
        (arm: { required?: ReadonlyArray<string> }) => arm.required ?? []
      )
      assert.deepStrictEqual(
        sorted(KnownCodexErrorCodes),
        sorted([...SchemaDump.enumValues(dump, "CodexErrorInfo"), ...objectKeys])
      )
    })
  )

  it.live("every method's refusal validates (or is an error frame)", () =>
    Effect.gen(function* () {
      for (const method of ServerRequestMethods) {
        const reply = ServerRequests.refusalFor(ServerRequests.decode(0, method, {}))
        if (reply._tag === "Result") {
          assert.deepStrictEqual(yield* validateAnswer(method, reply.result), { _tag: "Valid" }, `refusal of ${method}`)
        } else {
          assert.isNumber(reply.error.code, method)
          assert.isAbove(reply.error.message.length, 0, method)
        }
      }
    })
  )

  it.live("sample answers from the protocol notes validate; wrong vocabulary does not", () =>
    Effect.gen(function* () {
      const valid: ReadonlyArray<readonly [string, unknown]> = [
        ["item/commandExecution/requestApproval", { decision: "accept" }],
        ["item/commandExecution/requestApproval", { decision: "acceptForSession" }],
        ["item/commandExecution/requestApproval", { decision: "decline" }],
        ["item/commandExecution/requestApproval", { decision: "cancel" }],
        [
          "item/commandExecution/requestApproval",
          { decision: { acceptWithExecpolicyAmendment: { execpolicy_amendment: ["ls", "-l"] } } }
        ],
        [
          "item/commandExecution/requestApproval",
          {
            decision: {
              applyNetworkPolicyAmendment: { network_policy_amendment: { host: "example.com", action: "allow" } }
            }
          }
        ],
        ["item/fileChange/requestApproval", { decision: "decline" }],
        ["item/permissions/requestApproval", { permissions: {}, scope: "turn" }],
        ["item/permissions/requestApproval", { permissions: { fileSystem: null, network: null }, scope: "session" }],
        ["mcpServer/elicitation/request", { action: "decline" }],
        ["mcpServer/elicitation/request", { action: "accept", content: {}, _meta: { persist: "session" } }],
        ["item/tool/requestUserInput", { answers: {} }],
        ["item/tool/requestUserInput", { answers: { q1: { answers: ["yes"] } } }],
        ["item/tool/call", { contentItems: [], success: false }],
        ["account/chatgptAuthTokens/refresh", { accessToken: "a", chatgptAccountId: "acct" }],
        ["attestation/generate", { token: "t" }],
        // 0.171.0: `denied` is an object with a reason; the bare word of older notes is refused.
        ["applyPatchApproval", { decision: { denied: { rejection: "nobody approved it" } } }],
        ["execCommandApproval", { decision: "abort" }]
      ]
      for (const [method, answer] of valid) {
        assert.deepStrictEqual(
          yield* validateAnswer(method, answer),
          { _tag: "Valid" },
          `${method} ${JSON.stringify(answer)}`
        )
      }
      const invalid: ReadonlyArray<readonly [string, unknown]> = [
        ["item/commandExecution/requestApproval", { decision: "abort" }],
        [
          "item/fileChange/requestApproval",
          { decision: { acceptWithExecpolicyAmendment: { execpolicy_amendment: [] } } }
        ],
        ["mcpServer/elicitation/request", { action: "acceptForSession" }],
        ["item/permissions/requestApproval", { scope: "turn" }],
        ["item/tool/requestUserInput", { answers: { q1: "yes" } }],
        ["applyPatchApproval", { decision: "decline" }],
        ["applyPatchApproval", { decision: "denied" }]
      ]
      for (const [method, answer] of invalid) {
        const verdict = yield* validateAnswer(method, answer)
        assert.strictEqual(verdict._tag, "Invalid", `${method} ${JSON.stringify(answer)}`)
      }
      assert.strictEqual((yield* validateAnswer("no/such/method", {}))._tag, "Unavailable")
    })
  )
})
