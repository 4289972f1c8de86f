/**
 * A proposed rule offered where a person answers: when a person accepts a card, and what was
 * decided so far (the newest `window` recorded cards, 10 000 by default, this acceptance included)
 * makes a proposal of `Suggest` whose evidence is this card (accepted at least `min` times, never
 * declined, proven by replay against those cards with the rules in force), that proposal is
 * offered. Taking it is an explicit
 * act: a remembered rule in the ledger (who took it, from which card, the proposal's summary as
 * its note), in force at once for this run and for every later one, revoked like any other
 * (`warden rules revoke`). Nothing is taken by itself.
 *
 * Offers are made off the engine's read loop (they read the ledger): call `after` from the fiber
 * that answered the card (the inbox's request, the terminal prompt).
 *
 * @example
 * ```ts
 * import { Ledger, Offers, Remembering } from "@warden/ledger"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const ledger = yield* Ledger.Ledger
 *   const run = yield* ledger.beginRun({ label: "nightly" })
 *   const remembering = yield* Remembering.make(ledger, run.id)
 *   const offers = Offers.make(ledger, remembering, run.id, { rules: { rules: [] } })
 *   // After a person accepted card c7:
 *   const offer = yield* offers.after("c7")
 *   if (offer !== undefined) yield* offers.take(offer.id, "alice")
 * })
 * ```
 */
import type { Policy } from "@warden/approvals"
import { Effect, Either } from "effect"
import type { CardPosition, CardRecord, LedgerError } from "./Ledger.js"
import type { LedgerShape } from "./Ledger.js"
import { yieldToLoop } from "./internal/Steps.js"
import type * as Remembered from "./Remembered.js"
import type { Remembering } from "./Remembering.js"
import * as Suggest from "./Suggest.js"

/** A proposal as it is offered to the person who just accepted one of its cards. */
export interface Offer {
  /** The proposal's id (`suggested-...`): what `take` takes. */
  readonly id: string
  /** One line: what it allows, its evidence and what it would have saved. */
  readonly summary: string
  /** The rule in full, as a rules file holds it (YAML, with its evidence as a comment). */
  readonly rule: string
  /** The cards it was proposed from (the newest `window`) replayed with the rules in force and this one. */
  readonly replay: Suggest.Proposal["replay"]
  /** How many accepted cards are its evidence. */
  readonly evidence: number
}

/** Offers for one run's cards. */
export interface Offers {
  /**
   * The offer an acceptance of card `cardId` (of this run) makes, if any: the proposal whose
   * evidence holds it and that a remembered rule can hold. Never fails: a ledger that cannot be
   * read offers nothing, and a warning says why (the acceptance itself stands).
   */
  readonly after: (cardId: string) => Effect.Effect<Offer | undefined>
  /**
   * Take an offer made by `after` in this run: a remembered rule authored by `author`. Left: why
   * nothing was remembered (no such offer, or the ledger refused or could not store it).
   */
  readonly take: (id: string, author: string) => Effect.Effect<Either.Either<Remembered.RememberedRule, string>>
}

/** How offers are made. */
export interface OffersOptions {
  /** The rules in force (the run's `--rules`): the proposal is replayed with them. */
  readonly rules: Policy.Rules
  /** Acceptances needed before a rule is offered (default 3, as `Suggest`'s `min`). */
  readonly min?: number
  /**
   * How many of the newest recorded cards (of every run) an offer is proposed from and replayed
   * over (default 10 000): the acceptance that asks is always among them, and the work of an
   * acceptance stays bounded however large the ledger grows.
   */
  readonly window?: number
}

/** `OffersOptions.window`'s default. */
const DefaultWindow = 10_000

/**
 * How many cards one read of an offer takes: the SQLite driver is synchronous, and 10,000 cards
 * in one read held the event loop ~0.2-0.3 s; in pages this size, with a turn of the event loop
 * between them, 5-8 ms each.
 */
export const PageSize = 250

