/**
 * May this question reach a person? An MCP elicitation form or a `request_user_input` question is
 * written by a model or a server; it must not be a way to fish a secret out of the person, nor a
 * wall of text or choices, nor a link that carries tokens. What fails here is refused at once
 * (the method's refusal), never shown.
 *
 * Judged (all deny-by-default: what is not understood is unsafe):
 * - bounded: questions/fields (8), choices per question/field (32), label and text lengths;
 * - no field or question asking for a secret: password, passphrase, token, key, cookie, credential,
 *   one-time/verification code, PIN, 2FA/MFA, SSN, card numbers, seed phrases... judged on the field
 *   or question name, title, header, question text, description and option texts (labels with the
 *   strict word list, prose with a list that needs the secret to be named: "which key binding" is
 *   prose, "your API key" is not); `isSecret: true`, `writeOnly: true` or `format: "password"`
 *   refuse; a question with `isOther` (free text) whose text asks for a secret refuses;
 * - no invisible or control characters in what the person reads (they can hide words);
 * - a URL elicitation only for a plain `https:` URL without user, password, query or fragment;
 * - the form schema is the flat one MCP defines (`type: "object"`, primitive `properties`,
 *   `required` naming them); anything else is malformed, and malformed is unsafe.
 * The MCP tool-call approval (`_meta.codex_approval_kind: "mcp_tool_call"`, empty schema) is a
 * yes/no and is Safe; its inputs are masked on the card. Command, file-change, permissions and
 * dynamic-tool requests are Safe here (rules, masking and the grant checks govern them). Unknown and
 * malformed requests are Unsafe (nobody can be shown them).
 *
 * A reason names keys (field names, question ids, schema keys), never a value or text the model or
 * server wrote. The word lists are English plus a few common translations of "password": a filter,
 * not a guarantee.
 */
import { Json, type ServerRequests } from "@warden/protocol"
import { looksSecret, Mask } from "./Masking.js"

export type Verdict = { readonly _tag: "Safe" } | { readonly _tag: "Unsafe"; readonly reason: string }

export interface Limits {
  /** Questions in one user-input request, fields in one form (default 8). */
  readonly maxQuestions?: number
  /** Choices per question or field (default 32). */
  readonly maxChoices?: number
  /** Question text, description, message length (default 2000). */
  readonly maxTextLength?: number
  /** Ids, names, titles, headers, option labels (default 200). */
  readonly maxLabelLength?: number
  /** URL length for URL elicitations (default 2048). */
  readonly maxUrlLength?: number
}

export const defaultLimits: Required<Limits> = {
  maxQuestions: 8,
  maxChoices: 32,
  maxTextLength: 2_000,
  maxLabelLength: 200,
  maxUrlLength: 2_048
}

const Safe: Verdict = { _tag: "Safe" }
const unsafe = (reason: string): Verdict => ({ _tag: "Unsafe", reason })

class Refused {
  constructor(readonly reason: string) {}
}
const refuse = (reason: string): never => {
  throw new Refused(reason)
}

// ---------------------------------------------------------------------------------------------
// Words

/** Lower case, camelCase and snake_case split, punctuation as spaces, compatibility forms folded. */
const normalize = (text: string): string =>
  text
    .normalize("NFKC")
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .toLowerCase()
    .replace(/[_\-./:]+/g, " ")

/** Secret words, for both labels and prose. */
const SecretAnywhere = new RegExp(
  [
    "pass ?words?",
    "passwd",
    "pass ?phrases?",
    "pass ?codes?",
    "secrets?",
    "tokens?",
    "api ?keys?",
    "access ?keys?",
    "private ?keys?",
    "secret ?keys?",
    "ssh ?keys?",
    "gpg ?keys?",
    "pgp ?keys?",
    "signing ?keys?",
    "encryption ?keys?",
    "license ?keys?",
    "licence ?keys?",
    "product ?keys?",
    "recovery ?keys?",
    "master ?keys?",
    "credentials?",
    "creds",
    "cookies?",
    "bearer",
    "auth ?codes?",
    "authentication ?codes?",
    "one ?time ?(?:codes?|pass ?words?|pins?|pass ?codes?|keys?)",
    "otp",
    "totp",
    "2fa",
    "mfa",
    "verification ?codes?",
    "security ?codes?",
    "recovery ?codes?",
    "backup ?codes?",
    "login ?codes?",
    "sign ?in ?codes?",
    "pin ?codes?",
    "pin ?numbers?",
    "ssn",
    "social security",
    "cvv",
    "cvc",
    "card ?numbers?",
    "credit ?cards?",
    "seed ?phrases?",
    "recovery ?phrases?",
    "mnemonic",
    "session ?(?:ids?|keys?)",
    "passwort",
    "kennwort",
    "contrase[nñ]a",
    "mot de passe",
    "senha",
    "wachtwoord"
  ]
    .map((w) => `\\b${w}(?![a-z0-9])`)
    .join("|") + "|пароль|密码|パスワード|비밀번호"
)

