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
  "!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "case", "esac", "select"
])

/**
 * Programs (and the reserved words `time`, `coproc`, `function`) after which another command may
 * start: `sudo -u root rm`, `env -u X rm`, `timeout -s KILL 5 rm`, `time -p rm`, `coproc NAME { rm; }`.
 * Their options, and which of them take an argument, vary too much to parse: a deny looks at every
 * later word.
 */
const Runners = new Set([
  "sudo", "doas", "env", "nohup", "exec", "command", "builtin", "nice", "ionice", "timeout", "stdbuf", "xargs",
  "watch", "setsid", "unbuffer", "chroot", "flock", "time", "strace", "ltrace", "caffeinate", "coproc", "function",
  "su", "runuser", "pkexec", "busybox", "toybox", "unshare", "nsenter", "firejail", "chrt", "taskset", "numactl",
  "prlimit", "setpriv", "systemd-run", "gosu", "su-exec", "chpst"
])

/**
 * Shells whose `-c` script a deny reads, at any path and with any version suffix (`bash5`,
 * `zsh-5.9`); `fish` is read apart (its `-c` takes the script as its own argument).
 */
const PosixShells = new Set([
  "sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "ksh93", "mksh", "lksh", "pdksh", "oksh", "loksh", "yash", "posh",
  "hush", "csh", "tcsh"
])

/** Shell options whose next word is their argument (`bash -o errexit`, `-O extglob`; ksh93 `-R file`; mksh `-T tty`). */
const ShellArgLetters = new Set(["o", "O", "R", "T"])
/** Long shell options that take no argument; any other (`--rcfile F`, `--init-file F`) is taken to take one. */
const ShellFlagsLong = new Set([
  "--login", "--norc", "--noprofile", "--noediting", "--posix", "--restricted", "--verbose", "--debugger",
  "--dump-strings", "--dump-po-strings", "--help", "--version", "--wordexp", "--pretty-print", "--protected"
])

/** `env` options whose argument may be the next word (GNU `-u NAME`, `-C DIR`, `-a ARG`; BSD `-P PATH`, `-L`/`-U USER`). */
const EnvArgLetters = new Set(["u", "C", "a", "P", "L", "U"])
const EnvArgLong = ["--unset", "--chdir", "--argv0"]

/**
 * Programs that run a shell command line given as the argument of an option (`su -c CMD`,
 * `flock FILE -c CMD`, `script -c CMD`): the letters and the long options.
 */
const CommandOptions = new Map<string, { readonly letters: string; readonly long: ReadonlyArray<string> }>([
  ["su", { letters: "c", long: ["--command", "--session-command"] }],
  ["runuser", { letters: "c", long: ["--command", "--session-command"] }],
  ["flock", { letters: "c", long: ["--command"] }],
  ["script", { letters: "c", long: ["--command"] }]
])
/** `fish -c CMD`, `fish -C CMD` (`--init-command`): fish's command options take the script as their argument. */
const FishOptions = { letters: "cC", long: ["--command", "--init-command"] } as const

/**
 * Programs that join their arguments into one command line for a shell (`watch`, `ssh host ...`,
 * `tmux new-session ...`, `screen -X stuff ...`, `parallel`, `sg GROUP ...`), as `eval` does.
 */
const JoiningRunners = new Set(["watch", "ssh", "tmux", "screen", "parallel", "sem", "sg"])

/** Programs after whose exec options a command starts (`find . -exec rm {} +`, `fd -x rm`). */
const ExecOptions = new Map<string, ReadonlySet<string>>([
  ["find", new Set(["-exec", "-execdir", "-ok", "-okdir"])],
  ["fd", new Set(["-x", "--exec", "-X", "--exec-batch"])],
  ["fdfind", new Set(["-x", "--exec", "-X", "--exec-batch"])]
])

