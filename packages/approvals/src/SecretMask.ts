/**
 * Masking for everything a card shows or an audit line writes. Two rules, applied together:
 *
 * - a value under a secret-looking key (`password`, `apiKey`, `x-auth-token`, `2fa_code`, ...) is
 *   replaced whole by `Mask`, whatever its type;
 * - a string that looks like a secret whatever its key (`sk-...`, `ghp_...`, `xoxb-...`, `AKIA...`,
 *   JWTs, `Bearer ...`, private key blocks, URL passwords and token users, `token=...` pairs,
 *   `--password X` flags, long high-entropy strings) has those parts replaced by `Mask`;
 * - in command lines (a text or an argv), the password forms of common programs, as each reads its
 *   arguments (`mysql -pX` but not `mysql -p db`, `curl -u user:X`, `sshpass -p X`, `docker login
 *   -p X`, `redis-cli -a X`, `openssl enc -k X`, `aws configure set aws_secret_access_key X`,
 *   `htpasswd -b file user X`, ...: `ProgramForms`).
 *
 * This module is the one place that decides what is secret: every exit (cards, the audit trail,
 * `--json` events, the log, error messages, the stderr tail) masks through it.
 *
 * Inputs are never mutated and never trusted: objects are copied through property descriptors (a
 * getter is not called: it is masked), cycles are masked, non-plain objects (class instances,
 * Maps, Proxies that misbehave) are masked, depth, breadth and the copy's total size are bounded.
 * Nothing here throws; on any trouble the value is masked. Masking errs on the side of hiding: an
 * identifier that happens to look random may be masked too.
 *
 * The work is linear in what is scanned, and what is scanned is bounded: a text is cut at 100 000
 * characters (`maskText`) or just past what will be shown (`maskShown`), every pattern is scanned
 * once left to right without re-reading a match (a quoted value's closing quote is searched from
 * past the previous one, at most 4 096 characters on; command words are read once, `ArgReader`),
 * and a masked copy stops scanning once its value and character budgets are spent (`MaskOptions`).
 * Objects' keys are read within a budget too (`maxKeys`): in V8, reading any of an object's keys
 * reads all of them, so a copy asks an object's size first (`Json.keysWithin`) and leaves a larger
 * one unread.
 */

import { Json } from "@warden/protocol"

/** What stands for a masked secret in every masked text and copy. */
export const Mask = "•••"

/**
 * Bounds of a masked copy made by `maskRecord` or `maskValue`.
 *
 * Depth, entries per object or array, string length, values copied and characters shown, so masking
 * a hostile value costs bounded work and yields a bounded copy. Every field is optional.
 */
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
  /**
   * Object keys read in all (default 20 000). Reading an object's keys costs time in ALL of them,
   * however few are copied (`Json.keysWithin`), so an object with more keys than are left is not
   * read: its copy is `{ "…": "N more keys" }`.
   */
  readonly maxKeys?: number
}

const Defaults = { maxDepth: 8, maxEntries: 100, maxString: 2_000, maxValues: 2_000, maxTotal: 100_000, maxKeys: 20_000 } as const

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
  "cvv", "cvc", "jwt", "pwd", "pw", "pass", "creds", "cred", "csrf", "xsrf", "passwort", "kennwort", "contrasena", "senha",
  // passwords by their programs' names for them (`SSHPASS=`, `keytool -storepass`, `openssl -passin`)
  "sshpass", "storepass", "keypass", "srcstorepass", "deststorepass", "srckeypass", "destkeypass", "passin", "passout"
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
  // a password in a URL: scheme://user:PASSWORD@host (up to the authority's last @: `p@ss` written raw)
  scan(/\b[a-z][a-z0-9+.-]{0,20}:\/\/[^\s:@/?#]{0,256}:(?<s>[^\s/?#]{1,256})@/gi, "://"),
]

/**
 * Headers whose whole value is a credential: the value up to the line's end or a quote (the header's
 * own quoting, `-H 'Authorization: ...'`; in JSON text also an escaped line end or quote, `\n`,
 * `\"`); a value that is itself quoted (`Authorization: "..."`, `Bearer "..."`) is read inside its
 * quotes (`quotedValue`).
 */
const Header = scan(/\b(?:proxy-)?(?:authorization|cookie|set-cookie|x-api-key|api-key)[ \t]*(?:\\{0,3}["'])?[ \t]*:[ \t]*(?<s>(?:[^\r\n"'`\\]|\\(?![nrt"'\\])){0,4096})/gi, ":")