/** Further words that are secret in a label (a field name, title, header, id) but not in prose. */
const SecretInLabel = /\b(?:keys?|pins?|pass|pwd|auth|authorization|session|sessions|sid|one ?time)\b/

/** "PIN" written in capitals names the code even in prose ("pin the version" does not). */
const PinInProse = /\bPINs?\b/

/** Invisible or control characters that could hide or disguise words (tab and line breaks allowed). */
const Hidden = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\p{Cf}\u2028\u2029]/u

/** Names printed in reasons: plain identifiers only, bounded, secret-looking ones masked. */
const NamePattern = /^[A-Za-z0-9_.-]{1,128}$/
const shownName = (name: string): string => (looksSecret(name) ? Mask : `"${name.slice(0, 64)}"`)

const asksForSecretLabel = (label: string): boolean => {
  const n = normalize(label)
  return SecretAnywhere.test(n) || SecretInLabel.test(n)
}
const asksForSecretProse = (prose: string): boolean => SecretAnywhere.test(normalize(prose)) || PinInProse.test(prose)

// ---------------------------------------------------------------------------------------------
// Helpers

const isPlainRecord = (value: unknown): value is Record<string, unknown> => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

const own = (record: Record<string, unknown>, key: string): unknown =>
  Object.hasOwn(record, key) ? record[key] : undefined

const checkText = (value: unknown, what: string, max: number, optional: boolean): string | undefined => {
  if (value === undefined || value === null) {
    if (optional) return undefined
    return refuse(`${what} is missing`)
  }
  if (typeof value !== "string") return refuse(`${what} is not text`)
  if (value.length > max) return refuse(`${what} is longer than ${max} characters`)
  if (Hidden.test(value)) return refuse(`${what} contains invisible or control characters`)
  return value
}

// ---------------------------------------------------------------------------------------------
// User input

const checkUserInput = (p: ServerRequests.UserInputParams, l: Required<Limits>): void => {
  if (p.questions.length === 0) refuse("user input asks no questions")
  if (p.questions.length > l.maxQuestions)
    refuse(`user input has ${p.questions.length} questions (limit ${l.maxQuestions})`)
  const ids = new Set<string>()
  p.questions.forEach((q, index) => {
    if (!NamePattern.test(q.id)) refuse(`question ${index + 1} has an id that is not a plain identifier`)
    const name = `question ${shownName(q.id)}`
    if (ids.has(q.id)) refuse(`${name} appears twice`)
    ids.add(q.id)
    if (q.isSecret === true) refuse(`${name} is marked secret`)
    const header = checkText(q.header, `${name} header`, l.maxLabelLength, false)!
    const text = checkText(q.question, `${name} text`, l.maxTextLength, false)!
    const options = q.options ?? []
    if (options.length > l.maxChoices) refuse(`${name} has ${options.length} choices (limit ${l.maxChoices})`)
    const secretText = asksForSecretLabel(q.id) || asksForSecretLabel(header) || asksForSecretProse(text)
    if (secretText && q.isOther === true) refuse(`${name} invites a free-text answer to a question about a secret`)
    if (secretText) refuse(`${name} asks for a secret`)
    options.forEach((o, i) => {
      const label = checkText(o.label, `${name} choice ${i + 1}`, l.maxLabelLength, false)!
      const description = checkText(o.description, `${name} choice ${i + 1} description`, l.maxTextLength, true)
      if (asksForSecretProse(label) || (description !== undefined && asksForSecretProse(description))) {
        refuse(`${name} choice ${i + 1} mentions a secret`)
      }
    })
  })
}

// ---------------------------------------------------------------------------------------------
// Elicitation forms

const SchemaKeys = new Set([
  "type",
  "properties",
  "required",
  "$schema",
  "title",
  "description",
  "additionalProperties"
])
const FieldKeys = new Set([
  "type",
  "title",
  "description",
  "enum",
  "enumNames",
  "oneOf",
  "items",
  "default",
  "format",
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "minItems",
  "maxItems"
])
const FieldTypes = new Set(["string", "number", "integer", "boolean", "array"])
const StringFormats = new Set(["email", "uri", "date", "date-time"])

/**
 * The keys of a schema object the filter reads, when it has at most `max` (else refused, unread:
 * in V8 reading one key of an object reads them all, and a frame's large object has a known size).
 */
const keysOf = (value: object, max: number, what: string): ReadonlyArray<string> => {
  const read = Json.keysWithin(value, max)
  return read.keys ?? refuse(`${what} has ${read.count} keys (more than a schema may have)`)
}
/** Keys that no schema object the filter reads may exceed (each allows at most 15 different keys). */
const MaxSchemaKeys = 64

