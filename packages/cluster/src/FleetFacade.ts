/**
 * The fleet's one inbox for code without Effect: `connectFleet({ cluster })` gives the open cards
 * of every runner of a fleet, their changes as an async iterable, and `answer`, routed to each
 * card's item wherever it runs now (the first answer wins fleet-wide). It is a client-only node
 * of the fleet (it owns no shards) with `FleetCards` on it, in a ManagedRuntime that `close` disposes.
 *
 * @example
 * ```ts
 * import { connectFleet } from "@warden/cluster"
 *
 * const fleet = await connectFleet({ cluster: "postgres://warden@db.internal/warden" })
 * for await (const update of fleet.cards()) {
 *   if (update._tag === "Opened" && update.card.summary.kind === "command" && update.card.summary.command.startsWith("ls"))
 *     console.log(await fleet.answer(update.card.id, "accept"))
 * }
 * ```
 */
import type { Card } from "@warden/approvals"
import { Facade } from "@warden/supervisor"
import { Cause, Effect, Exit, Layer, ManagedRuntime, Stream } from "effect"
import type { ShardingConfig } from "@effect/cluster"
import * as ClusterClient from "./Client.js"
import * as FleetCards from "./FleetCards.js"
import * as Storage from "./Storage.js"

/** How to reach a fleet. */
export interface FleetFacadeConfig {
  /** The fleet's store: `postgres://...` or `sqlite:PATH` (as `warden runner --cluster`). */
  readonly cluster: string
  /** The engine's settings the fleet's runners were given (their `--sharding`), if any. */
  readonly sharding?: Partial<ShardingConfig.ShardingConfig["Type"]>
  /** How often the store is read (default 1 second) and how long an answer may take (default 90 seconds). */
  readonly pollInterval?: FleetCards.FleetCardsOptions["pollInterval"]
  readonly answerTimeout?: FleetCards.FleetCardsOptions["answerTimeout"]
}

/** What the fleet's inbox sees: the open cards first, then every change (as `Approvals.InboxUpdate`, with the fleet's settlements). */
export type FleetInboxUpdate =
  | { readonly _tag: "Snapshot"; readonly cards: ReadonlyArray<Card.CardView> }
  | { readonly _tag: "Opened"; readonly card: Card.CardView }
  | {
      readonly _tag: "Settled"
      readonly card: Card.CardView
      readonly settlement: FleetCards.FleetSettlement
    }

/** A connection to a fleet's one inbox. */
export interface WardenFleet {
  /** Every runner's open cards, as of the last reading of the store (default every second). */
  readonly openCards: () => Promise<ReadonlyArray<Card.CardView>>
  /** The open cards, then every card that opens or settles, until `close` (or the loop is left). */
  readonly cards: () => AsyncIterable<FleetInboxUpdate>
  /** The fleet's items: every unfinished one, and those that changed since the connection was made. */
  readonly items: () => Promise<ReadonlyArray<FleetCards.FleetItem>>
  /**
   * Answer a card by its fleet-wide id, on the runner that drives its item now. Never rejects for
   * what the fleet did: `Settled`, `AlreadySettled`, `UnknownCard`, or `NotDelivered` (the runner
   * was not reached in time; the card stays open). Rejects with a `TypeError` for an input that is
   * not a decision.
   */
  readonly answer: (cardId: string, decision: Facade.DecisionInput) => Promise<FleetCards.FleetAnswer>
  /** Disconnects (ends every `cards()` loop). Cards stay as they are on the fleet. */
  readonly close: () => Promise<void>
}

const settle = <A, E>(exit: Exit.Exit<A, E>): Promise<A> =>
  Exit.isSuccess(exit) ? Promise.resolve(exit.value) : Promise.reject(Cause.squash(exit.cause))

/**
 * Connects to the fleet at `config.cluster`. Rejects with `FleetStoreError` when its store cannot
 * be read.
 */
export const connectFleet = async (config: FleetFacadeConfig): Promise<WardenFleet> => {
  const live = FleetCards.layer({
    ...(config.pollInterval !== undefined ? { pollInterval: config.pollInterval } : {}),
    ...(config.answerTimeout !== undefined ? { answerTimeout: config.answerTimeout } : {})
  }).pipe(
    Layer.provideMerge(ClusterClient.layer(config.sharding !== undefined ? { sharding: config.sharding } : {})),
    Layer.provideMerge(Storage.layer(config.cluster))
  )
  const runtime = ManagedRuntime.make(live)
  const fleet = await runtime.runPromiseExit(FleetCards.FleetCards).then(async (exit) => {
    if (Exit.isFailure(exit)) await runtime.dispose()
    return settle(exit)
  })
  const rt = await runtime.runtime()
  const run = <A, E>(effect: Effect.Effect<A, E>) => runtime.runPromiseExit(effect).then(settle)
  const updates: Stream.Stream<FleetInboxUpdate> = Stream.unwrapScoped(
    Effect.gen(function* () {
      // Subscribed before the snapshot: nothing after it is missed (an Opened may repeat a card of it).
      const changes = yield* fleet.subscribe
      const snapshot = yield* fleet.openCards
      const first: FleetInboxUpdate = { _tag: "Snapshot", cards: snapshot }
      const rest: Stream.Stream<FleetInboxUpdate> = Stream.fromQueue(changes).pipe(
        Stream.filter((e): e is Exclude<FleetCards.FleetCardEvent, { _tag: "Item" }> => e._tag !== "Item")
      )
      return Stream.concat(Stream.succeed(first), rest)
    })
  )
  return {
    openCards: () => run(fleet.openCards),
    cards: () => Stream.toAsyncIterableRuntime(updates, rt),
    items: () => run(fleet.items),
    answer: (cardId, decision) => Promise.resolve().then(() => run(fleet.answer(cardId, Facade.toDecision(decision)))),
    close: () => runtime.dispose()
  }
}
