/**
 * Every command a command line may run, for deny rules: the segments of the script, the commands
 * inside substitutions and here-documents, the command after runners (`sudo`, `env`, `xargs`,
 * `find -exec`, ...), the scripts of nested shells, `eval`, `su -c`, `env -S`, `ssh`'s command
 * options, `alias` values and `trap` actions. The programs' tables (which run another command,
 * which take a script as an option's argument) are here; the words come from `ShellLexer`.
 *
 * Linear in the line: starts are indexes into a segment's words (never copies of suffixes),
 * nesting is followed `MaxDepth` levels, and re-reading is bounded by `WorkPerChar`; what those
 * bounds leave unread is reported (`complete: false`), never silently dropped.
 */
import type { Commands, Start } from "../ShellCommand.js"
import type { LexResult } from "./ShellLexer.js"
import { lexAll, MaxDepth, splitPath } from "./ShellLexer.js"
import { peel } from "./ShellWrapper.js"

/** Words that start or shape a command without being one (stripped before deny matching). */
const ReservedWords = new Set([
  "!",
  "{",
  "}",
  "if",
  "then",
  "elif",
  "else",
  "fi",
  "do",
  "done",
  "while",
  "until",
  "case",
  "esac",
  "select"
])

/**
 * Programs (and the reserved words `time`, `coproc`, `function`) after which another command may
 * start: `sudo -u root rm`, `env -u X rm`, `timeout -s KILL 5 rm`, `time -p rm`, `coproc NAME { rm; }`.
 * Their options, and which of them take an argument, vary too much to parse: a deny looks at every
 * later word.
 */
const Runners = new Set([
  "sudo",
  "doas",
  "env",
  "nohup",
  "exec",
  "command",
  "builtin",
  "nice",
  "ionice",
  "timeout",
  "stdbuf",
  "xargs",
  "watch",
  "setsid",
  "unbuffer",
  "chroot",
  "flock",
  "time",
  "strace",
  "ltrace",
  "caffeinate",
  "coproc",
  "function",
  "su",
  "runuser",
  "pkexec",
  "busybox",
  "toybox",
  "unshare",
  "nsenter",
  "firejail",
  "chrt",
  "taskset",
  "numactl",
  "prlimit",
  "setpriv",
  "systemd-run",
  "gosu",
  "su-exec",
  "chpst"
])

/**
 * Shells whose `-c` script a deny reads, at any path and with any version suffix (`bash5`,
 * `zsh-5.9`); `fish` is read apart (its `-c` takes the script as its own argument).
 */
const PosixShells = new Set([
  "sh",
  "bash",
  "rbash",
  "dash",
  "ash",
  "zsh",
  "ksh",
  "ksh93",
  "mksh",
  "lksh",
  "pdksh",
  "oksh",
  "loksh",
  "yash",
  "posh",
  "hush",
  "csh",
  "tcsh"
])

/** Shell options whose next word is their argument (`bash -o errexit`, `-O extglob`; ksh93 `-R file`; mksh `-T tty`). */
const ShellArgLetters = new Set(["o", "O", "R", "T"])
/** Long shell options that take no argument; any other (`--rcfile F`, `--init-file F`) is taken to take one. */
const ShellFlagsLong = new Set([
  "--login",
  "--norc",
  "--noprofile",
  "--noediting",
  "--posix",
  "--restricted",
  "--verbose",
  "--debugger",
  "--dump-strings",
  "--dump-po-strings",
  "--help",
  "--version",
  "--wordexp",
  "--pretty-print",
  "--protected"
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

/** `ShellCommand.WorkPerChar`: characters read per character of the line (plus 1024) before a walk stops, incomplete. */
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
  then === "every" || Runners.has(name) ? "every" : (then ?? ExecOptions.get(name))

/** Does a command start at `words[i]` (`i` past the segment's first start), given how starts go on? */
const startsAt = (words: ReadonlyArray<string>, i: number, then: Then): boolean =>
  // biome-ignore lint/complexity/useOptionalChain: the answer is a boolean, never undefined
  then === "every" ? !isLeading(words[i]!) : then !== undefined && then.has(words[i - 1]!)

/**
 * Call `f` with every index of `words` where a command may start, given that one starts at `at`:
 * `at` itself, after a runner such as `sudo`, `env`, `timeout` or `xargs` every later word past
 * leading assignments and reserved words, and after `find`'s `-exec` (and the like) the word after
 * it. Each index once, in order, by index (no copies): linear in the words. Stops when `f` returns
 * true, and then returns true.
 */
const eachStart = (words: ReadonlyArray<string>, at: number, f: (start: number) => boolean): boolean => {
  let then: Then
  for (let start = at; start < words.length; start++) {
    if (start > at && !startsAt(words, start, then)) continue
    if (f(start)) return true
    then = thenAfter(splitPath(words[start]!).name, then)
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
  for (let i = 0; i < lexed.segments.length && !walk.stopped; i++)
    walkSegment(walk, lexed.segments[i]!, depth, lead && i === 0)
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
    const name = splitPath(words[start]!).name
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
  const walk: Walk = {
    budget: WorkPerChar * (command.length + 1024),
    work: 0,
    complete: true,
    stopped: false,
    onSegment,
    onStart
  }
  const { inner, lexed } = peel(command)
  walkScript(walk, inner, 0, lexed)
  return walk
}

/**
 * `ShellCommand.commands` (what it reads is listed there): the line's wrappers peeled, then its
 * script walked (`walkScript`), every start collected as an index into its segment's words.
 */
export const commands = (command: string): Commands => {
  const starts: Array<Start> = []
  const { complete, work } = walkLine(
    command,
    () => false,
    (words, at) => {
      starts.push({ words, at })
      return false
    }
  )
  return { starts, complete, work }
}

/** `ShellCommand.segments`: the walk of `commands`, stopped after `maxSegments` segments. */
export const segments = (command: string, maxSegments = 512): ReadonlyArray<ReadonlyArray<string>> => {
  const found: Array<ReadonlyArray<string>> = []
  if (maxSegments <= 0) return found
  walkLine(
    command,
    (words, at) => {
      found.push(at === 0 ? words : words.slice(at))
      return found.length >= maxSegments
    },
    () => false
  )
  return found
}

/** `ShellCommand.commandStarts`: `eachStart` over one segment, each start copied. */
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