/** A token as a URL's user (`https://TOKEN@github.com`, an Azure DevOps PAT): masked when it reads as a credential. */
const UrlUser = scan(/\b[a-z][a-z0-9+.-]{0,20}:\/\/(?<s>[^\s:@/?#]{16,256})@/gi, "://")

/** An auth scheme and its credential (`Bearer abc123...`): the scheme word stays, the credential is masked. */
const AuthScheme = scan(/\b(?:[Bb]earer|BEARER|Basic|Token|Digest|Bot)[ \t]+(?:\\{0,3}["']){0,3}(?<s>[A-Za-z0-9._~+/=-]{8,4096})/g, "earer", "BEARER", "Basic", "Token", "Digest", "Bot")
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
  constructor(private readonly text: string, private readonly needle: string) {}
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
  quotes: { "\"": new NextIndex(text, "\""), "'": new NextIndex(text, "'"), "`": new NextIndex(text, "`") }
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
const assignments = (text: string, spans: Array<Span>): void =>
  keyedValues(text, spans, Assignment, (separator) => separator.includes("=") ? AssignmentValue : ColonValue)

/** `--password VALUE`: as `assignments`, for secret-looking flags. */
const flagValues = (text: string, spans: Array<Span>): void =>
  keyedValues(text, spans, FlagValue, () => FlagWord)

/** The values after secret keys that `pattern` finds (its match ends where the value starts), read with `wordFor(match)` unless quoted. */
const keyedValues = (text: string, spans: Array<Span>, { needs, pattern }: Scan, wordFor: (match: string) => RegExp): void => {
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
const headers = (text: string, spans: Array<Span>): void => {
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

// ---------------------------------------------------------------------------------------------
// Password forms of common programs' arguments

/**
 * Where a program's arguments carry a password in a form no key names (`mysql -phunter2`,
 * `curl -u user:pass`, `sshpass -p pass`, `htpasswd -b file user pass`), as each program reads them.
 */
interface ArgForms {
  /** Applies only once this word followed the program (a subcommand: `docker login`, `openssl passwd`). */
  readonly after?: string
  /** Options whose value is a password: the next word, or attached (`-pX`, `-p=X`, `--password=X`). */
  readonly value?: ReadonlyArray<string>
  /** Options whose value is a password only as the next word (`openssl enc -k PASS`: `-keyform` is another option). */
  readonly next?: ReadonlyArray<string>
  /** Options whose value is a password only when attached (`mysql -pSECRET`: `-p SECRET` prompts, SECRET is the database). */
  readonly attached?: ReadonlyArray<string>
  /** Options whose value is `user<separator>password` (`curl -u user:pass`, `smbclient -U user%pass`): the part after it. */
  readonly userPass?: ReadonlyArray<string>
  readonly separator?: string
  /** Words after which `KEY VALUE` sets a setting (`aws configure set KEY VALUE`, `git config KEY VALUE`): VALUE, when KEY is secret. */
  readonly keyValue?: ReadonlyArray<string>
  /** The last word of the command is a password once a short option bundle has this letter (`htpasswd -b`), or, with "", once `after` was seen. */
  readonly lastWhen?: string
}

const forms = (programs: ReadonlyArray<string>, ...list: ReadonlyArray<ArgForms>) => programs.map((p) => [p, list] as const)
const SetWords = ["set", "config"]

/** The password forms of each program (by the basename of its first word). */
const ProgramForms = new Map<string, ReadonlyArray<ArgForms>>([
  ...forms([
    "mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck", "mysqlpump", "mysqlslap", "mysqlbinlog", "mysqlsh",
    "mariadb", "mariadb-dump", "mariadb-admin", "mariadb-import", "mariadb-show", "mariadb-check", "mariadb-slap", "mariadb-binlog",
    "7z", "7za", "7zr", "rar", "unrar"
  ], { attached: ["-p"] }),
  ...forms(["sshpass"], { value: ["-p"] }),
  ...forms(["docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oras", "crane", "regctl", "finch"], { after: "login", value: ["-p", "--password"] }),
  ...forms(["redis-cli", "valkey-cli", "keydb-cli"], { next: ["-a"] }),
  ...forms(["openssl"], { next: ["-k", "-K"] }, { after: "passwd", lastWhen: "" }),
  ...forms(["mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport", "mongostat", "mongotop", "mongofiles"], { next: ["-p"] }),
  ...forms(["sqlcmd", "bcp", "osql", "isql"], { value: ["-P"] }),
  ...forms(["ldapsearch", "ldapadd", "ldapmodify", "ldapdelete", "ldapwhoami", "ldapcompare", "ldapmodrdn", "ldapexop", "ldapurl"], { value: ["-w"] }),
  ...forms(["ldappasswd"], { value: ["-w", "-s", "-a"] }),
  ...forms(["zip", "unzip", "zipcloak", "funzip"], { value: ["-P"] }),
  ...forms(["curl"], { userPass: ["-u", "--user", "-U", "--proxy-user"], separator: ":" }),
  ...forms(["smbclient", "rpcclient", "smbget", "smbcacls", "smbmap", "smbtree", "net", "mount.cifs"], { userPass: ["-U", "--user"], separator: "%" }),
  ...forms(["lftp"], { userPass: ["-u", "--user"], separator: "," }),
  ...forms(["htpasswd"], { lastWhen: "b" }),
  ...forms(["xfreerdp", "wlfreerdp", "sdl-freerdp"], { attached: ["/p:"] }),
  ...forms(["gh"], { after: "secret", value: ["-b", "--body"] }),
  ...forms([
    "aws", "npm", "pnpm", "yarn", "git", "doppler", "dotnet", "heroku", "flyctl", "fly", "vercel", "netlify", "firebase", "gcloud", "az", "gh",
    "conda", "pip", "poetry", "composer", "bundle", "gem", "cargo", "kubectl", "vault", "op", "railway", "supabase", "wrangler"
  ], { keyValue: SetWords })
].reduce((all, [program, list]) => all.set(program, [...(all.get(program) ?? []), ...list]), new Map<string, ReadonlyArray<ArgForms>>()))

/** Every program of `ProgramForms` (a text without any of them has none of their forms). */
const ProgramNames = new RegExp([...ProgramForms.keys()].sort((a, b) => b.length - a.length).map((n) => n.replace(/[.+]/g, "\\$&")).join("|"))

const isSpace = (code: number): boolean => code === 32 || code === 9 || code === 10 || code === 13 || code === 11 || code === 12
/** Where an unquoted value ends in a command line: blanks and the shell's syntax characters. */
const endsValue = (code: number): boolean =>
  isSpace(code) || code === 39 || code === 34 || code === 96 || code === 59 || code === 124 || code === 38 || code === 41 || code === 60 || code === 62
/** An escaped line end or quote of JSON text at `i` (`\n`, `\"`): the end of an unquoted value too. */
const isEscape = (src: string, i: number): boolean => src.charCodeAt(i) === 92 && "nrt\"'".includes(src[i + 1] ?? "x")
/** Leading characters that are quoting or grouping around a word, not the word (`'mysql`, `"$(mysql`, `(cd`). */
const isOpener = (code: number): boolean => code === 39 || code === 34 || code === 96 || code === 40 || code === 123 || code === 36
/** Trailing quoting and operators after a word (`db'`, `db;`, `db)`, `db&&`). */
const isCloser = (code: number): boolean => code === 39 || code === 34 || code === 96 || code === 41 || code === 125 || code === 59 || code === 124 || code === 38

const hasNewline = (src: string, from: number, to: number): boolean => {
  for (let i = from; i < to; i++) if (src.charCodeAt(i) === 10) return true
  return false
}

/** A word that is an option, not a value (`-u`, `--host`): a value option followed by one gets nothing. */
const isOptionWord = (word: string): boolean => word.startsWith("--") || /^-[A-Za-z]$/.test(word)

/**
 * Reads the words of command lines (a text's blank-separated words, or an argv) and reports the
 * password spans of `ProgramForms`: one pass, each word once, state only for the current command
 * (its program's forms, a pending value, the last word). A command ends at a line end or `;`, `|`, `&`.
 */
class ArgReader {
  /** The forms of the programs named in the current command, and whether each applies yet (its `after` word seen). */
  private forms: ReadonlyArray<ArgForms> | undefined = undefined
  private seen: Array<boolean> = []
  /** The next word is a value: `""` all of it, else the part after this separator. */
  private pending: string | undefined = undefined
  /** `KEY VALUE` after a set word: 1 while the key is awaited, 2 when the value is secret. */
  private key = 0
  private last = false
  private lastFrom = -1
  private lastTo = -1

  constructor(private readonly found: (from: number, to: number) => void) {}

  /** End of a command: the last word, if the command's batch option or subcommand made it a password. */
  end(): void {
    if (this.last && this.lastFrom >= 0) this.found(this.lastFrom, this.lastTo)
    this.forms = undefined
    this.pending = undefined
    this.key = 0
    this.last = false
    this.lastFrom = -1
  }

  /**
   * A value starting at `p` of `src`: the rest of the word in an argv (`exact`); in a command line
   * up to a blank or shell syntax, or inside the quotes it starts with (`'a b'`, `"a b"`, codex's
   * escaped `'\''a b'\''`), bounded by the line. Reports it (or its part after `separator`) at `base`,
   * and returns where reading resumes.
   */
  private value(src: string, p: number, end: number, base: number, exact: boolean, separator: string, report = true): number {
    let from = p
    let to = end
    let resume = end
    if (!exact) {
      const escaped = src.startsWith("'\\''", p)
      const quote = escaped ? "'\\''" : src[p] === "'" || src[p] === "\"" ? src[p]! : undefined
      if (quote !== undefined) {
        from = p + quote.length
        // the closing quote, on the same line (the search ends at the next quote: each quote is passed once)
        const close = src.indexOf(quote, from)
        if (close >= 0 && !hasNewline(src, from, close)) {
          to = close
          resume = close + quote.length
        } else {
          to = from
          while (to < end && !endsValue(src.charCodeAt(to)) && !isEscape(src, to)) to++
        }
      } else {
        to = p
        while (to < end && !endsValue(src.charCodeAt(to)) && !isEscape(src, to)) to++
      }
    }
    if (separator !== "") {
      let at = from
      while (at < to && src[at] !== separator) at++ // within the value only: a search past it could read the text again per value
      if (at >= to) return resume
      from = at + 1
    }
    if (to > from) {
      if (report) this.found(base + from, base + to)
      else {
        this.lastFrom = base + from
        this.lastTo = base + to
      }
    }
    return resume
  }

  /**
   * One word, `src` from `start` to `end` (in a command line: blank to blank; in an argv: all of
   * it), reported at `base`. Returns where reading resumes (past a quoted value), at least `end`.
   */
  word(src: string, start: number, end: number, base: number, exact: boolean): number {
    let s = start
    let e = end
    let ends = false
    if (!exact) {
      while (s < e && isOpener(src.charCodeAt(s))) s++
      while (e > s && isCloser(src.charCodeAt(e - 1))) {
        const c = src.charCodeAt(e - 1)
        if (c === 59 || c === 124 || c === 38) ends = true
        e--
      }
    } else if (src === ";" || src === "|" || src === "&&" || src === "||" || src === "&") {
      this.end()
      return end
    }
    let resume = end
    if (s < e) resume = Math.max(end, this.read(src, s, e, start, end, base, exact))
    if (ends) this.end()
    return resume
  }

  /** `word` as one of the value options `names`: the next word is pending, or its attached value (`-pX`, `-p=X`, `--password=X`) is read. */
  private option(names: ReadonlyArray<string>, separator: string, word: string, src: string, s: number, end: number, base: number, exact: boolean): number {
    for (const name of names) {
      if (word === name) this.pending = separator
      else if (word.startsWith(name) && (name.startsWith("--") ? word[name.length] === "=" : word.length > name.length)) {
        return this.value(src, s + name.length + (word[name.length] === "=" ? 1 : 0), end, base, exact, separator)
      }
    }
    return end
  }

  private read(src: string, s: number, e: number, start: number, end: number, base: number, exact: boolean): number {
    const word = src.slice(s, e)
    const program = ProgramForms.get(word.slice(word.lastIndexOf("/") + 1))
    if (program !== undefined && this.pending === undefined && this.key !== 2) {
      // a program inside a command (`docker exec db mysql -pX`) adds its forms; a file named like
      // one (`htpasswd -b /etc/htpasswd ...`) then changes nothing
      if (this.forms === undefined) {
        this.forms = program
        this.seen = program.map((f) => f.after === undefined)
      } else if (!this.forms.includes(program[0]!)) {
        this.forms = [...this.forms, ...program]
        this.seen = [...this.seen, ...program.map((f) => f.after === undefined)]
      }
      return end
    }
    const forms = this.forms
    if (forms === undefined) return end
    if (this.pending !== undefined) {
      const separator = this.pending
      this.pending = undefined
      if (!isOptionWord(word)) return this.value(src, start, end, base, exact, separator)
    }
    if (this.key === 2) {
      this.key = 0
      if (!isOptionWord(word)) return this.value(src, start, end, base, exact, "")
    }
    const option = word.startsWith("-") || word.startsWith("/")
    if (this.key === 1 && !word.startsWith("-")) this.key = isSecretKey(word) && !word.includes("=") ? 2 : 0
    let resume = end
    let subcommand = false
    for (let f = 0; f < forms.length; f++) {
      const form = forms[f]!
      if (!this.seen[f]) {
        if (word === form.after) {
          this.seen[f] = true
          subcommand = true
          if (form.lastWhen === "") this.last = true
        }
        continue
      }
      if (form.keyValue !== undefined && form.keyValue.includes(word)) this.key = 1
      if (!option) continue
      if (form.next?.includes(word)) this.pending = ""
      if (form.value !== undefined) resume = Math.max(resume, this.option(form.value, "", word, src, s, end, base, exact))
      if (form.userPass !== undefined) resume = Math.max(resume, this.option(form.userPass, form.separator ?? ":", word, src, s, end, base, exact))
      if (form.attached !== undefined) {
        for (const name of form.attached) {
          if (word.length > name.length && word.startsWith(name) && !word.startsWith("--")) {
            resume = Math.max(resume, this.value(src, s + name.length, end, base, exact, ""))
          }
        }
      }
      if (form.lastWhen !== undefined && form.lastWhen !== "" && word[0] === "-" && word[1] !== "-" && word.includes(form.lastWhen)) this.last = true
    }
    if (!option && !subcommand && forms.some((f) => f.lastWhen !== undefined)) {
      resume = Math.max(resume, this.value(src, start, end, base, exact, "", false))
    }
    return resume
  }
}

/** The password spans of `ProgramForms` in a text of command lines. */
const argSpans = (text: string, spans: Array<Span>): void => {
  if (!ProgramNames.test(text)) return
  const reader = new ArgReader((start, end) => spans.push({ start, end }))
  let i = 0
  while (i < text.length) {
    const code = text.charCodeAt(i)
    if (isSpace(code)) {
      if (code === 10) reader.end()
      i++
      continue
    }
    let j = i
    while (j < text.length && !isSpace(text.charCodeAt(j))) j++
    i = reader.word(text, i, j, 0, false)
  }
  reader.end()
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
  for (const m of matches(text, UrlUser)) if (credentialLike(m.groups!["s"]!)) add(m)
  headers(text, spans)
  assignments(text, spans)
  argSpans(text, spans)
  flagValues(text, spans)
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

/** Cut a string to `max` characters (by code point), ending with "…" when cut. */
export const truncate = (text: string, max: number): string => {
  if (text.length <= max) return text
  const chars = Array.from(text.slice(0, max + 1))
  return chars.length <= max ? chars.join("") : `${chars.slice(0, Math.max(0, max - 1)).join("")}…`
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
  const reader = new ArgReader((start, end) => found.push({ start, end }))
  const joined: Array<string> = []
  let at = 0
  for (const word of argv) {
    starts.push(at)
    reader.word(word, 0, word.length, at, true)
    if (at < ScanLimit) joined.push(word)
    at += word.length + 1
  }
  reader.end()
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

// ---------------------------------------------------------------------------------------------
// Structures

const settings = (options: MaskOptions | undefined) => ({
  maxDepth: options?.maxDepth ?? Defaults.maxDepth,
  maxEntries: options?.maxEntries ?? Defaults.maxEntries,
  maxString: options?.maxString ?? Defaults.maxString,
  /** What is left of `maxValues`, `maxTotal` and `maxKeys` while one copy is made. */
  values: options?.maxValues ?? Defaults.maxValues,
  chars: options?.maxTotal ?? Defaults.maxTotal,
  keys: options?.maxKeys ?? Defaults.maxKeys
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
    // Read only when its keys fit in what is left of the budget (a large object of a frame is not
    // enumerated at all: its size is known), and charged whole: reading costs every key.
    const read = Json.keysWithin(value, s.keys)
    if (read.keys === undefined) {
      define(out, "…", `${read.count} more keys`)
      return out
    }
    s.keys -= read.count
    const keys = read.keys
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

/**
 * A JSON value as an exit writes it (an audit record, a `--json` line), masked.
 *
 * Every string and key goes through `maskText`, and a value under a secret-looking key is replaced
 * whole by `Mask` (what masking strings alone cannot know: `{password: "hunter2"}` has no
 * secret-looking string). Not cut or bounded otherwise; nesting deeper than `maxDepth` is `Elided`.
 */
export const maskJson = (value: unknown, maxDepth = 32): unknown => {
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return maskText(v)
    if (typeof v !== "object" || v === null) return v
    if (depth >= maxDepth) return Elided
    if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1))
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(v)) {
      define(out, maskText(key), isSecretKey(key) ? Mask : walk((v as Record<string, unknown>)[key], depth + 1))
    }
    return out
  }
  try {
    return walk(value, 0)
  } catch {
    return Mask
  }
}

/** The value stored under `key`, masked (all of it if the key looks secret, else what in it looks secret). */
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
