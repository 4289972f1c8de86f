/**
 * The ten server-to-client request methods of codex app-server 0.171.0 (stable schema), as one
 * exhaustive table. Each method has: a lenient params schema, its refusal (the answer that keeps
 * the turn going, or the error frame where the method has no refusal word), and an encoder from a
 * `Decision` to its answer that refuses what the method cannot express.
 *
 * `Specs` is typed `{ [M in ServerRequestMethod]: MethodSpec<...> }`: adding a method to
 * `ServerRequestMethods` without a spec (and so without a refusal) does not compile.
 */
import { Either, Schema } from "effect"
import type { Decision, DecisionTag } from "./Decision.js"
import type { RequestId, RpcErrorBody } from "./JsonRpc.js"
import * as PermissionsGrant from "./PermissionsGrant.js"
import { describeParseError, isEmpty } from "./Json.js"
import * as FastDecode from "./internal/FastDecode.js"

/**
 * The ten server-to-client request methods Warden knows, as listed in the 0.171.0 stable schema.
 *
 * The conformance test compares this list with the pinned binary's schema dump.
 */
export const ServerRequestMethods = [
  "item/commandExecution/requestApproval",
  "item/fileChange/requestApproval",
  "item/permissions/requestApproval",
  "mcpServer/elicitation/request",
  "item/tool/requestUserInput",
  "item/tool/call",
  "account/chatgptAuthTokens/refresh",
  "attestation/generate",
  "applyPatchApproval",
  "execCommandApproval"
] as const

/** One of the `ServerRequestMethods`. */
export type ServerRequestMethod = (typeof ServerRequestMethods)[number]

/** Whether a method name is one of the `ServerRequestMethods`. */
export const isServerRequestMethod = (method: string): method is ServerRequestMethod =>
  (ServerRequestMethods as ReadonlyArray<string>).includes(method)

/**
 * What goes back on the wire for a server request, a result or an error frame.
 *
 * Write it with `replyFrame`. codex takes an error frame as a denial.
 */
export type Reply =
  | { readonly _tag: "Result"; readonly result: Record<string, unknown> }
  | { readonly _tag: "Error"; readonly error: RpcErrorBody }

/**
 * Encodes a `Reply` to server request `id` as a JSON-RPC response frame, with `"jsonrpc":"2.0"`.
 *
 * @example
 * ```ts
 * import { ServerRequests } from "@warden/protocol"
 *
 * const request = ServerRequests.decode(0, "item/fileChange/requestApproval", params)
 * ServerRequests.replyFrame(request.id, ServerRequests.refusalFor(request))
 * // { jsonrpc: "2.0", id: 0, result: { decision: "decline" } }
 * ```
 */
export const replyFrame = (id: RequestId, reply: Reply): Record<string, unknown> =>
  reply._tag === "Result" ? { jsonrpc: "2.0", id, result: reply.result } : { jsonrpc: "2.0", id, error: reply.error }

const result = (value: Record<string, unknown>): Reply => ({ _tag: "Result", result: value })

/**
 * The error body that refuses a request Warden never answers positively (token refresh, attestation).
 *
 * It is the honest answer for a method nobody here can answer: codex takes any error frame as a
 * denial. Its message tells the model to go on with what it is already allowed to do.
 */
export const refusedError: RpcErrorBody = {
  code: -32001,
  message: "Warden refused this request: nobody approved it. Continue with what you are already allowed to do."
}
/**
 * The error body (code -32601) that refuses a server request method Warden does not know.
 *
 * `refusalFor` sends it for every `Unknown` request; codex takes it as a denial.
 */
export const unknownMethodError = (method: string): RpcErrorBody => ({
  code: -32601,
  message: `Warden does not handle ${method}; refused.`
})

// ---------------------------------------------------------------------------------------------
// Params (lenient: the server adds keys; we keep what we use)

const Nullable = <S extends Schema.Schema.Any>(s: S) => Schema.optional(Schema.NullOr(s))

