/**
 * The Approvals service, one per supervisor. It makes the open-card registry of each connection,
 * keeps every open card reachable by id for inboxes (`answer`), fans events out to subscribers
 * (audit, CLI, UIs), and on shutdown settles whatever is still open with a refusal.
 */
import type { Decision, JsonRpc, ServerRequests } from "@warden/protocol"
import { Context, Effect, Layer } from "effect"
import type { Fiber, Queue, RuntimeFlags, Scope, Stream, Tracer } from "effect"
import type { ApprovalEvent } from "./ApprovalEvent.js"
import type { CardContext, CardId, CardView, Outcome, Settlement, Source } from "./Card.js"
import type * as CardGroup from "./CardGroup.js"
import * as Config from "./Config.js"
import type { ConfigError } from "./Config.js"
import type * as Deadlines from "./Deadlines.js"
import * as Engine from "./internal/Engine.js"
import type * as SafetyFilter from "./internal/SafetyFilter.js"
import type * as Policy from "./Policy.js"

/**
 * The approvals engine's configuration.
 *
 * How every connection's cards are decided (deadlines, rules, handler, safety limits: `DecisionConfig`)
 * and how many settled cards are remembered for late answers. Decoded once by {@link make} /
 * {@link layer}; a bad value is a `ConfigError`.
 */
export interface ApprovalsConfig extends DecisionConfig {
  /**
   * How many settled cards are remembered so a late answer can say which outcome won (default
   * 1,000, the most recent ones): an answer to a card settled longer ago is `UnknownCard`, and
   * decides nothing either. Each remembered settlement keeps its card's view (~3 KiB), so this
   * bounds what a long run holds (docs/performance.md, flat memory).
   */
  readonly settledHistory?: number
}

/** How many settled cards are remembered for late answers unless `settledHistory` says otherwise. */
export const DefaultSettledHistory: number = Engine.DefaultSettledHistory

/**
 * What `answer` did with a decision.
 *
 * It settled the card (`Settled`), came too late (`AlreadySettled`, with the settlement that won),
 * or named no card this engine knows (`UnknownCard`: never opened, or settled so long ago that it
 * left the history).
 */
export type AnswerResult =
  /** This answer decided the card (accepted, declined, or refused when it could not be expressed). */
  | { readonly _tag: "Settled"; readonly settlement: Settlement }
  /** The card had already settled: the answer was dropped and reported late. */
  | { readonly _tag: "AlreadySettled"; readonly settlement: Settlement }
  /** No open card, and no remembered settled one, has this id. Nothing was written. */
  | { readonly _tag: "UnknownCard"; readonly cardId: CardId }

/**
 * What `answerGroup` did: each open card of the group that offers the decision, with what `answer`
 * did with it (in the order the cards opened), and the cards of the group that do not offer it
 * (left open, for an answer of their own). No open card in the group: both empty.
 */
export interface GroupAnswer {
  readonly group: CardGroup.GroupId
  readonly answered: ReadonlyArray<{ readonly cardId: CardId; readonly result: AnswerResult }>
  readonly notOffered: ReadonlyArray<CardId>
}

/**
 * What an inbox sees, starting with a snapshot of the open cards.
 *
 * First a `Snapshot` of the cards open when it started, then every card that opens (`Opened`) and
 * every settlement (`Settled`), whoever decided it. Updates published in one step arrive in one
 * chunk of the `inbox` stream (a card a rule or a remembered rule settles as it opens: its `Opened`
 * and `Settled` together), so an inbox that applies a chunk at a time never shows that card open.
 */
export type InboxUpdate =
  | { readonly _tag: "Snapshot"; readonly cards: ReadonlyArray<CardView> }
  | { readonly _tag: "Opened"; readonly card: CardView }
  | { readonly _tag: "Settled"; readonly settlement: Settlement }

/**
 * An answer about to be written to codex (`ApprovalsShape.observeAnswers`): the card, how it
 * settles if the write goes through (`outcome`: `accepted`, `declined`, `refused`, `timeout`,
 * ...), who decided, and the name of the decision taken, if one was (`accept`, `decline`, ...;
 * also when what is written is the method's refusal because the decision could not be expressed:
 * `outcome` says which). Never the answer's content: a form's values are not here.
 */
export interface Answering {
  readonly card: CardView
  readonly outcome: Outcome
  readonly source: Source
  readonly decision: string | undefined
}

