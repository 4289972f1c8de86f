/**
 * Cards as text for people, for every front end (the CLI's board and prompt, the web inbox, an
 * embedder's own): a short kind label, the full details (command, diff, permissions, MCP inputs,
 * questions) shown on request, and the words a card's offers are answered with. Everything comes
 * from the card's summary, which the engine has already masked and bounded; control characters
 * are shown escaped here (`escapeControls`), so nothing a model or a server wrote can move a
 * terminal's cursor or reorder what a person reads.
 */
import type * as Card from "./Card.js"

// C0 controls but tab and newline, DEL, C1 controls, the bidi embeddings, overrides and isolates.
const Unsafe = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

const named: Readonly<Record<string, string>> = {
  "\r": "\\r",
  "\u001b": "\\x1b",
  "\u0007": "\\a",
  "\b": "\\b",
  "\f": "\\f",
  "\v": "\\v",
  "\u0000": "\\0"
}

const escapeOne = (c: string): string => {
  const name = named[c]
  if (name !== undefined) return name
  const code = c.charCodeAt(0)
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`
}

const AnyUnsafe = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

/**
 * `text` from a source we do not trust (a model writes commands, diffs, messages; a server writes
 * reasons) with every control character, escape sequence and bidirectional override shown escaped
 * (`\r`, `\x1b`, `\u202e`): a carriage return plus erase-line would show `git status` while the
 * command is `curl ...|sh`. Tabs and newlines are left to the caller (split lines on `\n` first).
 * Linear; allocates only when something is escaped.
 */
export const escapeControls = (text: string): string => (AnyUnsafe.test(text) ? text.replace(Unsafe, escapeOne) : text)

/** An offer of `CardView.offers` (`AcceptForSession`) as the word a person answers with (`acceptForSession`), as `--approvals stdin` and the web inbox take it. */
export const offerWord = (tag: string): string => (tag.length > 0 ? tag[0]!.toLowerCase() + tag.slice(1) : tag)

/** A short label of the card's kind for a list: `command`, `file change`, `mcp tool`, `question`, ... (the method for any other). */
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
 * each line with its control characters shown escaped ({@link escapeControls}).
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
        out.push(
          `field ${field.name}${field.required ? " (required)" : ""}: ${field.type ?? "?"}${field.choices ? ` one of ${field.choices.join(", ")}` : ""}`
        )
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
