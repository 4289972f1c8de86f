/**
 * Masking for everything a card shows or an audit line writes. Two rules, applied together:
 *
 * - a value under a secret-looking key (`password`, `apiKey`, `x-auth-token`, `2fa_code`, ...) is
 *   replaced whole by `Mask`, whatever its type;
 * - a string that looks like a secret whatever its key (`sk-...`, `ghp_...`, `xoxb-...`, `AKIA...`,
 *   JWTs, `Bearer ...`, private key blocks, URL passwords, `token=...` pairs, long high-entropy
 *   strings) has those parts replaced by `Mask`.
 *
 * Inputs are never mutated and never trusted: objects are copied through property descriptors (a
 * getter is not called: it is masked), cycles are masked, non-plain objects (class instances,
 * Maps, Proxies that misbehave) are masked, depth, breadth and the copy's total size are bounded.
 * Nothing here throws; on any trouble the value is masked. Masking errs on the side of hiding: an
 * identifier that happens to look random may be masked too.
 *
 * The work is linear in what is scanned, and what is scanned is bounded: a text is cut at 100 000
 * characters (`maskText`) or just past what will be shown (`maskShown`), every pattern is scanned
 * once left to right without re-reading a match, and a masked copy stops scanning once its value
 * and character budgets are spent (`MaskOptions`).
 */

export const Mask = "•••"

export interface MaskOptions {
  /** Nesting below this depth is masked whole (default 8). */
  readonly maxDepth?: number
  /** Keys or items kept per object or array; the rest are summarised (default 100). */
  readonly maxEntries?: number
  /** Strings are cut to this length after masking, with "…" (default 2000). */
  readonly maxString?: number
  /** Values (objects, arrays, strings, numbers...) copied in all; later ones are shown as `Elided` (default 2000). */
  readonly maxValues?: number
  /** Characters of string values shown in all; later strings are cut to what is left, then `Elided` (default 100 000). */
  readonly maxTotal?: number
}

const Defaults = { maxDepth: 8, maxEntries: 100, maxString: 2_000, maxValues: 2_000, maxTotal: 100_000 } as const

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

// ---------------------------------------------------------------------------------------------
// Keys

/** Split `apiKey`, `API_KEY`, `x-auth-token`, `2faCode` into lower-case words. */
export const keyWords = (key: string): ReadonlyArray<string> =>
  key
    .slice(0, 256)
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 0)

/** Secret wherever they appear inside a key, separators removed (`db_password_hash`, `clientsecret`). */
const SecretFragments = [
  "password", "passwd", "passphrase", "passcode", "secret", "credential", "apikey", "accesskey", "privatekey",
  "secretkey", "signingkey", "encryptionkey", "privkey", "authorization", "bearer", "cookie", "onetime",
  "mnemonic", "seedphrase", "sessionid", "accesstoken", "refreshtoken", "authtoken", "idtoken", "otpcode"
]

/** Secret as whole words of a key. */
const SecretWords = new Set([
  "token", "tokens", "auth", "session", "sessions", "otp", "totp", "hotp", "pin", "pins", "ssn", "mfa", "2fa",
  "cvv", "cvc", "jwt", "pwd", "pass", "creds", "cred", "csrf", "xsrf", "passwort", "kennwort", "contrasena", "senha"
])

/** `key` is secret after one of these words (`api key`, `ssh_key`, `privateKey`). */
const KeyQualifiers = new Set([
  "api", "access", "private", "secret", "signing", "encryption", "ssh", "gpg", "pgp", "master", "license", "licence",
  "client", "app", "auth", "session", "deploy", "recovery", "product", "activation", "account", "service", "webhook"
])

/** Two-word secrets (`verification code`, `card number`). */
const SecretPairs: ReadonlyArray<readonly [string, string]> = [
  ["one", "time"], ["verification", "code"], ["security", "code"], ["recovery", "code"], ["backup", "code"],
  ["login", "code"], ["signin", "code"], ["sign", "in"], ["card", "number"], ["account", "number"], ["social", "security"],
  ["routing", "number"], ["seed", "phrase"], ["recovery", "phrase"]
]