/**
 * The approvals engine, as the `Approvals` service provides it.
 *
 * The open-card registry of each connection (the supervisor makes one per app-server connection),
 * the inbox through which a person or program answers open cards, and the event stream. None of
 * its operations fails.
 */
export interface ApprovalsShape {
  /**
   * The open-card registry of one connection (`ConnectionCards`): its cards answer through
   * `line` and are decided by the engine's `DecisionConfig` with `overrides`; its deadline timer
   * and card fibers live in `owner` (the connection's scope; the engine's when omitted).
   */
  readonly cardsFor: (line: Line, overrides?: Partial<DecisionConfig>, owner?: FiberOwner) => ConnectionCards
  /** The cards open now, across every connection. */
  readonly openCards: Effect.Effect<ReadonlyArray<CardView>>
  /**
   * Answer a card as a person (or program) through the inbox; `channel` (e.g. `web`) is recorded
   * in the settlement's source (`{ _tag: "Person", channel }`).
   */
  readonly answer: (cardId: CardId, decision: Decision.Decision, channel?: string) => Effect.Effect<AnswerResult>
  /**
   * Answer every open card of a group (`CardGroup.groupOf`: the same method and the same
   * decision-relevant facts) as `answer` would, one by one: each card gets its own answer in its
   * own method's vocabulary, written once, with its own settlement. Cards whose request does not
   * offer the decision are left open (`notOffered`). `channel` as for `answer`.
   */
  readonly answerGroup: (
    group: CardGroup.GroupId,
    decision: Decision.Decision,
    channel?: string
  ) => Effect.Effect<GroupAnswer>
  /** Subscribe before acting, so no event is missed. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<ApprovalEvent>, never, Scope.Scope>
  /**
   * Call `observer` with every answer the engine is about to write to codex, in the synchronous
   * step that writes it, just before the write, until the caller's scope closes. The ledger's
   * answer journal uses it (an answer is on record before codex can act on it: docs/ledger.md,
   * "Durability"). It runs where the answer is written (the connection's read loop, a decision,
   * a deadline): keep it short and synchronous. A throw is caught and logged, and the answer is
   * written all the same.
   */
  readonly observeAnswers: (observer: (answer: Answering) => void) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Call `observer` with every approval event (a card opened, settled, a late decision) in the
   * synchronous step that publishes it, after the answer was written (for a settlement), until
   * the caller's scope closes: what `subscribe` delivers, without a fiber woken per event and
   * without a queue (the ledger records this way). It runs where the event is published (the
   * connection's read loop, a decision, a deadline): keep it short and synchronous; a throw is
   * caught and logged.
   */
  readonly observeEvents: (observer: (event: ApprovalEvent) => void) => Effect.Effect<void, never, Scope.Scope>
  /** Live events from the moment the stream starts. */
  readonly events: Stream.Stream<ApprovalEvent>
  /**
   * The open cards now, then every change (an Opened may repeat a card of the snapshot); each
   * chunk is every update published since the last one was taken (see {@link InboxUpdate}).
   */
  readonly inbox: Stream.Stream<InboxUpdate>
}

/**
 * The `Approvals` service tag. The supervisor runs an engine of its own (`supervisor.approvals`);
 * provide it under this tag to use what needs the service, such as `Audit.jsonlSink`.
 */
export class Approvals extends Context.Tag("@warden/approvals/Approvals")<Approvals, ApprovalsShape>() {}

/**
 * The approvals engine, in the caller's scope. Its configuration is decoded here, once (see
 * `Config`): a bad value fails with a `ConfigError`, before anything runs.
 */
export const make = (input: ApprovalsConfig = {}): Effect.Effect<ApprovalsShape, ConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const config = yield* Config.decode(input)
    return yield* Engine.make(config)
  })

