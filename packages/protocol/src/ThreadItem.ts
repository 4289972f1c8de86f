/**
 * The items of a turn (`item/started`, `item/completed`, `turn/completed.turn.items`), decoded by
 * their wire `type`. Field names follow the wire; absent optional fields become `null`.
 *
 * Decoding an item never fails: a `type` this module does not know, or a known `type` whose shape
 * drifted, becomes `{type: "unknown", itemType, raw, issue}` so the lifecycle event still arrives.
 */
import { Either, ParseResult, Schema } from "effect"
import * as OpenEnum from "./OpenEnum.js"

/**
 * Tool-like item statuses of 0.171.0, four for commands and file changes plus `interrupted` for collab calls.
 */
export const ItemStatuses = ["inProgress", "completed", "failed", "declined", "interrupted"] as const
/**
 * The status of a tool-like item, with a value added since decoding as `"unknown"`.
 */
export const ItemStatus = OpenEnum.make(...ItemStatuses)
export type ItemStatus = OpenEnum.Open<(typeof ItemStatuses)[number]>

/** The kinds of change to one file in 0.171.0; any other decodes as `"unknown"`. */
export const PatchChangeKinds = ["add", "delete", "update"] as const
/** What a `subAgentActivity` item reports a sub-agent did, in 0.171.0. */
export const SubAgentActivityKinds = ["started", "interacted", "interrupted", "completed"] as const
/**
 * The phases an agent message may be marked with; `final_answer` marks the turn's declared answer.
 */
export const MessagePhases = ["commentary", "partial_answer", "final_answer"] as const

const nullable = <A, I>(schema: Schema.Schema<A, I>) =>
  Schema.optionalWith(Schema.NullOr(schema), { default: () => null })
const anyValue = Schema.optionalWith(Schema.Unknown, { default: () => null })

/**
 * One file of a fileChange item or of `item/fileChange/patchUpdated`.
 *
 * The wire's `kind: {type, move_path}` is read into `kind` (an open enum of `PatchChangeKinds`)
 * and `movePath` (null unless the file moves).
 */
export const FileChange = Schema.transform(
  Schema.Struct({
    path: Schema.String,
    kind: Schema.Struct({ type: Schema.String, move_path: nullable(Schema.String) }),
    diff: Schema.String
  }),
  Schema.Struct({
    path: Schema.String,
    kind: Schema.Literal(...PatchChangeKinds, "unknown"),
    movePath: Schema.NullOr(Schema.String),
    diff: Schema.String
  }),
  {
    strict: true,
    decode: (wire) => ({
      path: wire.path,
      kind: OpenEnum.of(PatchChangeKinds, wire.kind.type),
      movePath: wire.kind.move_path,
      diff: wire.diff
    }),
    encode: (change) => ({
      path: change.path,
      kind: { type: change.kind, move_path: change.movePath },
      diff: change.diff
    })
  }
)
export type FileChange = Schema.Schema.Type<typeof FileChange>

/** The person's input to a turn, as an item (`userMessage`); `content` is kept raw. */
export const UserMessage = Schema.Struct({
  type: Schema.Literal("userMessage"),
  id: Schema.String,
  content: Schema.optionalWith(Schema.Array(Schema.Unknown), { default: () => [] })
})

/** A message from the agent (`agentMessage`), with its text. */
export const AgentMessage = Schema.Struct({
  type: Schema.Literal("agentMessage"),
  id: Schema.String,
  text: Schema.String,
  /** `final_answer` marks the turn's declared answer; providers do not always set it (null). */
  phase: nullable(OpenEnum.make(...MessagePhases))
})

/** The model's reasoning (`reasoning`), as summary parts and raw content. */
export const Reasoning = Schema.Struct({
  type: Schema.Literal("reasoning"),
  id: Schema.String,
  summary: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  content: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] })
})

/** A plan the agent wrote (`plan`), as text. */
export const Plan = Schema.Struct({
  type: Schema.Literal("plan"),
  id: Schema.String,
  text: Schema.String
})

/**
 * A command the agent runs or asked to run (`commandExecution`).
 *
 * It ends `declined` when its approval was refused, and `failed` when the approval request got an
 * error frame.
 */
