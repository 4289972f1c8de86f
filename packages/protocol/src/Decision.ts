/**
 * What a policy, a person or a program can decide about a card. One vocabulary for every method;
 * each method's encoder says which of these it can express (see ServerRequests). A decision a
 * method cannot express is refused, never coerced into a nearby word.
 */

/**
 * A decision about one server request, in one vocabulary for every method, told apart by `_tag`.
 *
 * - `Accept`, `AcceptForSession`, `Decline`, `Cancel`: the four words (see the constants below).
 * - `Abort`: the legacy v1 word; every v2 method refuses it.
 * - `AcceptWithExecpolicyAmendment`: accept a command and persist the execpolicy rule the request
 *   proposed (`amendment` must equal it), so the same command asks no more in later turns.
 * - `ApplyNetworkPolicyAmendment`: apply one of the network policy amendments a command request
 *   proposed (same `host` and `action`).
 * - `Grant`: answer a permissions request with `permissions` (a subset of what was asked, checked
 *   by `PermissionsGrant.checkGrant`), `scope` `"turn"` (the default) or `"session"`.
 * - `Elicitation`: answer an MCP elicitation with an `action`, the form's `content` and a `persist`
 *   level the request offered.
 * - `Answers`: answer `item/tool/requestUserInput`, by question id.
 * - `ToolResult`: the result of a dynamic tool call.
 *
 * `ServerRequests.offersFor` says which tags a request offers; `ServerRequests.answerFor` encodes
 * a decision or says why the method cannot express it.
 */
export type Decision =
  | { readonly _tag: "Accept" }
  | { readonly _tag: "AcceptForSession" }
  | { readonly _tag: "Decline" }
  | { readonly _tag: "Cancel" }
  /** Legacy v1 word. Not a v2 decision: every v2 method refuses it. */
  | { readonly _tag: "Abort" }
  | { readonly _tag: "AcceptWithExecpolicyAmendment"; readonly amendment: ReadonlyArray<string> }
  | { readonly _tag: "ApplyNetworkPolicyAmendment"; readonly host: string; readonly action: "allow" | "deny" }
  | {
      readonly _tag: "Grant"
      readonly permissions: unknown
      readonly scope?: unknown
      readonly strictAutoReview?: unknown
    }
  | {
      readonly _tag: "Elicitation"
      readonly action: "accept" | "decline" | "cancel"
      readonly content?: unknown
      readonly persist?: "session" | "always"
    }
  | { readonly _tag: "Answers"; readonly answers: unknown }
  | { readonly _tag: "ToolResult"; readonly contentItems: unknown; readonly success: unknown }

/** The `_tag` of a `Decision`, as `ServerRequests.offersFor` lists them. */
export type DecisionTag = Decision["_tag"]

/**
 * Accept the request once.
 *
 * A command runs, a patch is applied, a permissions request is granted exactly as asked for this
 * turn, a URL elicitation (or a form with no fields) is accepted, a legacy request is `approved`.
 * A command request whose `availableDecisions` does not list `accept` refuses it.
 */
export const Accept: Decision = { _tag: "Accept" }
/**
 * Accept the request, and let codex take the same answer for the rest of the session.
 *
 * Command and file change approvals send `acceptForSession` (a command request must offer it), a
 * permissions request is granted as asked with scope `session`, a legacy request is
 * `approved_for_session`. It is not an elicitation action: an elicitation refuses it.
 */
export const AcceptForSession: Decision = { _tag: "AcceptForSession" }
/**
 * Refuse the request and let the turn go on, which every method can express.
 *
 * It encodes to each method's refusal: `{decision:"decline"}` for command and file changes (codex
 * takes it even when `availableDecisions` does not list it; the item ends `declined`), an empty
 * grant, `{action:"decline"}`, `{answers:{}}`, `{contentItems:[], success:false}`, the legacy
 * `denied`, or the error frame for the token refresh and attestation.
 */
export const Decline: Decision = { _tag: "Decline" }
/**
 * Refuse the request and interrupt the turn.
 *
 * Command and file change approvals send `cancel` (the item ends declined and the turn ends
 * `interrupted`), an elicitation sends `{action:"cancel"}`, a legacy request `abort`. Permissions,
 * user input, dynamic tool calls, the token refresh and attestation cannot express it.
 */
export const Cancel: Decision = { _tag: "Cancel" }

/**
 * Whether a decision is a yes of some kind, for audit and invariants ("no acceptance unless decided").
 *
 * A network amendment counts when its action is `allow`, an elicitation when its action is
 * `accept`; a grant, answers and a tool result always count, even when empty.
 */
