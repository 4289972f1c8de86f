/**
 * The one reader of shell words in the package: what a blank, a quote, an operator, a
 * substitution and a here-document are, for both of its users, and writing words back.
 *
 * - `lex` reads a script as the shell will run it (POSIX quoting: single quotes, double quotes,
 *   backslashes, `$'...'`; control operators, redirections, grouping, substitutions,
 *   here-documents) into segments of words with quotes removed. Command analysis
 *   (`ShellWrapper`, `CommandStarts`) decides on these words: a rule must see exactly what runs.
 * - `readTextWords`, `readArgvWords` and `valueExtent` read the command words of any text, or of
 *   an argv, with their positions, for masking (`ProgramPasswords`): leniently and at every
 *   nesting level at once (see "Reading the command words of any text"), so that masking errs
 *   on the side of hiding where a POSIX reading would lose a word.
 * - `quote` and `join` write words so a shell reads them back unchanged.
 *
 * Nothing here throws on any input (`lexAll` turns a failure into "not read"), and everything is
 * linear in what it reads: one pass per nesting level, nesting followed at most `MaxDepth` levels,
 * each word of a text read once.
 */

/**
 * How deep wrappers, substitutions, here-documents and nested scripts are followed; deeper nesting
 * reads as "not simple", and makes `commands` incomplete (a deny then matches).
 */
export const MaxDepth = 8

// ---------------------------------------------------------------------------------------------
// Reading a script as the shell runs it

/** A script read by `lex`. */
export interface LexResult {
  /** Top-level command segments, words after quote removal. */
  readonly segments: Array<Array<string>>
  /** Segments found inside `$(...)`, backticks, `<(...)`, here-documents and here-strings. */
  readonly nested: Array<Array<string>>
  /** False when a quote, substitution or here-document was not closed (closed at the end). */
  complete: boolean
  /** Control operators, redirections or grouping were present. */
  compound: boolean
  /** Any expansion, substitution, glob, brace, tilde or comment was present. */
  expands: boolean
  /**
   * Part of the script was not read: a substitution or here-document nested deeper than
   * `MaxDepth` (the rest of the script after such a substitution is skipped), or the lexer failed.
   * Implies `complete: false`; a deny must then assume the unread part runs anything.
   */
  truncated: boolean
}

type Mode = "top" | "paren" | "backtick"
type Target = "skip" | "heredoc" | "heredocTabs" | "herestring"

interface Cursor {
  i: number
}

const emptyResult = (): LexResult => ({
  segments: [],
  nested: [],
  complete: true,
  compound: false,
  expands: false,
  truncated: false
})

const isBlank = (c: string) => c === " " || c === "\t"
/**
 * A character `Lexer.run` only adds to the word it is in, wherever it stands: letters, digits and
 * `-_./=,:@%+^` (a subset of what it treats so: `#` and `~` mean something at a word's start).
 */
const isPlain = (code: number): boolean =>
  (code >= 97 && code <= 122) || // a-z
  (code >= 65 && code <= 90) || // A-Z
  (code >= 43 && code <= 58) || // + , - . / 0-9 :
  code === 95 || // _
  code === 61 || // =
  code === 64 || // @
  code === 37 || // %
  code === 94 // ^
const isDigits = (s: string) => s.length > 0 && /^[0-9]+$/.test(s)

/**
 * Lex `src` from `cursor.i` into `into` (segments of words). In "paren" mode stop after the
 * unmatched `)`, in "backtick" mode after the closing backtick. Control operators end a segment;
 * a redirection drops its target word. The bodies of here-documents and here-strings are data to
 * the shell but may be a script to the program reading them (`bash <<EOF`), so they are lexed as
 * scripts of their own into `nested`, where their quotes cannot swallow what follows them.
 * A class rather than closures: one object per (nested) lexing, no function made per call.
 */
class Lexer {
  segment: Array<string> = []
  word = ""
  inWord = false
  wordQuoted = false
  target: Target | undefined = undefined
  readonly heredocs: Array<{ readonly delimiter: string; readonly stripTabs: boolean }> = []
  parenDepth = 0
  readonly src: string
  readonly cursor: Cursor
  readonly mode: Mode
  readonly depth: number
  readonly out: LexResult
  readonly into: Array<Array<string>>

  constructor(src: string, cursor: Cursor, mode: Mode, depth: number, out: LexResult, into: Array<Array<string>>) {
    this.src = src
    this.cursor = cursor
    this.mode = mode
    this.depth = depth
    this.out = out
    this.into = into
  }

