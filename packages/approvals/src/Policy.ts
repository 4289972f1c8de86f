/**
 * Policy rules: data that decides yes/no approvals before anyone is asked.
 *
 * ```yaml
 * rules:
 *   - id: git-read
 *     effect: allow
 *     match: { command: { argvPrefix: [git, status] } }
 *   - id: no-rm
 *     effect: deny
 *     match: { command: { argvPrefix: [rm] } }
 *   - id: repo-writes
 *     effect: allow
 *     match: { path: { under: /work/repo }, method: item/fileChange/requestApproval }
 *   - id: probe-tools
 *     effect: allow
 *     match: { mcp: { server: probe, tool: poke } }
 * ```
 *
 * Semantics (deny is the default in every doubt):
 * - A deny rule that matches wins over every allow rule, whatever the order. Otherwise the first
 *   matching allow rule (in file order) decides; otherwise `NoMatch` (a person or handler decides).
 * - An allow matches only when the request certainly stays inside the rule; a deny matches when the
 *   request may touch what the rule names.
 * - `command.argvPrefix`: an allow matches a *simple* command (ShellCommand.unwrap: one command, no
 *   operators, no expansions) whose argv starts with the prefix, word for word. A deny matches if ANY
 *   command the line may run (every segment of a compound command, substitutions, here-documents,
 *   nested `bash -c`/`eval` scripts, the command after runners such as `sudo`/`env`/`xargs`) starts
 *   with the prefix; its first word also matches by basename (`/bin/rm` for `rm`). A deny rule is a
 *   guard rail, not a sandbox: a program can still run another (`python -c`, `find -exec`). A command
 *   line longer than `MaxCommandLength` is not read: no allow matches it and every command deny does.
 * - `path.under` (absolute): on a file-change approval an allow needs at least one change, every
 *   changed path (and the `grantRoot`, if any) absolute, free of `..` segments and under the root; a
 *   deny matches if any of them resolves under the root or cannot be placed (relative paths, no
 *   known changes). On a permissions approval an allow needs every asked path (read, write,
 *   entries, globs) under the root and nothing else asked (no network, no special paths); a deny
 *   matches if any asked path overlaps the root (under it, or above it such as `/`) or is special.
 *   Paths are compared lexically: symbolic links are not followed.
 * - `mcp.server` (and optional `tool`): an allow matches only the MCP tool-call approval
 *   (`_meta.codex_approval_kind: "mcp_tool_call"`, a form with no fields) of that server (and tool);
 *   a deny matches any elicitation of that server (or, with `tool`, that tool's approval).
 * - `method` scopes a match to one server-request method (checked against the match kind on load).
 * - Rules decide yes/no approvals only (command, file change, permissions, MCP tool call). An allow
 *   never applies to a form elicitation with fields, a URL elicitation, a user-input question or a
 *   dynamic tool call: answering those needs content a rule does not have, so they go to a person.
 *   Unknown and malformed requests never match (they are refused before rules are consulted).
 */
import { Data, Effect, Either, ParseResult, Schema } from "effect"
import { readFile, stat } from "node:fs/promises"
import { extname } from "node:path"
import * as posix from "node:path/posix"
import { PermissionsGrant, ServerRequests } from "@warden/protocol"
import * as YAML from "yaml"
import type { CardContext } from "./Card.js"
import * as ShellCommand from "./ShellCommand.js"

// ---------------------------------------------------------------------------------------------
// Schema

const shownActual = (actual: unknown): string => {
  try {
    return (JSON.stringify(actual) ?? String(actual)).slice(0, 80)
  } catch {
    return "(unprintable)"
  }
}

const Method = Schema.Literal(...ServerRequests.ServerRequestMethods).annotations({
  message: (issue) => ({ message: `${shownActual(issue.actual)} is not a server-request method; use one of: ${ServerRequests.ServerRequestMethods.join(", ")}`, override: true })
})

const AbsolutePath = Schema.String.pipe(
  Schema.filter((s) => (s.startsWith("/") && !s.includes("\u0000") ? undefined : "must be an absolute path (starting with /)"))
)

