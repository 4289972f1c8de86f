/**
 * Text for a terminal, from a source we do not trust (a model writes commands, diffs, messages;
 * a server writes reasons): control characters, escape sequences and bidirectional overrides are
 * shown escaped (`\r`, `\x1b`, `\u202e`), so nothing it wrote can move the cursor, erase a line,
 * recolour the screen or reorder what a person reads (a carriage return plus erase-line would
 * show `git status` while the command is `curl …|sh`). Tabs and newlines are left to the caller
 * (lines are split on `\n` first).
 */

// C0 controls but tab and newline, DEL, C1 controls, the bidi embeddings, overrides and isolates.
const Unsafe = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

const named: Readonly<Record<string, string>> = { "\r": "\\r", "\u001b": "\\x1b", "\u0007": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\u0000": "\\0" }

const escapeOne = (c: string): string => {
  const name = named[c]
  if (name !== undefined) return name
  const code = c.charCodeAt(0)
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`
}

const AnyUnsafe = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

/** `text` with every unsafe character shown escaped. Linear; allocates only when something is escaped. */
export const escapeControls = (text: string): string => (AnyUnsafe.test(text) ? text.replace(Unsafe, escapeOne) : text)
