/**
 * Server notifications translated into typed domain events.
 *
 * - `threadIdOf` runs on the read loop for every frame: two property reads, no Schema.
 * - `toEvent` runs lazily at the thread. It never throws and never fails: an unknown method is
 *   `Other {method, params}`; a known method whose params do not decode is
 *   `Malformed {method, params, issue}` (drift a supervisor should log, and, for `turn/completed`,
 *   treat as the end of the turn).
 *
 * Params may carry unknown keys; the frame's top-level `emittedAtMs` is not part of params.
 * Several notifications carry no thread (account, config, process news): an ordinary channel.
 * A sub-agent codex spawns streams its own turns/items/usage under its own thread id; sub-agent
 * activity itself arrives as `subAgentActivity` and `collabAgentToolCall` items (0.171.0 has no
 * separate notification for it).
 */
import { Either, ParseResult, Schema } from "effect"
import type { RequestId } from "./JsonRpc.js"
import * as OpenEnum from "./OpenEnum.js"
import { Thread, ThreadStatus, ThreadStatusFromWire } from "./Thread.js"
import * as ThreadItem from "./ThreadItem.js"
import { type TurnError, TurnStatus, turnErrorOf } from "./Turn.js"

// ---------------------------------------------------------------------------------------------
// The hot path

/**
 * The thread a frame belongs to: `params.threadId`, or `params.thread.id` for `thread/started`.
 * Works for notifications and server requests alike; undefined when the frame names no thread.
 */
export const threadIdOf = (method: string, params: unknown): string | undefined => {
  if (typeof params !== "object" || params === null) return undefined
  if (method === "thread/started") {
    const thread = (params as { readonly thread?: unknown }).thread
    if (typeof thread !== "object" || thread === null) return undefined
    const id = (thread as { readonly id?: unknown }).id
    return typeof id === "string" ? id : undefined
  }
  const id = (params as { readonly threadId?: unknown }).threadId
  return typeof id === "string" ? id : undefined
}

// ---------------------------------------------------------------------------------------------
// Domain events

export interface TokenBreakdown {
  readonly totalTokens: number
  readonly inputTokens: number
  /** Already included in `inputTokens`. */
  readonly cachedInputTokens: number
  readonly cacheWriteInputTokens: number
  readonly outputTokens: number
  readonly reasoningOutputTokens: number
}

export interface RateLimitWindow {
  readonly usedPercent: number
  readonly windowDurationMins: number | null
  /** Unix seconds. */
  readonly resetsAt: number | null
}

/** A sparse rolling update: null means "not in this update", not "cleared". */
export interface RateLimitSnapshot {
  readonly limitId: string | null
  readonly limitName: string | null
  readonly primary: RateLimitWindow | null
  readonly secondary: RateLimitWindow | null
  readonly credits: { readonly hasCredits: boolean; readonly unlimited: boolean; readonly balance: string | null } | null
  readonly planType: string | null
  readonly rateLimitReachedType: string | null
}

export const PlanStepStatuses = ["pending", "inProgress", "completed"] as const
export interface PlanStep {
  readonly step: string
  readonly status: OpenEnum.Open<(typeof PlanStepStatuses)[number]>
}

interface InTurn {
  readonly threadId: string
  readonly turnId: string
}