/** `ssh` options whose value is a command line run on this machine (or, `RemoteCommand`, on the other). */
const SshCommandOption = /^(?:-o)?[ \t]*(?:proxy|local|knownhosts|remote)command[ \t]*[= \t][ \t]*/i

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
  /** Characters lexed or scanned to find them (the line, nested scripts, options): at most `WorkPerChar` × (length + 1024). */
  readonly work: number
}

/**
 * Reading budget of `commands` and `segments`, in characters lexed (or scanned for options) per
 * character of the line (plus a little): the scripts of nested shells and `eval` are lexed again,
 * once per level. A line whose scripts would cost more (e.g. `sudo eval eval eval ...`, where every
 * word after `sudo` is an `eval` of all the rest, or `sudo su su su ...`, where every `su` scans the
 * rest for `-c`) is read up to the budget and reported incomplete.
 */
export const WorkPerChar = 16

const isLeading = (word: string): boolean => ReservedWords.has(word) || Assignment.test(word)

/** The first index at or after `i` whose word is not a reserved word or an assignment. */
const skipLeading = (words: ReadonlyArray<string>, i: number): number => {
  while (i < words.length && isLeading(words[i]!)) i++
  return i
}

/**
 * How later commands start in a segment once a program has started: at every later word past
 * assignments and reserved words (after a runner: `"every"`), at the word after an exec option
 * (`find ... -exec CMD`: the set of those options), or nowhere (`undefined`).
 */
type Then = "every" | ReadonlySet<string> | undefined

const thenAfter = (name: string, then: Then): Then =>
  then === "every" || Runners.has(name) ? "every" : then ?? ExecOptions.get(name)

/** Does a command start at `words[i]` (`i` past the segment's first start), given how starts go on? */
const startsAt = (words: ReadonlyArray<string>, i: number, then: Then): boolean =>
  then === "every" ? !isLeading(words[i]!) : then !== undefined && then.has(words[i - 1]!)

/**
 * Call `f` with every index of `words` where a command may start, given that one starts at `at`:
 * `at` itself, after a runner such as `sudo`, `env`, `timeout` or `xargs` every later word past
 * leading assignments and reserved words, and after `find`'s `-exec` (and the like) the word after
 * it. Each index once, in order, by index (no copies): linear in the words. Stops when `f` returns
 * true, and then returns true.
 */
const eachStart = (words: ReadonlyArray<string>, at: number, f: (start: number) => boolean): boolean => {
  let then: Then = undefined
  for (let start = at; start < words.length; start++) {
    if (start > at && !startsAt(words, start, then)) continue
    if (f(start)) return true
    then = thenAfter(basename(words[start]!).name, then)
    if (then === undefined) return false
  }
  return false
}

interface Walk {
  readonly budget: number
  /** Characters lexed or scanned so far (the scripts of nested shells and `eval` are lexed again). */
  work: number
  complete: boolean
  stopped: boolean
  /** Each segment, its words and where its command starts (past assignments); true stops the walk. */
  readonly onSegment: (words: ReadonlyArray<string>, at: number) => boolean
  /** Each start of each segment; true stops the walk. */
  readonly onStart: (words: ReadonlyArray<string>, at: number) => boolean
}

/** Count `n` characters of reading against the budget; false (and the walk incomplete) when it is spent. */
const charge = (walk: Walk, n: number): boolean => {
  if (walk.work + n > walk.budget) {
    walk.complete = false
    return false
  }
  walk.work += n
  return true
}

/**
 * Lex `script` and walk its segments: top-level ones, then those inside substitutions and
 * here-documents. With `lead`, the first segment is the arguments of a runner (`ssh host CMD`
 * joined): every word of it may start a command.
 */
const walkScript = (walk: Walk, script: string, depth: number, lexedAlready?: LexResult, lead = false): void => {
  if (walk.stopped) return
  if (walk.work + script.length > walk.budget) {
    walk.complete = false
    return
  }
  walk.work += script.length
  const lexed = lexedAlready ?? lexAll(script)
  if (lexed.truncated) walk.complete = false
  for (let i = 0; i < lexed.segments.length && !walk.stopped; i++) walkSegment(walk, lexed.segments[i]!, depth, lead && i === 0)
  for (const words of lexed.nested) if (!walk.stopped) walkSegment(walk, words, depth, false)
}