/**
 * Arrays of strings, and arrays of anything, checked in one pass with a guard and kept as they came
 * (not copied): `Schema.Array` costs ~0.6 µs per element, so a 16 MiB frame of `["a","a",...]` or
 * `[1,1,...]` held the read loop for seconds. They accept exactly what `Schema.Array(Schema.String)`
 * and `Schema.Array(Schema.Unknown)` accept.
 */
const StringArray = Schema.declare(
  (u: unknown): u is ReadonlyArray<string> => Array.isArray(u) && u.every((x) => typeof x === "string"),
  // the message never formats the value (a failure on a huge array would print all of it)
  { identifier: "StringArray", message: () => "Expected an array of strings" }
)
const UnknownArray = Schema.declare((u: unknown): u is ReadonlyArray<unknown> => Array.isArray(u), {
  identifier: "UnknownArray",
  message: () => "Expected an array"
})
/** An object of anything (what `Schema.Record({ key: Schema.String, value: Schema.Unknown })` accepts), checked without visiting its keys. */
const UnknownRecord = Schema.declare(
  (u: unknown): u is { readonly [key: string]: unknown } => typeof u === "object" && u !== null && !Array.isArray(u),
  { identifier: "UnknownRecord", message: () => "Expected an object" }
)

/** The most items an array of objects in a request's params may have (`BoundedArray`). */
export const MaxItems = 1_000

/**
 * An array of objects, decoded only when it has at most `MaxItems` items (its length is checked
 * before any item is): `Schema.Array` of a struct costs ~2 µs per item, so a 16 MiB frame of small
 * objects (~110,000 questions, ~600,000 network amendments) held the read loop for a quarter to a
 * whole second. A longer one fails to decode: the request is malformed, and refused. (No reader
 * takes that many: the safety filter shows 8 questions of 32 choices.)
 */
const BoundedArray = <S extends Schema.Schema.Any>(item: S) =>
  Schema.compose(
    Schema.declare((u: unknown): u is ReadonlyArray<unknown> => Array.isArray(u) && u.length <= MaxItems, {
      identifier: "BoundedArray",
      message: () => `Expected an array of at most ${MaxItems} items`
    }),
    Schema.Array(item),
    { strict: false }
  )

const NetworkAmendment = Schema.Struct({ host: Schema.String, action: Schema.String })

/**
 * The params of `item/commandExecution/requestApproval`, codex asking to run a command.
 *
 * Only `threadId`, `turnId` and `itemId` (the model's call id) are required; every other field may
 * be absent or null, and unknown keys are ignored. `command` is the shell command as one string.
 * `availableDecisions` is kept as sent (0.171.0 never lists `decline`, yet takes it);
 * `proposedExecpolicyAmendment` and `proposedNetworkPolicyAmendments` are what
 * `AcceptWithExecpolicyAmendment` and `ApplyNetworkPolicyAmendment` may accept.
 */
export const CommandApprovalParams = Schema.Struct({
  threadId: Schema.String,
  turnId: Schema.String,
  itemId: Schema.String,
  kind: Nullable(Schema.String),
  reason: Nullable(Schema.String),
  command: Nullable(Schema.String),
  cwd: Nullable(Schema.String),
  commandActions: Nullable(UnknownArray),
  proposedExecpolicyAmendment: Nullable(StringArray),
  proposedNetworkPolicyAmendments: Nullable(BoundedArray(NetworkAmendment)),
  availableDecisions: Nullable(UnknownArray),
  networkApprovalContext: Nullable(Schema.Unknown)
})
export type CommandApprovalParams = typeof CommandApprovalParams.Type

/**
 * The params of `item/fileChange/requestApproval`, codex asking to apply a patch.
 *
 * They do not carry the changes: those are in the `fileChange` item of the `item/started` that
 * came before, with the same `itemId` (keep them to show on the card). `grantRoot`, when set, is
 * a root under which the agent asks to be allowed writes for the rest of the session.
 */
export const FileChangeApprovalParams = Schema.Struct({
  threadId: Schema.String,
  turnId: Schema.String,
  itemId: Schema.String,
  reason: Nullable(Schema.String),
  grantRoot: Nullable(Schema.String)
})
export type FileChangeApprovalParams = typeof FileChangeApprovalParams.Type

