/**
 * The steps a `ScriptedModel` serves, one step per sampling request (one `POST /v1/responses`).
 *
 * Steps are plain, Schema-validated data so a script can also be written as JSON; the constructors
 * below are the usual way to build them.
 *
 * Measured on codex 0.171.0 (see /work/shared/reference/codex-app-server-protocol.md):
 * - `exec_command {cmd, sandbox_permissions:"require_escalated", justification}` under
 *   `approvalPolicy:"on-request"` raises `item/commandExecution/requestApproval`;
 * - an `apply_patch <<'EOF' ... EOF` heredoc sent through `exec_command` is intercepted as a
 *   `fileChange` item (approval when it writes outside the writable roots);
 * - `request_permissions` (feature `request_permissions_tool`) raises
 *   `item/permissions/requestApproval`;
 * - `request_user_input` (feature `default_mode_request_user_input`) raises
 *   `item/tool/requestUserInput`;
 * - an MCP tool is called as a function call with `namespace: "mcp__<server>"` and the tool's own name.
 */
import { Schema } from "effect"

const NonNegativeInt = Schema.Int.pipe(Schema.nonNegative())
const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** A `function_call` output item. `arguments`: an object is JSON-encoded; a string is sent verbatim
 * (so a test can send malformed arguments on purpose). `callId` defaults to `call_<seq>_<index>`. */
export const FunctionCall = Schema.TaggedStruct("FunctionCall", {
  name: Schema.NonEmptyString,
  arguments: Schema.Union(Schema.String, JsonObject),
  namespace: Schema.optional(Schema.NonEmptyString),
  callId: Schema.optional(Schema.NonEmptyString)
})
export type FunctionCall = typeof FunctionCall.Type

/** A `custom_tool_call` output item (free-form `input`). */
export const CustomToolCall = Schema.TaggedStruct("CustomToolCall", {
  name: Schema.NonEmptyString,
  input: Schema.String,
  callId: Schema.optional(Schema.NonEmptyString)
})
export type CustomToolCall = typeof CustomToolCall.Type

/** An assistant `message`. With `stream: true` the text is also sent as `response.output_text.delta`
 * events of `chunkSize` characters (default 8), `chunkDelayMs` apart (default 0), between
 * `response.output_item.added` and `response.output_item.done`. `id` defaults to `msg_<seq>_<index>`. */
export const Message = Schema.TaggedStruct("Message", {
  text: Schema.String,
  stream: Schema.optional(Schema.Boolean),
  chunkSize: Schema.optional(Schema.Int.pipe(Schema.positive())),
  chunkDelayMs: Schema.optional(NonNegativeInt),
  id: Schema.optional(Schema.NonEmptyString)
})
export type Message = typeof Message.Type

/** Any other output item, sent as given (such as a `reasoning` item). */
export const RawItem = Schema.TaggedStruct("RawItem", { item: JsonObject })
export type RawItem = typeof RawItem.Type

/** One output item of a `Reply` (a function call, a custom tool call, a message, or a raw item). */
export const OutputItem = Schema.Union(FunctionCall, CustomToolCall, Message, RawItem)
export type OutputItem = typeof OutputItem.Type

/** Token usage sent with `response.completed` (default 10 in, 5 out, 15 total). */
export const Usage = Schema.Struct({
  input_tokens: NonNegativeInt,
  output_tokens: NonNegativeInt,
  total_tokens: NonNegativeInt
})
export type Usage = typeof Usage.Type

/** `response.created`, one `response.output_item.done` per item, `response.completed` with usage. */
export const Reply = Schema.TaggedStruct("Reply", {
  items: Schema.NonEmptyArray(OutputItem),
  usage: Schema.optional(Usage),
  delayMs: Schema.optional(NonNegativeInt)
})
export type Reply = typeof Reply.Type

/** Headers and `response.created`, then nothing until the client goes away or the model's scope
 * closes (which destroys the socket). */
export const Stall = Schema.TaggedStruct("Stall", {
  delayMs: Schema.optional(NonNegativeInt)
})
export type Stall = typeof Stall.Type

