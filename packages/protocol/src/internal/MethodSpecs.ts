/**
 * How Warden reads, refuses, answers and routes each server request method: one `MethodSpec` per
 * method in the exhaustive `Specs` table. Public through `ServerRequests`.
 */
import { Either, type Schema } from "effect"
import type { Decision, DecisionTag } from "../Decision.js"
import { isEmpty } from "../Json.js"
import * as PermissionsGrant from "../PermissionsGrant.js"
import {
  AttestationParams,
  CommandApprovalParams,
  DynamicToolCallParams,
  ElicitationParams,
  FileChangeApprovalParams,
  LegacyApplyPatchParams,
  LegacyExecParams,
  PermissionsApprovalParams,
  type ServerRequestMethod,
  TokenRefreshParams,
  UserInputParams
} from "./RequestParams.js"
import { type Reply, refusedError, result } from "./Reply.js"

// ---------------------------------------------------------------------------------------------
// Method specs

/**
 * How Warden reads, refuses, answers and routes one server request method.
 *
 * One spec per method lives in `Specs`; `decode`, `refusalFor`, `answerFor`, `offersFor`,
 * `threadIdFor` and `turnIdFor` read them.
 */
export interface MethodSpec<P> {
  /** The lenient params schema (unknown keys are ignored). */
  readonly params: Schema.Schema<P, any>
  /** The answer written when nobody decided (deadline, scope closed, handler failed). Required. */
  readonly refusal: Reply
  /** Encode a decision, or say why this method cannot express it. */
  readonly answer: (params: P, decision: Decision) => Either.Either<Reply, string>
  /** The decisions this request offers a person (for UIs); Decline is always among them. */
  readonly offers: (params: P) => ReadonlyArray<DecisionTag>
  /** The thread the request belongs to, if it says. */
  readonly threadId: (params: P) => string | undefined
  /** The turn the request belongs to, if it says. */
  readonly turnId: (params: P) => string | undefined
}

const cannot = (decision: Decision, method: string) =>
  Either.left(`${decision._tag} cannot be expressed as an answer to ${method}`)

const commandDecision = (value: unknown): Reply => result({ decision: value })

const offeredWord = (available: ReadonlyArray<unknown> | null | undefined, word: string): boolean =>
  available === undefined || available === null || available.some((d) => d === word)

const offeredObject = (available: ReadonlyArray<unknown> | null | undefined, key: string): boolean =>
  available === undefined ||
  available === null ||
  available.some((d) => typeof d === "object" && d !== null && key in (d as object))

const sameStrings = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) =>
  a.length === b.length && a.every((x, i) => x === b[i])

const commandApproval: MethodSpec<CommandApprovalParams> = {
  params: CommandApprovalParams,
  refusal: commandDecision("decline"),
  answer: (p, d) => {
    const method = "item/commandExecution/requestApproval"
    switch (d._tag) {
      case "Accept":
        return offeredWord(p.availableDecisions, "accept")
          ? Either.right(commandDecision("accept"))
          : Either.left("accept is not offered by this request")
      case "AcceptForSession":
        return offeredWord(p.availableDecisions, "acceptForSession")
          ? Either.right(commandDecision("acceptForSession"))
          : Either.left("acceptForSession is not offered by this request")
      case "Decline":
        // Accepted by the server even when availableDecisions does not list it (measured).
        return Either.right(commandDecision("decline"))
      case "Cancel":
        return Either.right(commandDecision("cancel"))
      case "AcceptWithExecpolicyAmendment": {
        const proposed = p.proposedExecpolicyAmendment
        if (!proposed || !offeredObject(p.availableDecisions, "acceptWithExecpolicyAmendment")) {
          return Either.left("an execpolicy amendment is not offered by this request")
        }
        if (!sameStrings(proposed, d.amendment))
          return Either.left("the amendment differs from the one the request proposed")
        return Either.right(commandDecision({ acceptWithExecpolicyAmendment: { execpolicy_amendment: [...proposed] } }))
      }
      case "ApplyNetworkPolicyAmendment": {
        const match = (p.proposedNetworkPolicyAmendments ?? []).find((a) => a.host === d.host && a.action === d.action)
        if (!match) return Either.left("that network policy amendment is not offered by this request")
        return Either.right(
          commandDecision({
            applyNetworkPolicyAmendment: { network_policy_amendment: { host: match.host, action: match.action } }
          })
        )
      }
      default:
        return cannot(d, method)
    }
  },
  offers: (p) => {
    const out: Array<DecisionTag> = []
    if (offeredWord(p.availableDecisions, "accept")) out.push("Accept")
    if (offeredWord(p.availableDecisions, "acceptForSession")) out.push("AcceptForSession")
    if (p.proposedExecpolicyAmendment && offeredObject(p.availableDecisions, "acceptWithExecpolicyAmendment")) {
      out.push("AcceptWithExecpolicyAmendment")
    }
    if ((p.proposedNetworkPolicyAmendments ?? []).length > 0) out.push("ApplyNetworkPolicyAmendment")
    out.push("Decline", "Cancel")
    return out
  },
  threadId: (p) => p.threadId,
  turnId: (p) => p.turnId
}

