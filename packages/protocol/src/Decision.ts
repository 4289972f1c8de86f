/**
 * What a policy, a person or a program can decide about a card. One vocabulary for every method;
 * each method's encoder says which of these it can express (see ServerRequests). A decision a
 * method cannot express is refused, never coerced into a nearby word.
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
  | { readonly _tag: "Grant"; readonly permissions: unknown; readonly scope?: unknown; readonly strictAutoReview?: unknown }
  | { readonly _tag: "Elicitation"; readonly action: "accept" | "decline" | "cancel"; readonly content?: unknown; readonly persist?: "session" | "always" }
  | { readonly _tag: "Answers"; readonly answers: unknown }
  | { readonly _tag: "ToolResult"; readonly contentItems: unknown; readonly success: unknown }

export type DecisionTag = Decision["_tag"]

export const Accept: Decision = { _tag: "Accept" }
export const AcceptForSession: Decision = { _tag: "AcceptForSession" }
export const Decline: Decision = { _tag: "Decline" }
export const Cancel: Decision = { _tag: "Cancel" }

/** Is this decision a yes of some kind? Used by audit and invariants ("no acceptance unless decided"). */
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
 * Read a decision from loose JSON (the CLI's stdin protocol, rules files): the four words as
 * strings, or a structured answer. Returns undefined for anything else (the caller reports it).
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
    const amendment = inner && typeof inner === "object" ? inner["network_policy_amendment"] as Record<string, unknown> | null : undefined
    if (!amendment || typeof amendment !== "object") return undefined
    const host = amendment["host"]
    const action = amendment["action"]
    return typeof host === "string" && (action === "allow" || action === "deny")
      ? { _tag: "ApplyNetworkPolicyAmendment", host, action }
      : undefined
  }
  if ("permissions" in v) {
    return { _tag: "Grant", permissions: v["permissions"], ...("scope" in v ? { scope: v["scope"] } : {}), ...("strictAutoReview" in v ? { strictAutoReview: v["strictAutoReview"] } : {}) }
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