/** Walk `script` (of `length` characters) one level deeper, if the depth and the budget allow. */
const follow = (walk: Walk, depth: number, length: number, script: () => string, lead = false): void => {
  if (depth >= MaxDepth || walk.work + length > walk.budget) walk.complete = false
  else walkScript(walk, script(), depth + 1, undefined, lead)
}

/** Walk one word as a script of its own. */
const followWord = (walk: Walk, depth: number, word: string | undefined): void => {
  if (word !== undefined) follow(walk, depth, word.length, () => word)
}

/** `tails[i]`: the length of `words.slice(i).join(" ")` plus one. */
const tailsOf = (words: ReadonlyArray<string>): ReadonlyArray<number> => {
  const tail = new Array<number>(words.length + 1)
  tail[words.length] = 0
  for (let i = words.length - 1; i >= 0; i--) tail[i] = tail[i + 1]! + words[i]!.length + 1
  return tail
}

/** An option word: `-x`, `+o`, `--long` (not `-` or `+` alone, not `--`). */
const isOption = (word: string): boolean => word.length > 1 && (word[0] === "-" || word[0] === "+") && word !== "--"

/** The shell family of a program name (`bash`, `/opt/bin/zsh-5.9` → `zsh`), or undefined. */
const shellOf = (name: string): string | undefined => {
  if (name.length > 24) return undefined
  let end = name.length
  while (end > 1 && "0123456789.-_".includes(name[end - 1]!)) end--
  const base = name.slice(0, end)
  return PosixShells.has(base) || base === "fish" ? base : undefined
}

/**
 * `bash [options] -c SCRIPT`, read with any options: where an option takes an argument is not
 * trusted to be known (shells differ: bash's `-o` takes the next word, zsh's `-oNAME` the rest of its
 * word), so the parse is a union of the readings. An option that may take an argument leaves one
 * pending; the next word that is not itself an option pays it. If any option word (or a pending
 * argument) carries `c`, every argument paid and the first word past the options are read as
 * scripts: one of them is the script, whichever reading the shell has. Linear in the options.
 */
const shellScripts = (walk: Walk, words: ReadonlyArray<string>, start: number, depth: number): void => {
  let sawC = false
  let pending = 0
  const paid: Array<number> = []
  let script = -1
  for (let i = start + 1; i < words.length; i++) {
    const word = words[i]!
    if (!charge(walk, word.length + 1)) return
    if (word === "--" || word === "-") {
      // the end of the options (the next word is the script, whatever it looks like), or an argument
      if (pending === 0) {
        script = i + 1
        break
      }
      pending--
      paid.push(i + 1)
      continue
    }
    if (isOption(word)) {
      if (word.startsWith("--")) {
        if (!ShellFlagsLong.has(word) && !word.includes("=")) pending++
        continue
      }
      for (let k = 1; k < word.length; k++) {
        const letter = word[k]!
        if (letter === "c") sawC = true
        else if (ShellArgLetters.has(letter)) pending++
      }
      continue
    }
    if (pending > 0) {
      pending--
      paid.push(i)
      continue
    }
    script = i
    break
  }
  if (!sawC) return
  for (const i of paid) followWord(walk, depth, words[i])
  if (script >= 0) followWord(walk, depth, words[script])
}

/**
 * `su -c CMD`, `su USER --command=CMD`, `flock FILE -c CMD`, `fish -c CMD`: the argument of a
 * command option (the rest of its word, `-cCMD`, and the next word, both read; long options also
 * by the prefixes getopt accepts, `--comm=CMD`), wherever it stands among the arguments.
 */
