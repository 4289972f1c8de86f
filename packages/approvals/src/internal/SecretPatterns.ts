/**
 * The shapes of secrets in text, each a linear-time pattern: known token prefixes (`sk-`, `ghp_`,
 * `xoxb-`, `AKIA`, JWTs, private key blocks), URL passwords and token users, auth schemes
 * (`Bearer X`), credential headers, `key=value` pairs and `--flag value` under secret-looking keys
 * (`SecretKeys`), and long runs that look random. Each finder adds the spans it finds to a list;
 * `Masking` puts them together.
 *
 * Every pattern is scanned once left to right without re-reading a match: a text lacking every
 * substring a pattern needs is not scanned for it, a quoted value's closing quote is searched
 * from past the previous one (at most 4 096 characters on), and a pair's value is read only when
 * its key is secret.
 */
import { isSecretKey } from "./SecretKeys.js"

/** A part of a text to mask, `[start, end)`. */
export interface Span {
  readonly start: number
  readonly end: number
}

/**
 * A pattern, and substrings of which every match contains at least one: a text that has none of
 * them cannot match, and is not scanned. Only exact necessary conditions belong in `needs`.
 */
/** A pattern, and the substrings a text must hold one of for it to match (none: any text). */
export interface Scan {
  readonly pattern: RegExp
  readonly needs: ReadonlyArray<string>
}

const scan = (pattern: RegExp, ...needs: ReadonlyArray<string>): Scan => ({ pattern, needs })

/** Patterns whose whole match (or the named group `s`) is a secret. All linear-time. */
const Patterns: ReadonlyArray<Scan> = [
  scan(
    /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|$)/g,
    "-----BEGIN "
  ),
  scan(/\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}/g, "sk-"),
  scan(/\b[rsp]k_(?:live|test)_[A-Za-z0-9]{10,}/g, "k_live_", "k_test_"),
  scan(/\bgh[pousr]_[A-Za-z0-9]{20,}/g, "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
  scan(/\bgithub_pat_[A-Za-z0-9_]{20,}/g, "github_pat_"),
  scan(/\bglpat-[A-Za-z0-9_-]{20,}/g, "glpat-"),
  scan(/\bxox[abposr]-[A-Za-z0-9-]{10,}/g, "xox"),
  scan(
    /\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b/g,
    "AKIA",
    "ASIA",
    "AGPA",
    "AIDA",
    "AROA",
    "ANPA",
    "ANVA",
    "AIPA"
  ),
  scan(/\bAIza[0-9A-Za-z_-]{35}/g, "AIza"),
  scan(/\bya29\.[0-9A-Za-z_-]{20,}/g, "ya29."),
  scan(/\bnpm_[A-Za-z0-9]{36}\b/g, "npm_"),
  scan(/\bhf_[A-Za-z0-9]{30,}/g, "hf_"),
  scan(/\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g, "eyJ"),
  // a password in a URL: scheme://user:PASSWORD@host (up to the authority's last @: `p@ss` written raw)
  scan(/\b[a-z][a-z0-9+.-]{0,20}:\/\/[^\s:@/?#]{0,256}:(?<s>[^\s/?#]{1,256})@/gi, "://")
]

/**
 * Headers whose whole value is a credential: the value up to the line's end or a quote (the header's
 * own quoting, `-H 'Authorization: ...'`; in JSON text also an escaped line end or quote, `\n`,
 * `\"`); a value that is itself quoted (`Authorization: "..."`, `Bearer "..."`) is read inside its
 * quotes (`quotedValue`).
 */
const Header = scan(
  /\b(?:proxy-)?(?:authorization|cookie|set-cookie|x-api-key|api-key)[ \t]*(?:\\{0,3}["'])?[ \t]*:[ \t]*(?<s>(?:[^\r\n"'`\\]|\\(?![nrt"'\\])){0,4096})/gi,
  ":"
)

