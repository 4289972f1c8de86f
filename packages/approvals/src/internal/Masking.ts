/**
 * Masking a text or an argv: every secret-looking part replaced by `Mask`. The spans come from
 * the shapes of secrets (`SecretPatterns`) and the password forms of programs
 * (`ProgramPasswords`); this module scans within bounds and applies them.
 *
 * The work is linear in what is scanned, and what is scanned is bounded: a text is cut at 100 000
 * characters (`maskText`) or just past what will be shown (`maskShown`). A run the cut falls into
 * whose length the patterns do not bound (a token run, a JWT) is masked from its start. Nothing
 * here throws: on any trouble the text is `Mask`.
 */
import { argvPasswords, programPasswords } from "./ProgramPasswords.js"
import { isSecretKey } from "./SecretKeys.js"
import type { Span } from "./SecretPatterns.js"
import { assignments, fixedPatterns, flagValues, headers, randomRuns } from "./SecretPatterns.js"

/** What stands for a masked secret in every masked text and copy. */
export const Mask = "•••"

/** What stands for a value left out of a masked copy because the copy was full (see `MaskOptions`). */
export const Elided = "…"

/** Text longer than this is cut before it is scanned (the tail is never shown). */
const ScanLimit = 100_000

/**
 * How far past what is shown a text is scanned (`maskShown`): longer than any bounded pattern match
 * (an assignment's key and value, a header value, a URL password), so a secret that starts in the
 * shown part is found as it would be in the whole text.
 */
const ScanMargin = 8_192

/**
 * Texts recently scanned and found clean (no span), so that scanning one again costs a lookup.
 * The same text is masked several times on its way out (a card's title in its summary, then in
 * its audit record, the ledger's row and the span's attributes; a masked text masked again): the
 * second scan found nothing the first did not. Only clean texts are kept (never one holding
 * something secret-looking), at most `CleanMaxLength` characters each, `CleanMaxEntries` of them,
 * the oldest let go first.
 */
const clean = new Set<string>()
const CleanMaxLength = 4_096
const CleanMaxEntries = 2_048
const NoSpans: ReadonlyArray<Span> = Object.freeze([])

const secretSpans = (text: string): ReadonlyArray<Span> => {
  const short = text.length <= CleanMaxLength
  if (short && clean.has(text)) return NoSpans
  const spans = findSpans(text)
  if (short && spans.length === 0) {
    if (clean.size >= CleanMaxEntries) clean.delete(clean.values().next().value as string)
    clean.add(text)
  }
  return spans
}

const findSpans = (text: string): ReadonlyArray<Span> => {
  const spans: Array<Span> = []
  fixedPatterns(text, spans)
  headers(text, spans)
  assignments(text, spans)
  programPasswords(text, spans)
  flagValues(text, spans)
  randomRuns(text, spans)
  return spans
}

const isAlnum = (code: number): boolean =>
  (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122)
/** A character of `TokenRun` (base64, base64url, hex). */
const isTokenChar = (code: number): boolean => isAlnum(code) || code === 43 || code === 45 || code === 47 || code === 95
/** A character of a JWT (its three parts and their dots). */
const isJwtChar = (code: number): boolean => isAlnum(code) || code === 45 || code === 46 || code === 95

/** Where the run of `is` characters that crosses `limit` starts, or -1 when the cut is not inside one. */
const runAcross = (text: string, limit: number, is: (code: number) => boolean): number => {
  if (!is(text.charCodeAt(limit)) || !is(text.charCodeAt(limit - 1))) return -1
  let start = limit - 1
  while (start > 0 && is(text.charCodeAt(start - 1))) start--
  return start
}

/**
 * The spans of `text` cut to `limit` characters. The patterns whose matches have no bound on their
 * length could judge a run the cut falls into differently from the whole: a token run (is it
 * random?) and a JWT (are its dots past the cut?). Such a run is masked from its start (a JWT from
 * its `eyJ`): its end is not known. Every other pattern's match is shorter than what is scanned
 * past the shown part (`ScanMargin`), so it is found as in the whole text.
 */
const cutSpans = (text: string, limit: number): { readonly scanned: string; readonly spans: ReadonlyArray<Span> } => {
  if (text.length <= limit) return { scanned: text, spans: secretSpans(text) }
  const scanned = text.slice(0, limit)
  const spans = [...secretSpans(scanned)]
  const token = runAcross(text, limit, isTokenChar)
  if (token >= 0) spans.push({ start: token, end: limit })
  const jwt = runAcross(text, limit, isJwtChar)
  const header = jwt >= 0 ? scanned.indexOf("eyJ", jwt) : -1
  if (header >= 0) spans.push({ start: header, end: limit })
  return { scanned, spans }
}

/** `scanned` with every span replaced by `Mask`. */
const applySpans = (scanned: string, spans: ReadonlyArray<Span>): string => {
  if (spans.length === 0) return scanned
  const sorted = [...spans].sort((a, b) => a.start - b.start || b.end - a.end)
  let out = ""
  let at = 0
  for (const span of sorted) {
    if (span.end <= at) continue
    out += scanned.slice(at, Math.max(at, span.start)) + Mask
    at = span.end
  }
  return out + scanned.slice(at)
}

/** Does this string carry something that looks like a secret? */
export const looksSecret = (text: string): boolean => {
  try {
    return cutSpans(text, ScanLimit).spans.length > 0
  } catch {
    return true
  }
}

