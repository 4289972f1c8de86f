/**
 * The supervisor-wide side of the cards: ids, the registry every inbox answers through, the
 * event fan-out, and the owner of the small cleanup fibers cards schedule when they settle.
 */
import type { Effect } from "effect"
import type { ApprovalEvent } from "./ApprovalEvent.js"
import type { CardId } from "./Card.js"
import type { LiveCard } from "./CardRace.js"

export interface Hub {
  readonly now: () => number
  readonly nextCardId: () => CardId
  readonly register: (card: LiveCard) => void
  readonly unregister: (card: LiveCard) => void
  readonly publish: (event: ApprovalEvent) => void
  readonly fork: (effect: Effect.Effect<void>) => void
}