/**
 * The params of `item/permissions/requestApproval`, codex asking to widen the sandbox.
 *
 * `permissions` is kept as received and checked only when an answer is built (see
 * `PermissionsGrant`); the wire shape is like `{network, fileSystem:{read, write, entries}}`.
 * No `item/started` or `item/completed` is sent for this tool.
 */
export const PermissionsApprovalParams = Schema.Struct({
  threadId: Schema.String,
  turnId: Schema.String,
  itemId: Schema.String,
  cwd: Schema.String,
  reason: Nullable(Schema.String),
  permissions: Schema.Unknown
})
export type PermissionsApprovalParams = typeof PermissionsApprovalParams.Type

/**
 * The params of `mcpServer/elicitation/request`, an MCP server asking the person for something.
 *
 * `mode` is `"form"` (fields described by the JSON Schema `requestedSchema`) or `"url"` (a page to
 * open at `url`). codex also gates a call of an MCP tool not marked read-only with one of these:
 * `_meta.codex_approval_kind` is `"mcp_tool_call"` and the form has no fields; declining it fails
 * the tool call. `_meta.persist` lists the persistence levels offered (see `persistOffered`).
 * `turnId` may be absent or null.
 */
export const ElicitationParams = Schema.Struct({
  threadId: Schema.String,
  turnId: Nullable(Schema.String),
  serverName: Schema.String,
  mode: Schema.String,
  message: Schema.String,
  requestedSchema: Schema.optional(Schema.Unknown),
  url: Schema.optional(Schema.String),
  elicitationId: Schema.optional(Schema.String),
  _meta: Nullable(UnknownRecord)
})
export type ElicitationParams = typeof ElicitationParams.Type

/**
 * One question of `item/tool/requestUserInput`; its `id` keys the answer.
 *
 * `options` are the choices offered, when there are any (null or absent otherwise); `isOther` and
 * `isSecret` are kept as the server sends them.
 */
export const UserInputQuestion = Schema.Struct({
  id: Schema.String,
  header: Schema.String,
  question: Schema.String,
  isOther: Schema.optional(Schema.Boolean),
  isSecret: Schema.optional(Schema.Boolean),
  options: Nullable(BoundedArray(Schema.Struct({ label: Schema.String, description: Schema.String })))
})
export type UserInputQuestion = typeof UserInputQuestion.Type

/**
 * The params of `item/tool/requestUserInput`, questions the model asks the person.
 *
 * `isBlocking` is false when the tool was enabled with `default_mode_request_user_input`; codex
 * never resolves a non-blocking question by itself.
 */
export const UserInputParams = Schema.Struct({
  threadId: Schema.String,
  turnId: Schema.String,
  itemId: Schema.String,
  isBlocking: Schema.optional(Schema.Boolean),
  questions: BoundedArray(UserInputQuestion)
})
export type UserInputParams = typeof UserInputParams.Type

/**
 * The params of `item/tool/call`, a call of a dynamic tool the client declared on `thread/start`.
 *
 * Needs `experimentalApi`; no `serverRequest/resolved` follows this request.
 */
export const DynamicToolCallParams = Schema.Struct({
  threadId: Schema.String,
  turnId: Schema.String,
  callId: Schema.String,
  namespace: Nullable(Schema.String),
  tool: Schema.String,
  arguments: Schema.Unknown
})
export type DynamicToolCallParams = typeof DynamicToolCallParams.Type

/**
 * The params of `account/chatgptAuthTokens/refresh`, sent on a 401 with ChatGPT-token auth.
 *
 * The server waits 10 s for an answer. Warden only refuses it, with the `refusedError` frame.
 */
export const TokenRefreshParams = Schema.Struct({
  reason: Schema.Unknown,
  previousAccountId: Nullable(Schema.String)
})
/**
 * The params of `attestation/generate`, which are none.
 *
 * Sent only to a client that asked for it (`capabilities.requestAttestation`); Warden only refuses
 * it, with the `refusedError` frame.
 */
export const AttestationParams = Schema.Struct({})

