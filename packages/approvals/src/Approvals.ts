/**
 * The Approvals service, one per supervisor. It makes a desk per connection, keeps every open
 * card reachable by id for inboxes (`answer`), fans events out to subscribers (audit, CLI, UIs),
 * and on shutdown settles whatever is still open with a refusal.
 */
import type { Decision } from "@warden/protocol"
import { Cause, Chunk, Context, Effect, FiberSet, Layer, Option, PubSub, Queue, Stream } from "effect"
import type { Scope } from "effect"
import type { ApprovalEvent } from "./ApprovalEvent.js"
import type { CardId, CardView, Settlement, Source } from "./Card.js"
import * as CardGroup from "./CardGroup.js"
import type { Line } from "./internal/CardRace.js"
import { LiveCard } from "./internal/CardRace.js"
import * as Config from "./Config.js"
import type { ConfigError } from "./Config.js"
import * as Desk from "./internal/Desk.js"
import type { FiberOwner, Hub } from "./internal/Hub.js"

export type { Desk, DeskConfig, OpenOptions, OpenResult } from "./internal/Desk.js"
export type { CloseReason, Handler, Line } from "./internal/CardRace.js"
export type { FiberOwner } from "./internal/Hub.js"

/**
 * The approvals engine's configuration.
 *
 * The desk settings every connection's desk starts from (deadlines, rules, handler, safety limits)
 * and how many settled cards are remembered for late answers. Decoded once by {@link make} /
 * {@link layer}; a bad value is a `ConfigError`.
 */
export interface ApprovalsConfig extends Desk.DeskConfig {
  /**
   * How many settled cards are remembered so a late answer can say which outcome won (default
   * 1,000, the most recent ones): an answer to a card settled longer ago is `UnknownCard`, and
   * decides nothing either. Each remembered settlement keeps its card's view (~3 KiB), so this
   * bounds what a long run holds (docs/performance.md, flat memory).
   */
  readonly settledHistory?: number
}

/** How many settled cards are remembered for late answers unless `settledHistory` says otherwise. */
export const DefaultSettledHistory = 1_000

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
 * A queue as a stream of drained batches: waits for one element, then takes every one queued
 * behind it, as one chunk (`Stream.fromQueue` hands a waiting taker the first element alone). Ends
 * when the queue is shut down.
 */
const drainedBatches = <A>(queue: Queue.Dequeue<A>): Stream.Stream<A> =>
  Stream.repeatEffectChunkOption(
    Queue.take(queue).pipe(
      Effect.flatMap((first) => Effect.map(Queue.takeAll(queue), (rest) => Chunk.prepend(rest, first))),
      Effect.catchAllCause((cause) =>
        Effect.flatMap(Queue.isShutdown(queue), (down) => (down && Cause.isInterruptedOnly(cause) ? Effect.fail(Option.none()) : Effect.failCause(cause)))
      )
    )
  )

/**
 * The approvals engine, as the `Approvals` service provides it.
 *
 * Desks for connections (the supervisor makes one per app-server connection), the inbox through
 * which a person or program answers open cards, and the event stream. None of its operations
 * fails.
 */
