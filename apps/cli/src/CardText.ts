/**
 * Cards as text for people: a short kind label, and the full details (command, diff, permissions,
 * MCP inputs, questions) shown on request. Everything comes from the card's summary, which the
 * approvals package has already masked and bounded; what goes to the terminal is escaped here.
 */
import type { Card } from "@warden/approvals"
import { escapeControls } from "./TerminalText.js"

export const kindLabel = (card: Card.CardView): string => {
  switch (card.summary.kind) {
    case "command":
      return "command"
    case "fileChange":
      return "file change"
    case "permissions":
      return "permissions"
    case "mcpToolCall":
      return "mcp tool"
    case "elicitation":
      return "mcp form"
    case "userInput":
      return "question"
    case "dynamicTool":
      return "tool call"
    case "other":
      return card.method
  }
}

const json = (value: unknown): ReadonlyArray<string> => {
  try {
    return (JSON.stringify(value, null, 2) ?? String(value)).split("\n")
  } catch {
    return [String(value)]
  }
}

const indent = (lines: ReadonlyArray<string>, by = "  "): ReadonlyArray<string> => lines.map((l) => by + l)

/**
 * Every detail the summary carries, one display line per entry (long values span several lines),
 * each line with its control characters shown escaped (`TerminalText`).
 */
export const details = (card: Card.CardView): ReadonlyArray<string> => detailLines(card).map(escapeControls)

const detailLines = (card: Card.CardView): ReadonlyArray<string> => {
  const s = card.summary
  const out: Array<string> = [`method: ${card.method}`]
  switch (s.kind) {
    case "command":
      out.push("command:", ...indent(s.command.split("\n")))
      if (s.argv) out.push(`argv: ${JSON.stringify(s.argv)}`)
      if (s.cwd) out.push(`cwd: ${s.cwd}`)
      if (s.reason) out.push(`reason: ${s.reason}`)
      break
    case "fileChange":
      if (s.reason) out.push(`reason: ${s.reason}`)
      if (s.grantRoot) out.push(`grant root: ${s.grantRoot}`)
      if (s.changes.length === 0) out.push("changes: (not known: the server sent none before asking)")
      for (const change of s.changes) {
        out.push(`${change.kind} ${change.path}`)
        if (change.diff) out.push(...indent(change.diff.split("\n")))
      }
      break
    case "permissions":
      if (s.reason) out.push(`reason: ${s.reason}`)
      out.push(`cwd: ${s.cwd}`, "permissions asked:", ...indent(json(s.permissions)))
      break
    case "mcpToolCall":
      out.push(`server: ${s.server}`, `tool: ${s.tool ?? "(unknown)"}`)
      if (s.message) out.push(`message: ${s.message}`)
      out.push("inputs:", ...indent(json(s.inputs)))
      break
    case "elicitation":
      out.push(`server: ${s.server}`, `mode: ${s.mode}`, `message: ${s.message}`)
      if (s.url) out.push(`url: ${s.url}`)
      for (const field of s.fields) {
        out.push(`field ${field.name}${field.required ? " (required)" : ""}: ${field.type ?? "?"}${field.choices ? ` one of ${field.choices.join(", ")}` : ""}`)
      }
      break
    case "userInput":
      for (const q of s.questions) {
        out.push(`${q.header}: ${q.question}`)
        for (const option of q.options ?? []) out.push(`  - ${option.label}: ${option.description}`)
      }
      break
    case "dynamicTool":
      out.push(`tool: ${s.namespace ? `${s.namespace}.` : ""}${s.tool}`, "arguments:", ...indent(json(s.arguments)))
      break
    case "other":
      break
  }
  out.push(`offers: ${card.offers.join(", ")}`)
  return out
}