export interface AgentMessageDelta extends InTurn {
  readonly _tag: "AgentMessageDelta"
  readonly itemId: string
  readonly delta: string
}
/** `part` is `summary` (item/reasoning/summaryTextDelta) or `text` (raw, item/reasoning/textDelta). */
export interface ReasoningDelta extends InTurn {
  readonly _tag: "ReasoningDelta"
  readonly itemId: string
  readonly part: "summary" | "text"
  /** summaryIndex or contentIndex: a new index starts a new paragraph. */
  readonly index: number
  readonly delta: string
}
export interface ReasoningSummaryPartAdded extends InTurn {
  readonly _tag: "ReasoningSummaryPartAdded"
  readonly itemId: string
  readonly summaryIndex: number
}
export interface ItemStarted extends InTurn {
  readonly _tag: "ItemStarted"
  readonly item: ThreadItem.ThreadItem
  readonly atMs: number | null
}
export interface ItemCompleted extends InTurn {
  readonly _tag: "ItemCompleted"
  readonly item: ThreadItem.ThreadItem
  readonly atMs: number | null
}
export interface CommandOutputDelta extends InTurn {
  readonly _tag: "CommandOutputDelta"
  readonly itemId: string
  readonly delta: string
}
/** item/fileChange/patchUpdated: the changes of a fileChange item while it is in progress. */
export interface FileChangePatchUpdated extends InTurn {
  readonly _tag: "FileChangePatchUpdated"
  readonly itemId: string
  readonly changes: ReadonlyArray<ThreadItem.FileChange>
}
/** turn/diff/updated: the whole turn's unified diff so far (can be very large). */
export interface TurnDiffUpdated extends InTurn {
  readonly _tag: "TurnDiffUpdated"
  readonly diff: string
}
export interface TurnPlanUpdated extends InTurn {
  readonly _tag: "TurnPlanUpdated"
  readonly explanation: string | null
  readonly plan: ReadonlyArray<PlanStep>
}
export interface TokenUsageUpdated extends InTurn {
  readonly _tag: "TokenUsageUpdated"
  readonly total: TokenBreakdown
  readonly last: TokenBreakdown
  readonly modelContextWindow: number | null
}
export interface RateLimitsUpdated {
  readonly _tag: "RateLimitsUpdated"
  readonly rateLimits: RateLimitSnapshot
}
export interface TurnStarted extends InTurn {
  readonly _tag: "TurnStarted"
  readonly status: TurnStatus
}
export interface TurnCompleted extends InTurn {
  readonly _tag: "TurnCompleted"
  readonly status: TurnStatus
  readonly error: TurnError | null
  /** What the server chose to include (0.171.0: the agent messages, `itemsView: "summary"`). */
  readonly items: ReadonlyArray<ThreadItem.ThreadItem>
  readonly durationMs: number | null
}
/** serverRequest/resolved: the server settled its own request (turn ended, interrupted...). */
export interface RequestWithdrawn {
  readonly _tag: "RequestWithdrawn"
  readonly threadId: string
  readonly requestId: RequestId
}
export interface ThreadStatusChanged {
  readonly _tag: "ThreadStatusChanged"
  readonly threadId: string
  readonly status: ThreadStatus
}
export interface ThreadStarted {
  readonly _tag: "ThreadStarted"
  readonly threadId: string
  readonly thread: Thread
}
export interface ThreadClosed {
  readonly _tag: "ThreadClosed"
  readonly threadId: string
}
/** `error`: willRetry true means codex retries by itself ("Reconnecting... 1/2"). */
export interface ErrorReported extends InTurn {
  readonly _tag: "Error"
  readonly error: TurnError
  readonly willRetry: boolean
}
export interface Warning {
  readonly _tag: "Warning"
  readonly threadId: string | null
  readonly message: string
}
export interface ConfigWarning {
  readonly _tag: "ConfigWarning"
  readonly summary: string
  readonly details: string | null
  readonly path: string | null
}
export interface ModelRerouted extends InTurn {
  readonly _tag: "ModelRerouted"
  readonly fromModel: string
  readonly toModel: string
  readonly reason: string
}
export interface Other {
  readonly _tag: "Other"
  readonly method: string
  readonly params: unknown
}
export interface Malformed {
  readonly _tag: "Malformed"
  readonly method: string
  readonly params: unknown
  readonly issue: string
}

export type DomainEvent =
  | AgentMessageDelta
  | ReasoningDelta
  | ReasoningSummaryPartAdded
  | ItemStarted
  | ItemCompleted
  | CommandOutputDelta
  | FileChangePatchUpdated
  | TurnDiffUpdated
  | TurnPlanUpdated
  | TokenUsageUpdated
  | RateLimitsUpdated
  | TurnStarted
  | TurnCompleted
  | RequestWithdrawn
  | ThreadStatusChanged
  | ThreadStarted
  | ThreadClosed
  | ErrorReported
  | Warning
  | ConfigWarning
  | ModelRerouted
  | Other
  | Malformed

export type DomainEventTag = DomainEvent["_tag"]

// ---------------------------------------------------------------------------------------------
// Wire shapes (unknown keys are ignored by Schema.Struct decoding)

const nullable = <A, I>(schema: Schema.Schema<A, I>) => Schema.optionalWith(Schema.NullOr(schema), { default: () => null })
const inTurn = { threadId: Schema.String, turnId: Schema.String }
const Item = Schema.transform(
  Schema.Unknown,
  Schema.declare((u): u is ThreadItem.ThreadItem => typeof u === "object" && u !== null, { identifier: "ThreadItem" }),
  { strict: true, decode: ThreadItem.decode, encode: (item) => item }
)

