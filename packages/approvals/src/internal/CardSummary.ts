/**
 * What a person needs to decide a card, and one line for boards and audit logs. Everything that
 * leaves here is masked (`Masking`, `MaskedCopy`: what `SecretMask` exposes) and bounded (long texts end with "…"). Nothing here throws: a
 * request that cannot be summarised becomes `{ kind: "other" }` with a title saying so.
 *
 * The work is bounded too, whatever the request's size: a text is scanned over what can be shown
 * (`maskShown`), lists are read up to what is shown (and counted), an object's keys
 * only when it has few enough (`Json.keysWithin`: in V8 reading one key of an object reads them
 * all), tool arguments are copied within the masked copy's value, character and key budgets, diffs share one budget
 * (`Bounds.diffTotal`), a URL is parsed over its first `Bounds.urlParse` characters.
 */
import { Json, type ServerRequests } from "@warden/protocol"
import type { CardContext, CardSummary, FileChange, FormField } from "../Card.js"
import { askedPathCount, MaxPaths } from "./RuleEvaluation.js"
import { maskRecord, maskValue } from "./MaskedCopy.js"
import { Elided, Mask, maskArgv, maskShown, truncate } from "./Masking.js"
import { join } from "./ShellLexer.js"
import { unwrap } from "./ShellWrapper.js"
import { omittedCount, omittedEntry, OmittedChanges } from "./FileChanges.js"
import { permissionsAsked } from "./PermissionsAsked.js"

export interface Summarized {
  readonly summary: CardSummary
  readonly title: string
}

/** Length bounds of what a summary carries. */
export const Bounds = {
  title: 160,
  text: 2_000,
  command: 4_000,
  path: 1_024,
  diff: 20_000,
  /** Characters of diff in one summary, all changes together; later diffs are cut, then left out. */
  diffTotal: 200_000,
  changes: 200,
  fields: 64,
  choices: 64,
  questions: 32,
  /** A longer URL is parsed (for display) over this many characters only. */
  urlParse: 16_384
} as const

// ---------------------------------------------------------------------------------------------
// Helpers

const isRecord = Json.isRecord

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** Masked, bounded text (scanned over what can be shown). */
const text = (value: string, max: number = Bounds.text): string => maskShown(value, max)
const optText = (value: string | null | undefined, max: number = Bounds.text): string | undefined =>
  value === null || value === undefined ? undefined : text(value, max)

/** One line: control characters and line breaks become spaces, runs of spaces collapse. */
const oneLine = (value: string): string =>
  isOneLine(value)
    ? value
    : value
        .replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]+/gu, " ")
        .replace(/\s+/g, " ")
        .trim()

/**
 * Whether `oneLine` would leave `value` as it is: printable ASCII only, no space at either end,
 * no two spaces in a row (most titles; a scan of its characters instead of two Unicode regexes).
 */
const isOneLine = (value: string): boolean => {
  const last = value.length - 1
  for (let i = 0; i <= last; i++) {
    const code = value.charCodeAt(i)
    if (code === 32) {
      if (i === 0 || i === last || value.charCodeAt(i + 1) === 32) return false
    } else if (code < 32 || code > 126) return false
  }
  return true
}

/** A title from text that is already masked: one line, bounded. */
const maskedLine = (masked: string, max: number = Bounds.title): string =>
  truncate(oneLine(masked.length > 4 * Bounds.title ? masked.slice(0, 4 * Bounds.title) : masked), max)

/** A title: masked, one line, bounded. */
const line = (value: string, max: number = Bounds.title): string => maskedLine(maskShown(value, 4 * Bounds.title), max)

/** A short rendering of a value for titles: strings bare, the rest as compact JSON. */
const brief = (value: unknown, max = 40): string => {
  let shown: string
  if (typeof value === "string") shown = value
  else {
    try {
      shown = JSON.stringify(value) ?? String(value)
    } catch {
      shown = Mask
    }
  }
  return truncate(oneLine(shown), max)
}

/** `k=v, k2=v2` from an already masked record, bounded. */
const callArgs = (inputs: unknown): string => {
  if (!isRecord(inputs)) return inputs === undefined ? "" : brief(inputs)
  return truncate(
    Object.entries(inputs)
      .map(([k, v]) => `${truncate(k, 30)}=${brief(v)}`)
      .join(", "),
    100
  )
}

const listed = (items: ReadonlyArray<string>, shown = 3): string =>
  items.length <= shown ? items.join(", ") : `${items.slice(0, shown).join(", ")} +${items.length - shown} more`

// ---------------------------------------------------------------------------------------------
// File changes

