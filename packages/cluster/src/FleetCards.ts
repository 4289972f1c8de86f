/**
 * The fleet's one inbox: every runner's open cards, read from the fleet's store, and answers
 * routed to each card's item, on whichever runner drives it now (`ClusterClient.answer`), where
 * the first answer wins fleet-wide (the runner records the settlement in the store before it
 * writes to codex). What `warden fleet --inbox` serves, and what `FleetFacade` offers code
 * without Effect.
 *
 * It reads the store every `pollInterval` (default 1 s): the open cards (`warden_cluster_cards`
 * rows not settled, found by a partial index), the settlement of each card that stopped being
 * open, and the items that are not finished or changed since it started. Each card is the masked
 * view its runner stored when it opened (a card stored without one, by an older runner, is shown
 * from its row and offers only `Decline`). A store that cannot be read is said once on the log and
 * read again at the next tick; what was known stays shown.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Card } from "@warden/approvals"
import type { Decision } from "@warden/protocol"
import { Context, Data, Duration, Effect, Either, Layer, PubSub, Schedule } from "effect"
import type { Queue } from "effect"
import type { Scope } from "effect"
import { ClusterClient } from "./Client.js"
import * as CardView from "./internal/CardView.js"
import { type CardRow, toCard } from "./internal/ItemStore.js"
import * as Migrations from "./internal/Migrations.js"

/** How a card of the fleet settled, as its row says. */
export interface FleetSettlement {
  /** The card's fleet-wide id (`<runner run id>:<card id>`). */
  readonly cardId: string
  readonly itemId: string
  /** `accepted`, `declined`, `refused`, `timeout`, `stranded` (its runner lost the item), ... */
  readonly outcome: string
  /** Who settled it, as stored: `person`, `stranded`, or the engine's source (`Rule`, `Deadline`, `ThreadStopped`, ...). */
  readonly source: string
  /** When (epoch ms; the settling runner's clock). */
  readonly settledAt: number
  /** From the card's opening to its settlement. */
  readonly latencyMs: number
}

/** A work item of the fleet, as its row says. */
export interface FleetItem {
  readonly id: string
  /** `running`, `stop-requested`, `completed`, `failed`, `stopped`. */
  readonly status: string
  /** The runner (`host:port`) that holds or last held it. */
  readonly runner: string | null
  readonly threadId: string | null
  readonly turnsDone: number
  readonly moves: number
  readonly updatedAt: number
}

/** What changed in the fleet since the last reading of its store. */
export type FleetCardEvent =
  | { readonly _tag: "Opened"; readonly card: Card.CardView }
  | { readonly _tag: "Settled"; readonly card: Card.CardView; readonly settlement: FleetSettlement }
  | { readonly _tag: "Item"; readonly item: FleetItem }

/** What answering a card of the fleet did. */
export type FleetAnswer =
  /** This answer decided the card (on the runner that drives its item). */
  | { readonly _tag: "Settled"; readonly settlement: FleetSettlement }
  /** The card had settled already (by someone else, its deadline, or `stranded`): nothing was written. */
  | { readonly _tag: "AlreadySettled"; readonly settlement: FleetSettlement }
  /** No card of the fleet has this id, or the runner that drives its item does not know it: nothing was written. */
  | { readonly _tag: "UnknownCard"; readonly cardId: string }
  /**
   * The answer did not reach the item's runner in time (`answerTimeout`), or the store could not
   * be read: the card stays open unless the answer arrives after all (the first answer wins).
   */
  | { readonly _tag: "NotDelivered"; readonly cardId: string; readonly detail: string }

/** The fleet's one inbox. */
export interface FleetCardsShape {
  /** The open cards as of the last reading of the store, oldest first. */
  readonly openCards: Effect.Effect<ReadonlyArray<Card.CardView>>
  /** The items as of the last reading: every unfinished one, and those that changed since this started. */
  readonly items: Effect.Effect<ReadonlyArray<FleetItem>>
  /** Every change from now on (subscribe before reading `openCards`, so that nothing is missed). */
  readonly subscribe: Effect.Effect<Queue.Dequeue<FleetCardEvent>, never, Scope.Scope>
  /** Answer a card by its fleet-wide id, through its item's entity. Never fails. */
  readonly answer: (cardId: string, decision: Decision.Decision) => Effect.Effect<FleetAnswer>
}