/** A token as a URL's user (`https://TOKEN@github.com`, an Azure DevOps PAT): masked when it reads as a credential. */
const UrlUser = scan(/\b[a-z][a-z0-9+.-]{0,20}:\/\/(?<s>[^\s:@/?#]{16,256})@/gi, "://")

/** An auth scheme and its credential (`Bearer abc123...`): the scheme word stays, the credential is masked. */
const AuthScheme = scan(
  /\b(?:[Bb]earer|BEARER|Basic|Token|Digest|Bot)[ \t]+(?:\\{0,3}["']){0,3}(?<s>[A-Za-z0-9._~+/=-]{8,4096})/g,
  "earer",
  "BEARER",
  "Basic",
  "Token",
  "Digest",
  "Bot"
)
/**
 * Any substring one of the fixed patterns, the auth schemes or a URL's user needs (`Scan.needs`):
 * a text without any of them matches none of them (`matches` skips each such scan). Built from the
 * scans themselves, so it cannot drift from them; `needs` are literal and case-sensitive, as
 * `includes` reads them. A scan that needs nothing makes it match every text. One search instead
 * of ~40 `includes` per text: most of a cold masking of a short value (the CLI masks each
 * `--json` line's values before its code is ever optimized).
 */
export const FixedScans: ReadonlyArray<Scan> = [...Patterns, AuthScheme, UrlUser]
export const AnyNeeded: RegExp = FixedScans.every((s) => s.needs.length > 0)
  ? new RegExp(
      FixedScans.flatMap((s) => s.needs)
        .map((n) => n.replace(/[.*+?^${}()|[\]\\-]/g, "\\$&"))
        .join("|")
    )
  : /(?:)/

/** A credential word has a digit, mixed case or length: "Token Provider" is prose, "Bearer abc123def" is not. */
const credentialLike = (s: string) => /[0-9]/.test(s) || (/[a-z]/.test(s) && /[A-Z]/.test(s.slice(1))) || s.length >= 20

/**
 * `key=value`, `key: value`, `"key": "value"`, `\"key\": \"value\"` (JSON inside JSON): masked when
 * the key is secret-looking (`KEY=$VAR` is a reference, kept). Scanned in two steps: the key and its
 * separator (up to where a value starts), then, only after a secret key, the value itself: inside
 * the quotes it starts with, however nested (`"'...'"`, `\"...\"`: `quotedValue`), else up to a
 * blank or a delimiter (`AssignmentValue`, sticky).
 */
const Assignment = scan(/(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_.-]{0,63})(?:\\{0,3}["'])?[ \t]*[:=][ \t]*/g, ":", "=")
/**
 * An unquoted value: up to a blank, a quote, a delimiter, or an escaped line end or quote of JSON
 * text (`\n`, `\"`). After `=` (a shell or query assignment) a `,` inside the value belongs to it
 * (`PASSWORD=a,b`) and `, ` ends it (`k=v, k2=v2`); after `:` (YAML, JSON-ish) any `,` ends it
 * (`{password: a,user: b}`).
 */
const AssignmentValue = /(?!\$)(?:[^\s"'`&;|),}\]\\]|,(?!\s|$)|\\(?![nrt"'])){1,4096}/y
const ColonValue = /(?!\$)(?:[^\s"'`&;|),}\]\\]|\\(?![nrt"'])){1,4096}/y
/** `--password hunter2`, `--token "a b"`: a secret-looking flag (scanned to its value, read as an assignment's). */
const FlagValue = scan(/(?<![A-Za-z0-9_-])--?([A-Za-z][A-Za-z0-9_-]{0,63})[ \t]+/g, "-")
const FlagWord = /(?![$-])(?:[^\s"'`\\]|\\(?![nrt"'])){1,4096}/y
/** An opening quote run: up to four quotes, each maybe escaped (`"`, `'`, `"'`, `\"`, `\\\"`). */
const QuoteRun = /(?:\\{0,3}["'`]){1,4}/y

/**
 * Where the next `needle` is at or after a position, for positions asked in increasing order: each
 * search starts past the previous answer, so a scan that asks many times reads the text once.
 */
class NextIndex {
  private from = -1
  private at = -1
  constructor(
    private readonly text: string,
    private readonly needle: string
  ) {}

  /** Keeps the searches' hidden class, and with it their optimized code, across full collections (see `ShellLexer`'s `Lexer.kept`). */
  static readonly kept: NextIndex = new NextIndex("", "\n")
  after(from: number): number {
    if (this.from < 0 || from < this.from || (this.at >= 0 && this.at < from)) {
      this.from = from
      this.at = this.text.indexOf(this.needle, from)
    }
    return this.at
  }
}

/** The searches one scan of a text shares (`quotedValue`): the next newline and the next of each quote. */
interface Closers {
  readonly newline: NextIndex
  readonly quotes: Record<string, NextIndex>
}
const closers = (text: string): Closers => ({
  newline: new NextIndex(text, "\n"),
  quotes: { '"': new NextIndex(text, '"'), "'": new NextIndex(text, "'"), "`": new NextIndex(text, "`") }
})

/**
 * A value that starts with quotes at `from` (`"a b"`, `'a b'`, `"'a b'"`, `\"a b\"`): its inside, up
 * to the innermost quote's next occurrence on the same line, at most 4 096 characters on (an escape
 * before the closing quote is not part of it); undefined when `from` is no quote or the quote is not
 * closed. Calls come in increasing `from` for one `Closers`, so the searches are linear.
 */
const quotedValue = (text: string, from: number, c: Closers): Span | undefined => {
  QuoteRun.lastIndex = from
  const run = QuoteRun.exec(text)
  QuoteRun.lastIndex = 0
  if (run === null) return undefined
  const start = from + run[0].length
  const close = c.quotes[run[0][run[0].length - 1]!]!.after(start)
  if (close < 0 || close - start > 4_096) return undefined
  const newline = c.newline.after(start)
  if (newline >= 0 && newline < close) return undefined
  let end = close
  while (end > start && text.charCodeAt(end - 1) === 92) end--
  return { start, end }
}

/** The value at `at`: quoted (see `quotedValue`, not a `$reference`), else what `word` (sticky) reads past an opening quote run. */
const valueAt = (text: string, at: number, word: RegExp, c: Closers): Span | undefined => {
  const quoted = quotedValue(text, at, c)
  if (quoted !== undefined) return quoted.end > quoted.start && text[quoted.start] !== "$" ? quoted : undefined
  QuoteRun.lastIndex = at
  const run = QuoteRun.exec(text)
  QuoteRun.lastIndex = 0
  word.lastIndex = at + (run === null ? 0 : run[0].length)
  const value = word.exec(text)
  word.lastIndex = 0
  return value === null ? undefined : { start: value.index, end: value.index + value[0].length }
}

/** Runs that could be random tokens (base64, base64url, hex). */
const TokenRun = scan(/[A-Za-z0-9+/_-]{20,}={0,3}/g)

const entropy = (s: string): number => {
  const counts = new Map<string, number>()
  for (const c of s) counts.set(c, (counts.get(c) ?? 0) + 1)
  let h = 0
  for (const n of counts.values()) {
    const p = n / s.length
    h -= p * Math.log2(p)
  }
  return h
}

const classes = (s: string) => ({ upper: /[A-Z]/.test(s), lower: /[a-z]/.test(s), digit: /[0-9]/.test(s) })

/** Random on its own: hex of 32+, or 20+ characters mixing upper case, lower case and digits with high entropy. */
const randomChunk = (s: string): boolean => {
  const c = classes(s)
  if (/^[0-9a-fA-F]+$/.test(s)) return s.length >= 32 && c.digit && (c.upper || c.lower)
  return s.length >= 20 && c.upper && c.lower && c.digit && entropy(s) >= 3.5
}

/** A chunk that reads as a word or a number (`accept`, `cmd`, `2024`, `Button`). */
const wordy = (s: string) => /^(?:[a-z]+|[0-9]+|[A-Z][a-z]+|[A-Z]+)$/.test(s)

/**
 * A run of token characters with no `/` that looks random. Identifiers made of words joined by
 * `-` or `_` (`rc-ws-a-cmd-accept-BOiw0A`) are not, unless one of their parts is random by itself.
 */
const randomPiece = (s: string): boolean => {
  if (s.length < 20) return false
  const body = s.replace(/=+$/, "")
  const chunks = body.split(/[-_]+/).filter((x) => x.length > 0)
  if (chunks.some((x) => x.length >= 16 && randomChunk(x))) return true
  if (chunks.length >= 2 && chunks.filter(wordy).length * 2 >= chunks.length) return false
  return randomChunk(body)
}

/** A token run that looks random (a `/` inside must look like base64, not a path). */
export const looksRandom = (run: string): boolean => {
  if (!run.includes("/")) return randomPiece(run)
  const c = classes(run)
  return run.length >= 32 && !run.startsWith("/") && c.upper && c.lower && c.digit && entropy(run) >= 4.3
}

/**
 * Every match of a global pattern, like `text.matchAll(pattern)` but without the copy of the
 * RegExp that `matchAll` makes on each call (the patterns are module constants, scanned here only,
 * synchronously: `lastIndex` is reset before and after), and without scanning a text that lacks
 * every substring the pattern needs.
 */
const matches = (text: string, { needs, pattern }: Scan): Array<RegExpExecArray> => {
  const found: Array<RegExpExecArray> = []
  if (needs.length > 0 && !needs.some((n) => text.includes(n))) return found
  pattern.lastIndex = 0
  try {
    for (let m = pattern.exec(text); m !== null; m = pattern.exec(text)) {
      found.push(m)
      if (m[0].length === 0) pattern.lastIndex++ // as matchAll does: never loop on an empty match
    }
  } finally {
    pattern.lastIndex = 0
  }
  return found
}

/**
 * The values of `key=value` pairs under a secret-looking key. After a pair whose key is not secret,
 * the scan resumes at its value, which may hold a pair of its own (`question: token=abc123`). The
 * pattern stops where the value starts, so a value is read only when it is masked: a text of
 * overlapping candidates (`a=a=a=...`) costs one short match per candidate, not one value each
 * (which made a 100 000-character text cost about 200 million steps). Each match moves past a key
 * and its separator, so the scan always advances.
 */
export const assignments = (text: string, spans: Array<Span>): void =>
  keyedValues(text, spans, Assignment, (separator) => (separator.includes("=") ? AssignmentValue : ColonValue))

/** `--password VALUE`: as `assignments`, for secret-looking flags. */
export const flagValues = (text: string, spans: Array<Span>): void =>
  keyedValues(text, spans, FlagValue, () => FlagWord)

/** The values after secret keys that `pattern` finds (its match ends where the value starts), read with `wordFor(match)` unless quoted. */
const keyedValues = (
  text: string,
  spans: Array<Span>,
  { needs, pattern }: Scan,
  wordFor: (match: string) => RegExp
): void => {
  if (!needs.some((n) => text.includes(n))) return
  const c = closers(text)
  pattern.lastIndex = 0
  try {
    for (let m = pattern.exec(text); m !== null; m = pattern.exec(text)) {
      if (m[0].length === 0) pattern.lastIndex++
      if (!isSecretKey(m[1]!)) continue
      const value = valueAt(text, pattern.lastIndex, wordFor(m[0]), c)
      if (value === undefined) continue
      spans.push(value)
      pattern.lastIndex = Math.max(pattern.lastIndex, value.end)
    }
  } finally {
    pattern.lastIndex = 0
  }
}

/** Header values (`Header`), and a quoted value right after them (`Authorization: Bearer "..."`). */
export const headers = (text: string, spans: Array<Span>): void => {
  const found = matches(text, Header)
  if (found.length === 0) return
  const c = closers(text)
  for (const m of found) {
    const value = m.groups!["s"]!
    const start = m.index + m[0].length - value.length
    if (value.trim().length > 0) spans.push({ start, end: start + value.length })
    const last = value.charCodeAt(value.length - 1)
    if (value.length === 0 || last === 32 || last === 9) {
      const quoted = quotedValue(text, start + value.length, c)
      if (quoted !== undefined) spans.push(quoted)
    }
  }
}

/**
 * The spans of the patterns that need no key: `Patterns` whole (or their group `s`), and the
 * credentials of an auth scheme (`Bearer X`) or of a URL's user that read as credentials.
 */
export const fixedPatterns = (text: string, spans: Array<Span>): void => {
  // Most texts hold none of the substrings any of these patterns needs: one search says so.
  if (!AnyNeeded.test(text)) return
  const add = (m: RegExpExecArray) => {
    const s = m.groups?.["s"]
    if (s !== undefined) {
      const at = m.index + m[0].lastIndexOf(s)
      spans.push({ start: at, end: at + s.length })
    } else {
      spans.push({ start: m.index, end: m.index + m[0].length })
    }
  }
  for (const p of Patterns) {
    for (const m of matches(text, p)) add(m)
  }
  for (const m of matches(text, AuthScheme)) if (credentialLike(m.groups!["s"]!)) add(m)
  for (const m of matches(text, UrlUser)) if (credentialLike(m.groups!["s"]!)) add(m)
}

/** Token runs that look random (a run with `/` in it: its random pieces, a path's words kept). */
export const randomRuns = (text: string, spans: Array<Span>): void => {
  for (const m of matches(text, TokenRun)) {
    const run = m[0]
    if (looksRandom(run)) {
      spans.push({ start: m.index, end: m.index + run.length })
    } else if (run.includes("/")) {
      let offset = 0
      for (const piece of run.split("/")) {
        if (randomPiece(piece)) spans.push({ start: m.index + offset, end: m.index + offset + piece.length })
        offset += piece.length + 1
      }
    }
  }
}
