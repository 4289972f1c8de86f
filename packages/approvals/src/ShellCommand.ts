/**
 * Reading a shell command the way a person (and a policy) needs it: codex wraps every command in a
 * login shell (`/bin/bash -lc 'echo hi; ls'`), so the wrapper is peeled off and the script is split
 * into words with POSIX quoting (single quotes, double quotes, backslashes).
 *
 * A command is `simple` only when its words are exactly what will run: one command, no control
 * operators (`;` `&&` `||` `|` `&` newline), no redirections, no grouping, no expansions of any kind
 * (`$VAR`, `$(...)`, backticks, globs, braces, `~`), no comment, no unterminated quote. Only a simple
 * command may be matched by an allow rule; deny rules look at every command the line may run (see
 * `commands`).
 *
 * Nothing here throws: a string we cannot read is "not simple" with no argv. Everything here is
 * linear in the command line (a model writes it, and it is read on the connection's read loop):
 * one pass per nesting level, starts kept as indexes into a segment's words (never copies of
 * suffixes), nesting followed at most `MaxDepth` levels and re-reading bounded by `WorkPerChar`;
 * what those bounds leave unread is reported (`Commands.complete`), never silently dropped.
 */

export interface Unwrapped {
  /** The words of the (first) command, quotes removed; undefined when the script cannot be read. */
  readonly argv: ReadonlyArray<string> | undefined
  /** True when `argv` is exactly and only what will run. */
  readonly simple: boolean
  /** The script inside the shell wrapper, or the command itself when there is no wrapper. */
  readonly inner: string
}

/**
 * How deep wrappers, substitutions, here-documents and nested scripts are followed; deeper nesting
 * reads as "not simple", and makes `commands` incomplete (a deny then matches).
 */
const MaxDepth = 8

const Shells = new Set(["bash", "sh", "zsh", "dash"])
/** Where a wrapping shell may live; any other path is a program of its own, not a wrapper. */
const ShellDirs = new Set(["", "/bin", "/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"])

/** Words that start or shape a command without being one (stripped before deny matching). */
const ReservedWords = new Set([
  "!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "time", "case", "esac", "select", "coproc"
])

/** Programs that run another command given as their arguments (`sudo rm`, `env X=1 rm`, `xargs rm`). */
const Runners = new Set([
  "sudo", "doas", "env", "nohup", "exec", "command", "builtin", "nice", "ionice", "timeout", "stdbuf", "xargs",
  "watch", "setsid", "unbuffer", "chroot", "flock", "time", "strace", "ltrace", "caffeinate"
])

const Assignment = /^[A-Za-z_][A-Za-z0-9_]*=/

// ---------------------------------------------------------------------------------------------
// Lexer