/** The `FleetCards` service tag. */
export class FleetCards extends Context.Tag("@warden/cluster/FleetCards")<FleetCards, FleetCardsShape>() {}

/** How `FleetCards` reads and answers. */
export interface FleetCardsOptions {
  /** How often the store is read (default 1 second). */
  readonly pollInterval?: Duration.DurationInput
  /** How long an answer may take to reach the item's runner and come back (default 90 seconds). */
  readonly answerTimeout?: Duration.DurationInput
}

/** The fleet's store could not be read (or its schema brought up to date) when the inbox started. */
export class FleetStoreError extends Data.TaggedError("FleetStoreError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

const describe = (error: unknown) =>
  error instanceof Error
    ? error.message
    : typeof error === "object" && error !== null
      ? String((error as { _tag?: unknown })._tag)
      : String(error)

const finalStatuses = ["completed", "failed", "stopped"] as const

const settlementOf = (row: CardRow): FleetSettlement => ({
  cardId: row.id,
  itemId: row.itemId,
  outcome: row.outcome ?? "open",
  source: row.source ?? "unknown",
  settledAt: row.settledAt ?? 0,
  latencyMs: Math.max(0, (row.settledAt ?? row.openedAt) - row.openedAt)
})

const itemOf = (r: Record<string, unknown>): FleetItem => ({
  id: String(r["id"]),
  status: String(r["status"]),
  runner: r["runner"] === null || r["runner"] === undefined ? null : String(r["runner"]),
  threadId: r["thread_id"] === null || r["thread_id"] === undefined ? null : String(r["thread_id"]),
  turnsDone: Number(r["turns_done"] ?? 0),
  moves: Number(r["moves"] ?? 0),
  updatedAt: Number(r["updated_at"] ?? 0)
})

const sameItem = (a: FleetItem, b: FleetItem) =>
  a.status === b.status &&
  a.runner === b.runner &&
  a.threadId === b.threadId &&
  a.turnsDone === b.turnsDone &&
  a.moves === b.moves

/**
 * The fleet's one inbox over the store and client in context; its reading fiber lives in the
 * caller's scope. Fails when the store cannot be read at the start (its schema brought up to date
 * first, as a runner does).
 */
export const make = (
  options: FleetCardsOptions = {}
): Effect.Effect<FleetCardsShape, FleetStoreError, SqlClient.SqlClient | ClusterClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const client = yield* ClusterClient
    const unreachable = (error: unknown) =>
      new FleetStoreError({ detail: `the fleet's store cannot be read: ${describe(error)}` })
    yield* Migrations.run.pipe(Effect.mapError(unreachable))
    const answerTimeout = Duration.decode(options.answerTimeout ?? "90 seconds")
    const startedAt = Date.now()
    const open = new Map<string, Card.CardView>()
    const items = new Map<string, FleetItem>()
    const changes = yield* PubSub.unbounded<FleetCardEvent>()

    const readCard = (id: string) =>
      Effect.map(sql`SELECT * FROM warden_cluster_cards WHERE id = ${id}`, (rows) =>
        rows[0] === undefined ? undefined : toCard(rows[0])
      )

    // One reading: every change found is published in one go, after the state was brought up to it.
    const read = Effect.gen(function* () {
      const openRows =
        (yield* sql`SELECT * FROM warden_cluster_cards WHERE outcome IS NULL ORDER BY opened_at, id`).map(toCard)
      const found: Array<FleetCardEvent> = []
      const nowOpen = new Set(openRows.map((r) => r.id))
      const gone = [...open.keys()].filter((id) => !nowOpen.has(id))
      if (gone.length > 0) {
        const rows = (yield* sql`SELECT * FROM warden_cluster_cards WHERE ${sql.in("id", gone)}`).map(toCard)
        const byId = new Map(rows.map((r) => [r.id, r]))
        for (const id of gone) {
          const row = byId.get(id)
          const card = open.get(id)!
          open.delete(id)
          found.push({
            _tag: "Settled",
            card,
            settlement:
              row !== undefined && row.outcome !== null
                ? settlementOf(row)
                : {
                    cardId: id,
                    itemId: String(card.workItem ?? ""),
                    outcome: "gone",
                    source: "unknown",
                    settledAt: Date.now(),
                    latencyMs: Date.now() - card.openedAt
                  }
          })
        }
      }
      for (const row of openRows) {
        if (open.has(row.id)) continue
        const card = CardView.decode(row)
        open.set(row.id, card)
        found.push({ _tag: "Opened", card })
      }
      const itemRows = yield* sql`SELECT id, status, runner, thread_id, turns_done, moves, updated_at
        FROM warden_cluster_items
        WHERE status NOT IN ${sql.in(finalStatuses)} OR updated_at >= ${startedAt - 60_000}
        ORDER BY id`
      for (const r of itemRows) {
        const item = itemOf(r)
        const known = items.get(item.id)
        if (known !== undefined && sameItem(known, item)) continue
        items.set(item.id, item)
        found.push({ _tag: "Item", item })
      }
      if (found.length > 0) yield* PubSub.publishAll(changes, found)
    })

    // The first reading before anything is offered: a store that cannot be read fails the start.
    yield* read.pipe(Effect.mapError(unreachable))
    let failing = false
    yield* read.pipe(
      Effect.tap(() =>
        failing
          ? Effect.sync(() => (failing = false)).pipe(
              Effect.zipRight(Effect.logInfo("fleet inbox: the store is read again"))
            )
          : Effect.void
      ),
      Effect.catchAll((error) =>
        failing
          ? Effect.void
          : Effect.sync(() => (failing = true)).pipe(
              Effect.zipRight(
                Effect.logWarning(
                  `fleet inbox: the store cannot be read (${error.message}); what was known stays shown, reading again every tick`
                )
              )
            )
      ),
      Effect.repeat(Schedule.spaced(options.pollInterval ?? "1 second")),
      Effect.interruptible,
      Effect.forkScoped
    )

    const answer = (cardId: string, decision: Decision.Decision): Effect.Effect<FleetAnswer> =>
      Effect.gen(function* () {
        const row = yield* Effect.either(readCard(cardId))
        if (Either.isLeft(row))
          return {
            _tag: "NotDelivered",
            cardId,
            detail: `the fleet's store cannot be read (${row.left.message})`
          } as const
        if (row.right === undefined) return { _tag: "UnknownCard", cardId } as const
        const card = row.right
        if (card.outcome !== null) return { _tag: "AlreadySettled", settlement: settlementOf(card) } as const
        const sent = yield* client.answer(card.itemId, cardId, decision).pipe(
          Effect.timeoutFail({
            duration: answerTimeout,
            onTimeout: () => ({ _tag: "Timeout" as const })
          }),
          Effect.either
        )
        if (Either.isLeft(sent))
          return {
            _tag: "NotDelivered",
            cardId,
            detail:
              sent.left._tag === "Timeout"
                ? `no answer from item ${card.itemId}'s runner within ${Duration.format(answerTimeout)}`
                : `item ${card.itemId}'s runner was not reached (${sent.left._tag})`
          } as const
        const result = sent.right
        switch (result._tag) {
          case "Settled": {
            const settledAt = Date.now()
            return {
              _tag: "Settled",
              settlement: {
                cardId,
                itemId: card.itemId,
                outcome: result.outcome,
                source: "person",
                settledAt,
                latencyMs: Math.max(0, settledAt - card.openedAt)
              }
            } as const
          }
          case "AlreadySettled": {
            const now = yield* Effect.either(readCard(cardId))
            const stored = Either.isRight(now) ? now.right : undefined
            return {
              _tag: "AlreadySettled",
              settlement:
                stored !== undefined && stored.outcome !== null
                  ? settlementOf(stored)
                  : { ...settlementOf(card), outcome: result.outcome }
            } as const
          }
          case "UnknownCard":
            return { _tag: "UnknownCard", cardId } as const
        }
      })

    return {
      openCards: Effect.sync(() => [...open.values()].sort((a, b) => a.openedAt - b.openedAt)),
      items: Effect.sync(() => [...items.values()]),
      subscribe: PubSub.subscribe(changes),
      answer
    } satisfies FleetCardsShape
  })

/** {@link make} as a layer over the store and the client in context. */
export const layer = (
  options: FleetCardsOptions = {}
): Layer.Layer<FleetCards, FleetStoreError, SqlClient.SqlClient | ClusterClient> =>
  Layer.scoped(FleetCards, make(options))