const fileChangeApproval: MethodSpec<FileChangeApprovalParams> = {
  params: FileChangeApprovalParams,
  refusal: commandDecision("decline"),
  answer: (_p, d) => {
    switch (d._tag) {
      case "Accept":
        return Either.right(commandDecision("accept"))
      case "AcceptForSession":
        return Either.right(commandDecision("acceptForSession"))
      case "Decline":
        return Either.right(commandDecision("decline"))
      case "Cancel":
        return Either.right(commandDecision("cancel"))
      default:
        return cannot(d, "item/fileChange/requestApproval")
    }
  },
  offers: () => ["Accept", "AcceptForSession", "Decline", "Cancel"],
  threadId: (p) => p.threadId,
  turnId: (p) => p.turnId
}

const grantReply = (answer: PermissionsGrant.GrantAnswer): Reply =>
  result({
    permissions: answer.permissions,
    scope: answer.scope,
    ...(answer.strictAutoReview !== undefined ? { strictAutoReview: answer.strictAutoReview } : {})
  })

const permissionsApproval: MethodSpec<PermissionsApprovalParams> = {
  params: PermissionsApprovalParams,
  refusal: grantReply(PermissionsGrant.emptyGrant()),
  answer: (p, d) => {
    switch (d._tag) {
      case "Accept":
      case "AcceptForSession":
        // Grant exactly what was asked, rebuilt from checked values.
        return Either.map(
          PermissionsGrant.checkGrant(p.permissions, {
            permissions: p.permissions,
            scope: d._tag === "Accept" ? "turn" : "session"
          }),
          grantReply
        )
      case "Grant":
        return Either.map(PermissionsGrant.checkGrant(p.permissions, d), grantReply)
      case "Decline":
        return Either.right(grantReply(PermissionsGrant.emptyGrant()))
      default:
        return cannot(d, "item/permissions/requestApproval")
    }
  },
  offers: () => ["Accept", "AcceptForSession", "Grant", "Decline"],
  threadId: (p) => p.threadId,
  turnId: (p) => p.turnId
}

const schemaProperties = (schema: unknown): Record<string, unknown> => {
  if (typeof schema !== "object" || schema === null) return {}
  const props = (schema as Record<string, unknown>)["properties"]
  return typeof props === "object" && props !== null ? (props as Record<string, unknown>) : {}
}

/** The persistence levels an elicitation offers in `_meta.persist`. */
export const persistOffered = (p: ElicitationParams): ReadonlyArray<"session" | "always"> => {
  const persist = p._meta?.["persist"]
  return Array.isArray(persist)
    ? persist.filter((x): x is "session" | "always" => x === "session" || x === "always")
    : []
}