/** Words that make `tokens` a count, not a credential (`max_tokens`, `total_tokens`). */
const CountWords = new Set(["max", "min", "num", "count", "total", "limit", "usage", "budget", "input", "output", "used", "remaining"])

/**
 * Substrings one of which every secret key contains once lower-cased and stripped of everything but
 * letters and digits (the words joined, as `isSecretKey` reads them): each rule below needs one of
 * its words whole. Most keys contain none and are answered by one scan.
 */
const SecretKeyNeeds = new RegExp(
  [...SecretFragments, ...SecretWords, "key", ...SecretPairs.map(([first]) => first)]
    .sort((a, b) => b.length - a.length)
    .join("|")
)

/** Answers of `isSecretKey` for recent keys (a text repeats its keys: `token=... token=...`); emptied when full. */
const secretKeyCache = new Map<string, boolean>()
const SecretKeyCacheSize = 1_024

/** Does a value stored under this key name a secret? */
export const isSecretKey = (key: string): boolean => {
  const compact = key.slice(0, 256).toLowerCase().replace(/[^a-z0-9]+/g, "")
  if (!SecretKeyNeeds.test(compact)) return false
  if (key.length > 64) return secretKey(key)
  const cached = secretKeyCache.get(key)
  if (cached !== undefined) return cached
  if (secretKeyCache.size >= SecretKeyCacheSize) secretKeyCache.clear()
  const answer = secretKey(key)
  secretKeyCache.set(key, answer)
  return answer
}

const secretKey = (key: string): boolean => {
  const words = keyWords(key)
  if (words.length === 0) return false
  const joined = words.join("")
  if (SecretFragments.some((f) => joined.includes(f))) return true
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!
    if ((w === "key" || w === "keys") && i > 0 && KeyQualifiers.has(words[i - 1]!)) return true
    if (SecretWords.has(w)) {
      const onlyCount = (w === "token" || w === "tokens") && words.some((x) => CountWords.has(x))
      if (!onlyCount) return true
    }
    const nextWord = words[i + 1]
    if (nextWord !== undefined && SecretPairs.some(([a, b]) => a === w && b === nextWord)) return true
  }
  return false
}

// ---------------------------------------------------------------------------------------------
// Values

interface Span {
  readonly start: number
  readonly end: number
}

/**
 * A pattern, and substrings of which every match contains at least one: a text that has none of
 * them cannot match, and is not scanned. Only exact necessary conditions belong in `needs`.
 */
interface Scan {
  readonly pattern: RegExp
  readonly needs: ReadonlyArray<string>
}

const scan = (pattern: RegExp, ...needs: ReadonlyArray<string>): Scan => ({ pattern, needs })

