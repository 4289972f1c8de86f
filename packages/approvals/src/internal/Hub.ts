/**
 * The supervisor-wide side of the cards: ids, the registry every inbox answers through, the
 * event fan-out, and the owner of the small cleanup fibers cards schedule when they settle.
 */
import type { Effect, Fiber } from "effect"
import type { ApprovalEvent } from "../ApprovalEvent.js"
import type { CardId } from "../Card.js"
import type { LiveCard } from "./CardRace.js"

/** Where small fibers go, a long-lived owner's fiber set (started after the caller's synchronous step). */
export interface FiberOwner {
  /** Run an effect in the owner's fiber set, after the caller's synchronous step (not on its stack). */
  readonly fork: (effect: Effect.Effect<void>) => void
  /** The same, returning the fiber. */
  readonly spawn: (effect: Effect.Effect<void>) => Fiber.RuntimeFiber<void>
}

export interface Hub extends FiberOwner {
  /** Wall-clock time (epoch milliseconds): what cards show. */
  readonly now: () => number
  /** The Clock's monotonic nanoseconds: what deadlines are measured in. */
  readonly nanos: () => bigint
  readonly nextCardId: () => CardId
  readonly register: (card: LiveCard) => void
  readonly unregister: (card: LiveCard) => void
  readonly publish: (event: ApprovalEvent) => void
}
