/**
 * The end-of-run summary for people: one row per work item (status, cards, tokens, elapsed, final
 * message or error) and one row per card (item, kind, outcome, who decided, what it was about).
 */
import { Card as CardNs, CardText } from "@warden/approvals"
import * as Board from "./Board.js"
import * as Durations from "../contract/Durations.js"
import * as RunState from "@warden/inbox/RunState"

const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): ReadonlyArray<string> => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd()
  return [line(header), ...rows.map(line)]
}

const flat = (text: string, max: number) => {
  const one = text.replace(/\s+/g, " ").trim()
  return one.length > max ? `${one.slice(0, max - 1)}…` : one
}

export const lines = (tally: RunState.RunState, exitCode: number): ReadonlyArray<string> => {
  const statuses = RunState.finalStatuses(tally)
  const itemRows = tally.items.map((item, i) => {
    const counts = tally.outcomes.get(i) ?? new Map<string, number>()
    const elapsed =
      item.startedAt === undefined ? "-" : Durations.short((item.finishedAt ?? Date.now()) - item.startedAt)
    const result = item.finalMessage ?? item.error ?? ""
    return [
      String(i),
      statuses[i] ?? "?",
      counts.size === 0 ? "-" : [...counts].map(([o, n]) => `${n} ${o}`).join(", "),
      Board.tokens(item.tokens),
      elapsed,
      flat(result, 100)
    ]
  })
  const out: Array<string> = ["", ...table(["ITEM", "STATUS", "CARDS", "TOKENS", "ELAPSED", "RESULT"], itemRows)]
  if (tally.settled.length > 0) {
    const cardRows = tally.settled.map((s) => [
      s.card.id,
      String(RunState.itemIndexOf(s.card.workItem) ?? "-"),
      CardText.kindLabel(s.card),
      s.outcome,
      CardNs.describeSource(s.source),
      flat(s.card.title, 90)
    ])
    out.push("", ...table(["CARD", "ITEM", "KIND", "OUTCOME", "DECIDED BY", "SUMMARY"], cardRows))
    if (tally.settledCount > tally.settled.length) {
      out.push(
        `(the last ${tally.settled.length.toLocaleString("en-US")} of ${tally.settledCount.toLocaleString("en-US")} cards; the ledger has them all: warden audit)`
      )
    }
  }
  const worktreeRows = tally.items.flatMap((item, i) => {
    const w = item.worktree
    if (w === undefined || !("changed" in w)) return []
    const what =
      w.error !== undefined
        ? `kept as it was: ${flat(w.error, 80)}`
        : w.changed
          ? `${w.files} file${w.files === 1 ? "" : "s"} +${w.insertions} -${w.deletions}, kept at ${w.path}`
          : w.kept
            ? `no change, kept at ${w.path}`
            : "no change, removed"
    return [[String(i), w.branch, what]]
  })
  if (worktreeRows.length > 0) out.push("", ...table(["ITEM", "BRANCH", "WORKTREE"], worktreeRows))
  out.push("", `exit code ${exitCode}`)
  return out
}