/**
 * The approvals engine (`make`) as a scoped layer providing `Approvals`. Building it fails with
 * a `ConfigError` naming every field at fault (a duration `Duration.decode` does not read, rules that
 * do not decode, a handler that is not a function, an unknown key); nothing runs then. When the
 * layer's scope closes, every card still open is refused (outcome `shutdown`) if its line is alive.
 *
 * @example
 * ```ts
 * import { Approvals, Audit } from "@warden/approvals"
 * import { Decision } from "@warden/protocol"
 * import { Effect } from "effect"
 *
 * const ApprovalsLive = Approvals.layer({
 *   rules: { rules: [{ id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } }] },
 *   deadlines: { default: "2 minutes", perMethod: { "item/tool/requestUserInput": "10 minutes" } },
 *   // Runs in its own fiber after the rules; `undefined` leaves the card to the inbox and the deadline.
 *   handler: (card) =>
 *     Effect.succeed(card.summary.kind === "command" && card.summary.argv?.[0] === "ls" ? Decision.Accept : undefined)
 * })
 *
 * const program = Effect.gen(function*() {
 *   const approvals = yield* Approvals.Approvals
 *   yield* Audit.jsonlSink("/var/log/warden/audit.jsonl")
 *   for (const card of yield* approvals.openCards) yield* approvals.answer(card.id, Decision.Decline)
 * }).pipe(Effect.scoped, Effect.provide(ApprovalsLive)) // fails with ConfigError | AuditFileError
 * ```
 */
export const layer = (config: ApprovalsConfig = {}): Layer.Layer<Approvals, ConfigError> =>
  Layer.scoped(Approvals, make(config))

// ---------------------------------------------------------------------------------------------
// Connections' cards

/**
 * What `ConnectionCards.open` did with a server request.
 *
 * It opened a card that now waits for a decision, settled it at once, or refused to open it
 * because its id is already open (`Duplicate`).
 */
export type OpenResult =
  | { readonly _tag: "Opened"; readonly card: CardView }
  /** Decided at once (rule, filter, malformed, unknown method, no thread, a handler that answered at once). */
  | { readonly _tag: "Settled"; readonly settlement: Settlement }
  /** The id is already open: a protocol error for the connection. Nothing was written. */
  | { readonly _tag: "Duplicate"; readonly requestId: JsonRpc.RequestId; readonly open: CardView }

/** Where a card opened by `ConnectionCards.open` belongs (its thread's scope), and what it shows beyond the request. */
export interface OpenOptions {
  /** The thread's scope; undefined when the request names no thread we know (refused at once). */
  readonly parent: Scope.Scope | undefined
  readonly context?: CardContext
  /** What closing `parent` means for the card (default: the thread was stopped). */
  readonly onParentClose?: CloseReason
  /**
   * The span the card's span is a child of (its turn's), given when telemetry is on: then every
   * card gets a span (also those a rule settles at once), describing how it settled. Without it,
   * only a card that waits for a decision has a span, a child of the caller's.
   */
  readonly traceParent?: Tracer.AnySpan
}

/**
 * The open cards of one connection, by server request id: its open-card registry.
 *
 * The supervisor opens a card per server request and settles them when the server withdraws them,
 * a thread or turn ends, or the connection is lost. Made by `ApprovalsShape.cardsFor`; no operation
 * fails.
 */
export interface ConnectionCards {
  /**
   * Open a card for a decoded server request, from the read loop: registers it synchronously, then
   * lets rules, the safety filter, the handler, a person and the deadline decide. Never waits for a
   * decision.
   */
  readonly open: (request: ServerRequests.DecodedRequest, options: OpenOptions) => Effect.Effect<OpenResult>
  /**
   * `open` for a caller in the middle of a fiber's synchronous step (the connection's read loop):
   * the same card, opened the same way, where `fiber` (with its `runtimeFlags`) is the fiber
   * running the caller, as `open` would have found it. Returns the result, or the effect to run
   * for it when something must wait (a thread's first card adds its finalizer, a card's span is
   * made): the read loop pays for no effect per card otherwise.
   */
  readonly openNow: (
    request: ServerRequests.DecodedRequest,
    options: OpenOptions,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    runtimeFlags: RuntimeFlags.RuntimeFlags
  ) => OpenResult | Effect.Effect<OpenResult>
  /** `serverRequest/resolved`: the server moved on; settle as withdrawn, write nothing. */
  readonly withdraw: (requestId: JsonRpc.RequestId) => Settlement | undefined
  /** Settle every open card that matches (thread stop, turn end, shutdown): refuse if the line is alive. */
  readonly closeWhere: (predicate: (card: CardView) => boolean, reason: CloseReason) => ReadonlyArray<Settlement>
  /** The connection ended: settle every card at once, write nothing. */
  readonly connectionLost: (detail: string) => ReadonlyArray<Settlement>
  /** The cards of this connection still open. */
  readonly openCards: () => ReadonlyArray<CardView>
  /** How many cards of this connection are open. */
  readonly size: () => number
  /**
   * With telemetry (a turn's span to hang cards under), a settled card's span is described (its
   * source, decision, masked title...) and its log record written off the read loop, in batches
   * (64 cards, or 20 ms after the first of them settled); the connection's close describes what
   * still waits. This describes them now, in the caller's step: for a caller about to read the
   * spans or to measure what they cost.
   */
  readonly describeSettled: () => void
}

