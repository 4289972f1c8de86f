/**
 * What codex sends: the server request methods Warden knows and their lenient params schemas.
 * Public through `ServerRequests`.
 */
import { Schema } from "effect"

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