export const CommandMatcher = Schema.Struct({
  argvPrefix: Schema.NonEmptyArray(Schema.NonEmptyString)
})
export const PathMatcher = Schema.Struct({ under: AbsolutePath })
export const McpMatcher = Schema.Struct({
  server: Schema.NonEmptyString,
  tool: Schema.optionalWith(Schema.NonEmptyString, { exact: true })
})

const kindsOf = (m: { readonly command?: unknown; readonly path?: unknown; readonly mcp?: unknown }) =>
  (m.command !== undefined ? 1 : 0) + (m.path !== undefined ? 1 : 0) + (m.mcp !== undefined ? 1 : 0)

/** Which methods a match kind can apply to. */
const MethodsFor = {
  command: ["item/commandExecution/requestApproval", "execCommandApproval"],
  path: ["item/fileChange/requestApproval", "applyPatchApproval", "item/permissions/requestApproval"],
  mcp: ["mcpServer/elicitation/request"]
} as const satisfies Record<string, ReadonlyArray<ServerRequests.ServerRequestMethod>>

export const Match = Schema.Struct({
  command: Schema.optionalWith(CommandMatcher, { exact: true }),
  path: Schema.optionalWith(PathMatcher, { exact: true }),
  mcp: Schema.optionalWith(McpMatcher, { exact: true }),
  method: Schema.optionalWith(Method, { exact: true })
}).pipe(
  Schema.filter((m) => {
    if (kindsOf(m) !== 1) return "a match needs exactly one of command, path or mcp"
    if (m.method === undefined) return undefined
    const kind = m.command !== undefined ? "command" : m.path !== undefined ? "path" : "mcp"
    return (MethodsFor[kind] as ReadonlyArray<string>).includes(m.method)
      ? undefined
      : `a ${kind} match never applies to method ${m.method} (it applies to ${MethodsFor[kind].join(", ")})`
  })
)
export type Match = typeof Match.Type

export const Rule = Schema.Struct({
  id: Schema.NonEmptyString,
  effect: Schema.Literal("allow", "deny").annotations({
    message: (issue) => ({ message: `must be "allow" or "deny", not ${shownActual(issue.actual)}`, override: true })
  }),
  match: Match,
  description: Schema.optionalWith(Schema.String, { exact: true })
})
export type Rule = typeof Rule.Type

export const Rules = Schema.Struct({
  rules: Schema.Array(Rule)
}).pipe(
  Schema.filter((r) => {
    const seen = new Set<string>()
    const duplicates = new Set<string>()
    for (const rule of r.rules) {
      if (seen.has(rule.id)) duplicates.add(rule.id)
      seen.add(rule.id)
    }
    return duplicates.size === 0 ? undefined : `rule ids must be unique; repeated: ${[...duplicates].join(", ")}`
  })
)
export type Rules = typeof Rules.Type

/** Decode rules from already parsed data (strict: unknown keys are errors). */
export const decodeRules = (input: unknown): Either.Either<Rules, string> =>
  Either.mapLeft(
    Schema.decodeUnknownEither(Rules, { onExcessProperty: "error", errors: "all" })(input),
    formatIssues
  )

const formatIssues = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const shown = issues.slice(0, 6).map((i) => `${i.path.length > 0 ? `at ${i.path.map(String).join(".")}: ` : ""}${i.message}`)
  return [...shown, ...(issues.length > shown.length ? [`(and ${issues.length - shown.length} more)`] : [])].join("; ")
}

// ---------------------------------------------------------------------------------------------
// Evaluation

export type Verdict =
  | { readonly _tag: "Allow"; readonly ruleId: string }
  | { readonly _tag: "Deny"; readonly ruleId: string }
  | { readonly _tag: "NoMatch" }

const NoMatch: Verdict = { _tag: "NoMatch" }

type Effect_ = "allow" | "deny"

const startsWith = (words: ReadonlyArray<string>, prefix: ReadonlyArray<string>, byBasename: boolean): boolean => {
  if (words.length < prefix.length) return false
  return prefix.every((p, i) => {
    const w = words[i]!
    if (w === p) return true
    return byBasename && i === 0 && !p.includes("/") && w.slice(w.lastIndexOf("/") + 1) === p
  })
}

