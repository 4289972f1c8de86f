/**
 * Drift between a codex binary's own protocol schema (`generate-json-schema`) and what Warden
 * handles: server-request methods, the notification methods Warden maps to typed events, and,
 * what matters most, whether every answer and refusal Warden can write still validates. An
 * answer that no longer validates is breaking (codex would take it as a failure or misread it);
 * the rest is reported as information.
 */
import { Decision, Events, ServerRequests } from "@warden/protocol"
import type * as SchemaDump from "@warden/protocol/SchemaDump"
import { Either } from "effect"

export interface AnswerCheck {
  readonly method: string
  /** `refusal`, or the decision that was encoded. */
  readonly answer: string
  readonly result: unknown
  readonly verdict: "valid" | "invalid" | "unavailable"
  readonly detail: string | undefined
}

export interface Report {
  /** Server requests the binary may send that Warden does not know (it refuses them with an error frame). */
  readonly unknownServerRequests: ReadonlyArray<string>
  /** Server requests Warden handles that the binary no longer has. */
  readonly goneServerRequests: ReadonlyArray<string>
  /** Notifications Warden maps to typed events that the binary no longer has. */
  readonly goneNotifications: ReadonlyArray<string>
  /** Notifications the binary has that Warden passes through untyped. */
  readonly unmappedNotifications: ReadonlyArray<string>
  readonly answers: ReadonlyArray<AnswerCheck>
  /** Some answer or refusal Warden writes does not validate against the binary's schema. */
  readonly breaking: boolean
}

const thread = { threadId: "thread-1", turnId: "turn-1" }

/** Params that decode for each method, rich enough that every decision can be expressed. */
export const sampleParams: { readonly [M in ServerRequests.ServerRequestMethod]: unknown } = {
  "item/commandExecution/requestApproval": {
    ...thread,
    itemId: "call-1",
    command: "/bin/bash -lc 'echo hi'",
    cwd: "/work",
    proposedExecpolicyAmendment: ["echo", "hi"],
    proposedNetworkPolicyAmendments: [{ host: "example.com", action: "allow" }]
  },
  "item/fileChange/requestApproval": { ...thread, itemId: "call-1", reason: "write outside", grantRoot: null },
  "item/permissions/requestApproval": {
    ...thread,
    itemId: "call-1",
    cwd: "/work",
    permissions: {
      network: null,
      fileSystem: {
        read: null,
        write: ["/var/tmp/x"],
        entries: [{ path: { type: "path", path: "/var/tmp/x" }, access: "write" }]
      }
    }
  },
  "mcpServer/elicitation/request": {
    ...thread,
    serverName: "probe",
    mode: "form",
    message: "which colour?",
    requestedSchema: { type: "object", properties: { colour: { type: "string", enum: ["red", "green"] } } },
    _meta: { persist: ["session", "always"] }
  },
  "item/tool/requestUserInput": {
    ...thread,
    itemId: "call-1",
    questions: [{ id: "q1", header: "Colour", question: "Which?", options: [{ label: "Red", description: "warm" }] }]
  },
  "item/tool/call": { ...thread, callId: "call-1", tool: "lookup", arguments: {} },
  "account/chatgptAuthTokens/refresh": { reason: "unauthorized" },
  "attestation/generate": {},
  applyPatchApproval: { conversationId: "c-1", callId: "call-1", fileChanges: {} },
  execCommandApproval: { conversationId: "c-1", callId: "call-1", command: ["echo", "hi"], cwd: "/work" }
}

/** One of each decision Warden's deciders (rules, handlers, people, stdin) can produce. */
export const sampleDecisions: ReadonlyArray<Decision.Decision> = [
  Decision.Accept,
  Decision.AcceptForSession,
  Decision.Decline,
  Decision.Cancel,
  { _tag: "Abort" },
  { _tag: "AcceptWithExecpolicyAmendment", amendment: ["echo", "hi"] },
  { _tag: "ApplyNetworkPolicyAmendment", host: "example.com", action: "allow" },
  { _tag: "Grant", permissions: { fileSystem: { write: ["/var/tmp/x"] } }, scope: "session" },
  { _tag: "Elicitation", action: "accept", content: { colour: "red" }, persist: "session" },
  { _tag: "Elicitation", action: "decline" },
  { _tag: "Elicitation", action: "cancel" },
  { _tag: "Answers", answers: { q1: ["Red"] } },
  { _tag: "ToolResult", contentItems: [{ type: "inputText", text: "42" }], success: true }
]

const sorted = (values: Iterable<string>) => [...new Set(values)].sort()
const missingFrom = (values: Iterable<string>, from: ReadonlyArray<string>) =>
  sorted([...values].filter((v) => !from.includes(v)))

export const check = (dump: SchemaDump.SchemaDump, validator: SchemaDump.Validator): Report => {
  const answers: Array<AnswerCheck> = []
  const validate = (method: string, answer: string, reply: ServerRequests.Reply) => {
    if (reply._tag === "Error") return // a JSON-RPC error frame: no schema, codex takes it as a denial
    const verdict = validator.serverRequestResponse(method, reply.result)
    answers.push({
      method,
      answer,
      result: reply.result,
      verdict: verdict._tag === "Valid" ? "valid" : verdict._tag === "Invalid" ? "invalid" : "unavailable",
      detail: verdict._tag === "Invalid" ? verdict.errors : verdict._tag === "Unavailable" ? verdict.reason : undefined
    })
  }
  for (const method of ServerRequests.ServerRequestMethods) {
    const decoded = ServerRequests.decode(0, method, sampleParams[method])
    validate(method, "refusal", ServerRequests.refusalFor(decoded))
    if (decoded._tag !== "Known") continue
    for (const decision of sampleDecisions) {
      const encoded = ServerRequests.answerFor(decoded, decision)
      if (Either.isRight(encoded)) validate(method, Decision.describe(decision), encoded.right)
    }
  }
  const goneServerRequests = missingFrom(ServerRequests.ServerRequestMethods, dump.serverRequestMethods)
  return {
    unknownServerRequests: missingFrom(dump.serverRequestMethods, ServerRequests.ServerRequestMethods),
    goneServerRequests,
    goneNotifications: missingFrom(Events.MappedNotificationMethods, dump.serverNotificationMethods),
    unmappedNotifications: missingFrom(dump.serverNotificationMethods, Events.MappedNotificationMethods),
    answers,
    // An answer to a method the binary no longer sends cannot break anything.
    breaking: answers.some((a) => a.verdict !== "valid" && !goneServerRequests.includes(a.method))
  }
}