const commandOptionScripts = (
  walk: Walk,
  words: ReadonlyArray<string>,
  start: number,
  depth: number,
  options: { readonly letters: string; readonly long: ReadonlyArray<string> }
): void => {
  for (let i = start + 1; i < words.length; i++) {
    const word = words[i]!
    if (!charge(walk, word.length + 1)) return
    if (!isOption(word) || word[0] !== "-") continue
    if (word.startsWith("--")) {
      const eq = word.indexOf("=")
      const name = eq < 0 ? word : word.slice(0, eq)
      if (name.length > 2 && options.long.some((long) => long.startsWith(name))) {
        followWord(walk, depth, eq < 0 ? words[i + 1] : word.slice(eq + 1))
      }
      continue
    }
    for (let k = 1; k < word.length; k++) {
      if (!options.letters.includes(word[k]!)) continue
      if (k + 1 < word.length) followWord(walk, depth, word.slice(k + 1))
      followWord(walk, depth, words[i + 1])
      break
    }
  }
}

/**
 * `env -S 'rm -rf ~'`, `env -iS'...'`, `env --split-string=...`: the split string is more of env's
 * own arguments (options, assignments, then the command), so it is read as `env` followed by it
 * (`\_`, env's escaped space, read as a space). Options are read up to the first word that is not
 * one; an option that may take an argument (`-u NAME`, `-C DIR`) skips the next word unless that
 * word is an option itself.
 */
const envScripts = (walk: Walk, words: ReadonlyArray<string>, start: number, depth: number): void => {
  const split = (arg: string | undefined) => {
    if (arg !== undefined) follow(walk, depth, arg.length + 4, () => `env ${arg.replaceAll("\\_", " ")}`)
  }
  for (let i = start + 1; i < words.length; i++) {
    const word = words[i]!
    if (!charge(walk, word.length + 1)) return
    if (word === "-") continue // GNU: `-` is `-i`
    if (!isOption(word) || word[0] !== "-") return
    if (word.startsWith("--")) {
      const eq = word.indexOf("=")
      const name = eq < 0 ? word : word.slice(0, eq)
      if (name.length > 2 && "--split-string".startsWith(name)) {
        if (eq < 0) split(words[++i])
        else split(word.slice(eq + 1))
      } else if (eq < 0 && name.length > 2 && EnvArgLong.some((long) => long.startsWith(name))) {
        if (i + 1 < words.length && !isOption(words[i + 1]!)) i++
      }
      continue
    }
    const s = word.indexOf("S", 1)
    if (s >= 0) {
      if (s + 1 < word.length) split(word.slice(s + 1))
      else split(words[++i])
      continue
    }
    if (EnvArgLetters.has(word[word.length - 1]!) && i + 1 < words.length && !isOption(words[i + 1]!)) i++
  }
}

/** `ssh -o ProxyCommand='...'`: commands in ssh's options (the command line after the host is read joined). */
const sshOptionScripts = (walk: Walk, words: ReadonlyArray<string>, start: number, depth: number): void => {
  for (let i = start + 1; i < words.length; i++) {
    const word = words[i]!
    if (!charge(walk, word.length + 1)) return
    const option = SshCommandOption.exec(word)
    if (option !== null) followWord(walk, depth, word.slice(option[0].length))
  }
}

/**
 * Report one segment and its starts (`eachStart`, inlined: no closure per segment), and walk the
 * scripts a start runs: a shell's `-c` script (any options), the argument of a command option
 * (`su -c`, `flock -c`, `fish -c`), env's split string, what `eval` and the joining runners
 * (`watch`, `ssh`, ...) join, the values of `alias`, the actions of `trap`. The length of a joined
 * script is known before it is built (sums of word lengths, computed once per segment), so a script
 * over the budget is never built; every word a start's options are scanned over is counted too.
 */
