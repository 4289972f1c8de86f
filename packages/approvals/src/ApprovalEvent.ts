/**
 * What the approvals engine tells the world (a card opened, a card settled, a decision came late).
 * The audit sink, inboxes and the CLI all read these.
 */
import type { CardView, Outcome, Settlement, Source } from "./Card.js"

/**
 * One approval event, carrying masked views only (never request values).
 *
 * `CardOpened` when a card registers (even one a rule settles at once), `CardSettled` exactly once
 * per card, `LateDecision` for a decision that came after its card had settled.
 */
export type ApprovalEvent =
  /** A card was opened (its view is masked). */
  | { readonly _tag: "CardOpened"; readonly card: CardView }
  /** A card settled: exactly one per card, whatever settled it. */
  | { readonly _tag: "CardSettled"; readonly settlement: Settlement }
  /** A decision that arrived after the card settled: dropped, never written. */
  | {
      readonly _tag: "LateDecision"
      readonly card: CardView
      readonly decision: string
      readonly source: Source
      /** The outcome that had already won. */
      readonly outcome: Outcome
      readonly at: number
    }
