/**
 * What the approvals engine tells the world: a card opened, a card settled, a decision came late.
 * The audit sink, inboxes and the CLI all read these.
 */
import type { CardView, Outcome, Settlement, Source } from "./Card.js"

export type ApprovalEvent =
  | { readonly _tag: "CardOpened"; readonly card: CardView }
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
