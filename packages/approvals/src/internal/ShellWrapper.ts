/**
 * Codex's login-shell wrapper: codex wraps every command in a shell (`/bin/bash -lc 'echo hi;
 * ls'`), so the wrapper is peeled off and what is inside read as a script (`ShellLexer.lex`).
 * `ShellCommand.unwrap` is the public face of this; rules read both the unwrapped words (allow)
 * and every command the script may run (`CommandStarts`, deny).
 */
import type { Unwrapped } from "../ShellCommand.js"
import type { LexResult } from "./ShellLexer.js"
import { lexAll, MaxDepth, splitPath } from "./ShellLexer.js"

const Shells = new Set(["bash", "sh", "zsh", "dash"])
/** Where a wrapping shell may live; any other path is a program of its own, not a wrapper. */
const ShellDirs = new Set(["", "/bin", "/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"])

/** The script of `bash -lc 'script'` and friends, or undefined if `words` is not such a wrapper. */
export const wrappedScript = (words: ReadonlyArray<string>): string | undefined => {
  if (words.length < 3) return undefined
  const { dir, name } = splitPath(words[0]!)
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
export const peel = (command: string): { readonly inner: string; readonly lexed: LexResult } => {
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
  const simple =
    argv !== undefined &&
    lexed.complete &&
    !lexed.compound &&
    !lexed.expands &&
    lexed.segments.length === 1 &&
    lexed.nested.length === 0
  return { argv, simple, inner }
}
