/**
 * The approvals engine, one per supervisor (`Approvals.make`): it makes the open-card registry of
 * each connection, keeps every open card reachable by id for inboxes (`answer`) and settled ones
 * for late answers, fans events out to subscribers (audit, CLI, UIs), and on shutdown settles
 * whatever is still open with a refusal.
 */
import type { Decision } from "@warden/protocol"
import { Cause, Chunk, Effect, FiberSet, Option, PubSub, Queue, Stream } from "effect"
import type { Scope } from "effect"
import type { ApprovalEvent } from "../ApprovalEvent.js"
import type {
  AnswerResult,
  Answering,
  ApprovalsConfig,
  ApprovalsShape,
  FiberOwner,
  GroupAnswer,
  InboxUpdate
} from "../Approvals.js"
import type { CardId, CardView, Outcome, Settlement, Source } from "../Card.js"
import * as CardGroup from "../CardGroup.js"
import * as Observers from "../Observers.js"
import * as ConnectionCards from "./ConnectionCards.js"
import type { PendingCard } from "./PendingCard.js"

/**
 * The engine-wide side of the cards, what every connection's open-card registry reaches: the
 * clock, card ids, the registry of every open card (the one `Approvals.answer` finds cards in),
 * the event fan-out, and the owner of the small fibers cards schedule when they settle.
 */
export interface Engine extends FiberOwner {
  /** Wall-clock time (epoch milliseconds): what cards show. */
  readonly now: () => number
  /** The Clock's monotonic nanoseconds: what deadlines are measured in. */
  readonly nanos: () => bigint
  readonly nextCardId: () => CardId
  readonly register: (card: PendingCard) => void
  readonly unregister: (card: PendingCard) => void
  readonly publish: (event: ApprovalEvent) => void
  /** An answer is about to be written: every `observeAnswers` observer, in order; never throws. */
  readonly answering: (card: CardView, outcome: Outcome, source: Source, decision: string | undefined) => void
}

/** `Approvals.DefaultSettledHistory`: settled cards remembered for late answers unless configured. */
export const DefaultSettledHistory = 1_000

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
        Effect.flatMap(Queue.isShutdown(queue), (down) =>
          down && Cause.isInterruptedOnly(cause) ? Effect.fail(Option.none()) : Effect.failCause(cause)
        )
      )
    )
  )

/** The engine for an already decoded configuration (`Approvals.make` decodes it). */
export const make = (config: ApprovalsConfig): Effect.Effect<ApprovalsShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const clock = yield* Effect.clock
    const pubsub = yield* PubSub.unbounded<ApprovalEvent>()
    const runFork = yield* FiberSet.makeRuntime<never>()
    const open = new Map<CardId, PendingCard>()
    const settled = new Map<CardId, Settlement>()
    const historyLimit = config.settledHistory ?? DefaultSettledHistory
    let counter = 0
    // Told once per observer that throws, after this step (never on the publisher's stack).
    const reportThrow = (what: string) => (defect: unknown) =>
      runFork(Effect.logError(`an observer of ${what} threw (said once per observer)`, Cause.die(defect)), {
        immediate: false
      })
    const eventObservers = Observers.make<ApprovalEvent>(reportThrow("approval events"))
    const answerObservers = Observers.make<Answering>(reportThrow("answers (the answer is written all the same)"))

    const engine: Engine = {
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
        eventObservers.deliver(event)
      },
      answering: (card, outcome, source, decision) => {
        if (!answerObservers.isEmpty()) answerObservers.deliver({ card, outcome, source, decision })
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
          engine.publish({
            _tag: "LateDecision",
            card: done.card,
            decision: decision._tag,
            source,
            outcome: done.outcome,
            at: engine.now()
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
        )
      )
    )

    const answerGroup = (
      group: CardGroup.GroupId,
      decision: Decision.Decision,
      channel?: string
    ): Effect.Effect<GroupAnswer> =>
      Effect.suspend(() => {
        const members = Array.from(open.values(), (c) => c.view).filter((view) => CardGroup.groupOf(view) === group)
        const offered = members.filter((view) => view.offers.includes(decision._tag))
        return Effect.map(
          Effect.forEach(offered, (view) =>
            Effect.map(answer(view.id, decision, channel), (result) => ({ cardId: view.id, result }))
          ),
          (answered): GroupAnswer => ({
            group,
            answered,
            notOffered: members.filter((view) => !view.offers.includes(decision._tag)).map((view) => view.id)
          })
        )
      })

    return {
      cardsFor: (line, overrides, owner) => ConnectionCards.make(line, engine, { ...config, ...overrides }, owner),
      openCards: Effect.sync(() => Array.from(open.values(), (c) => c.view)),
      answer,
      answerGroup,
      subscribe,
      observeAnswers: answerObservers.observe,
      observeEvents: eventObservers.observe,
      events: Stream.fromPubSub(pubsub),
      inbox
    }
  })
