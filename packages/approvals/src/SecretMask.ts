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
 *   `htpasswd -b file user X`, ...).
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
 * once left to right without re-reading a match, command words are read once, and a masked copy
 * stops scanning once its value and character budgets are spent (`MaskOptions`).
 */
import * as MaskedCopy from "./internal/MaskedCopy.js"
import * as Masking from "./internal/Masking.js"
import * as SecretKeys from "./internal/SecretKeys.js"
import * as SecretPatterns from "./internal/SecretPatterns.js"

/** What stands for a masked secret in every masked text and copy. */
export const Mask = Masking.Mask

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

/** What stands for a value left out of a masked copy because the copy was full (see `MaskOptions`). */
export const Elided = Masking.Elided

/** Split `apiKey`, `API_KEY`, `x-auth-token`, `2faCode` into lower-case words. */
export const keyWords: (key: string) => ReadonlyArray<string> = SecretKeys.keyWords

/** Does a value stored under this key name a secret? */
export const isSecretKey: (key: string) => boolean = SecretKeys.isSecretKey

/** A token run that looks random (a `/` inside must look like base64, not a path). */
export const looksRandom: (run: string) => boolean = SecretPatterns.looksRandom

/** Does this string carry something that looks like a secret? */
export const looksSecret: (text: string) => boolean = Masking.looksSecret

/** Does the part of `text` that `maskShown(text, max)` scans (the shown part, or just past it) look secret? */
export const looksSecretShown: (text: string, max: number) => boolean = Masking.looksSecretShown

/**
 * Replace every secret-looking part of a text by `Mask`. A text longer than 100 000 characters is
 * cut first (and ends with "…"; a token-like run the cut falls into is masked whole). Linear in the
 * text: every pattern is scanned once, left to right, and no match is re-read.
 *
 * @example
 * ```ts
 * SecretMask.maskText("export DB_PASSWORD=hunter2 && mysql -phunter2 app")
 * // "export DB_PASSWORD=••• && mysql -p••• app"
 * ```
 */
export const maskText: (text: string) => string = Masking.maskText

/**
 * `truncate(maskText(text), max)`, without scanning what cannot be shown.
 *
 * A text longer than `max` is scanned over its first `max` + 8 192 characters only (more than any
 * bounded match is long, so a secret that starts in the shown part is still found whole; a
 * token-like run the cut falls into is masked). The cost is bounded by `max`, whatever the text's
 * length.
 */
export const maskShown: (text: string, max: number) => string = Masking.maskShown

/** Cut a string to `max` characters (by code point), ending with "…" when cut. */
export const truncate: (text: string, max: number) => string = Masking.truncate

/**
 * Mask an argv, word by word, including secrets spread over several words.
 *
 * It masks what `maskText` finds in the words joined by spaces (so a secret spread over words
 * is found as in the command line: `Authorization: Basic X`, `Bearer X`, `--password X`), the
 * password forms of its programs read over the exact words (`mysql -pX`, `curl -u user:X`,
 * `htpasswd -b file user X`, ...), the value after (or inside) a secret-looking flag, and each
 * word as text.
 */
export const maskArgv: (argv: ReadonlyArray<string>) => ReadonlyArray<string> = Masking.maskArgv

/**
 * A JSON value as an exit writes it (an audit record, a `--json` line), masked.
 *
 * Every string and key goes through `maskText`, and a value under a secret-looking key is replaced
 * whole by `Mask` (what masking strings alone cannot know: `{password: "hunter2"}` has no
 * secret-looking string). Not cut or bounded otherwise; nesting deeper than `maxDepth` is `Elided`.
 */
export const maskJson: (value: unknown, maxDepth?: number) => unknown = MaskedCopy.maskJson

/** The value stored under `key`, masked (all of it if the key looks secret, else what in it looks secret). */
export const maskValue: (key: string, value: unknown, options?: MaskOptions) => unknown = MaskedCopy.maskValue

/**
 * A masked copy of a record (tool inputs, arguments). `null`/`undefined` give `{}`; a value that is
 * not a plain record is kept under the key `"(value)"`; a record that cannot be read gives
 * `{ "(value)": Mask }`.
 */
export const maskRecord: (obj: unknown, options?: MaskOptions) => Readonly<Record<string, unknown>> =
  MaskedCopy.maskRecord
