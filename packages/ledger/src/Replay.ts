/**
 * Replay recorded cards against candidate rules, to see what those rules would have decided
 * against what was decided.
 *
 * For each card, replay asks approvals' own `Policy.evaluate` on the card's recorded facts, and
 * compares; it also counts totals ("would auto-accept 37 of 52, would overturn 0 denials"). Pure.
 *
 * As when a card opens, rules are consulted only for requests that reached them: a card refused because
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
import * as Remembered from "./Remembered.js"

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

/** How a recorded card ended, as replay reads it (`SettlementRecord` is one). */
export interface RecordedSettlement {
  /** The card's outcome (`accepted`, `declined`, `timeout`, ...), or `stranded` when its run died. */
  readonly outcome: Card.Outcome | "stranded"
  /** `rule:<id>`, `person`, `handler`, `deadline`, `stranded`, ... (approvals' `describeSource`). */
  readonly source: string
  /** The source's kind: the part before `:` (`rule`, `person`, `remembered`, ...). */
  readonly sourceKind: string
  /** The decision that won, in words, if one did. */
  readonly decision: string | undefined
}

/** What the candidate rules would do with one card (accept, decline, ask, or never see it). */
export type Candidate =
  /**
   * An allow rule would accept it at once; `remembered`: no candidate rule decides it, and a
   * remembered rule in force (`ReplayOptions.remembered`, its id in `ruleId`) would accept it.
   */
  | { readonly _tag: "Accept"; readonly ruleId: string; readonly remembered?: true }
  /** A deny rule would decline it at once. */
  | { readonly _tag: "Decline"; readonly ruleId: string }
  /** No rule decides it: the safety filter, the handler or a person would. */
  | { readonly _tag: "Ask" }
  /** It never reaches the rules (unknown method, params that do not decode, no thread of ours). */
  | { readonly _tag: "Refused" }

/** How a card's candidate verdict compares with what happened to it. */
export type Change =
  /** The candidate rules leave it as it was (or decide it the way it went). */
  | "same"
  /** Someone (a rule, a remembered rule, a person, a handler, the safety filter) declined, cancelled or refused it; the candidate would accept it. */
  | "overturns-denial"
  /** Nobody decided it (deadline, withdrawn, connection lost, thread stopped, turn ended, shutdown, stranded, still open); the candidate would accept it. */
  | "accepts-undecided"
  /** It was accepted; the candidate would decline it. */
  | "new-denial"
  /** A rule (or a remembered rule) decided it then; none would now, so it would go to a person (or handler). */
  | "to-person"

/** One card replayed, with what the candidate rules would do and how that differs. */
export interface ReplayedCard {
  /** The card as it was recorded. */
  readonly card: RecordedCard
  /** What the candidate rules would do with it. */
  readonly candidate: Candidate
  /** How that compares with what happened. */
  readonly change: Change
  /** Replayed on facts that were cut for display (see the module comment). */
  readonly approximate: boolean
}

/** A replay's counts, by candidate verdict and by change. */
export interface Totals {
  /** Cards replayed. */
  readonly cards: number
  /** Cards an allow rule would accept (`Accept`). */
  readonly wouldAccept: number
  /** Cards a deny rule would decline (`Decline`). */
  readonly wouldDecline: number
  /** Cards no rule decides (`Ask`). */
  readonly wouldAsk: number
  /** Cards that never reach the rules (`Refused`). */
  readonly refused: number
  /** Cards whose change is `same`. */
  readonly unchanged: number
  /** Cards whose change is `overturns-denial`. */
  readonly overturnedDenials: number
  /** Cards whose change is `accepts-undecided`. */
  readonly acceptsUndecided: number
  /** Cards whose change is `new-denial`. */
  readonly newDenials: number
  /** Cards whose change is `to-person`. */
  readonly toPerson: number
  /** Cards replayed on facts that were cut for display. */
  readonly approximate: number
}