/** A plain HTTP error status with an OpenAI-style JSON error body. */
export const HttpError = Schema.TaggedStruct("HttpError", {
  status: Schema.Int.pipe(Schema.between(400, 599)),
  message: Schema.optional(Schema.String),
  delayMs: Schema.optional(NonNegativeInt)
})
export type HttpError = typeof HttpError.Type

/** `response.created` (and, if `partialText` is non-empty, a started message with that text as a
 * delta), then the socket is destroyed without `response.completed`. */
export const Drop = Schema.TaggedStruct("Drop", {
  partialText: Schema.optional(Schema.String),
  delayMs: Schema.optional(NonNegativeInt)
})
export type Drop = typeof Drop.Type

/** `response.created` then `response.failed {response:{id, error:{code, message}}}`. */
export const Failed = Schema.TaggedStruct("Failed", {
  code: Schema.optional(Schema.String),
  message: Schema.String,
  delayMs: Schema.optional(NonNegativeInt)
})
export type Failed = typeof Failed.Type

/**
 * One step, how one sampling request is answered. A `Reply` completes normally; `Stall`,
 * `HttpError`, `Drop` and `Failed` are the ways a model fails. Each may wait `delayMs` (real time).
 */
export const Step = Schema.Union(Reply, Stall, HttpError, Drop, Failed)
export type Step = typeof Step.Type

// ---------------------------------------------------------------------------------------------
// Constructors

const one = (item: OutputItem): Reply => ({ _tag: "Reply", items: [item] })

/** Any function call. */
export const functionCall = (
  name: string,
  args: Readonly<Record<string, unknown>> | string,
  options?: { readonly namespace?: string; readonly callId?: string }
): Reply =>
  one({
    _tag: "FunctionCall",
    name,
    arguments: args,
    ...(options?.namespace === undefined ? {} : { namespace: options.namespace }),
    ...(options?.callId === undefined ? {} : { callId: options.callId })
  })

/** The arguments of `execCommand`, the command line and how codex is asked to run it. */
export interface ExecCommandArgs {
  /** The command line, run by codex's shell. */
  readonly cmd: string
  /** `sandbox_permissions: "require_escalated"`: under on-request this asks for approval. */
  readonly escalated?: boolean
  /** Shown to the person as the approval's `reason`. */
  readonly justification?: string
  readonly workdir?: string
  /** Proposed reusable approval prefix (only meaningful with `escalated`). */
  readonly prefixRule?: ReadonlyArray<string>
  /** `yield_time_ms`: how long codex waits for output before the call returns. */
  readonly yieldTimeMs?: number
  /** The function call's id (default `call_<seq>_<index>`). */
  readonly callId?: string
}

/** `exec_command {cmd, sandbox_permissions?, justification?, workdir?, prefix_rule?, yield_time_ms?}`. */
export const execCommand = (args: ExecCommandArgs): Reply =>
  functionCall(
    "exec_command",
    {
      cmd: args.cmd,
      ...(args.escalated === true ? { sandbox_permissions: "require_escalated" } : {}),
      ...(args.justification === undefined ? {} : { justification: args.justification }),
      ...(args.workdir === undefined ? {} : { workdir: args.workdir }),
      ...(args.prefixRule === undefined ? {} : { prefix_rule: [...args.prefixRule] }),
      ...(args.yieldTimeMs === undefined ? {} : { yield_time_ms: args.yieldTimeMs })
    },
    args.callId === undefined ? undefined : { callId: args.callId }
  )

/** A patch adding `path` with `content`, sent the way codex 0.171.0 accepts it (an
 * `apply_patch <<'EOF'` heredoc through `exec_command`, intercepted as a `fileChange` item). */
export const applyPatch = (
  path: string,
  content: string,
  options?: { readonly callId?: string; readonly workdir?: string }
): Reply => {
  const lines = content.split("\n")
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop()
  const patch = ["*** Begin Patch", `*** Add File: ${path}`, ...lines.map((l) => `+${l}`), "*** End Patch"].join("\n")
  return execCommand({
    cmd: `apply_patch <<'EOF'\n${patch}\nEOF\n`,
    ...(options?.callId === undefined ? {} : { callId: options.callId }),
    ...(options?.workdir === undefined ? {} : { workdir: options.workdir })
  })
}