export const CommandExecution = Schema.Struct({
  type: Schema.Literal("commandExecution"),
  id: Schema.String,
  status: ItemStatus,
  command: Schema.String,
  cwd: Schema.String,
  processId: nullable(Schema.String),
  exitCode: nullable(Schema.Number),
  /** The complete output; `outputDelta` may miss the first chunk (measured on 0.171.0). */
  aggregatedOutput: nullable(Schema.String),
  durationMs: nullable(Schema.Number)
})

/**
 * A patch the agent applies or asked to apply (`fileChange`), one `FileChange` per file.
 *
 * The changes a file change approval is about are in this item's `item/started`.
 */
export const FileChangeItem = Schema.Struct({
  type: Schema.Literal("fileChange"),
  id: Schema.String,
  status: ItemStatus,
  changes: Schema.Array(FileChange)
})

/**
 * A call of an MCP server's tool (`mcpToolCall`).
 *
 * codex gates a tool not marked read-only with an MCP elicitation first; declining that fails
 * this item.
 */
export const McpToolCall = Schema.Struct({
  type: Schema.Literal("mcpToolCall"),
  id: Schema.String,
  status: ItemStatus,
  server: Schema.String,
  tool: Schema.String,
  arguments: anyValue,
  result: anyValue,
  error: nullable(Schema.Struct({ message: Schema.String })),
  durationMs: nullable(Schema.Number)
})

/** A call of a dynamic tool the client declared on `thread/start` (`dynamicToolCall`). */
export const DynamicToolCall = Schema.Struct({
  type: Schema.Literal("dynamicToolCall"),
  id: Schema.String,
  status: ItemStatus,
  tool: Schema.String,
  namespace: nullable(Schema.String),
  arguments: anyValue,
  contentItems: nullable(Schema.Array(Schema.Unknown)),
  success: nullable(Schema.Boolean),
  durationMs: nullable(Schema.Number)
})

/**
 * A call of a multi-agent tool (`collabAgentToolCall`), such as spawning or messaging a sub-agent.
 *
 * `tool` is kept verbatim; `agentsStates` holds each agent's status and message, keyed as the
 * server sends them.
 */
export const CollabAgentToolCall = Schema.Struct({
  type: Schema.Literal("collabAgentToolCall"),
  id: Schema.String,
  status: ItemStatus,
  /** spawnAgent, sendInput, wait, closeAgent, ... (kept verbatim). */
  tool: Schema.String,
  senderThreadId: Schema.String,
  receiverThreadIds: Schema.Array(Schema.String),
  prompt: nullable(Schema.String),
  model: nullable(Schema.String),
  agentsStates: Schema.optionalWith(
    Schema.Record({
      key: Schema.String,
      value: Schema.Struct({ status: Schema.String, message: nullable(Schema.String) })
    }),
    { default: () => ({}) }
  )
})

/**
 * News of a sub-agent codex spawned (`subAgentActivity`), read from the wire field `kind` into `activity`.
 *
 * The sub-agent's own turns and items arrive under its own thread id, `agentThreadId`.
 */
export const SubAgentActivity = Schema.Struct({
  type: Schema.Literal("subAgentActivity"),
  id: Schema.String,
  activity: Schema.propertySignature(OpenEnum.make(...SubAgentActivityKinds)).pipe(Schema.fromKey("kind")),
  agentThreadId: Schema.String,
  agentPath: Schema.String,
  model: nullable(Schema.String)
})

/** A web search the agent ran (`webSearch`), with its query. */
export const WebSearch = Schema.Struct({
  type: Schema.Literal("webSearch"),
  id: Schema.String,
  query: Schema.String
})

/** A compaction of the thread's context (`contextCompaction`). */
export const ContextCompaction = Schema.Struct({
  type: Schema.Literal("contextCompaction"),
  id: Schema.String
})

/**
 * An item this module could not decode into its own shape, kept raw so its lifecycle still arrives.
 *
 * Either its `type` is new (`issue` null) or its known shape drifted (`issue` says how).
 */
