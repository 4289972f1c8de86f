/**
 * Reading a shell command the way a person (and a policy) needs it: codex wraps every command in a
 * login shell (`/bin/bash -lc 'echo hi; ls'`), so the wrapper is peeled off and the script is split
 * into words with POSIX quoting (single quotes, double quotes, backslashes).
 *
 * A command is `simple` only when its words are exactly what will run: one command, no control
 * operators (`;` `&&` `||` `|` `&` newline), no redirections, no grouping, no expansions of any kind
 * (`$VAR`, `$(...)`, backticks, globs, braces, `~`), no comment, no unterminated quote. Only a simple
 * command may be matched by an allow rule; deny rules look at every segment (see `segments`).
 *
 * Nothing here throws: a string we cannot read is "not simple" with no argv.
 */

export interface Unwrapped {
  /** The words of the (first) command, quotes removed; undefined when the script cannot be read. */
  readonly argv: ReadonlyArray<string> | undefined
  /** True when `argv` is exactly and only what will run. */
  readonly simple: boolean
  /** The script inside the shell wrapper, or the command itself when there is no wrapper. */
  readonly inner: string
}

/** How deep wrappers and substitutions are followed; deeper nesting reads as "not simple". */
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
}

type Mode = "top" | "paren" | "backtick"
type Target = "skip" | "heredoc" | "heredocTabs" | "herestring"

interface Cursor {
  i: number
}

const emptyResult = (): LexResult => ({ segments: [], nested: [], complete: true, compound: false, expands: false })

const isBlank = (c: string) => c === " " || c === "\t"
const isDigits = (s: string) => s.length > 0 && /^[0-9]+$/.test(s)

/**
 * Lex `src` from `cursor.i` into `into` (segments of words). In "paren" mode stop after the
 * unmatched `)`, in "backtick" mode after the closing backtick. Control operators end a segment;
 * a redirection drops its target word. The bodies of here-documents and here-strings are data to
 * the shell but may be a script to the program reading them (`bash <<EOF`), so they are lexed as
 * scripts of their own into `nested`, where their quotes cannot swallow what follows them.
 */