/** Set an own data property (a key named `__proto__` stays a key, never a prototype). */
const defineOwn = (target: Record<string, unknown>, key: string, value: unknown): void => {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

const ownField = (props: Record<string, unknown>, key: string): Record<string, unknown> | undefined => {
  if (!Object.hasOwn(props, key)) return undefined
  const field = Object.getOwnPropertyDescriptor(props, key)?.value
  return typeof field === "object" && field !== null && !Array.isArray(field) ? (field as Record<string, unknown>) : {}
}

/** Whether `value` is of the type the form's field asks (JSON Schema `type`; none declared: any primitive). */
const fieldValue = (field: Record<string, unknown>, value: unknown): unknown | undefined => {
  const type = field["type"]
  const choices = Array.isArray(field["enum"]) ? (field["enum"] as ReadonlyArray<unknown>) : undefined
  const inChoices = (v: unknown) => choices === undefined || choices.includes(v)
  switch (type) {
    case "string":
      return typeof value === "string" && inChoices(value) ? value : undefined
    case "number":
      return typeof value === "number" && Number.isFinite(value) && inChoices(value) ? value : undefined
    case "integer":
      return typeof value === "number" && Number.isSafeInteger(value) && inChoices(value) ? value : undefined
    case "boolean":
      return typeof value === "boolean" ? value : undefined
    case "array": {
      const items =
        typeof field["items"] === "object" && field["items"] !== null ? (field["items"] as Record<string, unknown>) : {}
      const itemChoices = Array.isArray(items["enum"]) ? (items["enum"] as ReadonlyArray<unknown>) : undefined
      return Array.isArray(value) &&
        value.every((x) => typeof x === "string" && (itemChoices === undefined || itemChoices.includes(x)))
        ? [...value]
        : undefined
    }
    case undefined:
      return (typeof value === "string" || typeof value === "number" || typeof value === "boolean") && inChoices(value)
        ? value
        : undefined
    default:
      return undefined
  }
}

/**
 * Content for an accepted form: only the form's OWN fields (an inherited name such as `toString`
 * or `constructor` is not a field), each of the type the field asks, every required field
 * present; rebuilt fresh.
 */
const formContent = (p: ElicitationParams, content: unknown): Either.Either<Record<string, unknown>, string> => {
  const props = schemaProperties(p.requestedSchema)
  const requiredList =
    typeof p.requestedSchema === "object" && p.requestedSchema !== null
      ? (p.requestedSchema as Record<string, unknown>)["required"]
      : undefined
  const required = Array.isArray(requiredList) ? requiredList.filter((x): x is string => typeof x === "string") : []
  if (content === undefined) {
    return isEmpty(props) ? Either.right({}) : Either.left("accepting this form needs content")
  }
  if (
    typeof content !== "object" ||
    content === null ||
    Array.isArray(content) ||
    Object.getPrototypeOf(content) !== Object.prototype
  ) {
    return Either.left("content is not a plain object")
  }
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(content)) {
    const field = ownField(props, key)
    if (field === undefined) return Either.left(`content has a field the form does not ask for: ${key}`)
    const descriptor = Object.getOwnPropertyDescriptor(content, key)!
    if (!("value" in descriptor)) return Either.left(`content.${key} is an accessor`)
    const value = fieldValue(field, descriptor.value)
    if (value === undefined) {
      const type = typeof field["type"] === "string" ? field["type"] : "primitive"
      return Either.left(
        `content.${key} is not ${Array.isArray(field["enum"]) ? "one of the form's choices" : `a ${type} value`}`
      )
    }
    defineOwn(out, key, value)
  }
  for (const key of required) {
    if (!Object.hasOwn(out, key) && ownField(props, key) !== undefined)
      return Either.left(`content.${key} is required by the form`)
  }
  return Either.right(out)
}

