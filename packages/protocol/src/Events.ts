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
import type { RequestId } from "./JsonRpc.js"
import type * as OpenEnum from "./OpenEnum.js"
import type { Thread, ThreadStatus } from "./Thread.js"
import type * as ThreadItem from "./ThreadItem.js"
import type { TurnError, TurnStatus } from "./Turn.js"
import { builders, type PlanStepStatuses } from "./internal/EventBuilders.js"

// ---------------------------------------------------------------------------------------------
// The hot path

/**
 * The thread a frame belongs to, from `params.threadId` or, for `thread/started`, `params.thread.id`.
 *
 * Works for notifications and server requests alike; undefined when the frame names no thread.
 * Two property reads and no Schema: it runs on the read loop for every frame.
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

/**
 * One breakdown of token usage, the `total` or `last` of a `TokenUsageUpdated`.
 *
 * `cacheWriteInputTokens` is 0 when the server does not send it.
 */
export interface TokenBreakdown {
  readonly totalTokens: number
  readonly inputTokens: number
  /** Already included in `inputTokens`. */
  readonly cachedInputTokens: number
  readonly cacheWriteInputTokens: number
  readonly outputTokens: number
  readonly reasoningOutputTokens: number
}

/**
 * One rate-limit window, with the share used and when it resets.
 */
export interface RateLimitWindow {
  readonly usedPercent: number
  readonly windowDurationMins: number | null
  /** Unix seconds. */
  readonly resetsAt: number | null
}

/**
 * A sparse rolling update of the account's rate limits, where null means "not in this update".
 *
 * A null field does not mean "cleared": keep the last value you saw.
 */
export interface RateLimitSnapshot {
  readonly limitId: string | null
  readonly limitName: string | null
  readonly primary: RateLimitWindow | null
  readonly secondary: RateLimitWindow | null
  readonly credits: {
    readonly hasCredits: boolean
    readonly unlimited: boolean
    readonly balance: string | null
  } | null
  readonly planType: string | null
  readonly rateLimitReachedType: string | null
}

export { PlanStepStatuses } from "./internal/EventBuilders.js"
/** One step of the agent's plan in `turn/plan/updated`, with its status. */
export interface PlanStep {
  readonly step: string
  readonly status: OpenEnum.Open<(typeof PlanStepStatuses)[number]>
}

interface InTurn {
  readonly threadId: string
  readonly turnId: string
}

/**
 * A chunk of an agent message's text as it streams (`item/agentMessage/delta`).
 *
 * The whole text is in the `agentMessage` item of `item/completed`. A `turn/steer` during a
 * streaming answer abandons the partial message: it never completes.
 */
export interface AgentMessageDelta extends InTurn {
  readonly _tag: "AgentMessageDelta"
  readonly itemId: string
  readonly delta: string
}
/**
 * A chunk of reasoning text as it streams, from the summary or the raw reasoning.
 *
 * `part` is `summary` (item/reasoning/summaryTextDelta) or `text` (raw, item/reasoning/textDelta).
 */
export interface ReasoningDelta extends InTurn {
  readonly _tag: "ReasoningDelta"
  readonly itemId: string
  readonly part: "summary" | "text"
  /** summaryIndex or contentIndex: a new index starts a new paragraph. */
  readonly index: number
  readonly delta: string
}
/** A new part of a reasoning summary began (`item/reasoning/summaryPartAdded`). */
export interface ReasoningSummaryPartAdded extends InTurn {
  readonly _tag: "ReasoningSummaryPartAdded"
  readonly itemId: string
  readonly summaryIndex: number
}
/**
 * An item of a turn began (`item/started`), with its first state.
 *
 * `atMs` is the server's `startedAtMs`, null when absent. A `fileChange` item here carries the
 * changes a later `item/fileChange/requestApproval` for the same item id is about.
 */