export interface ApprovalsShape {
  /**
   * A desk for one connection: its cards answer through `line`; its deadline timer and card
   * fibers live in `owner` (the connection's scope; the engine's when omitted).
   */
  readonly desk: (line: Line, overrides?: Partial<Desk.DeskConfig>, owner?: FiberOwner) => Desk.Desk
  /** The cards open now, across every desk. */
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
  readonly answerGroup: (group: CardGroup.GroupId, decision: Decision.Decision, channel?: string) => Effect.Effect<GroupAnswer>
  /** Subscribe before acting, so no event is missed. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<ApprovalEvent>, never, Scope.Scope>
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
  Effect.gen(function*() {
    const config = yield* Config.decode(input)
    const clock = yield* Effect.clock
    const pubsub = yield* PubSub.unbounded<ApprovalEvent>()
    const runFork = yield* FiberSet.makeRuntime<never>()
    const open = new Map<CardId, LiveCard>()
    const settled = new Map<CardId, Settlement>()
    const historyLimit = config.settledHistory ?? DefaultSettledHistory
    let counter = 0

    const hub: Hub = {
      now: () => clock.unsafeCurrentTimeMillis(),
      nanos: () => clock.unsafeCurrentTimeNanos(),
      nextCardId: () => `c${++counter}`,
      register: (card) => {
        open.set(card.view.id, card)
      },
      unregister: (card) => {
        open.delete(card.view.id)
        if (card.settlement) {
          settled.set(card.view.id, card.settlement)
          if (settled.size > historyLimit) settled.delete(settled.keys().next().value!)
        }
      },
      publish: (event) => {
        pubsub.unsafeOffer(event)
      },
      // Not on the caller's stack (runFork would start the fiber right there): a caller settling
      // thousands of cards in one synchronous step finishes that step first.
      fork: (effect) => {
        runFork(effect, { immediate: false })
      },
      spawn: (effect) => runFork(effect, { immediate: false })
    }

    // Shutdown: whatever is still open is refused (if its line can carry it) before we go.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const card of Array.from(open.values())) card.close({ _tag: "Shutdown" })
      })
    )

    const answer = (cardId: CardId, decision: Decision.Decision, channel?: string): Effect.Effect<AnswerResult> =>
      Effect.sync(() => {
        const source: Source = channel === undefined ? { _tag: "Person" } : { _tag: "Person", channel }
        const card = open.get(cardId)
        if (card) {
          const before = card.settlement
          const settlement = card.decide(decision, source)
          return before ? { _tag: "AlreadySettled", settlement } : { _tag: "Settled", settlement }
        }
        const done = settled.get(cardId)
        if (done) {
          hub.publish({
            _tag: "LateDecision",
            card: done.card,
            decision: decision._tag,
            source,
            outcome: done.outcome,
            at: hub.now()
          })
          return { _tag: "AlreadySettled", settlement: done }
        }
        return { _tag: "UnknownCard", cardId }
      })

    const subscribe = PubSub.subscribe(pubsub)

    const inbox: Stream.Stream<InboxUpdate> = Stream.unwrapScoped(
      Effect.map(subscribe, (queue) =>
        Stream.concat(
          Stream.sync((): InboxUpdate => ({ _tag: "Snapshot", cards: Array.from(open.values(), (c) => c.view) })),
          drainedBatches(queue).pipe(
            Stream.filterMap((event): Option.Option<InboxUpdate> => {
              switch (event._tag) {
                case "CardOpened":
                  return Option.some({ _tag: "Opened", card: event.card })
                case "CardSettled":
                  return Option.some({ _tag: "Settled", settlement: event.settlement })
                default:
                  return Option.none()
              }
            })
          )
        ))
    )

    const answerGroup = (group: CardGroup.GroupId, decision: Decision.Decision, channel?: string): Effect.Effect<GroupAnswer> =>
      Effect.suspend(() => {
        const members = Array.from(open.values(), (c) => c.view).filter((view) => CardGroup.groupOf(view) === group)
        const offered = members.filter((view) => view.offers.includes(decision._tag))
        return Effect.map(
          Effect.forEach(offered, (view) => Effect.map(answer(view.id, decision, channel), (result) => ({ cardId: view.id, result }))),
          (answered): GroupAnswer => ({
            group,
            answered,
            notOffered: members.filter((view) => !view.offers.includes(decision._tag)).map((view) => view.id)
          })
        )
      })

    return {
      desk: (line, overrides, owner) => Desk.make(line, hub, { ...config, ...overrides }, owner),
      openCards: Effect.sync(() => Array.from(open.values(), (c) => c.view)),
      answer,
      answerGroup,
      subscribe,
      events: Stream.fromPubSub(pubsub),
      inbox
    }
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
export const layer = (config: ApprovalsConfig = {}): Layer.Layer<Approvals, ConfigError> => Layer.scoped(Approvals, make(config))

