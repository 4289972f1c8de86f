/**
 * What travels between runners, clients and storage: a work item's spec, its typed end, its
 * status, the event lines it streams, decisions and what answering one did. Every type is a
 * Schema: the engine stores the persisted `Run` payload and reply, and runner traffic is msgpack.
 */
import { Schema } from "effect"

/**
 * A work item as submitted to the fleet: its prompt and follow-ups, and what is passed to the
 * thread (working directory, model, approval policy, sandbox).
 *
 * Stored verbatim by the engine (`cluster_messages.payload`) so that another runner can run it
 * again: the cluster database is as sensitive as the prompts.
 */
export class ItemSpec extends Schema.Class<ItemSpec>("@warden/cluster/ItemSpec")({
  prompt: Schema.String,
  followUps: Schema.optionalWith(Schema.Array(Schema.String), { exact: true }),
  cwd: Schema.optionalWith(Schema.String, { exact: true }),
  model: Schema.optionalWith(Schema.String, { exact: true }),
  approvalPolicy: Schema.optionalWith(Schema.String, { exact: true }),
  sandbox: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/** The item ran to its end: its thread, the last turn's status and final message, and how often it moved. */
export class Completed extends Schema.TaggedClass<Completed>()("Completed", {
  threadId: Schema.String,
  status: Schema.String,
  finalMessage: Schema.NullOr(Schema.String),
  turns: Schema.Number,
  /**
   * How often the item moved: to another runner incarnation, or back to the same one after its
   * runner stopped it (see {@link MoveReason}). The same number as the item's stored row
   * (`warden_cluster_items.moves`, the claims with a reason): the result is recorded only by the
   * runner that holds the item under its latest epoch.
   */
  moves: Schema.Number
}) {}

/**
 * Why an item moved (the `reason` of an `item.moved` line, and of its row in
 * `warden_cluster_claims`): another runner incarnation held it (`shard-moved`), or its own
 * runner stopped it and ran it again (`shard-lost`, `lease-lost`).
 * - `shard-moved`: the item was last held by another runner incarnation (it died, stopped, was
 *   taken for dead, or its shard was assigned to this runner).
 * - `shard-lost`: the same runner ran the item, let go of its shard (its run stopped, its open
 *   cards refused `ThreadStopped` or `TurnEnded`), then took the shard back and ran it again; the
 *   engine does this when a shard lock refresh takes longer than it allows (docs/scaling.md).
 * - `lease-lost`: the same runner stopped the item itself because its hold on the item's shard
 *   was last confirmed too long ago (its own deadline, shorter than the lock's expiry, passed:
 *   a paused process, a stalled event loop), then the hold was confirmed again (nobody had taken
 *   the shard) and it ran the item again.
 */
export const MoveReason = Schema.Literal("shard-moved", "shard-lost", "lease-lost")
export type MoveReason = typeof MoveReason.Type

/**
 * Why an item failed: the supervisor's `WorkItemFailed` reasons, plus `thread-unreachable` (the
 * thread lives in a codex home this runner cannot read).
 */
export const FailureReason = Schema.String

/** The item failed, with a typed `reason` and a readable, masked `detail`. */
export class Failed extends Schema.TaggedClass<Failed>()("Failed", {
  reason: FailureReason,
  detail: Schema.String,
  threadId: Schema.NullOr(Schema.String)
}) {}

/** The item was stopped (`Stop`) before it ended. */
export class Stopped extends Schema.TaggedClass<Stopped>()("Stopped", {
  threadId: Schema.NullOr(Schema.String)
}) {}

/**
 * How a work item ended, as the persisted `Run` reply: always a value, never an RPC failure, so
 * "completed or failed with a typed reason" can be read back from storage.
 */
export const RunResult = Schema.Union(Completed, Failed, Stopped)
/** The type of {@link RunResult}. */
export type RunResult = typeof RunResult.Type

/** Where an item stands, as `Status` answers (from the live runner, or the stored row). */
export class ItemStatus extends Schema.Class<ItemStatus>("@warden/cluster/ItemStatus")({
  /** `unknown` (never submitted here), `running`, `completed`, `failed`, `stopped`. */
  status: Schema.String,
  /** The runner address (`host:port`) that holds (or last held) it. */
  runner: Schema.NullOr(Schema.String),
  /** The runner run id (incarnation) that holds (or last held) it. */
  incarnation: Schema.NullOr(Schema.String),
  threadId: Schema.NullOr(Schema.String),
  turnsDone: Schema.Number,
  /** Open cards of the item on this runner (global ids). */
  openCards: Schema.Array(Schema.String)
}) {}

/**
 * One line of an item's event stream: a JSON object with a `type` (`item.snapshot`,
 * `item.placed`, `item.moved`, `thread.ready`, `turn.started`, `turn.completed`, `card.opened`,
 * `card.settled`, `item.finished`), masked on the runner, tagged with the runner incarnation
 * that produced it and a sequence number within that incarnation (unique across the item's
 * activations on it: a shard let go of and taken back goes on counting).
 */
export class ItemEvent extends Schema.Class<ItemEvent>("@warden/cluster/ItemEvent")({
  seq: Schema.Number,
  incarnation: Schema.String,
  runner: Schema.String,
  line: Schema.Record({ key: Schema.String, value: Schema.Unknown })
}) {}

/**
 * A decision as it travels to the runner holding the card: the protocol's `Decision` union.
 */
export const DecisionWire = Schema.Union(
  Schema.TaggedStruct("Accept", {}),
  Schema.TaggedStruct("AcceptForSession", {}),
  Schema.TaggedStruct("Decline", {}),
  Schema.TaggedStruct("Cancel", {}),
  Schema.TaggedStruct("Abort", {}),
  Schema.TaggedStruct("AcceptWithExecpolicyAmendment", { amendment: Schema.Array(Schema.String) }),
  Schema.TaggedStruct("ApplyNetworkPolicyAmendment", { host: Schema.String, action: Schema.Literal("allow", "deny") }),
  Schema.TaggedStruct("Grant", {
    permissions: Schema.Unknown,
    scope: Schema.optionalWith(Schema.Unknown, { exact: true }),
    strictAutoReview: Schema.optionalWith(Schema.Unknown, { exact: true })
  }),
  Schema.TaggedStruct("Elicitation", {
    action: Schema.Literal("accept", "decline", "cancel"),
    content: Schema.optionalWith(Schema.Unknown, { exact: true }),
    persist: Schema.optionalWith(Schema.Literal("session", "always"), { exact: true })
  }),
  Schema.TaggedStruct("Answers", { answers: Schema.Unknown }),
  Schema.TaggedStruct("ToolResult", { contentItems: Schema.Unknown, success: Schema.Unknown })
)

/** This answer decided the card (`outcome`: accepted, declined, refused...). */
export class Settled extends Schema.TaggedClass<Settled>()("Settled", { outcome: Schema.String }) {}
/** The card had already settled (`outcome`, `stranded` included); nothing was written. */
export class AlreadySettled extends Schema.TaggedClass<AlreadySettled>()("AlreadySettled", {
  outcome: Schema.String
}) {}
/** No card of this item has this id on the runner that holds the item now; nothing was written. */
export class UnknownCard extends Schema.TaggedClass<UnknownCard>()("UnknownCard", { cardId: Schema.String }) {}

/** What answering a card through the fleet's one inbox did. */
export const AnswerWire = Schema.Union(Settled, AlreadySettled, UnknownCard)
/** The type of {@link AnswerWire}. */
export type AnswerWire = typeof AnswerWire.Type

/** `Steer` or `Interrupt` found no running item of this id on the runner that holds it. */
export class ItemNotActive extends Schema.TaggedError<ItemNotActive>()("ItemNotActive", {
  itemId: Schema.String,
  detail: Schema.String
}) {}

/**
 * A card's fleet-wide id, `<runner run id>:<card id>`: the runner part names the process that
 * opened it, so a decision for it can be checked after that process is gone.
 */
export const globalCardId = (runId: string, cardId: string): string => `${runId}:${cardId}`

/** Split a fleet-wide card id at its last `:` (`undefined` when it has none). */
export const parseCardId = (id: string): { readonly runId: string; readonly cardId: string } | undefined => {
  const at = id.lastIndexOf(":")
  return at <= 0 || at === id.length - 1 ? undefined : { runId: id.slice(0, at), cardId: id.slice(at + 1) }
}