const elicitation: MethodSpec<ElicitationParams> = {
  params: ElicitationParams,
  refusal: result({ action: "decline" }),
  answer: (p, d) => {
    switch (d._tag) {
      case "Decline":
        return Either.right(result({ action: "decline" }))
      case "Cancel":
        return Either.right(result({ action: "cancel" }))
      case "Accept":
        return p.mode === "url"
          ? Either.right(result({ action: "accept" }))
          : Either.map(formContent(p, undefined), (content) =>
              result(Object.keys(content).length === 0 ? { action: "accept" } : { action: "accept", content })
            )
      case "Elicitation": {
        if (d.action !== "accept") return Either.right(result({ action: d.action }))
        if (d.persist !== undefined && !persistOffered(p).includes(d.persist)) {
          return Either.left(`persist "${d.persist}" is not offered by this elicitation`)
        }
        const meta = d.persist !== undefined ? { _meta: { persist: d.persist } } : {}
        if (p.mode === "url") {
          return d.content === undefined
            ? Either.right(result({ action: "accept", ...meta }))
            : Either.left("a URL elicitation takes no content")
        }
        return Either.map(formContent(p, d.content), (content) =>
          result({
            action: "accept",
            ...(Object.keys(content).length > 0 || d.content !== undefined ? { content } : {}),
            ...meta
          })
        )
      }
      default:
        return cannot(d, "mcpServer/elicitation/request")
    }
  },
  offers: (p) => [
    ...(p.mode === "url" || isEmpty(schemaProperties(p.requestedSchema)) ? ["Accept" as const] : []),
    "Elicitation",
    "Decline",
    "Cancel"
  ],
  threadId: (p) => p.threadId,
  turnId: (p) => p.turnId ?? undefined
}

const MaxAnswersPerQuestion = 32
const MaxAnswerLength = 4_096

const userInput: MethodSpec<UserInputParams> = {
  params: UserInputParams,
  refusal: result({ answers: {} }),
  answer: (p, d) => {
    switch (d._tag) {
      case "Decline":
        return Either.right(result({ answers: {} }))
      case "Answers": {
        const answers = d.answers
        if (
          typeof answers !== "object" ||
          answers === null ||
          Array.isArray(answers) ||
          Object.getPrototypeOf(answers) !== Object.prototype
        ) {
          return Either.left("answers is not a plain object")
        }
        const ids = new Set(p.questions.map((q) => q.id))
        const out: Record<string, { answers: Array<string> }> = {}
        for (const id of Object.keys(answers)) {
          if (!ids.has(id)) return Either.left(`answers name a question that was not asked: ${id}`)
          const descriptor = Object.getOwnPropertyDescriptor(answers, id)!
          if (!("value" in descriptor)) return Either.left(`answers.${id} is an accessor`)
          const raw: unknown = descriptor.value
          const list = Array.isArray(raw)
            ? raw
            : typeof raw === "object" && raw !== null && Array.isArray((raw as Record<string, unknown>)["answers"])
              ? ((raw as Record<string, unknown>)["answers"] as ReadonlyArray<unknown>)
              : typeof raw === "string"
                ? [raw]
                : undefined
          if (
            !list ||
            list.length > MaxAnswersPerQuestion ||
            !list.every((x) => typeof x === "string" && x.length <= MaxAnswerLength)
          ) {
            return Either.left(`answers.${id} is not a bounded list of strings`)
          }
          defineOwn(out, id, { answers: [...(list as ReadonlyArray<string>)] })
        }
        return Either.right(result({ answers: out }))
      }
      default:
        return cannot(d, "item/tool/requestUserInput")
    }
  },
  offers: () => ["Answers", "Decline"],
  threadId: (p) => p.threadId,
  turnId: (p) => p.turnId
}

const contentItem = (item: unknown): Record<string, string> | undefined => {
  if (typeof item !== "object" || item === null) return undefined
  const i = item as Record<string, unknown>
  if (i["type"] === "inputText" && typeof i["text"] === "string") return { type: "inputText", text: i["text"] }
  if (i["type"] === "inputImage" && typeof i["imageUrl"] === "string")
    return { type: "inputImage", imageUrl: i["imageUrl"] }
  if (i["type"] === "inputAudio" && typeof i["audioUrl"] === "string")
    return { type: "inputAudio", audioUrl: i["audioUrl"] }
  return undefined
}