export interface ItemStarted extends InTurn {
  readonly _tag: "ItemStarted"
  readonly item: ThreadItem.ThreadItem
  readonly atMs: number | null
}
/**
 * An item of a turn ended (`item/completed`), with its final state.
 *
 * `atMs` is the server's `completedAtMs`, null when absent. A file change cancelled at approval
 * never gets one.
 */
export interface ItemCompleted extends InTurn {
  readonly _tag: "ItemCompleted"
  readonly item: ThreadItem.ThreadItem
  readonly atMs: number | null
}
/**
 * A chunk of a running command's output (`item/commandExecution/outputDelta`).
 *
 * The deltas may miss the first output: only the completed item's `aggregatedOutput` is complete.
 */
export interface CommandOutputDelta extends InTurn {
  readonly _tag: "CommandOutputDelta"
  readonly itemId: string
  readonly delta: string
}
/** The changes of a fileChange item while it is in progress (`item/fileChange/patchUpdated`). */
export interface FileChangePatchUpdated extends InTurn {
  readonly _tag: "FileChangePatchUpdated"
  readonly itemId: string
  readonly changes: ReadonlyArray<ThreadItem.FileChange>
}
/** The whole turn's unified diff so far (`turn/diff/updated`), which can be very large. */
export interface TurnDiffUpdated extends InTurn {
  readonly _tag: "TurnDiffUpdated"
  readonly diff: string
}
/**
 * The agent's plan for the turn, whole, each time it changes (`turn/plan/updated`).
 */
export interface TurnPlanUpdated extends InTurn {
  readonly _tag: "TurnPlanUpdated"
  readonly explanation: string | null
  readonly plan: ReadonlyArray<PlanStep>
}
/**
 * A thread's token usage changed (`thread/tokenUsage/updated`).
 *
 * `total` is the thread's running total, `last` the latest usage; `modelContextWindow` is null
 * when the server does not say.
 */
export interface TokenUsageUpdated extends InTurn {
  readonly _tag: "TokenUsageUpdated"
  readonly total: TokenBreakdown
  readonly last: TokenBreakdown
  readonly modelContextWindow: number | null
}
/**
 * The account's rate limits changed (`account/rateLimits/updated`); it belongs to no thread.
 */
export interface RateLimitsUpdated {
  readonly _tag: "RateLimitsUpdated"
  readonly rateLimits: RateLimitSnapshot
}
/** A turn began (`turn/started`). */
export interface TurnStarted extends InTurn {
  readonly _tag: "TurnStarted"
  readonly status: TurnStatus
}
/**
 * A turn ended (`turn/completed`), with its final status and error.
 *
 * `status` is `completed`, `interrupted`, `failed` (or `"unknown"` for a value added since);
 * `error` is read by `Turn.turnErrorOf`. Only the thread id, turn id and status must decode, so
 * the end of a turn gets through a drifted payload.
 */
export interface TurnCompleted extends InTurn {
  readonly _tag: "TurnCompleted"
  readonly status: TurnStatus
  readonly error: TurnError | null
  /** What the server chose to include (0.171.0: the agent messages, `itemsView: "summary"`). */
  readonly items: ReadonlyArray<ThreadItem.ThreadItem>
  readonly durationMs: number | null
}
/**
 * The server considers one of its requests settled (`serverRequest/resolved`); a later answer is dropped.
 *
 * It follows a normal answer (before `turn/completed`), and a request the server resolved itself
 * when a turn started, completed or was interrupted (after `turn/completed` on interrupt). No such
 * notification follows `item/tool/call` or the token refresh.
 */
export interface RequestWithdrawn {
  readonly _tag: "RequestWithdrawn"
  readonly threadId: string
  readonly requestId: RequestId
}
/**
 * A thread's status changed (`thread/status/changed`).
 *
 * While a server request waits, the status is `Active` with `waitingOnApproval` or
 * `waitingOnUserInput` among its flags.
 */