export interface UnknownItem {
  readonly type: "unknown"
  /** The item's id when it had a string one. */
  readonly id: string | null
  /** The wire `type` (a kind this module does not know, or a known one that failed to decode). */
  readonly itemType: string
  readonly raw: unknown
  /** Why a known kind did not decode; null for a kind that is simply new. */
  readonly issue: string | null
}

/**
 * Every item `decode` can produce, told apart by `type`.
 *
 * @example
 * ```ts
 * import { ThreadItem } from "@warden/protocol"
 *
 * const item = ThreadItem.decode(params.item)
 * if (item.type === "commandExecution") console.log(item.command, item.exitCode, item.aggregatedOutput)
 * ```
 */
export type ThreadItem =
  | Schema.Schema.Type<typeof UserMessage>
  | Schema.Schema.Type<typeof AgentMessage>
  | Schema.Schema.Type<typeof Reasoning>
  | Schema.Schema.Type<typeof Plan>
  | Schema.Schema.Type<typeof CommandExecution>
  | Schema.Schema.Type<typeof FileChangeItem>
  | Schema.Schema.Type<typeof McpToolCall>
  | Schema.Schema.Type<typeof DynamicToolCall>
  | Schema.Schema.Type<typeof CollabAgentToolCall>
  | Schema.Schema.Type<typeof SubAgentActivity>
  | Schema.Schema.Type<typeof WebSearch>
  | Schema.Schema.Type<typeof ContextCompaction>
  | UnknownItem

/** The `type` of a `ThreadItem`, `"unknown"` included. */
export type ItemType = ThreadItem["type"]

type Decoder = (raw: unknown) => Either.Either<ThreadItem, ParseResult.ParseError>
const decoderOf = <A extends ThreadItem, I>(schema: Schema.Schema<A, I>): Decoder =>
  Schema.decodeUnknownEither(schema, { errors: "all" })

const decoders: ReadonlyMap<string, Decoder> = new Map([
  ["userMessage", decoderOf(UserMessage)],
  ["agentMessage", decoderOf(AgentMessage)],
  ["reasoning", decoderOf(Reasoning)],
  ["plan", decoderOf(Plan)],
  ["commandExecution", decoderOf(CommandExecution)],
  ["fileChange", decoderOf(FileChangeItem)],
  ["mcpToolCall", decoderOf(McpToolCall)],
  ["dynamicToolCall", decoderOf(DynamicToolCall)],
  ["collabAgentToolCall", decoderOf(CollabAgentToolCall)],
  ["subAgentActivity", decoderOf(SubAgentActivity)],
  ["webSearch", decoderOf(WebSearch)],
  ["contextCompaction", decoderOf(ContextCompaction)]
])

/** The wire item types decoded into their own shape (the rest become `unknown`). */
export const KnownItemTypes: ReadonlyArray<string> = Array.from(decoders.keys())

const fieldOf = (raw: unknown, key: string): unknown =>
  typeof raw === "object" && raw !== null ? (raw as { readonly [k: string]: unknown })[key] : undefined

/**
 * Decodes one wire item by its `type` into a `ThreadItem`; it never fails.
 *
 * A `type` not in `KnownItemTypes` (or none) and a known `type` whose shape drifted both become an
 * `UnknownItem`; see the module comment.
 */
export const decode = (raw: unknown): ThreadItem => {
  const itemType = fieldOf(raw, "type")
  const id = fieldOf(raw, "id")
  const unknownItem = (issue: string | null): UnknownItem => ({
    type: "unknown",
    id: typeof id === "string" ? id : null,
    itemType: typeof itemType === "string" ? itemType : "",
    raw,
    issue
  })
  const decoder = typeof itemType === "string" ? decoders.get(itemType) : undefined
  if (decoder === undefined) return unknownItem(typeof itemType === "string" ? null : "item has no string `type`")
  return Either.match(decoder(raw), {
    onLeft: (error) => unknownItem(ParseResult.TreeFormatter.formatErrorSync(error)),
    onRight: (item) => item
  })
}

/** The item's status where its kind has one (tool-like items), else null. */
export const statusOf = (item: ThreadItem): ItemStatus | null => ("status" in item ? item.status : null)