const commandLine = (request: ServerRequests.ServerRequest): string | undefined => {
  switch (request.method) {
    case "item/commandExecution/requestApproval":
      return request.params.command ?? undefined
    case "execCommandApproval":
      return ShellCommand.join(request.params.command)
    default:
      return undefined
  }
}

/** Command lines longer than this are not read: no allow matches them, every command deny does. */
export const MaxCommandLength = 65_536

const matchCommand = (prefix: ReadonlyArray<string>, line: string, effect: Effect_): boolean => {
  if (line.length > MaxCommandLength) return effect === "deny"
  if (effect === "allow") {
    const u = ShellCommand.unwrap(line)
    return u.simple && u.argv !== undefined && startsWith(u.argv, prefix, false)
  }
  return ShellCommand.segments(line).some((segment) =>
    ShellCommand.commandStarts(segment).some((start) => startsWith(start, prefix, true))
  )
}

const normalRoot = (root: string): string => posix.resolve(root)

/** Lexically under `root` (or equal to it). */
const isUnder = (path: string, root: string): boolean => {
  const r = normalRoot(root)
  return path === r || path.startsWith(r === "/" ? "/" : `${r}/`)
}

/** Certainly under `root`: absolute, no `..` segment, no NUL, and under after normalising. */
const certainlyUnder = (path: string, root: string): boolean =>
  path.startsWith("/") && !path.includes("\u0000") && !path.split("/").includes("..") && isUnder(posix.resolve(path), root)

/** May be under `root`: relative (cannot be placed) or under it, lexically or after resolving `..`. */
const mayBeUnder = (path: string, root: string): boolean =>
  !path.startsWith("/") || isUnder(posix.resolve(path), root) || isUnder(posix.normalize(path), root) || isUnder(path, root)

/** May overlap `root`: under it, or a parent of it (a grant of `/` covers everything). */
const mayOverlap = (path: string, root: string): boolean =>
  mayBeUnder(path, root) || isUnder(normalRoot(root), posix.resolve(path))