  /**
   * One lexer kept for the module's life, never run. V8 holds the hidden class a constructor's
   * objects end with only weakly (through the transitions from the one they start with): with
   * every lexer gone (they live for one call), a full GC collected it, and with it the optimized
   * code of `run` and `endSegment`, compiled against it ("weak objects"), so lexing ran
   * unoptimized again after each full GC until it got hot (two to three times as long; measured
   * with `--trace-deopt` in bench/, "Telemetry": the card summaries' lexing). This one keeps it.
   */
  static readonly kept: Lexer = new Lexer("", { i: 0 }, "top", 0, emptyResult(), [])

  nestedScript(script: string): void {
    if (this.depth >= MaxDepth) {
      this.out.complete = false
      this.out.truncated = true
      return
    }
    const sub = emptyResult()
    lex(script, { i: 0 }, "top", this.depth + 1, sub, sub.segments)
    for (const words of sub.segments) this.out.nested.push(words)
    for (const words of sub.nested) this.out.nested.push(words)
    if (sub.expands) this.out.expands = true
    if (sub.truncated) this.out.truncated = true
  }
  endWord(): void {
    if (this.inWord) {
      if (this.target === undefined) this.segment.push(this.word)
      else if (this.target === "heredoc" || this.target === "heredocTabs")
        this.heredocs.push({ delimiter: this.word, stripTabs: this.target === "heredocTabs" })
      else if (this.target === "herestring") this.nestedScript(this.word)
      this.target = undefined
    }
    this.word = ""
    this.inWord = false
    this.wordQuoted = false
  }
  endSegment(): void {
    this.endWord()
    if (this.segment.length > 0) this.into.push(this.segment)
    this.segment = []
  }
  readHeredocs(): void {
    for (const heredoc of this.heredocs) {
      const lines: Array<string> = []
      let closed = false
      while (this.cursor.i < this.src.length) {
        const nl = this.src.indexOf("\n", this.cursor.i)
        const line = this.src.slice(this.cursor.i, nl < 0 ? this.src.length : nl)
        this.cursor.i = nl < 0 ? this.src.length : nl + 1
        if ((heredoc.stripTabs ? line.replace(/^\t+/, "") : line) === heredoc.delimiter) {
          closed = true
          break
        }
        lines.push(line)
      }
      if (!closed) this.out.complete = false
      this.nestedScript(lines.join("\n"))
    }
    this.heredocs.length = 0
  }

  substitution(nestedMode: "paren" | "backtick"): void {
    this.out.expands = true
    if (this.depth >= MaxDepth) {
      this.out.complete = false
      this.out.truncated = true
      this.cursor.i = this.src.length
      return
    }
    lex(this.src, this.cursor, nestedMode, this.depth + 1, this.out, this.out.nested)
  }