const dynamicToolCall: MethodSpec<DynamicToolCallParams> = {
  params: DynamicToolCallParams,
  refusal: result({ contentItems: [], success: false }),
  answer: (_p, d) => {
    switch (d._tag) {
      case "Decline":
        return Either.right(result({ contentItems: [], success: false }))
      case "ToolResult": {
        if (typeof d.success !== "boolean") return Either.left("success is not a boolean")
        if (!Array.isArray(d.contentItems)) return Either.left("contentItems is not an array")
        const items = d.contentItems.map(contentItem)
        if (items.some((x) => x === undefined))
          return Either.left("a content item is not inputText, inputImage or inputAudio")
        return Either.right(result({ contentItems: items, success: d.success }))
      }
      default:
        return cannot(d, "item/tool/call")
    }
  },
  offers: () => ["ToolResult", "Decline"],
  threadId: (p) => p.threadId,
  turnId: (p) => p.turnId
}

/** Methods Warden never answers positively: only the error frame (a refusal) is expressible. */
const refuseOnly = <P>(params: Schema.Schema<P, any>, method: string): MethodSpec<P> => ({
  params,
  refusal: { _tag: "Error", error: refusedError },
  answer: (_p, d) => (d._tag === "Decline" ? Either.right({ _tag: "Error", error: refusedError }) : cannot(d, method)),
  offers: () => ["Decline"],
  threadId: () => undefined,
  turnId: () => undefined
})

const legacyDenied: Reply = result({
  decision: { denied: { rejection: "Warden refused this request: nobody approved it." } }
})

const legacyApproval = <P>(params: Schema.Schema<P, any>, method: string): MethodSpec<P> => ({
  params,
  refusal: legacyDenied,
  answer: (_p, d) => {
    switch (d._tag) {
      case "Accept":
        return Either.right(result({ decision: "approved" }))
      case "AcceptForSession":
        return Either.right(result({ decision: "approved_for_session" }))
      case "Decline":
        return Either.right(legacyDenied)
      case "Abort":
      case "Cancel":
        return Either.right(result({ decision: "abort" }))
      default:
        return cannot(d, method)
    }
  },
  offers: () => ["Accept", "AcceptForSession", "Decline", "Abort"],
  threadId: () => undefined,
  turnId: () => undefined
})

/** The decoded params type of each server request method. */
export type ParamsOf = {
  "item/commandExecution/requestApproval": CommandApprovalParams
  "item/fileChange/requestApproval": FileChangeApprovalParams
  "item/permissions/requestApproval": PermissionsApprovalParams
  "mcpServer/elicitation/request": ElicitationParams
  "item/tool/requestUserInput": UserInputParams
  "item/tool/call": DynamicToolCallParams
  "account/chatgptAuthTokens/refresh": typeof TokenRefreshParams.Type
  "attestation/generate": typeof AttestationParams.Type
  applyPatchApproval: typeof LegacyApplyPatchParams.Type
  execCommandApproval: typeof LegacyExecParams.Type
}

/**
 * The spec of every server request method, an exhaustive table by method name.
 *
 * Its type makes a method without a spec (and so without a refusal) a compile error. The refusals,
 * each the answer that keeps the turn going:
 *
 * - command and file change approvals: `{decision:"decline"}`;
 * - permissions: `{permissions:{}, scope:"turn"}` (the empty grant);
 * - MCP elicitation: `{action:"decline"}`;
 * - user input: `{answers:{}}`;
 * - dynamic tool call: `{contentItems:[], success:false}`;
 * - token refresh and attestation: the `refusedError` frame;
 * - legacy v1 approvals: `{decision:{denied:{rejection:"..."}}}`.
 */
export const Specs: { readonly [M in ServerRequestMethod]: MethodSpec<ParamsOf[M]> } = {
  "item/commandExecution/requestApproval": commandApproval,
  "item/fileChange/requestApproval": fileChangeApproval,
  "item/permissions/requestApproval": permissionsApproval,
  "mcpServer/elicitation/request": elicitation,
  "item/tool/requestUserInput": userInput,
  "item/tool/call": dynamicToolCall,
  "account/chatgptAuthTokens/refresh": refuseOnly(TokenRefreshParams, "account/chatgptAuthTokens/refresh"),
  "attestation/generate": refuseOnly(AttestationParams, "attestation/generate"),
  applyPatchApproval: legacyApproval(LegacyApplyPatchParams, "applyPatchApproval"),
  execCommandApproval: legacyApproval(LegacyExecParams, "execCommandApproval")
}