/** Does the part of `text` that `maskShown(text, max)` scans (the shown part, or just past it) look secret? */
export const looksSecretShown = (text: string, max: number): boolean => {
  try {
    return cutSpans(text, Math.min(ScanLimit, Math.max(0, max) + ScanMargin)).spans.length > 0
  } catch {
    return true
  }
}

/**
 * Replace every secret-looking part of a text by `Mask`. A text longer than 100 000 characters is
 * cut first (and ends with "…"; a token-like run the cut falls into is masked whole). Linear in the
 * text: every pattern is scanned once, left to right, and no match is re-read.
 */
export const maskText = (text: string): string => {
  try {
    const { scanned, spans } = cutSpans(text, ScanLimit)
    const out = applySpans(scanned, spans)
    return scanned.length < text.length ? `${out}…` : out
  } catch {
    return Mask
  }
}

/**
 * `truncate(maskText(text), max)`, without scanning what cannot be shown.
 *
 * A text longer than `max` is scanned over its first `max` + 8 192 characters only (more than any
 * bounded match is long, so a secret that starts in the shown part is still found whole; a
 * token-like run the cut falls into is masked). The cost is bounded by `max`, whatever the text's
 * length.
 */
export const maskShown = (text: string, max: number): string => {
  try {
    const limit = Math.min(ScanLimit, Math.max(0, max) + ScanMargin)
    const { scanned, spans } = cutSpans(text, limit)
    const out = applySpans(scanned, spans)
    return truncate(scanned.length < text.length ? `${out}…` : out, max)
  } catch {
    return Mask
  }
}

/**
 * Cut a string to `max` characters (code points: a surrogate pair is one, as `Array.from` counts
 * them), ending with "…" when cut: then its first `max - 1` characters and "…". A walk over the
 * code units of what is kept, no array of characters.
 */
export const truncate = (text: string, max: number): string => {
  if (text.length <= max) return text
  max = Math.floor(max) // a fractional bound counts whole characters, as slicing did
  let at = 0 // code units of the characters walked
  let kept = 0 // code units of the first `max - 1` characters
  for (let chars = 0; chars < max; chars++) {
    if (at >= text.length) return text
    if (chars === max - 1) kept = at
    const code = text.charCodeAt(at)
    at += code >= 0xd800 && code <= 0xdbff && (text.charCodeAt(at + 1) & 0xfc00) === 0xdc00 ? 2 : 1
  }
  return at >= text.length ? text : `${text.slice(0, kept)}…`
}

/**
 * Mask an argv, word by word, including secrets spread over several words.
 *
 * It masks what `maskText` finds in the words joined by spaces (so a secret spread over words
 * is found as in the command line: `Authorization: Basic X`, `Bearer X`, `--password X`), the
 * password forms of its programs read over the exact words (`ProgramForms`: `mysql -pX`, `curl -u
 * user:X`, `htpasswd -b file user X`, ...), the value after (or inside) a secret-looking flag, and
 * each word as text.
 */
export const maskArgv = (argv: ReadonlyArray<string>): ReadonlyArray<string> => {
  const words = argForms(argv)
  const out: Array<string> = []
  let maskNext = false
  for (const word of words) {
    if (maskNext) {
      out.push(Mask)
      maskNext = false
      continue
    }
    const flag = /^--?([A-Za-z][A-Za-z0-9_-]{0,63})(=?)/.exec(word)
    if (flag && isSecretKey(flag[1]!)) {
      if (flag[2] === "=") out.push(`${word.slice(0, flag[0].length)}${Mask}`)
      else {
        out.push(word)
        maskNext = true
      }
      continue
    }
    out.push(maskText(word))
  }
  return out
}

/**
 * `argv` with the spans masked that `secretSpans` finds in its words joined by spaces (the first
 * `ScanLimit` characters) and that `ProgramForms` give over its exact words; a span over several
 * words masks its part of each.
 */
const argForms = (argv: ReadonlyArray<string>): ReadonlyArray<string> => {
  const starts: Array<number> = []
  const found: Array<Span> = []
  argvPasswords(argv, found)
  const joined: Array<string> = []
  let at = 0
  for (const word of argv) {
    starts.push(at)
    if (at < ScanLimit) joined.push(word)
    at += word.length + 1
  }
  const line = joined.join(" ")
  for (const span of cutSpans(line, Math.min(line.length, ScanLimit)).spans) found.push(span)
  if (found.length === 0) return argv
  const spans = new Map<number, Array<Span>>()
  const wordAt = (offset: number): number => {
    // the last word starting at or before `offset`
    let lo = 0
    let hi = starts.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (starts[mid]! <= offset) lo = mid
      else hi = mid - 1
    }
    return lo
  }
  for (const span of found) {
    for (let i = wordAt(span.start); i < argv.length && starts[i]! < span.end; i++) {
      const from = Math.max(0, span.start - starts[i]!)
      const to = Math.min(argv[i]!.length, span.end - starts[i]!)
      if (to <= from) continue
      const list = spans.get(i) ?? []
      list.push({ start: from, end: to })
      spans.set(i, list)
    }
  }
  return argv.map((word, i) => {
    const list = spans.get(i)
    return list === undefined ? word : applySpans(word, list)
  })
}