  run(): void {
    const { cursor, mode, out, src } = this
    while (cursor.i < src.length) {
      const c = src[cursor.i]!
      const next = src[cursor.i + 1]

      if (c === "\\") {
        if (next === undefined) {
          this.word += "\\"
          this.inWord = true
          cursor.i += 1
        } else if (next === "\n") {
          cursor.i += 2 // line continuation
        } else {
          this.word += next
          this.inWord = true
          this.wordQuoted = true
          cursor.i += 2
        }
        continue
      }
      if (c === "'") {
        const end = src.indexOf("'", cursor.i + 1)
        this.inWord = true
        this.wordQuoted = true
        if (end < 0) {
          out.complete = false
          this.word += src.slice(cursor.i + 1)
          cursor.i = src.length
        } else {
          this.word += src.slice(cursor.i + 1, end)
          cursor.i = end + 1
        }
        continue
      }
      if (c === '"') {
        this.inWord = true
        this.wordQuoted = true
        cursor.i += 1
        let closed = false
        while (cursor.i < src.length) {
          const d = src[cursor.i]!
          if (d === '"') {
            closed = true
            cursor.i += 1
            break
          }
          if (d === "\\") {
            const e = src[cursor.i + 1]
            if (e === "$" || e === "`" || e === '"' || e === "\\") {
              this.word += e
              cursor.i += 2
            } else if (e === "\n") {
              cursor.i += 2
            } else {
              this.word += "\\"
              cursor.i += 1
            }
            continue
          }
          if ((d === "$" && src[cursor.i + 1] === "(") || d === "`") {
            const start = cursor.i
            cursor.i += d === "`" ? 1 : 2
            this.substitution(d === "`" ? "backtick" : "paren")
            this.word += src.slice(start, cursor.i)
            continue
          }
          if (d === "$") out.expands = true
          this.word += d
          cursor.i += 1
        }
        if (!closed) out.complete = false
        continue
      }
      if (c === "`") {
        if (mode === "backtick") {
          cursor.i += 1
          this.endSegment()
          this.readHeredocs()
          return
        }
        const start = cursor.i
        cursor.i += 1
        this.substitution("backtick")
        this.word += src.slice(start, cursor.i)
        this.inWord = true
        continue
      }
      if (c === "$") {
        out.expands = true
        this.inWord = true
        if (next === "(") {
          const start = cursor.i
          cursor.i += 2
          this.substitution("paren")
          this.word += src.slice(start, cursor.i)
          continue
        }
        if (next === "'") {
          // ANSI-C quoting: backslash escapes inside, ends at an unescaped quote
          let j = cursor.i + 2
          while (j < src.length && src[j] !== "'") j += src[j] === "\\" ? 2 : 1
          if (j >= src.length) out.complete = false
          this.word += src.slice(cursor.i + 2, Math.min(j, src.length))
          cursor.i = Math.min(j + 1, src.length)
          continue
        }
        this.word += c
        cursor.i += 1
        continue
      }
      if (c === "#" && !this.inWord) {
        out.expands = true // a comment: text the command line carries but does not run
        const nl = src.indexOf("\n", cursor.i)
        cursor.i = nl < 0 ? src.length : nl
        continue
      }
      if (isBlank(c)) {
        this.endWord()
        cursor.i += 1
        continue
      }
      if (c === "&" && next === ">") {
        // &> and &>> redirect both streams to a file
        out.compound = true
        this.endWord()
        cursor.i += src[cursor.i + 2] === ">" ? 3 : 2
        this.target = "skip"
        continue
      }
      if (c === "\n" || c === ";" || c === "&" || c === "|") {
        out.compound = true
        this.endSegment()
        const two =
          (c === "&" && next === "&") ||
          (c === "|" && (next === "|" || next === "&")) ||
          (c === ";" && (next === ";" || next === "&"))
        cursor.i += two ? 2 : 1
        if (c === "\n") this.readHeredocs()
        continue
      }
      if (c === "<" || c === ">") {
        out.compound = true
        if (this.inWord && !this.wordQuoted && isDigits(this.word)) {
          // "2>file": the digits name a file descriptor, not an argument
          this.word = ""
          this.inWord = false
        } else {
          this.endWord()
        }
        if (next === "(") {
          // process substitution <(...) / >(...)
          cursor.i += 2
          this.substitution("paren")
          continue
        }
        let j = cursor.i + 1
        while (j < src.length && j - cursor.i < 3 && (src[j] === "<" || src[j] === ">" || src[j] === "|")) j++
        const op = src.slice(cursor.i, j)
        if (src[j] === "&") {
          // >&2, <&-, >&2- name descriptors; >&file names a file
          const fd = /^(?:[0-9]+-?|-)/.exec(src.slice(j + 1, j + 16))
          if (fd) {
            cursor.i = j + 1 + fd[0].length
            continue
          }
          j++
        }
        if (op === "<<" && src[j] === "-") {
          j++
          this.target = "heredocTabs"
        } else {
          this.target = op === "<<" ? "heredoc" : op === "<<<" ? "herestring" : "skip"
        }
        cursor.i = j
        continue
      }
      if (c === "(") {
        out.compound = true
        if (this.inWord) out.expands = true // e.g. arr=(a b) or an extglob
        this.endSegment()
        this.parenDepth += 1
        cursor.i += 1
        continue
      }
      if (c === ")") {
        cursor.i += 1
        if (mode === "paren" && this.parenDepth === 0) {
          this.endSegment()
          this.readHeredocs()
          return
        }
        out.compound = true
        this.endSegment()
        this.parenDepth = Math.max(0, this.parenDepth - 1)
        continue
      }
      if (!this.inWord && c === "~") out.expands = true
      if (c === "*" || c === "?" || c === "[" || c === "{" || c === "}") out.expands = true
      // The plain characters after it (nothing above reads them) join the word with it, at once.
      let j = cursor.i + 1
      while (j < src.length && isPlain(src.charCodeAt(j))) j++
      this.word += j === cursor.i + 1 ? c : src.slice(cursor.i, j)
      this.inWord = true
      cursor.i = j
    }
    if (mode !== "top") out.complete = false // the substitution never closed
    this.endSegment()
    if (this.heredocs.length > 0) {
      out.complete = false // a here-document with no body
      this.heredocs.length = 0
    }
  }
}