/**
 * The params of the legacy v1 `applyPatchApproval`, keyed by conversation and call, not by thread.
 *
 * No client method starts a v1 conversation on 0.171.0, so it could not be triggered there.
 */
export const LegacyApplyPatchParams = Schema.Struct({
  conversationId: Schema.String,
  callId: Schema.String,
  fileChanges: Schema.Unknown,
  reason: Nullable(Schema.String),
  grantRoot: Nullable(Schema.String)
})
/**
 * The params of the legacy v1 `execCommandApproval`, with the command as an argv list.
 *
 * Keyed by conversation and call, not by thread; not triggerable on 0.171.0.
 */
export const LegacyExecParams = Schema.Struct({
  conversationId: Schema.String,
  callId: Schema.String,
  command: StringArray,
  cwd: Schema.String,
  reason: Nullable(Schema.String),
  parsedCmd: Schema.optional(Schema.Unknown)
})

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

// ---------------------------------------------------------------------------------------------
// Decoded requests

/**
 * A server request whose method is known and whose params decoded, typed by its `method`.
 *
 * Narrow on `method` to get that method's params type.
 */
export type ServerRequest = {
  readonly [M in ServerRequestMethod]: {
    readonly _tag: "Known"
    readonly id: RequestId
    readonly method: M
    readonly params: ParamsOf[M]
  }
}[ServerRequestMethod]

/**
 * What `decode` makes of a server request, tagged `Known`, `Unknown` or `Malformed`.
 *
 * Every one of them must still be answered (codex waits forever): `refusalFor` gives the answer
 * for each.
 */
export type DecodedRequest =
  | ServerRequest
  /** A method outside the union: answered with the error frame. */
  | { readonly _tag: "Unknown"; readonly id: RequestId; readonly method: string; readonly params: unknown }
  /** A known method whose params do not decode: nobody can be shown it; refused at once. */
  | {
      readonly _tag: "Malformed"
      readonly id: RequestId
      readonly method: ServerRequestMethod
      readonly params: unknown
      readonly detail: string
    }

const decoders = Object.fromEntries(
  ServerRequestMethods.map((m) => [
    m,
    Schema.decodeUnknownEither(Specs[m].params as Schema.Schema<unknown, unknown>, { onExcessProperty: "ignore" })
  ])
) as Record<ServerRequestMethod, (u: unknown) => Either.Either<unknown, import("effect/ParseResult").ParseError>>

const fastDecoders = Object.fromEntries(
  ServerRequestMethods.map((m) => [m, FastDecode.compile(Specs[m].params.ast)])
) as Record<ServerRequestMethod, FastDecode.Decoder | undefined>

/**
 * Decodes a server request's method and params into a `DecodedRequest`; it never fails.
 *
 * A method outside `ServerRequestMethods` is `Unknown`. Params that do not match the method's
 * schema make it `Malformed`, whose `detail` names the failing field and what was expected, never
 * the value (a token may sit there). Missing params decode as `{}`; unknown keys are ignored.
 *
 * @example
 * ```ts
 * import { Either } from "effect"
 * import { Decision, ServerRequests } from "@warden/protocol"
 *
 * const request = ServerRequests.decode(message.id, message.method, message.params)
 * const reply = request._tag === "Known"
 *   ? Either.getOrElse(ServerRequests.answerFor(request, Decision.Accept), () => ServerRequests.refusalFor(request))
 *   : ServerRequests.refusalFor(request)
 * const frame = ServerRequests.replyFrame(request.id, reply)
 * ```
 */
export const decode = (id: RequestId, method: string, params: unknown): DecodedRequest => {
  if (!isServerRequestMethod(method)) return { _tag: "Unknown", id, method, params }
  const input = params ?? {}
  // The same answer as the Schema decoder's, faster, for the shapes it covers; otherwise (and for
  // every input it does not accept) the Schema decoder decides (internal/FastDecode.ts).
  const fast = fastDecoders[method]
  if (fast !== undefined) {
    const out = fast(input)
    if (out !== FastDecode.Miss) return { _tag: "Known", id, method, params: out } as ServerRequest
  }
  const decoded = decoders[method](input)
  // The detail names the failing fields and the expected types, never the values (a token may sit there).
  if (Either.isLeft(decoded)) return { _tag: "Malformed", id, method, params, detail: describeParseError(decoded.left) }
  return { _tag: "Known", id, method, params: decoded.right } as ServerRequest
}