export const isAcceptance = (decision: Decision): boolean => {
  switch (decision._tag) {
    case "Accept":
    case "AcceptForSession":
    case "AcceptWithExecpolicyAmendment":
      return true
    case "ApplyNetworkPolicyAmendment":
      return decision.action === "allow"
    case "Elicitation":
      return decision.action === "accept"
    case "Grant":
    case "Answers":
    case "ToolResult":
      return true
    case "Decline":
    case "Cancel":
    case "Abort":
      return false
  }
}

/**
 * Reads a decision from loose JSON, as the CLI's stdin protocol and rules files write it.
 *
 * The words `"accept"`, `"acceptForSession"`, `"decline"`, `"cancel"` and `"abort"` as strings, or
 * an answer in the wire's own shape: `{acceptWithExecpolicyAmendment:{execpolicy_amendment:[...]}}`,
 * `{applyNetworkPolicyAmendment:{network_policy_amendment:{host, action}}}`, `{permissions, scope?,
 * strictAutoReview?}`, `{action, content?, persist?}`, `{answers}`, `{contentItems, success}` (the
 * first of these keys present decides). Returns undefined for anything else; the caller reports it.
 * Values inside a grant, answers or a tool result are not checked here but when the decision is
 * encoded (`ServerRequests.answerFor`).
 *
 * @example
 * ```ts
 * import { Decision } from "@warden/protocol"
 *
 * Decision.fromJson("decline") // Decision.Decline
 * Decision.fromJson({ action: "accept", content: { name: "x" } }) // an Elicitation decision
 * Decision.fromJson("yes") // undefined
 * ```
 */
export const fromJson = (value: unknown): Decision | undefined => {
  switch (value) {
    case "accept":
      return Accept
    case "acceptForSession":
      return AcceptForSession
    case "decline":
      return Decline
    case "cancel":
      return Cancel
    case "abort":
      return { _tag: "Abort" }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined
  const v = value as Record<string, unknown>
  if ("acceptWithExecpolicyAmendment" in v) {
    const inner = v["acceptWithExecpolicyAmendment"] as Record<string, unknown> | null
    const amendment = inner && typeof inner === "object" ? inner["execpolicy_amendment"] : undefined
    return Array.isArray(amendment) && amendment.every((x) => typeof x === "string")
      ? { _tag: "AcceptWithExecpolicyAmendment", amendment }
      : undefined
  }
  if ("applyNetworkPolicyAmendment" in v) {
    const inner = v["applyNetworkPolicyAmendment"] as Record<string, unknown> | null
    const amendment =
      inner && typeof inner === "object"
        ? (inner["network_policy_amendment"] as Record<string, unknown> | null)
        : undefined
    if (!amendment || typeof amendment !== "object") return undefined
    const host = amendment["host"]
    const action = amendment["action"]
    return typeof host === "string" && (action === "allow" || action === "deny")
      ? { _tag: "ApplyNetworkPolicyAmendment", host, action }
      : undefined
  }
  if ("permissions" in v) {
    return {
      _tag: "Grant",
      permissions: v["permissions"],
      ...("scope" in v ? { scope: v["scope"] } : {}),
      ...("strictAutoReview" in v ? { strictAutoReview: v["strictAutoReview"] } : {})
    }
  }
  if ("action" in v) {
    const action = v["action"]
    if (action !== "accept" && action !== "decline" && action !== "cancel") return undefined
    const persist = v["persist"]
    return {
      _tag: "Elicitation",
      action,
      ...("content" in v ? { content: v["content"] } : {}),
      ...(persist === "session" || persist === "always" ? { persist } : {})
    }
  }
  if ("answers" in v) return { _tag: "Answers", answers: v["answers"] }
  if ("contentItems" in v) return { _tag: "ToolResult", contentItems: v["contentItems"], success: v["success"] }
  return undefined
}

/**
 * A short name for a decision, for logs, cards and audit records.
 *
 * The wire word for the four words and `abort`, `acceptWithExecpolicyAmendment`,
 * `networkPolicy:allow` or `networkPolicy:deny`, `elicitation:<action>`, `grant`, `answers` or
 * `toolResult`. It never includes a decision's payload (a grant, content, answers).
 */
export const describe = (decision: Decision): string => {
  switch (decision._tag) {
    case "Accept":
      return "accept"
    case "AcceptForSession":
      return "acceptForSession"
    case "Decline":
      return "decline"
    case "Cancel":
      return "cancel"
    case "Abort":
      return "abort"
    case "AcceptWithExecpolicyAmendment":
      return "acceptWithExecpolicyAmendment"
    case "ApplyNetworkPolicyAmendment":
      return `networkPolicy:${decision.action}`
    case "Grant":
      return "grant"
    case "Elicitation":
      return `elicitation:${decision.action}`
    case "Answers":
      return "answers"
    case "ToolResult":
      return "toolResult"
  }
}