const Breakdown = Schema.Struct({
  totalTokens: Schema.Number,
  inputTokens: Schema.Number,
  cachedInputTokens: Schema.Number,
  cacheWriteInputTokens: Schema.optionalWith(Schema.Number, { default: () => 0 }),
  outputTokens: Schema.Number,
  reasoningOutputTokens: Schema.Number
})
const Window = Schema.Struct({
  usedPercent: Schema.Number,
  windowDurationMins: nullable(Schema.Number),
  resetsAt: nullable(Schema.Number)
})

type Build = (method: string, params: unknown) => DomainEvent

const formatIssue = (error: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(error)

const via = <A, I>(schema: Schema.Schema<A, I>, build: (params: A) => DomainEvent): Build => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all" })
  return (method, params) =>
    Either.match(decode(params), {
      onLeft: (error): DomainEvent => ({ _tag: "Malformed", method, params, issue: formatIssue(error) }),
      onRight: build
    })
}

const builders: ReadonlyMap<string, Build> = new Map<string, Build>([
  [
    "item/agentMessage/delta",
    via(Schema.Struct({ ...inTurn, itemId: Schema.String, delta: Schema.String }), (p) => ({ _tag: "AgentMessageDelta", ...p }))
  ],
  [
    "item/reasoning/summaryTextDelta",
    via(
      Schema.Struct({ ...inTurn, itemId: Schema.String, delta: Schema.String, summaryIndex: Schema.Number }),
      (p) => ({ _tag: "ReasoningDelta", threadId: p.threadId, turnId: p.turnId, itemId: p.itemId, part: "summary", index: p.summaryIndex, delta: p.delta })
    )
  ],
  [
    "item/reasoning/textDelta",
    via(
      Schema.Struct({ ...inTurn, itemId: Schema.String, delta: Schema.String, contentIndex: Schema.Number }),
      (p) => ({ _tag: "ReasoningDelta", threadId: p.threadId, turnId: p.turnId, itemId: p.itemId, part: "text", index: p.contentIndex, delta: p.delta })
    )
  ],
  [
    "item/reasoning/summaryPartAdded",
    via(
      Schema.Struct({ ...inTurn, itemId: Schema.String, summaryIndex: Schema.Number }),
      (p) => ({ _tag: "ReasoningSummaryPartAdded", ...p })
    )
  ],
  [
    "item/started",
    via(
      Schema.Struct({ ...inTurn, item: Item, startedAtMs: nullable(Schema.Number) }),
      (p) => ({ _tag: "ItemStarted", threadId: p.threadId, turnId: p.turnId, item: p.item, atMs: p.startedAtMs })
    )
  ],
  [
    "item/completed",
    via(
      Schema.Struct({ ...inTurn, item: Item, completedAtMs: nullable(Schema.Number) }),
      (p) => ({ _tag: "ItemCompleted", threadId: p.threadId, turnId: p.turnId, item: p.item, atMs: p.completedAtMs })
    )
  ],
  [
    "item/commandExecution/outputDelta",
    via(Schema.Struct({ ...inTurn, itemId: Schema.String, delta: Schema.String }), (p) => ({ _tag: "CommandOutputDelta", ...p }))
  ],
  [
    "item/fileChange/patchUpdated",
    via(
      Schema.Struct({ ...inTurn, itemId: Schema.String, changes: Schema.Array(ThreadItem.FileChange) }),
      (p) => ({ _tag: "FileChangePatchUpdated", ...p })
    )
  ],
  [
    "turn/diff/updated",
    via(Schema.Struct({ ...inTurn, diff: Schema.String }), (p) => ({ _tag: "TurnDiffUpdated", ...p }))
  ],
  [
    "turn/plan/updated",
    via(
      Schema.Struct({
        ...inTurn,
        explanation: nullable(Schema.String),
        plan: Schema.Array(Schema.Struct({ step: Schema.String, status: OpenEnum.make(...PlanStepStatuses) }))
      }),
      (p) => ({ _tag: "TurnPlanUpdated", ...p })
    )
  ],
  [
    "thread/tokenUsage/updated",
    via(
      Schema.Struct({
        ...inTurn,
        tokenUsage: Schema.Struct({ total: Breakdown, last: Breakdown, modelContextWindow: nullable(Schema.Number) })
      }),
      (p) => ({
        _tag: "TokenUsageUpdated",
        threadId: p.threadId,
        turnId: p.turnId,
        total: p.tokenUsage.total,
        last: p.tokenUsage.last,
        modelContextWindow: p.tokenUsage.modelContextWindow
      })
    )
  ],
  [
    "account/rateLimits/updated",
    via(
      Schema.Struct({
        rateLimits: Schema.Struct({
          limitId: nullable(Schema.String),
          limitName: nullable(Schema.String),
          primary: nullable(Window),
          secondary: nullable(Window),
          credits: nullable(
            Schema.Struct({ hasCredits: Schema.Boolean, unlimited: Schema.Boolean, balance: nullable(Schema.String) })
          ),
          planType: nullable(Schema.String),
          rateLimitReachedType: nullable(Schema.String)
        })
      }),
      (p) => ({ _tag: "RateLimitsUpdated", rateLimits: p.rateLimits })
    )
  ],
  [
    "turn/started",
    via(
      Schema.Struct({ threadId: Schema.String, turn: Schema.Struct({ id: Schema.String, status: TurnStatus }) }),
      (p) => ({ _tag: "TurnStarted", threadId: p.threadId, turnId: p.turn.id, status: p.turn.status })
    )
  ],
  [
    // Only threadId, turn.id and turn.status are required: the end of a turn must get through.
    "turn/completed",
    via(
      Schema.Struct({
        threadId: Schema.String,
        turn: Schema.Struct({
          id: Schema.String,
          status: TurnStatus,
          error: Schema.optionalWith(Schema.Unknown, { default: () => null }),
          items: Schema.optionalWith(Schema.Array(Item), { default: () => [] }),
          durationMs: nullable(Schema.Number)
        })
      }),
      (p) => ({
        _tag: "TurnCompleted",
        threadId: p.threadId,
        turnId: p.turn.id,
        status: p.turn.status,
        error: turnErrorOf(p.turn.error),
        items: p.turn.items,
        durationMs: p.turn.durationMs
      })
    )
  ],
  [
    "serverRequest/resolved",
    via(
      Schema.Struct({ threadId: Schema.String, requestId: Schema.Union(Schema.Number, Schema.String) }),
      (p) => ({ _tag: "RequestWithdrawn", ...p })
    )
  ],
  [
    "thread/status/changed",
    via(
      Schema.Struct({ threadId: Schema.String, status: ThreadStatusFromWire }),
      (p) => ({ _tag: "ThreadStatusChanged", ...p })
    )
  ],
  [
    "thread/started",
    via(Schema.Struct({ thread: Thread }), (p) => ({ _tag: "ThreadStarted", threadId: p.thread.id, thread: p.thread }))
  ],
  ["thread/closed", via(Schema.Struct({ threadId: Schema.String }), (p) => ({ _tag: "ThreadClosed", ...p }))],
  [
    "error",
    via(
      Schema.Struct({ ...inTurn, error: Schema.Unknown, willRetry: Schema.Boolean }),
      (p) => ({
        _tag: "Error",
        threadId: p.threadId,
        turnId: p.turnId,
        willRetry: p.willRetry,
        error: turnErrorOf(p.error) ?? { message: "error notification without an error", codexErrorInfo: null, additionalDetails: null }
      })
    )
  ],
  [
    "warning",
    via(
      Schema.Struct({ threadId: nullable(Schema.String), message: Schema.String }),
      (p) => ({ _tag: "Warning", ...p })
    )
  ],
  [
    "configWarning",
    via(
      Schema.Struct({ summary: Schema.String, details: nullable(Schema.String), path: nullable(Schema.String) }),
      (p) => ({ _tag: "ConfigWarning", ...p })
    )
  ],
  [
    "model/rerouted",
    via(
      Schema.Struct({ ...inTurn, fromModel: Schema.String, toModel: Schema.String, reason: Schema.String }),
      (p) => ({ _tag: "ModelRerouted", ...p })
    )
  ]
])

/** Every notification method `toEvent` maps to its own event (the conformance test checks each exists). */
export const MappedNotificationMethods: ReadonlyArray<string> = Array.from(builders.keys())

/** Translate one notification; never throws (see the module comment). */
export const toEvent = (method: string, params: unknown): DomainEvent => {
  const build = builders.get(method)
  return build === undefined ? { _tag: "Other", method, params } : build(method, params)
}
