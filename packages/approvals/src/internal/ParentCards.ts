/**
 * A connection's open cards by parent scope (the scope of the thread a card belongs to): the
 * first card under a parent adds ONE finalizer to it, which settles that parent's open cards when
 * it closes (the thread stopped, the supervisor shuts down). The list runs through the cards
 * themselves (`PendingCard.parentPrev`/`parentNext`), so a card costs no entry of its own, and a
 * settled card leaves it at once.
 */
import { Effect, Scope } from "effect"
import type { CloseReason } from "../Approvals.js"
import type { PendingCard } from "./PendingCard.js"

/** The cards of one parent scope that are still open, in a list through the cards themselves. */
export interface ParentGroup {
  head: PendingCard | undefined
}

/** Take a card out of its parent's list (nothing if it is in none). */
export const unlinkParent = (card: PendingCard): void => {
  const group = card.parentGroup
  if (group === undefined) return
  const prev = card.parentPrev
  const next = card.parentNext
  if (prev === undefined) group.head = next
  else prev.parentNext = next
  if (next !== undefined) next.parentPrev = prev
  card.parentGroup = undefined
  card.parentPrev = undefined
  card.parentNext = undefined
}

/**
 * A connection's registry of cards by parent scope: the first card under a parent adds ONE
 * finalizer to it, which settles that parent's open cards when it closes (the thread stopped, the
 * supervisor shuts down). A settled card leaves the registry at once.
 */
export interface ParentCards {
  /**
   * Register `card` under `parent` (closing it closes the card with `reason`). Synchronous for
   * every card but a parent's first, for which it returns the effect that adds the finalizer (run
   * it before anything else waits on the card: added to a scope already closed, it settles the
   * card at once).
   */
  readonly add: (parent: Scope.Scope, card: PendingCard, reason: CloseReason) => Effect.Effect<void> | undefined
}

export const parentCards = (): ParentCards => {
  const byParent = new WeakMap<Scope.Scope, ParentGroup>()
  return {
    add: (parent, card, reason) => {
      let group = byParent.get(parent)
      const first = group === undefined
      if (group === undefined) {
        group = { head: undefined }
        byParent.set(parent, group)
      }
      const mine = group
      card.closeReason = reason
      card.parentGroup = mine
      card.parentPrev = undefined
      card.parentNext = mine.head
      if (mine.head !== undefined) mine.head.parentPrev = card
      mine.head = card
      if (!first) return undefined
      // Added to a scope that is already closed, a finalizer runs at once: the card settles.
      return Scope.addFinalizer(
        parent,
        Effect.sync(() => {
          byParent.delete(parent) // a card opened under it later settles at once (see above)
          const open: Array<PendingCard> = []
          for (let c = mine.head; c !== undefined; c = c.parentNext) open.push(c)
          for (const c of open) c.close(c.closeReason ?? { _tag: "ThreadStopped" })
        })
      )
    }
  }
}
