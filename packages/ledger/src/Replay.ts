/**
 * Replaying recorded cards against candidate rules: for each card, what the candidate rules would
 * have decided (with approvals' own `Policy.evaluate`, on the card's recorded facts) against what
 * was decided, and totals ("would auto-accept 37 of 52, would overturn 0 denials"). Pure.
 *
 * As in the desk, rules are consulted only for requests that reached them: a card refused because
 * its method was unknown, its params did not decode or it named no thread of ours is `Refused`
 * whatever the rules say. A card the candidate rules do not decide (`Ask`) goes to the safety
 * filter, the handler or a person, as it did when it was recorded (unless a rule decided it then).
 *
 * The facts are the card's masked, bounded summary: a card whose facts were cut (`complete:
 * false`) is replayed on what was kept and marked `approximate` (a cut change list reads as
 * unknown changes: no path allow matches, every path deny does).
 */
import { Policy } from "@warden/approvals"
import type { Card } from "@warden/approvals"
import * as CardFacts from "./CardFacts.js"

/** A card as replay reads it (what `Ledger.cards` returns is one). */
export interface RecordedCard {
  readonly runId: string
  readonly cardId: string
  readonly method: string
  readonly threadId: string | undefined
  readonly turnId: string | undefined
  readonly workItem: string | undefined
  readonly title: string
  readonly facts: CardFacts.CardFacts
  readonly settlement: RecordedSettlement | undefined
}

export interface RecordedSettlement {
  readonly outcome: Card.Outcome | "stranded"
  /** `rule:<id>`, `person`, `handler`, `deadline`, `stranded`, ... (approvals' `describeSource`). */
  readonly source: string
  /** The source's kind: the part before `:` (`rule`, `person`, `remembered`, ...). */
  readonly sourceKind: string
  readonly decision: string | undefined
}

export type Candidate =
  /** An allow rule would accept it at once. */
  | { readonly _tag: "Accept"; readonly ruleId: string }
  /** A deny rule would decline it at once. */
  | { readonly _tag: "Decline"; readonly ruleId: string }
  /** No rule decides it: the safety filter, the handler or a person would. */
  | { readonly _tag: "Ask" }
  /** It never reaches the rules (unknown method, params that do not decode, no thread of ours). */
  | { readonly _tag: "Refused" }

export type Change =
  /** The candidate rules leave it as it was (or decide it the way it went). */
  | "same"
  /** Someone (a rule, a remembered rule, a person, a handler, the safety filter) declined, cancelled or refused it; the candidate would accept it. */
  | "overturns-denial"
  /** Nobody decided it (deadline, withdrawn, connection lost, thread stopped, turn ended, shutdown, stranded, still open); the candidate would accept it. */
  | "accepts-undecided"
  /** It was accepted; the candidate would decline it. */
  | "new-denial"
  /** A rule decided it then; no candidate rule does, so it would go to a person (or handler). */
  | "to-person"

export interface ReplayedCard {
  readonly card: RecordedCard
  readonly candidate: Candidate
  readonly change: Change
  /** Replayed on facts that were cut for display (see the module comment). */
  readonly approximate: boolean
}

export interface Totals {
  readonly cards: number
  readonly wouldAccept: number
  readonly wouldDecline: number
  readonly wouldAsk: number
  readonly refused: number
  readonly unchanged: number
  readonly overturnedDenials: number
  readonly acceptsUndecided: number
  readonly newDenials: number
  readonly toPerson: number
  readonly approximate: number
}

export interface Report {
  readonly cards: ReadonlyArray<ReplayedCard>
  readonly totals: Totals
  /** One line: `would auto-accept 37 of 52, would overturn 0 denials` (and what else changed). */
  readonly summary: string
}

/** Sources that settle a card before the rules are consulted. */
const BeforeRules = new Set(["unknown-method", "malformed", "no-thread"])

const Denied = new Set(["declined", "cancelled", "refused"])

/** Sources that decide: a refusal of theirs is a denial (a deadline's or a closing scope's is not). */
const Deciders = new Set(["rule", "remembered", "person", "handler", "safety-filter"])

/** Someone decided no: a rule, a person, a handler, the safety filter. */
const isDenial = (s: RecordedSettlement | undefined): boolean => s !== undefined && Denied.has(s.outcome) && Deciders.has(s.sourceKind)

/** What the candidate rules would decide for one card. */
export const candidateFor = (card: RecordedCard, rules: Policy.Rules): Candidate => {
  if (card.settlement !== undefined && BeforeRules.has(card.settlement.sourceKind)) return { _tag: "Refused" }
  const rebuilt = CardFacts.toRequest(card)
  if (rebuilt === undefined) return { _tag: "Ask" }
  const verdict = Policy.evaluate(rules, rebuilt.request, rebuilt.context)
  switch (verdict._tag) {
    case "Allow":
      return { _tag: "Accept", ruleId: verdict.ruleId }
    case "Deny":
      return { _tag: "Decline", ruleId: verdict.ruleId }
    case "NoMatch":
      return { _tag: "Ask" }
  }
}

const changeOf = (card: RecordedCard, candidate: Candidate): Change => {
  const s = card.settlement
  const accepted = s?.outcome === "accepted"
  switch (candidate._tag) {
    case "Accept":
      if (accepted) return "same"
      return isDenial(s) ? "overturns-denial" : "accepts-undecided"
    case "Decline":
      return accepted ? "new-denial" : "same"
    case "Ask":
      return s !== undefined && s.sourceKind === "rule" ? "to-person" : "same"
    case "Refused":
      return "same"
  }
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/** Replay `cards` against `rules`. Pure; linear in the cards and their facts. */
export const replay = (cards: ReadonlyArray<RecordedCard>, rules: Policy.Rules): Report => {
  const replayed = cards.map((card): ReplayedCard => {
    const candidate = candidateFor(card, rules)
    return { card, candidate, change: changeOf(card, candidate), approximate: !card.facts.complete }
  })
  const count = (p: (r: ReplayedCard) => boolean) => replayed.reduce((n, r) => (p(r) ? n + 1 : n), 0)
  const totals: Totals = {
    cards: replayed.length,
    wouldAccept: count((r) => r.candidate._tag === "Accept"),
    wouldDecline: count((r) => r.candidate._tag === "Decline"),
    wouldAsk: count((r) => r.candidate._tag === "Ask"),
    refused: count((r) => r.candidate._tag === "Refused"),
    unchanged: count((r) => r.change === "same"),
    overturnedDenials: count((r) => r.change === "overturns-denial"),
    acceptsUndecided: count((r) => r.change === "accepts-undecided"),
    newDenials: count((r) => r.change === "new-denial"),
    toPerson: count((r) => r.change === "to-person"),
    approximate: count((r) => r.approximate)
  }
  const extra = [
    totals.newDenials > 0 ? `would deny ${totals.newDenials} accepted` : undefined,
    totals.acceptsUndecided > 0 ? `would accept ${totals.acceptsUndecided} nobody decided` : undefined,
    totals.toPerson > 0 ? `would ask about ${totals.toPerson} a rule decided` : undefined,
    totals.approximate > 0 ? `${plural(totals.approximate, "card")} replayed on cut facts` : undefined
  ].filter((s): s is string => s !== undefined)
  const summary = [
    `would auto-accept ${totals.wouldAccept} of ${totals.cards}`,
    `would overturn ${plural(totals.overturnedDenials, "denial")}`,
    ...extra
  ].join(", ")
  return { cards: replayed, totals, summary }
}