const checkChoices = (values: unknown, name: string, l: Required<Limits>, titled: boolean): void => {
  if (!Array.isArray(values) || values.length === 0) refuse(`${name} has malformed choices`)
  const list = values as ReadonlyArray<unknown>
  if (list.length > l.maxChoices) refuse(`${name} has ${list.length} choices (limit ${l.maxChoices})`)
  list.forEach((v, i) => {
    const value = titled ? (isPlainRecord(v) ? own(v, "const") : undefined) : v
    if (typeof value !== "string" && typeof value !== "number") refuse(`${name} choice ${i + 1} is malformed`)
    checkText(String(value), `${name} choice ${i + 1}`, l.maxLabelLength, false)
    if (titled && isPlainRecord(v)) {
      if (keysOf(v, MaxSchemaKeys, `${name} choice ${i + 1}`).some((k) => k !== "const" && k !== "title"))
        refuse(`${name} choice ${i + 1} has unsupported keys`)
      checkText(own(v, "title"), `${name} choice ${i + 1} title`, l.maxLabelLength, true)
    }
  })
}

const checkField = (fieldName: string, field: unknown, l: Required<Limits>): void => {
  const name = `form field ${shownName(fieldName)}`
  if (!isPlainRecord(field)) refuse(`${name} is not a schema object`)
  const f = field as Record<string, unknown>
  if (own(f, "isSecret") === true || own(f, "writeOnly") === true || own(f, "format") === "password")
    refuse(`${name} is marked secret`)
  const extra = keysOf(f, MaxSchemaKeys, name).find((k) => !FieldKeys.has(k))
  if (extra !== undefined)
    refuse(`${name} has an unsupported key ${NamePattern.test(extra) ? shownName(extra) : "(not an identifier)"}`)
  const type = own(f, "type")
  if (typeof type !== "string" || !FieldTypes.has(type)) refuse(`${name} has no supported type`)
  const title = checkText(own(f, "title"), `${name} title`, l.maxLabelLength, true)
  const description = checkText(own(f, "description"), `${name} description`, l.maxTextLength, true)
  if (
    asksForSecretLabel(fieldName) ||
    (title !== undefined && asksForSecretLabel(title)) ||
    (description !== undefined && asksForSecretProse(description))
  ) {
    refuse(`${name} asks for a secret`)
  }
  const format = own(f, "format")
  if (format !== undefined && (type !== "string" || typeof format !== "string" || !StringFormats.has(format)))
    refuse(`${name} has an unsupported format`)
  const def = own(f, "default")
  if (def !== undefined && typeof def !== "string" && typeof def !== "number" && typeof def !== "boolean")
    refuse(`${name} has a default that is not a plain value`)
  if (typeof def === "string") checkText(def, `${name} default`, l.maxTextLength, false)
  const enumValues = own(f, "enum")
  const oneOf = own(f, "oneOf")
  if (enumValues !== undefined && oneOf !== undefined) refuse(`${name} has both enum and oneOf`)
  if (enumValues !== undefined) checkChoices(enumValues, name, l, false)
  if (oneOf !== undefined) checkChoices(oneOf, name, l, true)
  const enumNames = own(f, "enumNames")
  if (enumNames !== undefined) {
    if (!Array.isArray(enumNames) || !Array.isArray(enumValues) || enumNames.length !== enumValues.length)
      refuse(`${name} has malformed enumNames`)
    ;(enumNames as ReadonlyArray<unknown>).forEach((n, i) =>
      checkText(n, `${name} choice ${i + 1} name`, l.maxLabelLength, false)
    )
  }
  const items = own(f, "items")
  if (type === "array") {
    if (!isPlainRecord(items)) refuse(`${name} is an array without choices`)
    const it = items as Record<string, unknown>
    if (keysOf(it, MaxSchemaKeys, `${name} items`).some((k) => k !== "type" && k !== "enum" && k !== "anyOf"))
      refuse(`${name} items have unsupported keys`)
    if (own(it, "type") !== undefined && own(it, "type") !== "string") refuse(`${name} items are not strings`)
    const itemEnum = own(it, "enum")
    const anyOf = own(it, "anyOf")
    if ((itemEnum === undefined) === (anyOf === undefined))
      refuse(`${name} is an array without exactly one list of choices`)
    if (itemEnum !== undefined) checkChoices(itemEnum, name, l, false)
    else checkChoices(anyOf, name, l, true)
  } else if (items !== undefined) {
    refuse(`${name} has items but is not an array`)
  }
  for (const bound of ["minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems"]) {
    const b = own(f, bound)
    if (b !== undefined && (typeof b !== "number" || !Number.isFinite(b))) refuse(`${name} has a malformed ${bound}`)
  }
}