/**
 * The refusal for any decoded request, the answer that keeps the turn going.
 *
 * For a `Known` or `Malformed` request it is the method's refusal (see `Specs`); for an `Unknown`
 * method, the `unknownMethodError` frame. It is what Warden writes when nobody decided (a deadline,
 * a closed scope, a failed handler).
 */
export const refusalFor = (request: DecodedRequest): Reply =>
  request._tag === "Unknown"
    ? { _tag: "Error", error: unknownMethodError(request.method) }
    : Specs[request.method].refusal

/**
 * Encodes a decision as the answer to a known request, or says why it cannot be expressed.
 *
 * Fails (`Left`, a reason a person can read) when the method has no word for the decision
 * (`Answers` to a command approval), when the request did not offer it (`accept` missing from a
 * command's `availableDecisions`, an amendment other than the one proposed, a `persist` level not
 * offered), or when its payload does not check out (a grant wider than asked, form content the
 * form does not ask for, more than 32 answers or one longer than 4096 characters to a question,
 * a tool result content item that is not `inputText`, `inputImage` or `inputAudio`). Never
 * coerces a decision into a nearby word. `Decline` always succeeds.
 *
 * @example
 * ```ts
 * import { Either } from "effect"
 * import { Decision, ServerRequests } from "@warden/protocol"
 *
 * const encoded = ServerRequests.answerFor(request, Decision.AcceptForSession)
 * if (Either.isLeft(encoded)) console.error(encoded.left) // "acceptForSession is not offered by this request"
 * ```
 */
export const answerFor = (request: ServerRequest, decision: Decision): Either.Either<Reply, string> =>
  (Specs[request.method] as MethodSpec<unknown>).answer(request.params, decision)

/**
 * The decision tags a known request offers a person; `Decline` is always among them.
 *
 * A command approval offers `Accept` and `AcceptForSession` only where `availableDecisions` lists
 * them (or is absent), `AcceptWithExecpolicyAmendment` where an amendment is proposed and
 * offered, `ApplyNetworkPolicyAmendment` where one is proposed, then `Decline` and `Cancel`. An
 * elicitation offers `Accept` only for a URL or a form without fields (a form needs an
 * `Elicitation` decision with content). The token refresh and attestation offer only `Decline`.
 */
export const offersFor = (request: ServerRequest): ReadonlyArray<DecisionTag> =>
  (Specs[request.method] as MethodSpec<unknown>).offers(request.params)

/**
 * The thread a decoded request belongs to, or undefined when it names none.
 *
 * For a `Known` request the method's spec says (the token refresh, attestation and the legacy v1
 * requests name no thread); for `Unknown` and `Malformed` ones, a string `params.threadId` if
 * there is one. A supervisor routes the request to that thread's worker with it.
 */
export const threadIdFor = (request: DecodedRequest): string | undefined => {
  if (request._tag === "Known") return (Specs[request.method] as MethodSpec<unknown>).threadId(request.params)
  const params = request.params
  if (typeof params === "object" && params !== null) {
    const threadId = (params as Record<string, unknown>)["threadId"]
    return typeof threadId === "string" ? threadId : undefined
  }
  return undefined
}

/**
 * The turn a decoded request belongs to, or undefined when it names none.
 *
 * Read like `threadIdFor`, from the spec or a string `params.turnId`.
 */
export const turnIdFor = (request: DecodedRequest): string | undefined => {
  if (request._tag === "Known") return (Specs[request.method] as MethodSpec<unknown>).turnId(request.params)
  const params = request.params
  if (typeof params === "object" && params !== null) {
    const turnId = (params as Record<string, unknown>)["turnId"]
    return typeof turnId === "string" ? turnId : undefined
  }
  return undefined
}