/**
 * The newest `window` cards of the record, listed oldest first, read in pages of `PageSize` (the
 * newest first), the event loop turning between them. Cards the writer commits meanwhile are
 * newer than the first page: they are not read.
 */
const newestInPages = (ledger: LedgerShape, window: number): Effect.Effect<ReadonlyArray<CardRecord>, LedgerError> =>
  Effect.gen(function* () {
    const pages: Array<ReadonlyArray<CardRecord>> = []
    let left = Math.max(0, Math.floor(window))
    let before: CardPosition | undefined
    while (left > 0) {
      const limit = Math.min(PageSize, left)
      const page = yield* ledger.cards({ newest: true, limit, ...(before !== undefined ? { before } : {}) })
      pages.push(page)
      left -= page.length
      // Fewer than asked: the record has no older card.
      if (page.length < limit) break
      const oldest = page[0]!
      before = { openedAt: oldest.openedAt, runId: oldest.runId, cardId: oldest.cardId }
      if (left > 0) yield* yieldToLoop
    }
    return pages.reverse().flat()
  })

/** Offers for the run `runId`, over `ledger`, remembering through `remembering` (its snapshot updated at once). */
export const make = (ledger: LedgerShape, remembering: Remembering, runId: string, options: OffersOptions): Offers => {
  const offered = new Map<string, { readonly proposal: Suggest.Proposal; readonly cardId: string }>()
  const after = (cardId: string): Effect.Effect<Offer | undefined> =>
    Effect.gen(function* () {
      // The acceptance is recorded by the ledger's writer: written before the record is read.
      yield* ledger.flush
      // The newest cards, this acceptance among them: the oldest ones (the default read) left it
      // out once the ledger held more than the window, and no rule was ever offered again.
      const cards = yield* newestInPages(ledger, options.window ?? DefaultWindow)
      // Only the proposal this card is evidence of is tried (a whole suggestion replays every
      // group over the whole record: ~0.7 s of the event loop for 5,000 cards, at each acceptance).
      // Paced: the suggestion over the window's cards (~0.2 s for 10,000) lets the event loop turn
      // every few milliseconds, as the pages above do.
      const found = yield* Suggest.suggestPaced(cards, options.rules, {
        ...(options.min !== undefined ? { min: options.min } : {}),
        remembered: remembering.rules(),
        now: Date.now(),
        evidenceOf: { runId, cardId }
      })
      const proposal = found.proposals.find(
        (p) =>
          p.rule.effect === "allow" &&
          p.evidence.some((e) => e.runId === runId && e.cardId === cardId) &&
          Either.isRight(Suggest.rememberedScope(p))
      )
      if (proposal === undefined) return undefined
      offered.set(proposal.rule.id, { proposal, cardId })
      return {
        id: proposal.rule.id,
        summary: proposal.summary,
        rule: Suggest.rulesFile({ proposals: [proposal], excluded: [], cards: found.cards }),
        replay: proposal.replay,
        evidence: proposal.evidence.length
      } satisfies Offer
    }).pipe(
      Effect.catchAll((error) =>
        Effect.as(
          Effect.logWarning(`no rule is offered for card ${cardId}: the ledger could not be read (${error.message})`),
          undefined
        )
      )
    )
  const take = (id: string, author: string) =>
    Effect.gen(function* () {
      const made = offered.get(id)
      if (made === undefined) return Either.left(`no rule ${id} was offered in this run`)
      const scope = Suggest.rememberedScope(made.proposal)
      if (Either.isLeft(scope)) return Either.left(scope.left)
      const rule = yield* remembering
        .scoped(scope.right, {
          author,
          from: { runId, cardId: made.cardId },
          note: `offered on acceptance (${id}): ${made.proposal.summary}`
        })
        .pipe(Effect.either)
      if (Either.isLeft(rule)) return Either.left(rule.left.message)
      offered.delete(id)
      return Either.right(rule.right)
    })
  return { after, take }
}