const checkForm = (p: ServerRequests.ElicitationParams, l: Required<Limits>): void => {
  const schema = p.requestedSchema
  if (!isPlainRecord(schema)) refuse("form elicitation has no schema object")
  const s = schema as Record<string, unknown>
  const extra = keysOf(s, MaxSchemaKeys, "form schema").find((k) => !SchemaKeys.has(k))
  if (extra !== undefined)
    refuse(`form schema has an unsupported key ${NamePattern.test(extra) ? shownName(extra) : "(not an identifier)"}`)
  if (own(s, "type") !== "object") refuse("form schema is not of type object")
  const properties = own(s, "properties") ?? {}
  if (!isPlainRecord(properties)) refuse("form schema properties is not an object")
  const props = properties as Record<string, unknown>
  const fields = Json.keysWithin(props, l.maxQuestions)
  if (fields.keys === undefined) return refuse(`form has ${fields.count} fields (limit ${l.maxQuestions})`)
  const names = fields.keys
  const required = own(s, "required")
  if (required !== undefined) {
    if (!Array.isArray(required) || !required.every((r) => typeof r === "string" && Object.hasOwn(props, r))) {
      refuse("form schema required names a field the form does not have")
    }
  }
  names.forEach((n, i) => {
    if (!NamePattern.test(n)) refuse(`form field ${i + 1} has a name that is not a plain identifier`)
  })
  const message = checkText(p.message, "elicitation message", l.maxTextLength, false)!
  checkText(p.serverName, "elicitation server name", l.maxLabelLength, false)
  // A yes/no (no fields, e.g. the MCP tool-call approval) may mention keys or tokens in its message:
  // it asks for consent, not for the secret. A form with fields may not.
  if (names.length > 0 && asksForSecretProse(message)) refuse("form elicitation message asks for a secret")
  for (const n of names) checkField(n, props[n], l)
}

// ---------------------------------------------------------------------------------------------
// URL elicitations

const checkUrl = (p: ServerRequests.ElicitationParams, l: Required<Limits>): void => {
  checkText(p.message, "elicitation message", l.maxTextLength, false)
  checkText(p.serverName, "elicitation server name", l.maxLabelLength, false)
  const raw = p.url
  if (raw === undefined) refuse("url elicitation has no url")
  const url = raw as string
  if (url.length > l.maxUrlLength) refuse(`url elicitation: the url is longer than ${l.maxUrlLength} characters`)
  if (/[\s\p{Cc}\p{Cf}]/u.test(url)) refuse("url elicitation: the url contains spaces or control characters")
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return refuse("url elicitation: the url does not parse")
  }
  if (parsed.protocol !== "https:") refuse("url elicitation: the url is not https")
  if (parsed.username !== "" || parsed.password !== "" || /^https:\/\/[^/]*@/i.test(url))
    refuse("url elicitation: the url carries a user name or password")
  if (parsed.search !== "" || url.includes("?")) refuse("url elicitation: the url has a query string")
  if (parsed.hash !== "" || url.includes("#")) refuse("url elicitation: the url has a fragment")
  if (parsed.hostname === "") refuse("url elicitation: the url has no host")
}

// ---------------------------------------------------------------------------------------------

const checkElicitation = (p: ServerRequests.ElicitationParams, l: Required<Limits>): void => {
  const kind = p._meta?.["codex_approval_kind"]
  if (kind !== undefined && kind !== null && kind !== "mcp_tool_call")
    refuse("elicitation has an unknown approval kind")
  if (p.mode === "url") return checkUrl(p, l)
  if (p.mode === "form") return checkForm(p, l)
  refuse("elicitation has an unsupported mode")
}

/** May this request be shown to a person? */
export const check = (request: ServerRequests.DecodedRequest, limits?: Limits): Verdict => {
  if (request._tag === "Unknown") return unsafe("unknown method")
  if (request._tag === "Malformed") return unsafe("params do not decode")
  try {
    switch (request.method) {
      case "mcpServer/elicitation/request":
        checkElicitation(request.params, limitsOf(limits))
        return Safe
      case "item/tool/requestUserInput":
        checkUserInput(request.params, limitsOf(limits))
        return Safe
      default:
        return Safe
    }
  } catch (error) {
    return unsafe(error instanceof Refused ? error.reason : "the request could not be read")
  }
}

/** The limits in force (only the methods the filter reads need them). */
const limitsOf = (limits: Limits | undefined): Required<Limits> => ({ ...defaultLimits, ...definedOnly(limits) })

const definedOnly = (limits: Limits | undefined): Partial<Required<Limits>> =>
  limits === undefined
    ? {}
    : Object.fromEntries(
        Object.entries(limits).filter(([, v]) => typeof v === "number" && Number.isFinite(v) && v >= 0)
      )