/** A glob's fixed directory prefix (`/repo/src/**` → `/repo/src`). */
const globBase = (pattern: string): string => {
  const cut = pattern.search(/[*?[{]/)
  if (cut < 0) return pattern
  const head = pattern.slice(0, cut)
  return head.slice(0, head.lastIndexOf("/") + 1) || "."
}

const fileChangePaths = (request: ServerRequests.ServerRequest, context: CardContext): { paths: ReadonlyArray<string>; grantRoot: string | undefined } => {
  if (request.method === "item/fileChange/requestApproval") {
    return { paths: (context.fileChanges ?? []).map((c) => c.path), grantRoot: request.params.grantRoot ?? undefined }
  }
  if (request.method === "applyPatchApproval") {
    const fc = request.params.fileChanges
    const legacy = typeof fc === "object" && fc !== null && !Array.isArray(fc) ? Object.keys(fc) : []
    const moved = typeof fc === "object" && fc !== null && !Array.isArray(fc)
      ? Object.values(fc).flatMap((c) => {
        const body = typeof c === "object" && c !== null ? Object.values(c)[0] : undefined
        const move = typeof body === "object" && body !== null ? (body as Record<string, unknown>)["move_path"] : undefined
        return typeof move === "string" ? [move] : []
      })
      : []
    const paths = legacy.length > 0 ? [...legacy, ...moved] : (context.fileChanges ?? []).map((c) => c.path)
    return { paths, grantRoot: request.params.grantRoot ?? undefined }
  }
  return { paths: [], grantRoot: undefined }
}

const matchFileChange = (root: string, request: ServerRequests.ServerRequest, context: CardContext, effect: Effect_): boolean => {
  const { paths, grantRoot } = fileChangePaths(request, context)
  const all = grantRoot !== undefined ? [...paths, grantRoot] : paths
  if (effect === "allow") return paths.length > 0 && all.every((p) => certainlyUnder(p, root))
  // Unknown changes may be anywhere.
  if (paths.length === 0) return true
  return all.some((p) => mayOverlap(p, root))
}

const matchPermissions = (root: string, permissions: unknown, effect: Effect_): boolean => {
  const read = PermissionsGrant.readRequested(permissions)
  if (Either.isLeft(read)) return effect === "deny"
  const asked = read.right
  const fs = asked.fileSystem
  const plain = [...(fs?.read ?? []), ...(fs?.write ?? [])]
  const entries = fs?.entries ?? []
  const network = asked.network?.enabled === true
  if (effect === "allow") {
    if (network) return false
    if (plain.length + entries.length === 0) return false
    return plain.every((p) => certainlyUnder(p, root)) && entries.every((e) => {
      switch (e.path.type) {
        case "path":
          return certainlyUnder(e.path.path, root)
        case "glob_pattern":
          return !e.path.pattern.split("/").includes("..") && certainlyUnder(globBase(e.path.pattern), root)
        case "special":
          return false
      }
    })
  }
  return plain.some((p) => mayOverlap(p, root)) || entries.some((e) => {
    switch (e.path.type) {
      case "path":
        return mayOverlap(e.path.path, root)
      case "glob_pattern":
        return mayOverlap(globBase(e.path.pattern), root)
      case "special":
        return e.access !== "deny"
    }
  })
}

const isToolCallApproval = (p: ServerRequests.ElicitationParams): boolean => {
  if (p._meta?.["codex_approval_kind"] !== "mcp_tool_call" || p.mode !== "form") return false
  const schema = p.requestedSchema
  if (typeof schema !== "object" || schema === null) return false
  const props = (schema as Record<string, unknown>)["properties"]
  return props === undefined || (typeof props === "object" && props !== null && Object.keys(props).length === 0)
}

const matchMcp = (matcher: typeof McpMatcher.Type, p: ServerRequests.ElicitationParams, effect: Effect_): boolean => {
  if (p.serverName !== matcher.server) return false
  const toolCall = p._meta?.["codex_approval_kind"] === "mcp_tool_call"
  const toolMatches = matcher.tool === undefined || (toolCall && p._meta?.["tool_name"] === matcher.tool)
  if (effect === "allow") return isToolCallApproval(p) && toolMatches
  return toolMatches
}

const matches = (rule: Rule, request: ServerRequests.ServerRequest, context: CardContext): boolean => {
  const m = rule.match
  if (m.method !== undefined && m.method !== request.method) return false
  if (m.command !== undefined) {
    const line = commandLine(request)
    return line !== undefined && matchCommand(m.command.argvPrefix, line, rule.effect)
  }
  if (m.path !== undefined) {
    switch (request.method) {
      case "item/fileChange/requestApproval":
      case "applyPatchApproval":
        return matchFileChange(m.path.under, request, context, rule.effect)
      case "item/permissions/requestApproval":
        return matchPermissions(m.path.under, request.params.permissions, rule.effect)
      default:
        return false
    }
  }
  if (m.mcp !== undefined) {
    return request.method === "mcpServer/elicitation/request" && matchMcp(m.mcp, request.params, rule.effect)
  }
  return false
}

/** Can a rule's Allow answer this request? Only yes/no approvals (see the module comment). */
export const allowApplies = (request: ServerRequests.DecodedRequest): boolean => {
  if (request._tag !== "Known") return false
  switch (request.method) {
    case "item/commandExecution/requestApproval":
    case "execCommandApproval":
    case "item/fileChange/requestApproval":
    case "applyPatchApproval":
    case "item/permissions/requestApproval":
      return true
    case "mcpServer/elicitation/request":
      return isToolCallApproval(request.params)
    default:
      return false
  }
}

/** Deny rules first (any order), then the first allow rule that matches and applies. */
export const evaluate = (rules: Rules, request: ServerRequests.DecodedRequest, context: CardContext): Verdict => {
  if (request._tag !== "Known") return NoMatch
  const safely = (rule: Rule): boolean => {
    try {
      return matches(rule, request, context)
    } catch {
      // A rule that cannot be evaluated: a deny is taken to match, an allow is not.
      return rule.effect === "deny"
    }
  }
  const deny = rules.rules.find((r) => r.effect === "deny" && safely(r))
  if (deny) return { _tag: "Deny", ruleId: deny.id }
  if (!allowApplies(request)) return NoMatch
  const allow = rules.rules.find((r) => r.effect === "allow" && safely(r))
  return allow ? { _tag: "Allow", ruleId: allow.id } : NoMatch
}

// ---------------------------------------------------------------------------------------------
// Loading

export class RulesFileError extends Data.TaggedError("RulesFileError")<{
  readonly path: string
  readonly reason: "Read" | "Extension" | "Parse" | "Schema"
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `rules file ${this.path}: ${this.detail}`
  }
}

/** Rules files larger than this are refused (a policy is small; a huge file is a mistake). */
export const MaxRulesFileBytes = 1_048_576

const parseText = (path: string, text: string, format: "json" | "yaml"): Either.Either<unknown, RulesFileError> => {
  const fail = (detail: string, cause?: unknown) => Either.left(new RulesFileError({ path, reason: "Parse", detail, cause }))
  if (format === "json") {
    try {
      JSON.parse(text)
    } catch (cause) {
      return fail(`is not valid JSON: ${cause instanceof Error ? cause.message : String(cause)}`, cause)
    }
  }
  // JSON is YAML 1.2; the YAML parser also reports duplicate keys, which JSON.parse silently merges.
  const doc = YAML.parseDocument(text, { uniqueKeys: true, prettyErrors: true, schema: "core", merge: false })
  if (doc.errors.length > 0) {
    const first = doc.errors[0]!
    const more = doc.errors.length > 1 ? ` (and ${doc.errors.length - 1} more)` : ""
    return fail(`is not valid ${format === "json" ? "JSON" : "YAML"}: ${first.message.split("\n")[0]!.replace(/:\s*$/, "")}${more}`, first)
  }
  try {
    return Either.right(doc.toJS({ maxAliasCount: 100 }))
  } catch (cause) {
    return fail(`could not be read as data: ${cause instanceof Error ? cause.message : String(cause)}`, cause)
  }
}

/** Parse and decode rules text; `format` is what the file extension said. */
export const parse = (path: string, text: string, format: "json" | "yaml"): Either.Either<Rules, RulesFileError> =>
  Either.flatMap(parseText(path, text, format), (data) => {
    if (data === null || data === undefined) {
      return Either.left(new RulesFileError({ path, reason: "Schema", detail: "is empty; expected an object with a rules list" }))
    }
    return Either.mapLeft(decodeRules(data), (detail) => new RulesFileError({ path, reason: "Schema", detail: `is not a valid rules file: ${detail}` }))
  })

/** Read a rules file: `.json`, or `.yaml`/`.yml`, decoded strictly. */
export const load = (path: string): Effect.Effect<Rules, RulesFileError> =>
  Effect.gen(function*() {
    const ext = extname(path).toLowerCase()
    const format = ext === ".json" ? "json" : ext === ".yaml" || ext === ".yml" ? "yaml" : undefined
    if (format === undefined) {
      return yield* new RulesFileError({ path, reason: "Extension", detail: `has extension "${ext}"; use .json, .yaml or .yml` })
    }
    const readError = (cause: unknown) =>
      new RulesFileError({ path, reason: "Read", detail: `could not be read: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
    const info = yield* Effect.tryPromise({ try: () => stat(path), catch: readError })
    if (!info.isFile()) return yield* new RulesFileError({ path, reason: "Read", detail: "is not a regular file" })
    if (info.size > MaxRulesFileBytes) {
      return yield* new RulesFileError({ path, reason: "Read", detail: `is ${info.size} bytes; the limit is ${MaxRulesFileBytes}` })
    }
    const text = yield* Effect.tryPromise({ try: () => readFile(path, "utf8"), catch: readError })
    return yield* parse(path, text, format)
  })
