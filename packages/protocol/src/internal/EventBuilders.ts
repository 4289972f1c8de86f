/**
 * The wire shapes of the notifications `Events.toEvent` maps, and the builder of each one's domain
 * event (unknown keys are ignored by `Schema.Struct` decoding).
 */
import { Either, ParseResult, Schema } from "effect"
import type { DomainEvent } from "../Events.js"
import * as OpenEnum from "../OpenEnum.js"
import { Thread, ThreadStatusFromWire } from "../Thread.js"
import * as ThreadItem from "../ThreadItem.js"
import { TurnStatus, turnErrorOf } from "../Turn.js"

/** The plan step statuses of 0.171.0; any other decodes as `"unknown"`. */
export const PlanStepStatuses = ["pending", "inProgress", "completed"] as const

const nullable = <A, I>(schema: Schema.Schema<A, I>) =>
  Schema.optionalWith(Schema.NullOr(schema), { default: () => null })
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

export const builders: ReadonlyMap<string, Build> = new Map<string, Build>([
  [
    "item/agentMessage/delta",
    via(Schema.Struct({ ...inTurn, itemId: Schema.String, delta: Schema.String }), (p) => ({
      _tag: "AgentMessageDelta",
      ...p
    }))
  ],
  [
    "item/reasoning/summaryTextDelta",
    via(
      Schema.Struct({ ...inTurn, itemId: Schema.String, delta: Schema.String, summaryIndex: Schema.Number }),
      (p) => ({
        _tag: "ReasoningDelta",
        threadId: p.threadId,
        turnId: p.turnId,
        itemId: p.itemId,
        part: "summary",
        index: p.summaryIndex,
        delta: p.delta
      })
    )
  ],
  [
    "item/reasoning/textDelta",
    via(
      Schema.Struct({ ...inTurn, itemId: Schema.String, delta: Schema.String, contentIndex: Schema.Number }),
      (p) => ({
        _tag: "ReasoningDelta",
        threadId: p.threadId,
        turnId: p.turnId,
        itemId: p.itemId,
        part: "text",
        index: p.contentIndex,
        delta: p.delta
      })
    )
  ],
  [
    "item/reasoning/summaryPartAdded",
    via(Schema.Struct({ ...inTurn, itemId: Schema.String, summaryIndex: Schema.Number }), (p) => ({
      _tag: "ReasoningSummaryPartAdded",
      ...p
    }))
  ],
  [
    "item/started",
    via(Schema.Struct({ ...inTurn, item: Item, startedAtMs: nullable(Schema.Number) }), (p) => ({
      _tag: "ItemStarted",
      threadId: p.threadId,
      turnId: p.turnId,
      item: p.item,
      atMs: p.startedAtMs
    }))
  ],
  [
    "item/completed",
    via(Schema.Struct({ ...inTurn, item: Item, completedAtMs: nullable(Schema.Number) }), (p) => ({
      _tag: "ItemCompleted",
      threadId: p.threadId,
      turnId: p.turnId,
      item: p.item,
      atMs: p.completedAtMs
    }))
  ],
  [
    "item/commandExecution/outputDelta",
    via(Schema.Struct({ ...inTurn, itemId: Schema.String, delta: Schema.String }), (p) => ({
      _tag: "CommandOutputDelta",
      ...p
    }))
  ],
  [
    "item/fileChange/patchUpdated",
    via(Schema.Struct({ ...inTurn, itemId: Schema.String, changes: Schema.Array(ThreadItem.FileChange) }), (p) => ({
      _tag: "FileChangePatchUpdated",
      ...p
    }))
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
    via(Schema.Struct({ threadId: Schema.String, requestId: Schema.Union(Schema.Number, Schema.String) }), (p) => ({
      _tag: "RequestWithdrawn",
      ...p
    }))
  ],
  [
    "thread/status/changed",
    via(Schema.Struct({ threadId: Schema.String, status: ThreadStatusFromWire }), (p) => ({
      _tag: "ThreadStatusChanged",
      ...p
    }))
  ],
  [
    "thread/started",
    via(Schema.Struct({ thread: Thread }), (p) => ({ _tag: "ThreadStarted", threadId: p.thread.id, thread: p.thread }))
  ],
  ["thread/closed", via(Schema.Struct({ threadId: Schema.String }), (p) => ({ _tag: "ThreadClosed", ...p }))],
  [
    "error",
    via(Schema.Struct({ ...inTurn, error: Schema.Unknown, willRetry: Schema.Boolean }), (p) => ({
      _tag: "Error",
      threadId: p.threadId,
      turnId: p.turnId,
      willRetry: p.willRetry,
      error: turnErrorOf(p.error) ?? {
        message: "error notification without an error",
        codexErrorInfo: null,
        additionalDetails: null
      }
    }))
  ],
  [
    "warning",
    via(Schema.Struct({ threadId: nullable(Schema.String), message: Schema.String }), (p) => ({
      _tag: "Warning",
      ...p
    }))
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
    via(Schema.Struct({ ...inTurn, fromModel: Schema.String, toModel: Schema.String, reason: Schema.String }), (p) => ({
      _tag: "ModelRerouted",
      ...p
    }))
  ]
])