const lex = (src: string, cursor: Cursor, mode: Mode, depth: number, out: LexResult, into: Array<Array<string>>): void => {
  let segment: Array<string> = []
  let word = ""
  let inWord = false
  let wordQuoted = false
  let target: Target | undefined
  const heredocs: Array<{ readonly delimiter: string; readonly stripTabs: boolean }> = []
  let parenDepth = 0

  const nestedScript = (script: string) => {
    if (depth >= MaxDepth) {
      out.complete = false
      return
    }
    const sub = emptyResult()
    lex(script, { i: 0 }, "top", depth + 1, sub, sub.segments)
    out.nested.push(...sub.segments, ...sub.nested)
    if (sub.expands) out.expands = true
  }
  const endWord = () => {
    if (inWord) {
      if (target === undefined) segment.push(word)
      else if (target === "heredoc" || target === "heredocTabs") heredocs.push({ delimiter: word, stripTabs: target === "heredocTabs" })
      else if (target === "herestring") nestedScript(word)
      target = undefined
    }
    word = ""
    inWord = false
    wordQuoted = false
  }
  const endSegment = () => {
    endWord()
    if (segment.length > 0) into.push(segment)
    segment = []
  }
  const readHeredocs = () => {
    for (const heredoc of heredocs) {
      const lines: Array<string> = []
      let closed = false
      while (cursor.i < src.length) {
        const nl = src.indexOf("\n", cursor.i)
        const line = src.slice(cursor.i, nl < 0 ? src.length : nl)
        cursor.i = nl < 0 ? src.length : nl + 1
        if ((heredoc.stripTabs ? line.replace(/^\t+/, "") : line) === heredoc.delimiter) {
          closed = true
          break
        }
        lines.push(line)
      }
      if (!closed) out.complete = false
      nestedScript(lines.join("\n"))
    }
    heredocs.length = 0
  }
  const substitution = (nestedMode: "paren" | "backtick") => {
    out.expands = true
    if (depth >= MaxDepth) {
      out.complete = false
      cursor.i = src.length
      return
    }
    lex(src, cursor, nestedMode, depth + 1, out, out.nested)
  }

  while (cursor.i < src.length) {
    const c = src[cursor.i]!
    const next = src[cursor.i + 1]

    if (c === "\\") {
      if (next === undefined) {
        word += "\\"
        inWord = true
        cursor.i += 1
      } else if (next === "\n") {
        cursor.i += 2 // line continuation
      } else {
        word += next
        inWord = true
        wordQuoted = true
        cursor.i += 2
      }
      continue
    }
    if (c === "'") {
      const end = src.indexOf("'", cursor.i + 1)
      inWord = true
      wordQuoted = true
      if (end < 0) {
        out.complete = false
        word += src.slice(cursor.i + 1)
        cursor.i = src.length
      } else {
        word += src.slice(cursor.i + 1, end)
        cursor.i = end + 1
      }
      continue
    }
    if (c === "\"") {
      inWord = true
      wordQuoted = true
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
            word += e
            cursor.i += 2
          } else if (e === "\n") {
            cursor.i += 2
          } else {
            word += "\\"
            cursor.i += 1
          }
          continue
        }
        if ((d === "$" && src[cursor.i + 1] === "(") || d === "`") {
          const start = cursor.i
          cursor.i += d === "`" ? 1 : 2
          substitution(d === "`" ? "backtick" : "paren")
          word += src.slice(start, cursor.i)
          continue
        }
        if (d === "$") out.expands = true
        word += d
        cursor.i += 1
      }
      if (!closed) out.complete = false
      continue
    }
    if (c === "`") {
      if (mode === "backtick") {
        cursor.i += 1
        endSegment()
        readHeredocs()
        return
      }
      const start = cursor.i
      cursor.i += 1
      substitution("backtick")
      word += src.slice(start, cursor.i)
      inWord = true
      continue
    }
    if (c === "$") {
      out.expands = true
      inWord = true
      if (next === "(") {
        const start = cursor.i
        cursor.i += 2
        substitution("paren")
        word += src.slice(start, cursor.i)
        continue
      }
      if (next === "'") {
        // ANSI-C quoting: backslash escapes inside, ends at an unescaped quote
        let j = cursor.i + 2
        while (j < src.length && src[j] !== "'") j += src[j] === "\\" ? 2 : 1
        if (j >= src.length) out.complete = false
        word += src.slice(cursor.i + 2, Math.min(j, src.length))
        cursor.i = Math.min(j + 1, src.length)
        continue
      }
      word += c
      cursor.i += 1
      continue
    }
    if (c === "#" && !inWord) {
      out.expands = true // a comment: text the command line carries but does not run
      const nl = src.indexOf("\n", cursor.i)
      cursor.i = nl < 0 ? src.length : nl
      continue
    }
    if (isBlank(c)) {
      endWord()
      cursor.i += 1
      continue
    }
    if (c === "&" && next === ">") {
      // &> and &>> redirect both streams to a file
      out.compound = true
      endWord()
      cursor.i += src[cursor.i + 2] === ">" ? 3 : 2
      target = "skip"
      continue
    }
    if (c === "\n" || c === ";" || c === "&" || c === "|") {
      out.compound = true
      endSegment()
      const two = (c === "&" && next === "&") || (c === "|" && (next === "|" || next === "&")) || (c === ";" && (next === ";" || next === "&"))
      cursor.i += two ? 2 : 1
      if (c === "\n") readHeredocs()
      continue
    }
    if (c === "<" || c === ">") {
      out.compound = true
      if (inWord && !wordQuoted && isDigits(word)) {
        // "2>file": the digits name a file descriptor, not an argument
        word = ""
        inWord = false
      } else {
        endWord()
      }
      if (next === "(") {
        // process substitution <(...) / >(...)
        cursor.i += 2
        substitution("paren")
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
        target = "heredocTabs"
      } else {
        target = op === "<<" ? "heredoc" : op === "<<<" ? "herestring" : "skip"
      }
      cursor.i = j
      continue
    }
    if (c === "(") {
      out.compound = true
      if (inWord) out.expands = true // e.g. arr=(a b) or an extglob
      endSegment()
      parenDepth += 1
      cursor.i += 1
      continue
    }
    if (c === ")") {
      cursor.i += 1
      if (mode === "paren" && parenDepth === 0) {
        endSegment()
        readHeredocs()
        return
      }
      out.compound = true
      endSegment()
      parenDepth = Math.max(0, parenDepth - 1)
      continue
    }
    if (!inWord && c === "~") out.expands = true
    if (c === "*" || c === "?" || c === "[" || c === "{" || c === "}") out.expands = true
    word += c
    inWord = true
    cursor.i += 1
  }
  if (mode !== "top") out.complete = false // the substitution never closed
  endSegment()
  if (heredocs.length > 0) {
    out.complete = false // a here-document with no body
    heredocs.length = 0
  }
}