/**
 * Legacy v1 `applyPatchApproval` carries its changes as `{[path]: {add|delete|update: ...}}`: the
 * first `Bounds.changes` of them (for display; rules read the request's paths themselves).
 */
const legacyChanges = (fileChanges: unknown): ReadonlyArray<FileChange> => {
  if (!isRecord(fileChanges)) return []
  const out: Array<FileChange> = []
  // as many as rules read (MaxPaths); a larger record is not enumerated (its size is known)
  const read = Json.keysWithin(fileChanges, MaxPaths)
  if (read.keys === undefined) return [omittedEntry(read.count)]
  const keys = read.keys
  for (let i = 0; i < keys.length; i++) {
    if (out.length >= Bounds.changes) {
      out.push(omittedEntry(keys.length - i))
      break
    }
    const path = keys[i]!
    const change = fileChanges[path]
    if (!isRecord(change)) {
      out.push({ path, kind: "unknown" })
      continue
    }
    const kinds = Json.keysWithin(change, 16).keys
    const kind = kinds !== undefined && kinds.length > 0 ? kinds[0]! : "unknown"
    const body = kinds !== undefined && kinds.length > 0 ? change[kind] : undefined
    const diff = isRecord(body) ? (str(body["unified_diff"]) ?? str(body["content"])) : undefined
    const movePath = isRecord(body) ? str(body["move_path"]) : undefined
    out.push({ path, kind: movePath ? "move-from" : kind, ...(diff !== undefined ? { diff } : {}) })
    if (movePath) out.push({ path: movePath, kind: "move-to" })
  }
  return out
}

/**
 * The changes as a card shows them: the first `Bounds.changes`, masked and bounded, the diffs
 * within `Bounds.diffTotal` together; then, when some were left out, one entry of kind
 * `OmittedChanges` saying how many.
 */
const shownChanges = (changes: ReadonlyArray<FileChange>): ReadonlyArray<FileChange> => {
  const out: Array<FileChange> = []
  let diffLeft: number = Bounds.diffTotal
  let omitted = 0
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i]!
    if (c.kind === OmittedChanges) {
      // the list was cut already: its last entry says by how many
      omitted += omittedCount(c)
      continue
    }
    if (out.length >= Bounds.changes) {
      omitted += 1
      continue
    }
    let diff: string | undefined
    if (c.diff !== undefined) {
      diff = diffLeft > 0 || c.diff.length === 0 ? text(c.diff, Math.min(Bounds.diff, diffLeft)) : Elided
      diffLeft -= diff.length
    }
    out.push({ path: text(c.path, Bounds.path), kind: text(c.kind, 40), ...(diff !== undefined ? { diff } : {}) })
  }
  if (omitted > 0) out.push(omittedEntry(omitted))
  return out
}

const fileChangeTitle = (changes: ReadonlyArray<FileChange>, grantRoot: string | undefined): string => {
  const listedChanges = changes.filter((c) => c.kind !== OmittedChanges)
  if (listedChanges.length === 0) {
    return grantRoot ? `write under ${grantRoot} (changes not known)` : "write files (changes not known)"
  }
  const paths = [...new Set(listedChanges.map((c) => c.path))]
  const more = listedChanges.length < changes.length ? "+" : ""
  return `write ${paths.length}${more} file${paths.length === 1 && more === "" ? "" : "s"}: ${listed(paths)}`
}

// ---------------------------------------------------------------------------------------------
// Elicitations

/** The first `n` items of a list (never the whole list copied). */
const first = (list: ReadonlyArray<unknown>, n: number): ReadonlyArray<unknown> =>
  list.length > n ? list.slice(0, n) : list

/** A form with more fields than this shows none (the safety filter refuses it). */
const FieldsRead = 10_000

const schemaFields = (schema: unknown): ReadonlyArray<FormField> => {
  if (!isRecord(schema) || !isRecord(schema["properties"])) return []
  const properties = schema["properties"]
  // Fields are read up to FieldsRead, shown up to Bounds.fields. A larger form is not enumerated (its
  // size is known) and shows no field: the safety filter refuses it (more than `maxQuestions`).
  const names = Json.keysWithin(properties, FieldsRead).keys?.slice(0, Bounds.fields) ?? []
  // One pass over `required`, however long, for the shown fields only (none shown: not read; all found: done).
  const shown = new Set(names)
  const required = new Set<string>()
  const list = schema["required"]
  if (names.length > 0 && Array.isArray(list)) {
    for (const r of list) {
      if (typeof r === "string" && shown.has(r)) required.add(r)
      if (required.size === shown.size) break
    }
  }
  return names.map((name): FormField => {
    const field = properties[name]
    const f = isRecord(field) ? field : {}
    const items = isRecord(f["items"]) ? f["items"] : {}
    const constOf = (o: unknown) => (isRecord(o) ? o["const"] : undefined)
    const choiceSource = Array.isArray(f["enum"])
      ? first(f["enum"], Bounds.choices)
      : Array.isArray(f["oneOf"])
        ? first(f["oneOf"], Bounds.choices).map(constOf)
        : Array.isArray(items["enum"])
          ? first(items["enum"], Bounds.choices)
          : Array.isArray(items["anyOf"])
            ? first(items["anyOf"], Bounds.choices).map(constOf)
            : undefined
    const choices = choiceSource?.map((c) => text(typeof c === "string" ? c : brief(c, 200), 200))
    const title = str(f["title"])
    const type = str(f["type"])
    return {
      name: text(name, 200),
      title: title !== undefined ? text(title, 200) : undefined,
      type: type !== undefined ? text(type, 40) : undefined,
      choices,
      required: required.has(name)
    }
  })
}