/** What `replay` returns, every card replayed in the order given, with totals and one line. */
export interface Report {
  /** Each card replayed, in the order given. */
  readonly cards: ReadonlyArray<ReplayedCard>
  /** The counts. */
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
const isDenial = (s: RecordedSettlement | undefined): boolean =>
  s !== undefined && Denied.has(s.outcome) && Deciders.has(s.sourceKind)

/** What a replay runs with besides the candidate rules. */
export interface ReplayOptions {
  /**
   * The remembered rules in force (`Ledger.rememberedRules()`), consulted as a connection's cards
   * consult them: only when no candidate rule decides (a candidate deny still wins). Default none.
   */
  readonly remembered?: ReadonlyArray<Remembered.RememberedRule>
  /** When the remembered rules are read as in force (epoch ms; default now). */
  readonly now?: number
}

/** What the candidate rules (then the remembered rules in force, if given) would decide for one card. */
export const candidateFor = (card: RecordedCard, rules: Policy.Rules, options: ReplayOptions = {}): Candidate => {
  if (card.settlement !== undefined && BeforeRules.has(card.settlement.sourceKind)) return { _tag: "Refused" }
  const rebuilt = CardFacts.toRequest(card)
  if (rebuilt === undefined) return { _tag: "Ask" }
  const verdict = Policy.evaluate(rules, rebuilt.request, rebuilt.context)
  switch (verdict._tag) {
    case "Allow":
      return { _tag: "Accept", ruleId: verdict.ruleId }
    case "Deny":
      return { _tag: "Decline", ruleId: verdict.ruleId }
    case "NoMatch": {
      const remembered =
        options.remembered === undefined || options.remembered.length === 0
          ? undefined
          : Remembered.rememberedFor(rebuilt.request, rebuilt.context, options.remembered, options.now ?? Date.now())
      return remembered === undefined ? { _tag: "Ask" } : { _tag: "Accept", ruleId: remembered.id, remembered: true }
    }
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
      return s !== undefined && (s.sourceKind === "rule" || s.sourceKind === "remembered") ? "to-person" : "same"
    case "Refused":
      return "same"
  }
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/**
 * Replay `cards` against `rules`, card by card and in totals; with `options.remembered`, the
 * remembered rules in force decide what no candidate rule decides, as in a run (a card a
 * remembered rule decided then and none would now goes `to-person`).
 *
 * Pure; linear in the cards and their facts. Each card's request is rebuilt from its facts
 * (`CardFacts.toRequest`) and read by `Policy.evaluate`; a card whose facts were cut is read on
 * what was kept and marked `approximate`. What `Ledger.cards` returns can be passed as it is.
 *
 * @example
 * ```ts
 * import { Policy } from "@warden/approvals"
 * import { Ledger, Replay } from "@warden/ledger"
 * import { Effect } from "effect"
 *
 * const whatIf = Effect.gen(function*() {
 *   const ledger = yield* Ledger.Ledger
 *   const candidate = yield* Policy.load("candidate-rules.yaml")
 *   const cards = yield* ledger.cards({ from: Date.now() - 7 * 24 * 60 * 60 * 1000 })
 *   const report = Replay.replay(cards, candidate)
 *   yield* Effect.logInfo(report.summary) // would auto-accept 37 of 52, would overturn 0 denials
 *   return report.cards.filter((r) => r.change === "overturns-denial" || r.change === "new-denial")
 * }) // fails with RulesFileError | LedgerError
 * ```
 */
export const replay = (cards: ReadonlyArray<RecordedCard>, rules: Policy.Rules, options: ReplayOptions = {}): Report =>
  reportOf(cards.map((card) => replayCard(card, rules, options)))

/** One card replayed, as `replay` replays each: what the rules would decide, and what that changes. */
export const replayCard = <C extends RecordedCard>(
  card: C,
  rules: Policy.Rules,
  options: ReplayOptions = {}
): ReplayedCard & { readonly card: C } => {
  const candidate = candidateFor(card, rules, options)
  return { card, candidate, change: changeOf(card, candidate), approximate: !card.facts.complete }
}

/** The report of cards replayed one by one (`replayCard`): the cards, their totals and the summary `replay` gives. */
export const reportOf = (replayed: ReadonlyArray<ReplayedCard>): Report => {
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
