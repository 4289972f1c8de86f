/**
 * What the web inbox serves: a source of open cards, their changes and work items, and a way to
 * answer a card. A supervisor is one (`fromSupervisor`); a fleet's one inbox is another (the CLI
 * makes it from `@warden/cluster`'s `FleetCards`).
 *
 * @internal
 */
import type { ApprovalEvent, Card } from "@warden/approvals"
import type { Decision } from "@warden/protocol"
import type { Supervisor } from "@warden/supervisor"
import { Effect, Queue } from "effect"
import type { Scope } from "effect"
import type { ItemJson, SettlementJson } from "../InboxApi.js"
import * as InboxBoard from "./Board.js"

/** A settled card: what was asked, and how it settled (masked). */
export interface SettledCard {
  readonly card: Card.CardView
  readonly settlement: SettlementJson
}

/**
 * A change the inbox shows. Supervisor events feed its item rows through the board's reducer; a
 * source that keeps its own rows sends `ItemUpdated` with the whole row.
 */
export type SourceEvent =
  | { readonly _tag: "CardOpened"; readonly card: Card.CardView }
  | { readonly _tag: "CardSettled"; readonly settled: SettledCard }
  | { readonly _tag: "ItemUpdated"; readonly item: ItemJson }
  | { readonly _tag: "Supervisor"; readonly event: Supervisor.SupervisorEvent }

/** What answering a card did. */
export type SourceAnswer =
  | { readonly _tag: "Settled"; readonly settlement: SettlementJson }
  | { readonly _tag: "AlreadySettled"; readonly settlement: SettlementJson }
  | { readonly _tag: "UnknownCard" }
  /** The answer did not reach whoever decides the card (`reason`); the card stays open. */
  | { readonly _tag: "NotDelivered"; readonly reason: string }

/** What the web inbox serves. */
export interface Source {
  /** The cards open now. */
  readonly openCards: Effect.Effect<ReadonlyArray<Card.CardView>>
  /** Every change from now on, in the order it happened; subscribe before reading `openCards`. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<SourceEvent>, never, Scope.Scope>
  /** The item rows known at the start (a source that sends `ItemUpdated`). */
  readonly items?: Effect.Effect<ReadonlyArray<ItemJson>>
  /** Answer a card as a person through `channel` (`web`, `link`). Never fails. */
  readonly answer: (cardId: string, decision: Decision.Decision, channel: string) => Effect.Effect<SourceAnswer>
}

const settledOf = (s: Card.Settlement): SettledCard => ({ card: s.card, settlement: InboxBoard.settlementJson(s) })

/** The cards and work items of `supervisor` (answered through its approvals engine: the first answer wins). */
export const fromSupervisor = (supervisor: Supervisor.SupervisorShape): Source => ({
  openCards: supervisor.approvals.openCards,
  subscribe: Effect.gen(function* () {
    const approvals = yield* supervisor.subscribeApprovals
    const events = yield* supervisor.subscribe
    const out = yield* Effect.acquireRelease(Queue.unbounded<SourceEvent>(), Queue.shutdown)
    // Each batch stays together (a card settled in the batch it opened in is not announced).
    const pump = <A>(from: Queue.Dequeue<A>, as: (a: A) => SourceEvent | undefined) =>
      Queue.takeBetween(from, 1, Number.MAX_SAFE_INTEGER).pipe(
        Effect.flatMap((batch) => {
          const mapped: Array<SourceEvent> = []
          for (const a of batch) {
            const e = as(a)
            if (e !== undefined) mapped.push(e)
          }
          return Queue.offerAll(out, mapped)
        }),
        Effect.forever,
        Effect.interruptible,
        Effect.forkScoped
      )
    yield* pump(approvals, (e: ApprovalEvent.ApprovalEvent): SourceEvent | undefined =>
      e._tag === "CardOpened"
        ? { _tag: "CardOpened", card: e.card }
        : e._tag === "CardSettled"
          ? { _tag: "CardSettled", settled: settledOf(e.settlement) }
          : undefined
    )
    yield* pump(events, (event: Supervisor.SupervisorEvent): SourceEvent => ({ _tag: "Supervisor", event }))
    return out
  }),
  answer: (cardId, decision, channel) =>
    Effect.map(supervisor.approvals.answer(cardId, decision, channel), (result): SourceAnswer => {
      switch (result._tag) {
        case "Settled":
          return { _tag: "Settled", settlement: InboxBoard.settlementJson(result.settlement) }
        case "AlreadySettled":
          return { _tag: "AlreadySettled", settlement: InboxBoard.settlementJson(result.settlement) }
        case "UnknownCard":
          return { _tag: "UnknownCard" }
      }
    })
})
