/**
 * Which keys name a secret: a value stored under `password`, `apiKey`, `x-auth-token`,
 * `2fa_code`, `SSHPASS`, ... is masked whole, whatever it is. Keys are read as lower-case words
 * (`keyWords`) and judged by fragments (`clientsecret`), whole words (`token`, but not in
 * `max_tokens`), qualified keys (`api key`, `ssh_key`) and pairs (`verification code`).
 */

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
  "password",
  "passwd",
  "passphrase",
  "passcode",
  "secret",
  "credential",
  "apikey",
  "accesskey",
  "privatekey",
  "secretkey",
  "signingkey",
  "encryptionkey",
  "privkey",
  "authorization",
  "bearer",
  "cookie",
  "onetime",
  "mnemonic",
  "seedphrase",
  "sessionid",
  "accesstoken",
  "refreshtoken",
  "authtoken",
  "idtoken",
  "otpcode"
]

/** Secret as whole words of a key. */
const SecretWords = new Set([
  "token",
  "tokens",
  "auth",
  "session",
  "sessions",
  "otp",
  "totp",
  "hotp",
  "pin",
  "pins",
  "ssn",
  "mfa",
  "2fa",
  "cvv",
  "cvc",
  "jwt",
  "pwd",
  "pw",
  "pass",
  "creds",
  "cred",
  "csrf",
  "xsrf",
  "passwort",
  "kennwort",
  "contrasena",
  "senha",
  // passwords by their programs' names for them (`SSHPASS=`, `keytool -storepass`, `openssl -passin`)
  "sshpass",
  "storepass",
  "keypass",
  "srcstorepass",
  "deststorepass",
  "srckeypass",
  "destkeypass",
  "passin",
  "passout"
])

/** `key` is secret after one of these words (`api key`, `ssh_key`, `privateKey`). */
const KeyQualifiers = new Set([
  "api",
  "access",
  "private",
  "secret",
  "signing",
  "encryption",
  "ssh",
  "gpg",
  "pgp",
  "master",
  "license",
  "licence",
  "client",
  "app",
  "auth",
  "session",
  "deploy",
  "recovery",
  "product",
  "activation",
  "account",
  "service",
  "webhook"
])

/** Two-word secrets (`verification code`, `card number`). */
const SecretPairs: ReadonlyArray<readonly [string, string]> = [
  ["one", "time"],
  ["verification", "code"],
  ["security", "code"],
  ["recovery", "code"],
  ["backup", "code"],
  ["login", "code"],
  ["signin", "code"],
  ["sign", "in"],
  ["card", "number"],
  ["account", "number"],
  ["social", "security"],
  ["routing", "number"],
  ["seed", "phrase"],
  ["recovery", "phrase"]
]

/** Words that make `tokens` a count, not a credential (`max_tokens`, `total_tokens`). */
const CountWords = new Set([
  "max",
  "min",
  "num",
  "count",
  "total",
  "limit",
  "usage",
  "budget",
  "input",
  "output",
  "used",
  "remaining"
])

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
  const compact = key
    .slice(0, 256)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "")
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