const lexAll = (src: string): LexResult => {
  const out = emptyResult()
  try {
    lex(src, { i: 0 }, "top", 0, out, out.segments)
  } catch {
    // The lexer is not meant to throw (e.g. on a stack overflow it would): then "cannot tell".
    out.complete = false
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

const peel = (command: string): string => {
  let inner = command
  for (let n = 0; n < MaxDepth; n++) {
    const lexed = lexAll(inner)
    if (!lexed.complete || lexed.compound || lexed.expands || lexed.segments.length !== 1) return inner
    const script = wrappedScript(lexed.segments[0]!)
    if (script === undefined) return inner
    inner = script
  }
  return inner
}

/** Peel shell wrappers off `command` and split what is inside into words. */
export const unwrap = (command: string): Unwrapped => {
  const inner = peel(command)
  const lexed = lexAll(inner)
  const first = lexed.segments[0]
  const argv = lexed.complete && first !== undefined && first.length > 0 ? first : undefined
  const simple = argv !== undefined && lexed.complete && !lexed.compound && !lexed.expands && lexed.segments.length === 1 &&
    lexed.nested.length === 0
  return { argv, simple, inner }
}

/**
 * Every command a (possibly compound) command line may run, for deny matching. The wrappers around
 * the whole line are peeled first, as `unwrap` does (codex wraps every command, so a rule naming
 * `bash` would otherwise match them all); then: top-level
 * segments, commands inside substitutions, here-documents and here-strings, the scripts of nested
 * shells (`bash -c '...'` at any path, with any flags) and of `eval`, each with leading assignments
 * and reserved words removed. Lenient: an unterminated quote is closed at the end so a deny still
 * sees the words. Over-reading is deliberate (a deny that matches too much refuses; one that
 * matches too little lets through). Bounded by `MaxDepth` and `maxSegments`.
 */
export const segments = (command: string, maxSegments = 512): ReadonlyArray<ReadonlyArray<string>> => {
  const found: Array<ReadonlyArray<string>> = []
  const visit = (script: string, depth: number) => {
    const lexed = lexAll(script)
    for (const words of [...lexed.segments, ...lexed.nested]) {
      if (found.length >= maxSegments) return
      const stripped = stripLeading(words)
      if (stripped.length === 0) continue
      found.push(stripped)
      if (depth >= MaxDepth) continue
      for (const start of commandStarts(stripped)) {
        const script = looseScript(start)
        if (script !== undefined) visit(script, depth + 1)
      }
    }
  }
  visit(peel(command), 0)
  return found
}

/** The script a shell or `eval` would run from these words, read loosely (for deny matching). */
const looseScript = (words: ReadonlyArray<string>): string | undefined => {
  const first = words[0]
  if (first === undefined) return undefined
  const name = basename(first).name
  if (name === "eval") return words.length > 1 ? words.slice(1).join(" ") : undefined
  if (!Shells.has(name) && name !== "ksh" && name !== "fish") return undefined
  let sawC = false
  for (let i = 1; i < words.length; i++) {
    const word = words[i]!
    if (/^[-+]/.test(word)) {
      if (/^-[A-Za-z]*c/.test(word)) sawC = true
      continue
    }
    return sawC ? word : undefined
  }
  return undefined
}

const stripLeading = (words: ReadonlyArray<string>): ReadonlyArray<string> => {
  let i = 0
  while (i < words.length && (ReservedWords.has(words[i]!) || Assignment.test(words[i]!))) i++
  return words.slice(i)
}

/**
 * The positions in one segment where a command may start: the segment itself and, after a runner
 * such as `sudo`, `env`, `timeout` or `xargs`, every later word (their options vary too much to
 * parse, so a deny looks everywhere after them).
 */
export const commandStarts = (segment: ReadonlyArray<string>): ReadonlyArray<ReadonlyArray<string>> => {
  const starts: Array<ReadonlyArray<string>> = [segment]
  const first = segment[0]
  if (first !== undefined && Runners.has(basename(first).name)) {
    for (let i = 1; i < segment.length; i++) starts.push(stripLeading(segment.slice(i)))
  }
  return starts
}

/** POSIX-quote one word so a shell reads it back unchanged. */
export const quote = (word: string): string =>
  word.length > 0 && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`

/** Join argv into a command line a shell reads back as the same words. */
export const join = (argv: ReadonlyArray<string>): string => argv.map(quote).join(" ")
