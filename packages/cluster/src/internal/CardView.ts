/**
 * A card as the fleet keeps it for its one inbox: the runner's masked `Card.CardView` under the
 * card's fleet-wide id, as JSON in `warden_cluster_cards.view`, bounded (`MAX_VIEW_BYTES`: a
 * bigger view loses its diffs, then its summary); read back checked, and made from what the row
 * itself says when the view is missing (a card stored by an older runner) or is not one.
 *
 * @internal
 */
import type { Card } from "@warden/approvals"
import { SecretMask } from "@warden/approvals"
import type { CardRow } from "./ItemStore.js"

/** The largest view kept (UTF-8 bytes of its JSON). */
export const MAX_VIEW_BYTES = 64 * 1024

/** What a card's title is cut to when its view had to be cut. */
const MAX_TITLE = 1000

const fits = (text: string) => Buffer.byteLength(text, "utf8") <= MAX_VIEW_BYTES

/** The view to store for `card`, opened on a runner as `id` (its fleet-wide id) for item `itemId`: masked, bounded. */
export const encode = (card: Card.CardView, id: string, itemId: string): string => {
  const base = { ...card, id, workItem: itemId }
  const json = (view: unknown) => JSON.stringify(SecretMask.maskJson(view))
  const whole = json(base)
  if (fits(whole)) return whole
  if (card.summary.kind === "fileChange") {
    const changes = card.summary.changes.map(({ diff: _diff, ...change }) => change)
    const withoutDiffs = json({ ...base, summary: { ...card.summary, changes } })
    if (fits(withoutDiffs)) return withoutDiffs
  }
  return json({
    ...base,
    title: card.title.slice(0, MAX_TITLE),
    summary: { kind: "other", method: card.method }
  })
}

/** The decisions a card can offer (`Decision.DecisionTag`): a stored offer of another name is dropped. */
const knownOffers: ReadonlySet<string> = new Set<Card.CardView["offers"][number]>([
  "Accept",
  "AcceptForSession",
  "Decline",
  "Cancel",
  "Abort",
  "AcceptWithExecpolicyAmendment",
  "ApplyNetworkPolicyAmendment",
  "Grant",
  "Elicitation",
  "Answers",
  "ToolResult"
])

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const isString = (v: unknown): v is string => typeof v === "string"

/** The fields every part of the inbox reads from a summary of each kind (what `CardText` reads). */
const summaryIsWhole = (s: Record<string, unknown>): boolean => {
  switch (s["kind"]) {
    case "command":
      return isString(s["command"])
    case "fileChange":
      return Array.isArray(s["changes"]) && s["changes"].every((c) => isRecord(c) && isString(c["path"]))
    case "permissions":
      return isString(s["cwd"])
    case "mcpToolCall":
      return isString(s["server"]) && isRecord(s["inputs"]) && isString(s["message"])
    case "elicitation":
      return isString(s["server"]) && isString(s["message"]) && isString(s["mode"]) && Array.isArray(s["fields"])
    case "userInput":
      return Array.isArray(s["questions"])
    case "dynamicTool":
      return isString(s["tool"])
    case "other":
      return isString(s["method"])
    default:
      return false
  }
}

/**
 * How long a card waits by default (the runners' `--approval-timeout` default): the deadline said
 * for a card whose view was not stored, which the row does not keep.
 */
const DEFAULT_WAIT_MS = 15 * 60_000

/**
 * The card `row` stores, as the inbox shows it. Its id, item and method are the row's (what a
 * decision is routed by); the rest is the stored view when it is one. Without a usable view the
 * card offers only `Decline` (nothing is accepted that nobody could read).
 */
export const decode = (row: CardRow): Card.CardView => {
  let parsed: unknown
  try {
    parsed = row.view === null ? undefined : JSON.parse(row.view)
  } catch {
    parsed = undefined
  }
  const fallback: Card.CardView = {
    id: row.id,
    requestId: 0,
    method: row.method,
    threadId: undefined,
    turnId: undefined,
    workItem: row.itemId,
    summary: { kind: "other", method: row.method },
    title: `${row.method} (its details were not stored)`,
    offers: ["Decline"],
    openedAt: row.openedAt,
    deadlineAt: row.openedAt + DEFAULT_WAIT_MS
  }
  if (!isRecord(parsed)) return fallback
  const offers = parsed["offers"]
  const summary = parsed["summary"]
  const wholeSummary = isRecord(summary) && summaryIsWhole(summary)
  return {
    ...fallback,
    requestId: isString(parsed["requestId"]) || typeof parsed["requestId"] === "number" ? parsed["requestId"] : 0,
    threadId: isString(parsed["threadId"]) ? parsed["threadId"] : undefined,
    turnId: isString(parsed["turnId"]) ? parsed["turnId"] : undefined,
    summary: wholeSummary ? (summary as unknown as Card.CardSummary) : fallback.summary,
    title: isString(parsed["title"]) ? parsed["title"] : fallback.title,
    // A view whose summary cannot be shown offers what a card nobody can read offers.
    offers:
      wholeSummary && Array.isArray(offers) && offers.includes("Decline")
        ? (offers.filter((o) => isString(o) && knownOffers.has(o)) as ReadonlyArray<Card.CardView["offers"][number]>)
        : fallback.offers,
    openedAt: typeof parsed["openedAt"] === "number" ? parsed["openedAt"] : row.openedAt,
    deadlineAt: typeof parsed["deadlineAt"] === "number" ? parsed["deadlineAt"] : fallback.deadlineAt
  }
}