/** `request_permissions {reason, permissions:{file_system:{write, read?}, network?}}` (needs the
 * `request_permissions_tool` feature). */
export const requestPermissions = (args: {
  readonly reason: string
  readonly write?: ReadonlyArray<string>
  readonly read?: ReadonlyArray<string>
  readonly network?: boolean
  readonly callId?: string
}): Reply =>
  functionCall(
    "request_permissions",
    {
      reason: args.reason,
      permissions: {
        ...(args.write === undefined && args.read === undefined
          ? {}
          : {
              file_system: {
                ...(args.write === undefined ? {} : { write: [...args.write] }),
                ...(args.read === undefined ? {} : { read: [...args.read] })
              }
            }),
        ...(args.network === undefined ? {} : { network: { enabled: args.network } })
      }
    },
    args.callId === undefined ? undefined : { callId: args.callId }
  )

/** One question of `requestUserInput`, with its options. */
export interface Question {
  readonly id: string
  readonly header: string
  readonly question: string
  readonly options: ReadonlyArray<{ readonly label: string; readonly description: string }>
}

/** `request_user_input {questions}` (needs `default_mode_request_user_input`, or plan mode). */
export const requestUserInput = (questions: ReadonlyArray<Question>, options?: { readonly callId?: string }): Reply =>
  functionCall(
    "request_user_input",
    { questions: questions.map((q) => ({ ...q, options: q.options.map((o) => ({ ...o })) })) },
    options
  )

/** A call to tool `tool` of the MCP server registered as `server` (namespace `mcp__<server>`). */
export const mcpCall = (
  server: string,
  tool: string,
  args: Readonly<Record<string, unknown>> = {},
  options?: { readonly callId?: string }
): Reply => functionCall(tool, args, { namespace: `mcp__${server}`, ...options })

/** A `custom_tool_call`. */
export const customToolCall = (name: string, input: string, options?: { readonly callId?: string }): Reply =>
  one({ _tag: "CustomToolCall", name, input, ...(options?.callId === undefined ? {} : { callId: options.callId }) })

/** An assistant message (with `stream`, also sent as output_text deltas). */
export const message = (
  text: string,
  options?: {
    readonly stream?: boolean
    readonly chunkSize?: number
    readonly chunkDelayMs?: number
    readonly id?: string
  }
): Reply =>
  one({
    _tag: "Message",
    text,
    ...(options?.stream === undefined ? {} : { stream: options.stream }),
    ...(options?.chunkSize === undefined ? {} : { chunkSize: options.chunkSize }),
    ...(options?.chunkDelayMs === undefined ? {} : { chunkDelayMs: options.chunkDelayMs }),
    ...(options?.id === undefined ? {} : { id: options.id })
  })

/** An output item sent as given. */
export const raw = (item: Readonly<Record<string, unknown>>): Reply => one({ _tag: "RawItem", item: { ...item } })

/** Several items in one response (such as two parallel function calls), in order. */
export const reply = (...replies: readonly [Reply, ...Array<Reply>]): Reply => {
  const [first, ...rest] = replies.flatMap((r) => r.items)
  return { _tag: "Reply", items: [first!, ...rest] }
}

/** A stream that never finishes (until the client disconnects or the model's scope closes). */
export const stall = (): Stall => ({ _tag: "Stall" })

/** An HTTP error status (default 500). */
export const httpError = (status = 500, message?: string): HttpError => ({
  _tag: "HttpError",
  status,
  ...(message === undefined ? {} : { message })
})

/** A stream cut mid-way. */
export const drop = (partialText?: string): Drop => ({
  _tag: "Drop",
  ...(partialText === undefined ? {} : { partialText })
})

/** `response.failed`. */
export const failed = (message: string, code?: string): Failed => ({
  _tag: "Failed",
  message,
  ...(code === undefined ? {} : { code })
})

/** The same step, answered only after `ms` milliseconds (real time). */
export const delayed = <S extends Step>(ms: number, step: S): S => ({ ...step, delayMs: ms })

/** `n` copies of a step (such as an HTTP 500 for every retry). */
export const times = (n: number, step: Step): Array<Step> => Array.from({ length: n }, () => step)