interface LexResult {
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

const lexAll = (src: string): LexResult => {
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
// Wrappers

const basename = (word: string): { dir: string; name: string } => {
  const slash = word.lastIndexOf("/")
  return slash < 0 ? { dir: "", name: word } : { dir: word.slice(0, slash), name: word.slice(slash + 1) }
}

/** The script of `bash -lc 'script'` and friends, or undefined if `words` is not such a wrapper. */
export const wrappedScript = (words: ReadonlyArray<string>): string | undefined => {
  if (words.length < 3) return undefined
  const { dir, name } = basename(words[0]!)
  if (!Shells.has(name) || !ShellDirs.has(dir)) return undefined
  let sawC = false
  let i = 1
  for (; i < words.length - 1; i++) {
    const flag = words[i]!
    if (flag === "--login") continue
    if (!/^-[lc]+$/.test(flag)) return undefined
    if (flag.includes("c")) {
      if (sawC) return undefined
      sawC = true
    }
  }
  // exactly one word after the flags: extra words would become $0, $1 of the script
  return sawC && i === words.length - 1 ? words[i] : undefined
}

/** The script inside the shell wrappers, and its lexing (the last one peel made, not made again). */
const peel = (command: string): { readonly inner: string; readonly lexed: LexResult } => {
  let inner = command
  for (let n = 0; n < MaxDepth; n++) {
    const lexed = lexAll(inner)
    if (!lexed.complete || lexed.compound || lexed.expands || lexed.segments.length !== 1) return { inner, lexed }
    const script = wrappedScript(lexed.segments[0]!)
    if (script === undefined) return { inner, lexed }
    inner = script
  }
  return { inner, lexed: lexAll(inner) }
}

/** Peel shell wrappers off `command` and split what is inside into words. */
export const unwrap = (command: string): Unwrapped => {
  const { inner, lexed } = peel(command)
  const first = lexed.segments[0]
  const argv = lexed.complete && first !== undefined && first.length > 0 ? first : undefined
  const simple = argv !== undefined && lexed.complete && !lexed.compound && !lexed.expands && lexed.segments.length === 1 &&
    lexed.nested.length === 0
  return { argv, simple, inner }
}

// ---------------------------------------------------------------------------------------------
// Every command a line may run (deny matching)

/** A place where a command may start: `words[at]` is its program, the words after it its arguments. */
export interface Start {
  readonly words: ReadonlyArray<string>
  readonly at: number
}

/** Every command a line may run, as `commands` reads it. */
export interface Commands {
  /** Where commands may start, in reading order (starts in one segment share its `words`). */
  readonly starts: ReadonlyArray<Start>
  /**
   * False when part of the line was not read: nesting deeper than `MaxDepth` (substitutions,
   * here-documents, nested shells, `eval`), or more reading than the budget (`WorkPerChar` times
   * the line's length). What was not read may run anything: a deny must then match.
   */
  readonly complete: boolean
  /** Characters lexed to find them (the line and the nested scripts read again): at most `WorkPerChar` × (length + 1024). */
  readonly work: number
}

/**
 * Reading budget of `commands` and `segments`, in characters lexed per character of the line (plus
 * a little): the scripts of nested shells and `eval` are lexed again, once per level. A line whose
 * scripts would cost more (e.g. `sudo eval eval eval ...`, where every word after `sudo` is an `eval`
 * of all the rest) is read up to the budget and reported incomplete.
 */
export const WorkPerChar = 16

const isLeading = (word: string): boolean => ReservedWords.has(word) || Assignment.test(word)

/** The first index at or after `i` whose word is not a reserved word or an assignment. */
const skipLeading = (words: ReadonlyArray<string>, i: number): number => {
  while (i < words.length && isLeading(words[i]!)) i++
  return i
}

/**
 * Call `f` with every index of `words` where a command may start, given that one starts at `at`:
 * `at` itself and, after a runner such as `sudo`, `env`, `timeout` or `xargs`, every later word past
 * leading assignments and reserved words (their options vary too much to parse, so a deny looks
 * everywhere after them). Each index once, in order, by index (no copies): linear in the words.
 * Stops when `f` returns true, and then returns true.
 */
const eachStart = (words: ReadonlyArray<string>, at: number, f: (start: number) => boolean): boolean => {
  if (f(at)) return true
  if (!Runners.has(basename(words[at]!).name)) return false
  for (let i = at + 1; i < words.length;) {
    const start = skipLeading(words, i)
    if (start >= words.length) return false
    if (f(start)) return true
    i = start + 1
  }
  return false
}

interface Walk {
  readonly budget: number
  /** Characters lexed so far (the scripts of nested shells and `eval` are lexed again). */
  work: number
  complete: boolean
  stopped: boolean
  /** Each segment, its words and where its command starts (past assignments); true stops the walk. */
  readonly onSegment: (words: ReadonlyArray<string>, at: number) => boolean
  /** Each start of each segment; true stops the walk. */
  readonly onStart: (words: ReadonlyArray<string>, at: number) => boolean
}

/** Lex `script` and walk its segments: top-level ones, then those inside substitutions and here-documents. */
const walkScript = (walk: Walk, script: string, depth: number, lexedAlready?: LexResult): void => {
  if (walk.stopped) return
  if (walk.work + script.length > walk.budget) {
    walk.complete = false
    return
  }
  walk.work += script.length
  const lexed = lexedAlready ?? lexAll(script)
  if (lexed.truncated) walk.complete = false
  for (const words of lexed.segments) if (!walk.stopped) walkSegment(walk, words, depth)
  for (const words of lexed.nested) if (!walk.stopped) walkSegment(walk, words, depth)
}

/** Walk `script` (of `length` characters) one level deeper, if the depth and the budget allow. */
const follow = (walk: Walk, depth: number, length: number, script: () => string): void => {
  if (depth >= MaxDepth || walk.work + length > walk.budget) walk.complete = false
  else walkScript(walk, script(), depth + 1)
}

/**
 * Report one segment and its starts (`eachStart`, inlined: no closure per segment), and walk the
 * script a start runs: a shell's `-c` script, or what `eval` joins. The length of an `eval` script
 * is known before it is built (sums of word lengths, computed once per segment), so a script over
 * the budget is never built.
 */
const walkSegment = (walk: Walk, words: ReadonlyArray<string>, depth: number): void => {
  const at = skipLeading(words, 0)
  if (at >= words.length) return
  if (walk.onSegment(words, at)) {
    walk.stopped = true
    return
  }
  const runner = Runners.has(basename(words[at]!).name)
  /** `tail[i]`: the length of `words.slice(i).join(" ")` plus one. */
  let tail: Array<number> | undefined
  for (let start = at; start < words.length;) {
    if (walk.onStart(words, start)) {
      walk.stopped = true
      return
    }
    const name = basename(words[start]!).name
    if (name === "eval") {
      if (start + 1 < words.length) {
        if (tail === undefined) {
          tail = new Array<number>(words.length + 1)
          tail[words.length] = 0
          for (let i = words.length - 1; i >= 0; i--) tail[i] = tail[i + 1]! + words[i]!.length + 1
        }
        const from = start + 1
        follow(walk, depth, tail[from]! - 1, () => words.slice(from).join(" "))
      }
    } else if (Shells.has(name) || name === "ksh" || name === "fish") {
      // `bash [flags] -c script`: the first word after the flags, read loosely (any flags, any path)
      let sawC = false
      for (let i = start + 1; i < words.length; i++) {
        const word = words[i]!
        if (/^[-+]/.test(word)) {
          if (/^-[A-Za-z]*c/.test(word)) sawC = true
          continue
        }
        if (sawC) follow(walk, depth, word.length, () => word)
        break
      }
    }
    if (walk.stopped || !runner) return
    // after a runner, every later word past assignments and reserved words
    start = skipLeading(words, start + 1)
  }
}

const walkLine = (command: string, onSegment: Walk["onSegment"], onStart: Walk["onStart"]): Walk => {
  const walk: Walk = { budget: WorkPerChar * (command.length + 1024), work: 0, complete: true, stopped: false, onSegment, onStart }
  const { inner, lexed } = peel(command)
  walkScript(walk, inner, 0, lexed)
  return walk
}

/**
 * Every command a (possibly compound) command line may run, for deny matching. The wrappers around
 * the whole line are peeled first, as `unwrap` does (codex wraps every command, so a rule naming
 * `bash` would otherwise match them all); then: top-level segments, commands inside substitutions,
 * here-documents and here-strings, the scripts of nested shells (`bash -c '...'` at any path, with
 * any flags) and of `eval`, each past leading assignments and reserved words, and after a runner
 * every later word. Lenient: an unterminated quote is closed at the end so a deny still sees the
 * words. Over-reading is deliberate (a deny that matches too much refuses; one that matches too
 * little lets through).
 *
 * Bounded and linear in the line: starts are indexes into the segment's words (never copies of
 * suffixes), nesting is followed `MaxDepth` levels, and the characters lexed are bounded by
 * `WorkPerChar` times the line's length. Whatever those bounds leave unread makes the result
 * `complete: false`, never silently shorter.
 */
export const commands = (command: string): Commands => {
  const starts: Array<Start> = []
  const { complete, work } = walkLine(command, () => false, (words, at) => {
    starts.push({ words, at })
    return false
  })
  return { starts, complete, work }
}

/**
 * The segments `commands` reads (each past its leading assignments and reserved words), at most
 * `maxSegments` of them: for display and tests. A decision must use `commands`, which reads every
 * segment and says when it could not.
 */
export const segments = (command: string, maxSegments = 512): ReadonlyArray<ReadonlyArray<string>> => {
  const found: Array<ReadonlyArray<string>> = []
  if (maxSegments <= 0) return found
  walkLine(command, (words, at) => {
    found.push(at === 0 ? words : words.slice(at))
    return found.length >= maxSegments
  }, () => false)
  return found
}

/**
 * The commands one segment may start, as copies: the segment itself and, after a runner such as
 * `sudo`, `env`, `timeout` or `xargs`, every later start. For display and tests: the copies make it
 * quadratic in a long runner segment; `commands` gives the same starts as indexes.
 */
export const commandStarts = (segment: ReadonlyArray<string>): ReadonlyArray<ReadonlyArray<string>> => {
  const starts: Array<ReadonlyArray<string>> = [segment]
  if (segment.length > 0) {
    eachStart(segment, 0, (start) => {
      if (start > 0) starts.push(segment.slice(start))
      return false
    })
  }
  return starts
}

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