/**
 * A URL for display: user, password, query values and fragment masked; a URL without a host is
 * masked as text. A URL longer than `Bounds.urlParse` is shown from its first `Bounds.urlParse`
 * characters (and ends with "…"); query keys are masked until the line is full.
 */
const shownUrl = (url: string): string => {
  const cut = url.length > Bounds.urlParse
  try {
    const u = new URL(cut ? url.slice(0, Bounds.urlParse) : url)
    if (u.host === "") return text(url, Bounds.path)
    const mask = Mask
    const auth = u.username || u.password ? `${u.username ? mask : ""}${u.password ? `:${mask}` : ""}@` : ""
    let shown = `${u.protocol}//${auth}${u.host}${maskShown(u.pathname, Bounds.path)}`
    const seen = new Set<string>()
    for (const k of u.searchParams.keys()) {
      if (shown.length > Bounds.path) break
      if (seen.has(k)) continue
      seen.add(k)
      shown += `${seen.size === 1 ? "?" : "&"}${maskShown(k, Bounds.path)}=${mask}`
    }
    if (u.hash) shown += `#${mask}`
    return truncate(cut ? `${shown}…` : shown, Bounds.path)
  } catch {
    return text(url, Bounds.path)
  }
}

const isMcpToolCall = (p: ServerRequests.ElicitationParams): boolean =>
  p._meta?.["codex_approval_kind"] === "mcp_tool_call"