export interface ThreadStatusChanged {
  readonly _tag: "ThreadStatusChanged"
  readonly threadId: string
  readonly status: ThreadStatus
}
/**
 * A thread began (`thread/started`), with the server's description of it.
 *
 * It may arrive after the `thread/start` response, even after the client's next request. A thread
 * codex spawned for a sub-agent starts this way too, with `parentThreadId` set.
 */
export interface ThreadStarted {
  readonly _tag: "ThreadStarted"
  readonly threadId: string
  readonly thread: Thread
}
/** A thread was closed (`thread/closed`). */
export interface ThreadClosed {
  readonly _tag: "ThreadClosed"
  readonly threadId: string
}
/**
 * An error in a turn (the `error` notification), tagged `Error`.
 *
 * `willRetry` true means codex retries by itself ("Reconnecting... 1/2"); when it gives up, a last
 * one with `willRetry` false comes before `turn/completed` with status `failed`.
 */
export interface ErrorReported extends InTurn {
  readonly _tag: "Error"
  readonly error: TurnError
  readonly willRetry: boolean
}
/** A warning from the server (`warning`), about a thread or about none. */
export interface Warning {
  readonly _tag: "Warning"
  readonly threadId: string | null
  readonly message: string
}
/**
 * A warning about codex's configuration (`configWarning`), which may arrive right after `initialize`.
 */
export interface ConfigWarning {
  readonly _tag: "ConfigWarning"
  readonly summary: string
  readonly details: string | null
  readonly path: string | null
}
/** The turn's model was replaced by another (`model/rerouted`), with the server's reason. */
export interface ModelRerouted extends InTurn {
  readonly _tag: "ModelRerouted"
  readonly fromModel: string
  readonly toModel: string
  readonly reason: string
}
/**
 * A notification `toEvent` does not map, passed through with its raw params.
 *
 * Most of the 87 notifications of 0.171.0 arrive this way; that is ordinary, not an error.
 */
export interface Other {
  readonly _tag: "Other"
  readonly method: string
  readonly params: unknown
}
/**
 * A mapped notification whose params did not decode, kept raw with the reason.
 *
 * Drift a supervisor should log; for `turn/completed`, treat it as the end of the turn. `issue` is
 * Schema's tree message and may quote the values it read.
 */
export interface Malformed {
  readonly _tag: "Malformed"
  readonly method: string
  readonly params: unknown
  readonly issue: string
}

/**
 * Every event `toEvent` can produce, told apart by `_tag`.
 *
 * @example
 * ```ts
 * import { Events } from "@warden/protocol"
 *
 * const show = (event: Events.DomainEvent): string | undefined => {
 *   switch (event._tag) {
 *     case "AgentMessageDelta":
 *       return event.delta
 *     case "TurnCompleted":
 *       return `turn ${event.turnId} ${event.status}`
 *     case "Malformed":
 *       return `unreadable ${event.method}: ${event.issue}`
 *     default:
 *       return undefined
 *   }
 * }
 * ```
 */
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

/** The `_tag` of a `DomainEvent`. */
export type DomainEventTag = DomainEvent["_tag"]

/** Every notification method `toEvent` maps to its own event (the conformance test checks each exists). */
export const MappedNotificationMethods: ReadonlyArray<string> = Array.from(builders.keys())

/**
 * Translates one server notification into a `DomainEvent`; it never throws and never fails.
 *
 * A method in `MappedNotificationMethods` decodes into its own event, or `Malformed` when its
 * params do not match; any other method is `Other`. Pass the frame's `params` (the top-level
 * `emittedAtMs` is not part of them); unknown keys are ignored.
 *
 * @example
 * ```ts
 * import { Events } from "@warden/protocol"
 *
 * Events.toEvent("turn/completed", { threadId: "th", turn: { id: "tu", status: "completed" } })
 * // { _tag: "TurnCompleted", threadId: "th", turnId: "tu", status: "completed", error: null, items: [], durationMs: null }
 * ```
 */
export const toEvent = (method: string, params: unknown): DomainEvent => {
  const build = builders.get(method)
  return build === undefined ? { _tag: "Other", method, params } : build(method, params)
}
