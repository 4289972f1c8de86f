/**
 * Reading shell words: what a blank, a quote, an operator, a substitution and a here-document
 * are, and writing words back so a shell reads them unchanged.
 *
 * `lex` reads a script as the shell will run it (POSIX quoting: single quotes, double quotes,
 * backslashes, `$'...'`; control operators, redirections, grouping, substitutions,
 * here-documents) into segments of words with quotes removed. Command analysis (`ShellWrapper`,
 * `CommandStarts`) decides on these words: a rule must see exactly what runs.
 *
 * Nothing here throws on any input (`lexAll` turns a failure into "not read"), and everything is
 * linear in what it reads: one pass per nesting level, nesting followed at most `MaxDepth` levels.
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

const emptyResult = (): LexResult => ({ segments: [], nested: [], complete: true, compound: false, expands: false, truncated: false })

const isBlank = (c: string) => c === " " || c === "\t"
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
      else if (this.target === "heredoc" || this.target === "heredocTabs") this.heredocs.push({ delimiter: this.word, stripTabs: this.target === "heredocTabs" })
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
      if (c === "\"") {
        this.inWord = true
        this.wordQuoted = true
        cursor.i += 1
        let closed = false
        while (cursor.i < src.length) {
          const d = src[cursor.i]!
          if (d === "\"") {
            closed = true
            cursor.i += 1
            break
          }
          if (d === "\\") {
            const e = src[cursor.i + 1]
            if (e === "$" || e === "`" || e === "\"" || e === "\\") {
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
        const two = (c === "&" && next === "&") || (c === "|" && (next === "|" || next === "&")) || (c === ";" && (next === ";" || next === "&"))
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
      this.word += c
      this.inWord = true
      cursor.i += 1
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
const lex = (src: string, cursor: Cursor, mode: Mode, depth: number, out: LexResult, into: Array<Array<string>>): void =>
  new Lexer(src, cursor, mode, depth, out, into).run()

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