const toolInputs = (meta: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> => {
  const params = meta["tool_params"]
  if (params !== undefined && params !== null) return maskRecord(params)
  const display = meta["tool_params_display"]
  if (!Array.isArray(display)) return {}
  const fromDisplay: Record<string, unknown> = {}
  for (const entry of first(display, 100)) {
    if (isRecord(entry) && typeof entry["name"] === "string") {
      Object.defineProperty(fromDisplay, entry["name"], {
        value: entry["value"],
        enumerable: true,
        writable: true,
        configurable: true
      })
    }
  }
  return maskRecord(fromDisplay)
}

// ---------------------------------------------------------------------------------------------
// Summaries per method

/** How much of a command line is read for its summary (a card shows `Bounds.command` of it). */
const CommandRead = 4 * Bounds.command

const command = (raw: string, cwd: string | undefined, reason: string | null | undefined): Summarized => {
  const unwrapped = unwrap(raw.length > CommandRead ? raw.slice(0, CommandRead) : raw)
  const shownCwd = optText(cwd, Bounds.path)
  // Masked once, on its own, for the summary and the title. Masking "run: <command>" instead read
  // "run: password=hunter2" as the assignment run=... and showed the password (and cost a second scan).
  const masked = maskShown(unwrapped.inner, CommandRead)
  const summary: CardSummary = {
    kind: "command",
    command: truncate(masked, Bounds.command),
    argv: unwrapped.argv ? maskArgv(unwrapped.argv.slice(0, 256)).map((w) => truncate(w, 500)) : undefined,
    cwd: shownCwd,
    reason: optText(reason)
  }
  const where = shownCwd !== undefined ? ` (in ${truncate(oneLine(shownCwd), 60)})` : ""
  const what = unwrapped.inner.trim().length > 0 ? masked : "(no command given)"
  return { summary, title: `${maskedLine(`run: ${what}`, Bounds.title - where.length)}${where}` }
}

const fileChange = (
  changes: ReadonlyArray<FileChange>,
  reason: string | null | undefined,
  grantRoot: string | null | undefined
): Summarized => {
  const shown = shownChanges(changes)
  const root = optText(grantRoot, Bounds.path)
  return {
    summary: { kind: "fileChange", changes: shown, reason: optText(reason), grantRoot: root },
    title: line(fileChangeTitle(shown, root))
  }
}

const summarizeKnown = (request: ServerRequests.ServerRequest, context: CardContext): Summarized => {
  switch (request.method) {
    case "item/commandExecution/requestApproval": {
      const p = request.params
      return command(p.command ?? "", p.cwd ?? undefined, p.reason)
    }
    case "execCommandApproval": {
      const p = request.params
      return command(join(p.command, CommandRead), p.cwd, p.reason)
    }
    case "item/fileChange/requestApproval": {
      const p = request.params
      return fileChange(context.fileChanges ?? [], p.reason, p.grantRoot)
    }
    case "applyPatchApproval": {
      const p = request.params
      const changes = legacyChanges(p.fileChanges)
      return fileChange(changes.length > 0 ? changes : (context.fileChanges ?? []), p.reason, p.grantRoot)
    }
    case "item/permissions/requestApproval": {
      const p = request.params
      const count = askedPathCount(p.permissions)
      const asked = count > MaxPaths ? [`${count} paths (too many to list)`] : permissionsAsked(p.permissions)
      return {
        summary: {
          kind: "permissions",
          permissions: maskValue("permissions", p.permissions),
          cwd: text(p.cwd, Bounds.path),
          reason: optText(p.reason)
        },
        title: line(
          asked === undefined
            ? "grant permissions (not readable)"
            : asked.length === 0
              ? "grant nothing"
              : `grant ${listed(asked, 4)}`
        )
      }
    }
    case "mcpServer/elicitation/request": {
      const p = request.params
      const server = text(p.serverName, 200)
      const message = text(p.message)
      if (isMcpToolCall(p)) {
        const meta = p._meta ?? {}
        const toolName = str(meta["tool_name"])
        const tool = toolName !== undefined ? text(toolName, 200) : undefined
        const inputs = toolInputs(meta)
        return {
          summary: { kind: "mcpToolCall", server, tool, inputs, message },
          title: line(`mcp ${server}.${tool ?? "?"}(${callArgs(inputs)})`)
        }
      }
      const url = p.mode === "url" && p.url !== undefined ? shownUrl(p.url) : undefined
      return {
        summary: {
          kind: "elicitation",
          server,
          message,
          mode: text(p.mode, 40),
          fields: schemaFields(p.requestedSchema),
          url
        },
        title: line(url !== undefined ? `open ${url} for ${server}` : `form from ${server}: ${p.message}`)
      }
    }
    case "item/tool/requestUserInput": {
      const p = request.params
      const questions = p.questions.slice(0, Bounds.questions).map(
        (q): ServerRequests.UserInputQuestion => ({
          id: text(q.id, 200),
          header: text(q.header, 200),
          question: text(q.question),
          ...(q.isOther !== undefined ? { isOther: q.isOther } : {}),
          ...(q.isSecret !== undefined ? { isSecret: q.isSecret } : {}),
          ...(q.options !== undefined
            ? {
                options:
                  q.options === null
                    ? null
                    : q.options
                        .slice(0, Bounds.choices)
                        .map((o) => ({ label: text(o.label, 200), description: text(o.description, 500) }))
              }
            : {})
        })
      )
      const first = p.questions[0]
      const more = p.questions.length > 1 ? ` (+${p.questions.length - 1} more)` : ""
      return {
        summary: { kind: "userInput", questions },
        title: first ? `${line(`question: ${first.question}`, Bounds.title - more.length)}${more}` : "question: (none)"
      }
    }
    case "item/tool/call": {
      const p = request.params
      const args = maskValue("arguments", p.arguments)
      const tool = text(p.tool, 200)
      const namespace = optText(p.namespace, 200)
      return {
        summary: { kind: "dynamicTool", tool, namespace, arguments: args },
        title: line(`tool ${namespace !== undefined ? `${namespace}.` : ""}${tool}(${callArgs(args)})`)
      }
    }
    case "account/chatgptAuthTokens/refresh":
    case "attestation/generate":
      return { summary: { kind: "other", method: request.method }, title: request.method }
  }
}

/** The card's summary and title for a decoded request. */
export const summarize = (request: ServerRequests.DecodedRequest, context: CardContext): Summarized => {
  try {
    switch (request._tag) {
      case "Known":
        return summarizeKnown(request, context)
      case "Unknown": {
        const method = line(request.method, 100)
        return { summary: { kind: "other", method }, title: `unknown method ${method}` }
      }
      case "Malformed": {
        const method = line(request.method, 100)
        return { summary: { kind: "other", method }, title: `malformed ${method}` }
      }
    }
  } catch {
    const method = line(request.method, 100)
    return { summary: { kind: "other", method }, title: `${method} (could not be summarised)` }
  }
}
