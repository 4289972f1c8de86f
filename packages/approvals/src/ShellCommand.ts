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
 * Nothing here throws: a string that cannot be read is "not simple" with no argv. Everything here is
 * linear in the command line (a model writes it, and it is read on the connection's read loop):
 * nesting is followed a bounded number of levels and re-reading is bounded by `WorkPerChar`; what
 * those bounds leave unread is reported (`Commands.complete`), never silently dropped.
 */
import * as CommandStarts from "./internal/CommandStarts.js"
import * as ShellLexer from "./internal/ShellLexer.js"
import * as ShellWrapper from "./internal/ShellWrapper.js"

/** A command line with its shell wrappers peeled off: the script inside, and its first command's words. */
export interface Unwrapped {
  /** The words of the (first) command, quotes removed; undefined when the script cannot be read. */
  readonly argv: ReadonlyArray<string> | undefined
  /** True when `argv` is exactly and only what will run. */
  readonly simple: boolean
  /** The script inside the shell wrapper, or the command itself when there is no wrapper. */
  readonly inner: string
}

/**
 * The script of `bash -lc 'script'` and friends, or undefined if `words` is not such a wrapper.
 *
 * A wrapper is `bash`, `sh`, `zsh` or `dash` (bare or in `/bin`, `/usr/bin`, `/usr/local/bin`,
 * `/opt/homebrew/bin`), flags made of `-l` and exactly one `-c` (or `--login`), then exactly one
 * word: extra words would become the script's `$0`, `$1`.
 */
export const wrappedScript: (words: ReadonlyArray<string>) => string | undefined = ShellWrapper.wrappedScript

/**
 * Peel shell wrappers off `command` and split what is inside into words.
 *
 * @example
 * ```ts
 * ShellCommand.unwrap("/bin/bash -lc 'git status --short'")
 * // { argv: ["git", "status", "--short"], simple: true, inner: "git status --short" }
 * ```
 */
export const unwrap: (command: string) => Unwrapped = ShellWrapper.unwrap

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
   * False when part of the line was not read: nesting deeper than the bound (substitutions,
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
export const WorkPerChar: number = CommandStarts.WorkPerChar

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
 *   `-O extglob`, `--rcfile F`, `zsh -oerrexit -c`, `bash -c -- SCRIPT`);
 * - the command-line arguments of `su -c`/`runuser -c`, `flock -c`, `script -c`, `fish -c`/`-C`,
 *   env's split string (`env -S`, `-iS`, `--split-string=`), ssh's `ProxyCommand`/`LocalCommand`;
 * - what `eval` runs and what programs that join their arguments for a shell run (`watch`, `ssh`,
 *   `tmux`, `screen`, `parallel`, `sg`), the values of `alias` and the actions of `trap`.
 * Lenient: an unterminated quote is closed at the end so a deny still sees the words. Over-reading
 * is deliberate (a deny that matches too much refuses; one that matches too little lets through):
 * where an option's argument is ambiguous every reading is taken.
 *
 * Bounded and linear in the line: starts are indexes into the segment's words (never copies of
 * suffixes), nesting is followed a bounded number of levels, and the characters lexed (and the
 * option words scanned) are bounded by `WorkPerChar` times the line's length. Whatever those
 * bounds leave unread makes the result `complete: false`, never silently shorter.
 */
export const commands: (command: string) => Commands = CommandStarts.commands

/**
 * The segments `commands` reads (each past its leading assignments and reserved words), at most
 * `maxSegments` of them: for display and tests. A decision must use `commands`, which reads every
 * segment and says when it could not.
 */
export const segments: (command: string, maxSegments?: number) => ReadonlyArray<ReadonlyArray<string>> =
  CommandStarts.segments

/**
 * The commands one segment may start, as copies: the segment itself and, after a runner such as
 * `sudo`, `env`, `timeout` or `xargs` (or `find -exec`), every later start (the scripts nested in
 * its words are not read: see `commands`). For display and tests: the copies make it
 * quadratic in a long runner segment; `commands` gives the same starts as indexes.
 */
export const commandStarts: (segment: ReadonlyArray<string>) => ReadonlyArray<ReadonlyArray<string>> =
  CommandStarts.commandStarts

/** POSIX-quote one word so a shell reads it back unchanged. */
export const quote: (word: string) => string = ShellLexer.quote

/**
 * Join argv into a command line a shell reads back as the same words. With `max`, stop once the
 * line is longer than `max` characters: the result is then a longer-than-`max` prefix of the line
 * (enough for a caller that refuses lines that long), and the cost is bounded by `max` plus one word.
 */
export const join: (argv: ReadonlyArray<string>, max?: number) => string = ShellLexer.join