const walkSegment = (walk: Walk, words: ReadonlyArray<string>, depth: number, lead: boolean): void => {
  const at = skipLeading(words, 0)
  if (at >= words.length) return
  if (walk.onSegment(words, at)) {
    walk.stopped = true
    return
  }
  let tail: ReadonlyArray<number> | undefined
  let then: Then = lead ? "every" : undefined
  for (let start = at; start < words.length; start++) {
    if (start > at && !startsAt(words, start, then)) continue
    if (walk.onStart(words, start)) {
      walk.stopped = true
      return
    }
    const name = basename(words[start]!).name
    if (start + 1 < words.length) {
      if (name === "eval" || JoiningRunners.has(name)) {
        tail ??= tailsOf(words)
        const from = start + 1
        follow(walk, depth, tail[from]! - 1, () => words.slice(from).join(" "), name !== "eval")
        if (name === "ssh") sshOptionScripts(walk, words, start, depth)
      } else if (name === "alias") {
        for (let i = start + 1; i < words.length && charge(walk, words[i]!.length + 1); i++) {
          const eq = words[i]!.indexOf("=")
          if (eq > 0) followWord(walk, depth, words[i]!.slice(eq + 1))
        }
      } else if (name === "trap") {
        // `trap [-lp] [--] ACTION SIGNAL...`: the action is the first word past the options
        let i = start + 1
        while (i < words.length && /^-[lpP]+$/.test(words[i]!)) i++
        if (words[i] === "--") i++
        followWord(walk, depth, words[i])
      } else if (name === "env") {
        envScripts(walk, words, start, depth)
      } else {
        const shell = shellOf(name)
        const options = shell === "fish" ? FishOptions : CommandOptions.get(name)
        if (options !== undefined) commandOptionScripts(walk, words, start, depth, options)
        else if (shell !== undefined) shellScripts(walk, words, start, depth)
      }
    }
    if (walk.stopped) return
    then = thenAfter(name, then)
    if (then === undefined) return
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
 * `bash` would otherwise match them all); then, each past leading assignments and reserved words:
 * - top-level segments, and the commands inside substitutions, here-documents and here-strings;
 * - after a runner (`sudo`, `env`, `timeout`, `xargs`, `nice`, `flock`, `time`, ...) every later
 *   word, whatever its options and their arguments (`sudo -u root -g wheel rm`, `timeout -s KILL 5
 *   rm`, `xargs -I R -n 1 rm`); after `find`'s `-exec`/`-execdir`/`-ok`/`-okdir` (`fd -x`) the word after;
 * - the scripts of nested shells (`bash`, `sh`, `dash`, `zsh`, `ksh`, `mksh`, `yash`, `csh`, `fish`,
 *   ... at any path) with any options, including those that take an argument (`bash -o errexit -c`,
 *   `-O extglob`, `--rcfile F`, `zsh -oerrexit -c`, `bash -c -- SCRIPT`: see `shellScripts`);
 * - the command-line arguments of `su -c`/`runuser -c`, `flock -c`, `script -c`, `fish -c`/`-C`,
 *   env's split string (`env -S`, `-iS`, `--split-string=`), ssh's `ProxyCommand`/`LocalCommand`;
 * - what `eval` runs and what programs that join their arguments for a shell run (`watch`, `ssh`,
 *   `tmux`, `screen`, `parallel`, `sg`), the values of `alias` and the actions of `trap`.
 * Lenient: an unterminated quote is closed at the end so a deny still sees the words. Over-reading
 * is deliberate (a deny that matches too much refuses; one that matches too little lets through):
 * where an option's argument is ambiguous every reading is taken.
 *
 * Bounded and linear in the line: starts are indexes into the segment's words (never copies of
 * suffixes), nesting is followed `MaxDepth` levels, and the characters lexed (and the option words
 * scanned) are bounded by `WorkPerChar` times the line's length. Whatever those bounds leave unread
 * makes the result `complete: false`, never silently shorter.
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
 * `sudo`, `env`, `timeout` or `xargs` (or `find -exec`), every later start (the scripts nested in
 * its words are not read: see `commands`). For display and tests: the copies make it
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