/** Patterns whose whole match (or the named group `s`) is a secret. All linear-time. */
const Patterns: ReadonlyArray<Scan> = [
  scan(/-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|$)/g, "-----BEGIN "),
  scan(/\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}/g, "sk-"),
  scan(/\b[rsp]k_(?:live|test)_[A-Za-z0-9]{10,}/g, "k_live_", "k_test_"),
  scan(/\bgh[pousr]_[A-Za-z0-9]{20,}/g, "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
  scan(/\bgithub_pat_[A-Za-z0-9_]{20,}/g, "github_pat_"),
  scan(/\bglpat-[A-Za-z0-9_-]{20,}/g, "glpat-"),
  scan(/\bxox[abposr]-[A-Za-z0-9-]{10,}/g, "xox"),
  scan(/\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b/g, "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"),
  scan(/\bAIza[0-9A-Za-z_-]{35}/g, "AIza"),
  scan(/\bya29\.[0-9A-Za-z_-]{20,}/g, "ya29."),
  scan(/\bnpm_[A-Za-z0-9]{36}\b/g, "npm_"),
  scan(/\bhf_[A-Za-z0-9]{30,}/g, "hf_"),
  scan(/\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g, "eyJ"),
  // a password in a URL: scheme://user:PASSWORD@host
  scan(/\b[a-z][a-z0-9+.-]{0,20}:\/\/[^\s:@/]{0,256}:(?<s>[^\s@/]{1,256})@/gi, "://"),
  // headers whose whole value is a credential
  scan(/\b(?:proxy-)?(?:authorization|cookie|set-cookie|x-api-key|api-key)\s*:\s*(?<s>[^\r\n"'`]{1,4096})/gi, ":")
]

/** An auth scheme and its credential (`Bearer abc123...`): the scheme word stays, the credential is masked. */
const AuthScheme = scan(/\b(?:[Bb]earer|BEARER|Basic|Token|Digest|Bot)[ \t]+(?<s>[A-Za-z0-9._~+/=-]{8,4096})/g, "earer", "BEARER", "Basic", "Token", "Digest", "Bot")
/** A credential word has a digit, mixed case or length: "Token Provider" is prose, "Bearer abc123def" is not. */
const credentialLike = (s: string) => /[0-9]/.test(s) || (/[a-z]/.test(s) && /[A-Z]/.test(s.slice(1))) || s.length >= 20

/**
 * `key=value`, `key: value`, `"key": "value"`: masked when the key is secret-looking (`KEY=$VAR` is a
 * reference, kept). Scanned in two steps: the key and its separator (up to where a value starts),
 * then, only after a secret key, the value itself (`AssignmentValue`, sticky).
 */
const Assignment = scan(/(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_.-]{0,63})["']?[ \t]*[:=][ \t]*["']?(?!\$)(?=[^\s"'`&;,)}\]])/g, ":", "=")
const AssignmentValue = /[^\s"'`&;,)}\]]{1,4096}/y
/** `--password hunter2`: a secret-looking flag and the word after it. */
const FlagValue = scan(/(?<![A-Za-z0-9_-])--?([A-Za-z][A-Za-z0-9_-]{0,63})[ \t]+["']?(?![$-])(?<s>[^\s"'`]{1,4096})/g, "-")
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
const assignments = (text: string, spans: Array<Span>): void => {
  const { needs, pattern } = Assignment
  if (!needs.some((n) => text.includes(n))) return
  pattern.lastIndex = 0
  try {
    for (let m = pattern.exec(text); m !== null; m = pattern.exec(text)) {
      if (!isSecretKey(m[1]!)) continue
      AssignmentValue.lastIndex = pattern.lastIndex
      const value = AssignmentValue.exec(text)
      if (value === null) continue
      spans.push({ start: value.index, end: value.index + value[0].length })
      pattern.lastIndex = value.index + value[0].length
    }
  } finally {
    pattern.lastIndex = 0
    AssignmentValue.lastIndex = 0
  }
}

const secretSpans = (text: string): ReadonlyArray<Span> => {
  const spans: Array<Span> = []
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
  assignments(text, spans)
  for (const m of matches(text, FlagValue)) if (isSecretKey(m[1]!)) add(m)
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
  return spans
}

const isAlnum = (code: number): boolean => (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122)
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

/** `looksSecret` over what `maskShown(text, max)` scans: does the shown part (or just past it) look secret? */
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
 * `truncate(maskText(text), max)` without scanning what cannot be shown: a text longer than `max`
 * is scanned over its first `max` + 8 192 characters only (more than any bounded match is long, so
 * a secret that starts in the shown part is still found whole; a token-like run the cut falls into
 * is masked). The cost is bounded by `max`, whatever the text's length.
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

/** Cut a string to `max` characters (by code point), ending with "…" when cut. */
export const truncate = (text: string, max: number): string => {
  if (text.length <= max) return text
  const chars = Array.from(text.slice(0, max + 1))
  return chars.length <= max ? chars.join("") : `${chars.slice(0, Math.max(0, max - 1)).join("")}…`
}

/** Mask an argv: each word as text, and the value after (or inside) a secret-looking flag. */
export const maskArgv = (argv: ReadonlyArray<string>): ReadonlyArray<string> => {
  const out: Array<string> = []
  let maskNext = false
  for (const word of argv) {
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

// ---------------------------------------------------------------------------------------------
// Structures

const settings = (options: MaskOptions | undefined) => ({
  maxDepth: options?.maxDepth ?? Defaults.maxDepth,
  maxEntries: options?.maxEntries ?? Defaults.maxEntries,
  maxString: options?.maxString ?? Defaults.maxString,
  /** What is left of `maxValues` and `maxTotal` while one copy is made. */
  values: options?.maxValues ?? Defaults.maxValues,
  chars: options?.maxTotal ?? Defaults.maxTotal
})

type Settings = ReturnType<typeof settings>

const define = (target: Record<string, unknown>, key: string, value: unknown) => {
  // defineProperty, so a key named "__proto__" is a plain key of the copy, not its prototype
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

/** A string as a copy shows it: masked, cut to `maxString` and to what is left of `maxTotal`. */
const maskString = (value: string, s: Settings): string => {
  const max = Math.min(s.maxString, s.chars)
  if (max <= 0 && value.length > 0) return Elided
  const shown = maskShown(value, max)
  s.chars -= shown.length
  return shown
}

/**
 * The masked copy. Bounded whatever the input: `maxDepth` levels (so no deep input reaches the
 * stack), `maxEntries` per object or array, `maxValues` values and `maxTotal` characters of strings
 * in all, each string scanned over what can be shown (`maskShown`).
 */
const maskAny = (value: unknown, depth: number, ancestors: Array<object>, s: Settings): unknown => {
  if (s.values <= 0) return Elided
  s.values--
  switch (typeof value) {
    case "string":
      return maskString(value, s)
    case "number":
    case "boolean":
    case "undefined":
      return value
    case "bigint":
      return maskString(value.toString(), s)
    case "object":
      break
    default:
      return Mask // functions, symbols
  }
  if (value === null) return null
  if (depth >= s.maxDepth || ancestors.includes(value)) return Mask
  ancestors.push(value)
  try {
    if (Array.isArray(value)) {
      if (Object.getPrototypeOf(value) !== Array.prototype) return Mask
      const length = value.length
      const out: Array<unknown> = []
      let i = 0
      for (; i < Math.min(length, s.maxEntries) && s.values > 0; i++) {
        const d = Object.getOwnPropertyDescriptor(value, String(i))
        out.push(d === undefined ? undefined : "value" in d ? maskAny(d.value, depth + 1, ancestors, s) : Mask)
      }
      if (i < length) out.push(`… ${length - i} more`)
      return out
    }
    const proto = Object.getPrototypeOf(value)
    if (proto !== Object.prototype && proto !== null) return Mask
    const out: Record<string, unknown> = {}
    const keys = Object.keys(value)
    let n = 0
    for (const key of keys) {
      if (n >= s.maxEntries || s.values <= 0) {
        define(out, "…", `${keys.length - n} more keys`)
        break
      }
      const d = Object.getOwnPropertyDescriptor(value, key)
      if (d === undefined) continue
      const shownKey = looksSecretShown(key, 200) ? `${Mask}${n}` : truncate(key, 200)
      if (isSecretKey(key) || !("value" in d)) {
        s.values-- // a masked value costs one value of the budget, as any other
        define(out, shownKey, Mask)
      } else {
        define(out, shownKey, maskAny(d.value, depth + 1, ancestors, s))
      }
      n++
    }
    return out
  } catch {
    return Mask
  } finally {
    ancestors.pop()
  }
}

/** The value stored under `key`, masked: all of it if the key looks secret, else what in it looks secret. */
export const maskValue = (key: string, value: unknown, options?: MaskOptions): unknown => {
  try {
    if (isSecretKey(key)) return Mask
    return maskAny(value, 0, [], settings(options))
  } catch {
    return Mask
  }
}

/**
 * A masked copy of a record (tool inputs, arguments). `null`/`undefined` give `{}`; a value that is
 * not a plain record is kept under the key `"(value)"`; a record that cannot be read gives
 * `{ "(value)": Mask }`.
 */
export const maskRecord = (obj: unknown, options?: MaskOptions): Readonly<Record<string, unknown>> => {
  if (obj === null || obj === undefined) return {}
  try {
    const masked = maskAny(obj, 0, [], settings(options))
    if (typeof masked === "object" && masked !== null && !Array.isArray(masked)) return masked as Record<string, unknown>
    return { "(value)": masked }
  } catch {
    return { "(value)": Mask }
  }
}
