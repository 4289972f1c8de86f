/**
 * Cards that ask the same thing: one answer for many.
 *
 * When forty work items each ask "may I run `pnpm test`?", a person should answer once. Two open
 * cards are in the same group when they have the same method and the same decision-relevant
 * facts, read from what the card shows (its masked summary, so a group never tells apart what a
 * person could not):
 *
 * - a command: its words (`argv`, or the command line when it has none); not its cwd nor the
 *   model's reason (work items in their own worktrees run the same command in different places);
 * - a file change: every path with its kind and diff, and the root it would grant;
 * - a permissions request: the permissions asked and the cwd they are relative to;
 * - an MCP tool call: the server, the tool and the inputs;
 * - a dynamic tool call: the tool, its namespace and arguments.
 *
 * Forms (MCP elicitations), questions (`userInput`) and unknown methods are never grouped: each
 * asks for an answer of its own. The group id is short (`g` and 16 hex digits of a SHA-256 of the
 * facts), stable across runs and processes, and carries nothing of the facts themselves.
 */
import { createHash } from "node:crypto"
import type { CardView } from "./Card.js"

/** A group's id: `g` and 16 hex digits. */
export type GroupId = string

/** The facts a group is made of, for the kinds that group (undefined: the card is never grouped). */
const factsOf = (card: CardView): unknown => {
  const s = card.summary
  switch (s.kind) {
    case "command":
      return s.argv !== undefined ? { argv: s.argv } : { command: s.command }
    case "fileChange":
      return { changes: s.changes.map((c) => [c.path, c.kind, c.diff ?? null]), grantRoot: s.grantRoot ?? null }
    case "permissions":
      return { permissions: s.permissions, cwd: s.cwd }
    case "mcpToolCall":
      return { server: s.server, tool: s.tool ?? null, inputs: s.inputs }
    case "dynamicTool":
      return { tool: s.tool, namespace: s.namespace ?? null, arguments: s.arguments ?? null }
    case "elicitation":
    case "userInput":
    case "other":
      return undefined
  }
}

/** JSON with object keys sorted, so equal facts always read the same. */
const canonical = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`
  }
  return JSON.stringify(value ?? null)
}

const cache = new WeakMap<CardView, GroupId | null>()

/**
 * The group of an open card, or undefined for a card that is never grouped (a form, questions, an
 * unknown method). Cards with the same group ask the same thing; computed once per card.
 */
export const groupOf = (card: CardView): GroupId | undefined => {
  const known = cache.get(card)
  if (known !== undefined) return known ?? undefined
  const facts = factsOf(card)
  const group =
    facts === undefined
      ? null
      : `g${createHash("sha256")
          .update(canonical({ method: card.method, facts }))
          .digest("hex")
          .slice(0, 16)}`
  cache.set(card, group)
  return group ?? undefined
}
