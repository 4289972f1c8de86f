/**
 * The property-test invariants (docs/testing.md, "The invariants") that can be checked over what a
 * fleet recorded: the event lines a client saw (`card.opened`, `card.settled`, item ends) and the
 * decisions the inbox was given. Used by the fleet's tests; useful to an auditor reading a run.
 */

/** One recorded line, as `Events` (or `warden submit --json`) gives it: a JSON object with a `type`. */
export type Line = Readonly<Record<string, unknown>>

/** What `check` reads besides the lines. */
export interface Recorded {
  /** Every distinct line seen (de-duplicated by incarnation and seq). */
  readonly lines: ReadonlyArray<Line>
  /** The decision the inbox was given for each card id (`Accept`, `Decline`, ...), if any. */
  readonly decisions: ReadonlyMap<string, string>
  /** The runner run ids (incarnations) that died: only their cards may be `stranded`. */
  readonly dead: ReadonlyArray<string>
  /** The item ids (or numbers) that must have ended. */
  readonly items: ReadonlyArray<string | number>
}

const typedEnds = new Set(["completed", "interrupted", "failed", "stopped"])

/**
 * The violations, each naming its invariant (empty: all hold).
 *
 * - 1: every card opened has exactly one settlement; `stranded` only for a card of a dead
 *   incarnation; none settles twice. (A card a runner recorded and then died before its
 *   `card.opened` reached anyone shows up only as its `stranded` settlement, and one whose
 *   runner's lines never reached anyone only as a later runner's `replayed` settlement; a
 *   settlement a later runner tells again, marked `replayed`, must agree with the first.)
 * - 2: no acceptance unless a person's (or rule's) accepting decision was given for that card.
 * - 4: every item ended, with a typed cause (`completed`, a `WorkItemFailed` reason,
 *   `thread-unreachable`, `stopped`), from its `item.finished` or `item.result` line.
 */
export const check = (recorded: Recorded): ReadonlyArray<string> => {
  const violations: Array<string> = []
  const opened = new Set(recorded.lines.filter((l) => l["type"] === "card.opened").map((l) => String(l["card"])))
  const settlements = new Map<string, Array<Line>>()
  for (const l of recorded.lines) {
    if (l["type"] !== "card.settled") continue
    const card = String(l["card"])
    settlements.set(card, [...(settlements.get(card) ?? []), l])
  }
  for (const card of opened) {
    const s = settlements.get(card) ?? []
    // A settlement told again by a later runner (`replayed`) repeats one: it must agree with it.
    const outcomes = new Set(s.map((l) => String(l["outcome"])))
    const told = s.filter((l) => l["replayed"] !== true).length
    if (outcomes.size !== 1 || told > 1)
      violations.push(`invariant 1: card ${card} has ${outcomes.size} outcomes in ${s.length} settlements`)
  }
  for (const [card, s] of settlements) {
    // A card its runner recorded and then died before anyone saw it open is reported only as
    // stranded; one whose runner stopped the item before its lines reached anyone (the shard
    // handed on at once) only as the settlement the next runner tells again from storage.
    const unseenOk = s.every((l) => l["outcome"] === "stranded" || l["replayed"] === true)
    if (!opened.has(card) && !unseenOk) violations.push(`invariant 1: card ${card} settled but never seen open`)
    for (const l of s) {
      if (l["outcome"] === "stranded" && !recorded.dead.some((runId) => card.startsWith(`${runId}:`))) {
        violations.push(`invariant 1: card ${card} stranded, but its runner did not die`)
      }
      if (l["outcome"] === "accepted") {
        const decision = recorded.decisions.get(card)
        // A rule's acceptance: `rule:<id>` in `warden run`'s lines, `Rule` in the fleet's.
        const byRule =
          typeof l["source"] === "string" && (String(l["source"]).startsWith("rule:") || l["source"] === "Rule")
        if (!byRule && (decision === undefined || !decision.startsWith("Accept"))) {
          violations.push(
            `invariant 2: card ${card} accepted (source ${String(l["source"])}) with no accepting decision (${decision ?? "none"})`
          )
        }
      }
    }
  }
  const ends = new Map<string, Line>()
  for (const l of recorded.lines) {
    if (l["type"] === "item.finished" || l["type"] === "item.result") ends.set(String(l["item"]), l)
  }
  for (const item of recorded.items) {
    const end = ends.get(String(item))
    if (end === undefined) {
      violations.push(`invariant 4: item ${item} never ended`)
      continue
    }
    const status = String(end["status"] ?? "")
    if (status === "" || (!typedEnds.has(status) && !/^[a-z]+(-[a-z]+)*$/.test(status))) {
      violations.push(`invariant 4: item ${item} ended without a typed cause (${status})`)
    }
  }
  return violations
}