/** How a connection's cards are decided (card deadlines, policy rules, the handler, remembered rules, the safety filter's bounds), all optional. */
export interface DecisionConfig {
  /** How long a card waits before it refuses by itself (default 15 minutes; per method configurable). */
  readonly deadlines?: Deadlines.DeadlineConfig
  /** Allow/deny rules, consulted before anyone else (deny rules win). */
  readonly rules?: Policy.Rules
  /** A program that decides what no rule decided, raced against a person and the deadline. */
  readonly handler?: Handler
  /**
   * Remembered allows ("always", e.g. from `@warden/ledger`'s `Remembered`): a synchronous lookup
   * consulted only when no configured rule matched (so a deny rule always wins) and the safety
   * filter let the request through, before the handler and the person. It runs on the read loop:
   * keep it a lookup. Returning a rule id accepts the card with source `remembered:<id>`; a lookup
   * that throws counts as no match (the card waits for the handler, a person or its deadline).
   */
  readonly remembered?: (
    request: ServerRequests.DecodedRequest,
    context: CardContext
  ) => { readonly ruleId: string } | undefined
  /** Bounds of what forms and questions may hold to be shown to a person (default 8 questions, 32 choices). */
  readonly safety?: SafetyFilter.Limits
}

/**
 * The former name of {@link ConnectionCards}, kept so that existing code compiles.
 *
 * @deprecated Use {@link ConnectionCards}: the same interface under the name that says what it is.
 */
export type Desk = ConnectionCards

/**
 * The former name of {@link DecisionConfig}, kept so that existing code compiles.
 *
 * @deprecated Use {@link DecisionConfig}: the same interface under the name that says what it is.
 */
export type DeskConfig = DecisionConfig

/** Where a card's answer goes, written synchronously without blocking (false when nothing could be written). */
export interface Line {
  readonly write: (frame: Record<string, unknown>) => boolean
  readonly isOpen: () => boolean
}

/** Why a card closed before a decision. */
export type CloseReason =
  | { readonly _tag: "Withdrawn" }
  | { readonly _tag: "ConnectionLost"; readonly detail: string }
  | { readonly _tag: "ThreadStopped" }
  | { readonly _tag: "TurnEnded" }
  | { readonly _tag: "Shutdown" }

/**
 * A program that decides cards, given each card's masked view.
 *
 * It returns the decision, or `undefined` for no opinion (a person through `answer`, or the
 * deadline, decides then).
 *
 * It is never called on the connection's read loop: it is called after the loop's step (a task of
 * the loop's scheduler), after the rules and the safety filter, and what it returns runs in a fiber
 * of its own, interrupted when its card settles without it. An Effect that is already its own
 * result (`Effect.succeed(…)`, `Effect.fail(…)`) settles the card at once, without a fiber. With
 * telemetry (or an embedder's tracer) the card's `warden.card.handler` span is made when it is
 * called: what it returns runs in that span (an answer ready at once ends it right there). A
 * Promise is accepted as well as an Effect. A failure, a defect, a synchronous throw, a rejection,
 * or a return that is neither an Effect nor a Promise refuses that card alone (outcome `refused`,
 * source `handler`);
 * one that never returns leaves the card to its deadline or its thread's close.
 *
 * @example
 * ```ts
 * const handler: Approvals.Handler = (card) =>
 *   Effect.succeed(card.summary.kind === "command" && card.summary.argv?.[0] === "echo" ? Decision.Accept : undefined)
 * ```
 */
export type Handler = (card: CardView) => Effect.Effect<Decision.Decision | undefined, unknown>

/** Where small fibers go, a long-lived owner's fiber set (started after the caller's synchronous step). */
export interface FiberOwner {
  /** Run an effect in the owner's fiber set, after the caller's synchronous step (not on its stack). */
  readonly fork: (effect: Effect.Effect<void>) => void
  /** The same, returning the fiber. */
  readonly spawn: (effect: Effect.Effect<void>) => Fiber.RuntimeFiber<void>
}