/** Lex with a `Lexer` (see there). */
const lex = (
  src: string,
  cursor: Cursor,
  mode: Mode,
  depth: number,
  out: LexResult,
  into: Array<Array<string>>
): void => new Lexer(src, cursor, mode, depth, out, into).run()

/** `src` read as a script at the top level; a lexer that fails reads as "not read" (`truncated`). */
export const lexAll = (src: string): LexResult => {
  const out = emptyResult()
  try {
    lex(src, { i: 0 }, "top", 0, out, out.segments)
  } catch {
    // The lexer is not meant to throw (e.g. on a stack overflow it would): then "cannot tell".
    out.complete = false
    out.truncated = true
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Reading the command words of any text

/*
 * A text that may hold command lines (a card's command, a reason, a log line, JSON text, a
 * script quoted inside another) is read at every nesting level at once and leniently, for
 * masking: a word ends at any blank, the quotes and grouping around a word are not part of it,
 * and a value is read inside the quotes it starts with, up to the closing quote on the same line
 * (codex's `'\''` escape included). Read the POSIX way (`lex`), an apostrophe of prose, `echo
 * 'mysql -pX'` or a script nested in `bash -lc '...'` would hide the words a masker must see.
 */

/** A blank of a text: where its words end (a line end also ends a command). */
const isSpace = (code: number): boolean =>
  code === 32 || code === 9 || code === 10 || code === 13 || code === 11 || code === 12
/** `;`, `|` or `&`: a control operator's character, where a command ends. */
const isControlChar = (code: number): boolean => code === 59 || code === 124 || code === 38
/** Where an unquoted value ends in a command line: blanks and the shell's syntax characters. */
const endsValue = (code: number): boolean =>
  isSpace(code) ||
  isControlChar(code) ||
  code === 39 ||
  code === 34 ||
  code === 96 ||
  code === 41 ||
  code === 60 ||
  code === 62
/** An escaped line end or quote of JSON text at `i` (`\n`, `\"`): the end of an unquoted value too. */
const isEscape = (src: string, i: number): boolean => src.charCodeAt(i) === 92 && "nrt\"'".includes(src[i + 1] ?? "x")
/** Leading characters that are quoting or grouping around a word, not the word (`'mysql`, `"$(mysql`, `(cd`). */
const isOpener = (code: number): boolean =>
  code === 39 || code === 34 || code === 96 || code === 40 || code === 123 || code === 36
/** Trailing quoting and operators after a word (`db'`, `db;`, `db)`, `db&&`). */
const isCloser = (code: number): boolean =>
  isControlChar(code) || code === 39 || code === 34 || code === 96 || code === 41 || code === 125
/** An argv word that is a control operator (the words of a command line someone split at blanks). */
const isOperatorWord = (word: string): boolean =>
  word === ";" || word === "|" || word === "&&" || word === "||" || word === "&"

const hasNewline = (src: string, from: number, to: number): boolean => {
  for (let i = from; i < to; i++) if (src.charCodeAt(i) === 10) return true
  return false
}

/** What reads command words (`readTextWords`, `readArgvWords`): each word, and the end of each command. */
export interface CommandWordReader {
  /**
   * One word. `src` from `s` to `e` is the word itself: in a text, past the quotes and grouping
   * that open it and before the quotes and operators that close it; in an argv (`exact`), the whole
   * word. `start` to `end` is where it lies (blank to blank), `base` the offset of `src` in what
   * is reported. Returns where reading resumes (past a quoted value it read): at least `end`.
   */
  readonly word: (src: string, s: number, e: number, start: number, end: number, base: number, exact: boolean) => number
  /** The current command ended: a line end, `;`, `|` or `&`, or the end of the text or argv. */
  readonly endCommand: () => void
}

/** The words of `text` (blank to blank), in one pass; a line end, or a `;`, `|`, `&` closing a word, ends a command. */
export const readTextWords = (text: string, reader: CommandWordReader): void => {
  let i = 0
  while (i < text.length) {
    const code = text.charCodeAt(i)
    if (isSpace(code)) {
      if (code === 10) reader.endCommand()
      i++
      continue
    }
    let j = i
    while (j < text.length && !isSpace(text.charCodeAt(j))) j++
    i = textWord(text, i, j, reader)
  }
  reader.endCommand()
}

/** One word of a text, `start` to `end`, its opening and closing characters left out. */
const textWord = (src: string, start: number, end: number, reader: CommandWordReader): number => {
  let s = start
  let e = end
  let ends = false
  while (s < e && isOpener(src.charCodeAt(s))) s++
  while (e > s && isCloser(src.charCodeAt(e - 1))) {
    if (isControlChar(src.charCodeAt(e - 1))) ends = true
    e--
  }
  let resume = end
  if (s < e) resume = Math.max(end, reader.word(src, s, e, start, end, 0, false))
  if (ends) reader.endCommand()
  return resume
}

/**
 * The words of an argv, exactly as they are, each reported at its offset in the words joined by
 * spaces; an operator word (`;`, `|`, `&&`, `||`, `&`) ends a command.
 */
export const readArgvWords = (argv: ReadonlyArray<string>, reader: CommandWordReader): void => {
  let at = 0
  for (const word of argv) {
    if (isOperatorWord(word)) reader.endCommand()
    else if (word.length > 0) reader.word(word, 0, word.length, 0, word.length, at, true)
    at += word.length + 1
  }
  reader.endCommand()
}

/** Where a value lies: `from` to `to`, and where reading resumes after it (`valueExtent`). */
export interface ValueExtent {
  from: number
  to: number
  resume: number
}

/**
 * Where a value starting at `p` of `src` lies, written into `out`: in an argv (`exact`) the rest
 * of the word; in a text up to a blank or shell syntax (or an escaped line end or quote of JSON
 * text), or inside the quotes it starts with (`'a b'`, `"a b"`, codex's `'\''a b'\''`) when they
 * close on the same line, then reading resumes past the closing quote. Never past `end` unless
 * quoted; each quote is passed once.
 */
export const valueExtent = (src: string, p: number, end: number, exact: boolean, out: ValueExtent): ValueExtent => {
  out.from = p
  out.to = end
  out.resume = end
  if (exact) return out
  const escaped = src.startsWith("'\\''", p)
  const opening = escaped ? "'\\''" : src[p] === "'" || src[p] === '"' ? src[p]! : undefined
  let to = p
  if (opening !== undefined) {
    out.from = p + opening.length
    // the closing quote, on the same line (the search ends at the next quote: each quote is passed once)
    const close = src.indexOf(opening, out.from)
    if (close >= 0 && !hasNewline(src, out.from, close)) {
      out.to = close
      out.resume = close + opening.length
      return out
    }
    to = out.from
  }
  while (to < end && !endsValue(src.charCodeAt(to)) && !isEscape(src, to)) to++
  out.to = to
  return out
}

// ---------------------------------------------------------------------------------------------
// Words of a program

/** A program word's directory and name (`/bin/bash` → `/bin`, `bash`; `bash` → ``, `bash`). */
export const splitPath = (word: string): { dir: string; name: string } => {
  const slash = word.lastIndexOf("/")
  return slash < 0 ? { dir: "", name: word } : { dir: word.slice(0, slash), name: word.slice(slash + 1) }
}

/** A program word's name, past its last `/` (`/usr/bin/rm` → `rm`). */
export const programName = (word: string): string => word.slice(word.lastIndexOf("/") + 1)

// ---------------------------------------------------------------------------------------------
// Writing words

/** POSIX-quote one word so a shell reads it back unchanged. */
export const quote = (word: string): string =>
  word.length > 0 && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`

/**
 * Join argv into a command line a shell reads back as the same words. With `max`, stop once the
 * line is longer than `max` characters: the result is then a longer-than-`max` prefix of the line
 * (enough for a caller that refuses lines that long), and the cost is bounded by `max` plus one word.
 */
export const join = (argv: ReadonlyArray<string>, max?: number): string => {
  if (max === undefined) return argv.map(quote).join(" ")
  const parts: Array<string> = []
  let length = -1
  for (const word of argv) {
    const quoted = quote(word)
    parts.push(quoted)
    length += quoted.length + 1
    if (length > max) break
  }
  return parts.join(" ")
}
