/**
 * Policy rules, data that decides yes/no approvals before anyone is asked.
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
 *   nested shell scripts with any options (`bash -o errexit -c`, `env -S`, `su -c`, `flock -c`),
 *   `eval`, the command after runners such as `sudo`/`env`/`xargs` whatever their options, after
 *   `find -exec`: see `ShellCommand.commands`) starts with the prefix; its first word also matches by
 *   basename (`/bin/rm` for `rm`). A deny rule is a guard rail, not a sandbox: a program can still
 *   run another (`python -c`, `perl -e`, `git -c core.sshCommand=...`), a script file or text piped
 *   into a shell (`curl ... | sh`) is not read. A command line longer than `MaxCommandLength` is
 *   not read: no allow matches it and every command deny does; the same for a line read only in
 *   part (nesting deeper than `ShellCommand.MaxDepth`, or more re-reading of nested scripts and
 *   options than `ShellCommand.WorkPerChar` allows).
 * - `path.under` (absolute): on a file-change approval an allow needs at least one change, every
 *   changed path (and the `grantRoot`, if any) absolute, free of `..` segments and under the root; a
 *   deny matches if any of them resolves under the root or cannot be placed (relative paths, no
 *   known changes). On a permissions approval an allow needs every asked path (read, write,
 *   entries, globs) under the root and nothing else asked (no network, no special paths); a deny
 *   matches if any asked path overlaps the root (under it, or above it such as `/`) or is special.
 *   Paths are compared lexically: symbolic links are not followed. A request with more than
 *   `MaxPaths` paths (or a change list cut by `Card.fileChangesOf`) is not read past them: no
 *   path allow matches it, every path deny does.
 * - `mcp.server` (and optional `tool`): an allow matches only the MCP tool-call approval
 *   (`_meta.codex_approval_kind: "mcp_tool_call"`, a form with no fields) of that server (and tool);
 *   a deny matches any elicitation of that server (or, with `tool`, that tool's approval).
 * - `method` scopes a match to one server-request method (checked against the match kind on load).
 * - Rules decide yes/no approvals only (command, file change, permissions, MCP tool call). An allow
 *   never applies to a form elicitation with fields, a URL elicitation, a user-input question or a
 *   dynamic tool call: answering those needs content a rule does not have, so they go to a person.
 *   Unknown and malformed requests never match (they are refused before rules are consulted).
 *
 * Evaluation is linear in the request and runs on the connection's read loop: see `evaluate`.
 */
import { Data, Effect, Either, ParseResult, Schema } from "effect"
import { readFile, stat } from "node:fs/promises"
import { extname } from "node:path"
import * as posix from "node:path/posix"
import { Json, PermissionsGrant, ServerRequests } from "@warden/protocol"
import * as YAML from "yaml"
import type { CardContext } from "./Card.js"
import { OmittedChanges } from "./internal/FileChanges.js"
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

const Method = Schema.suspend((): Schema.Schema<ServerRequests.ServerRequestMethod> =>
  Schema.Literal(...ServerRequests.ServerRequestMethods).annotations({
    message: (issue) => ({ message: `${shownActual(issue.actual)} is not a server-request method; use one of: ${ServerRequests.ServerRequestMethods.join(", ")}`, override: true })
  })
)

const AbsolutePath = Schema.String.pipe(
  Schema.filter((s) => (s.startsWith("/") && !s.includes("\u0000") ? undefined : "must be an absolute path (starting with /)"))
)

/**
 * Matches commands by their argv prefix, word for word (`["git", "status"]`).
 *
 * An allow matches only a simple command, a deny any command the line may run (see the module
 * doc). At least one non-empty word.
 */
export const CommandMatcher = Schema.Struct({
  argvPrefix: Schema.NonEmptyArray(Schema.NonEmptyString)
})
/**
 * Matches file changes and permission requests by where they write or ask.
 *
 * Paths are compared with the absolute root `under` lexically (symbolic links are not followed).
 */
export const PathMatcher = Schema.Struct({ under: AbsolutePath })
/** Matches MCP elicitations by the server that sent them and, optionally, the tool being approved. */
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

/**
 * What a rule matches, exactly one of `command`, `path` or `mcp`.
 *
 * It may be narrowed to one server-request `method` (which must be one that kind of match applies
 * to).
 */
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

/**
 * One rule, with its id, its effect (`allow` or `deny`) and what it matches.
 *
 * The `id` is named in settlements and the audit trail as `rule:<id>`; `description` is optional.
 */
export const Rule = Schema.Struct({
  id: Schema.NonEmptyString,
  effect: Schema.Literal("allow", "deny").annotations({
    message: (issue) => ({ message: `must be "allow" or "deny", not ${shownActual(issue.actual)}`, override: true })
  }),
  match: Match,
  description: Schema.optionalWith(Schema.String, { exact: true })
})
export type Rule = typeof Rule.Type

/**
 * A policy, a list of rules with unique ids, as data.
 *
 * It is the schema of a rules file, and of the `rules` setting. Decoded with {@link decodeRules},
 * {@link parse} or {@link load}; the decoded value is what `Approvals.layer({ rules })` and the
 * supervisor's `approvals.rules` take.
 *
 * @example
 * ```ts
 * import { Policy } from "@warden/approvals"
 *
 * const rules: Policy.Rules = {
 *   rules: [
 *     { id: "git-read", effect: "allow", match: { command: { argvPrefix: ["git", "status"] } } },
 *     { id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } },
 *     { id: "repo-writes", effect: "allow", match: { path: { under: "/work/repo" }, method: "item/fileChange/requestApproval" } },
 *     { id: "probe-tools", effect: "allow", match: { mcp: { server: "probe", tool: "poke" } } }
 *   ]
 * }
 * ```
 */
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

/** Decode rules from already parsed data, strictly (unknown keys are errors); `Left` holds the issues as text. */
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

/**
 * What the rules say about one request.
 *
 * `Deny` (a deny rule matched), `Allow` (no deny matched and an allow did), or `NoMatch` (a handler,
 * a person or the deadline decides).
 */
export type Verdict =
  | { readonly _tag: "Allow"; readonly ruleId: string }
  | { readonly _tag: "Deny"; readonly ruleId: string }
  | { readonly _tag: "NoMatch" }

const NoMatch: Verdict = { _tag: "NoMatch" }

/** `words` from index `at` start with `prefix`, word for word (the first also by basename when asked). */
const startsWith = (words: ReadonlyArray<string>, at: number, prefix: ReadonlyArray<string>, byBasename: boolean): boolean => {
  if (words.length - at < prefix.length) return false
  for (let i = 0; i < prefix.length; i++) {
    const w = words[at + i]!
    const p = prefix[i]!
    if (w === p) continue
    if (byBasename && i === 0 && !p.includes("/") && w.slice(w.lastIndexOf("/") + 1) === p) continue
    return false
  }
  return true
}

/** Command lines longer than this are not read (no allow matches them, every command deny does). */
export const MaxCommandLength = 65_536

/**
 * Paths a path rule reads per request (changed files and move targets, or asked permission paths
 * and entries). A request with more (or whose change list was cut, see `Card.OmittedChanges`) is
 * not read past them: no path allow matches it, every path deny does (what was not read may be
 * anywhere).
 */
export const MaxPaths = 10_000

// ---------------------------------------------------------------------------------------------
// What rules look at, read once per evaluation

/** A path as path rules compare it, worked out once per evaluation (not once per rule). */
interface PathFacts {
  readonly raw: string
  readonly absolute: boolean
  /** Absolute, no NUL, no `..` segment: a path an allow may place. */
  readonly clean: boolean
  readonly resolved: string
  readonly normalized: string
}

const pathFacts = (raw: string): PathFacts => {
  const absolute = raw.startsWith("/")
  return {
    raw,
    absolute,
    clean: absolute && !raw.includes("\u0000") && !raw.split("/").includes(".."),
    // A relative path cannot be placed (every check below treats it so): it is not resolved.
    resolved: absolute ? posix.resolve(raw) : raw,
    normalized: absolute ? posix.normalize(raw) : raw
  }
}

/** At most `MaxPaths` items; `complete: false` when there were more. */
interface Bounded<A> {
  readonly items: ReadonlyArray<A>
  readonly complete: boolean
}

interface FileChangeFacts {
  readonly paths: Bounded<PathFacts>
  readonly grantRoot: PathFacts | undefined
}

type EntryFacts =
  | { readonly type: "path"; readonly path: PathFacts }
  | { readonly type: "glob_pattern"; readonly dotDot: boolean; readonly base: PathFacts }
  | { readonly type: "special"; readonly access: string }

interface PermissionFacts {
  readonly plain: Bounded<PathFacts>
  readonly entries: Bounded<EntryFacts>
  readonly network: boolean
}

/**
 * What the rules of one evaluation read from the request, each part worked out on first use and
 * kept: the command line (joined at most once, bounded), its unwrapped form (allow rules) and
 * every command it may run (deny rules), the file-change paths, the asked permissions. Every rule
 * then costs a comparison per item, not a new reading of the request.
 */
interface Facts {
  readonly line: () => string | undefined
  readonly unwrapped: () => ShellCommand.Unwrapped
  readonly commands: () => ShellCommand.Commands
  readonly fileChanges: () => FileChangeFacts
  readonly permissions: () => PermissionFacts | undefined
}

const lazy = <A>(f: () => A): (() => A) => {
  let done = false
  let value: A | undefined
  return () => {
    if (!done) {
      value = f()
      done = true
    }
    return value as A
  }
}

const optionalPath = (path: string | null | undefined): PathFacts | undefined =>
  path !== undefined && path !== null ? pathFacts(path) : undefined

const contextPaths = (context: CardContext): Bounded<PathFacts> => {
  const items: Array<PathFacts> = []
  for (const change of context.fileChanges ?? []) {
    if (change.kind === OmittedChanges || items.length >= MaxPaths) return { items, complete: false }
    items.push(pathFacts(change.path))
  }
  return { items, complete: true }
}

/** Legacy `applyPatchApproval` changes (`{[path]: {add|delete|update: {move_path?}}}`): the paths and move targets. */
const legacyPaths = (fileChanges: unknown): Bounded<PathFacts> | undefined => {
  if (typeof fileChanges !== "object" || fileChanges === null || Array.isArray(fileChanges)) return undefined
  const record = fileChanges as Record<string, unknown>
  // Read only up to MaxPaths keys: a larger record is not enumerated (its size is known), it is incomplete.
  const keys = Json.keysWithin(record, MaxPaths).keys
  if (keys === undefined) return { items: [], complete: false }
  if (keys.length === 0) return undefined
  const items: Array<PathFacts> = []
  const moved: Array<PathFacts> = []
  for (const key of keys) {
    if (items.length + moved.length >= MaxPaths) return { items: [...items, ...moved], complete: false }
    items.push(pathFacts(key))
    const change = record[key]
    // a change is `{add|delete|update: ...}`: one with more keys than that cannot be read (its move target could hide there)
    const kinds = typeof change === "object" && change !== null ? Json.keysWithin(change, 16).keys : []
    if (kinds === undefined) return { items: [...items, ...moved], complete: false }
    const body = typeof change === "object" && change !== null && kinds.length > 0 ? (change as Record<string, unknown>)[kinds[0]!] : undefined
    const move = typeof body === "object" && body !== null ? (body as Record<string, unknown>)["move_path"] : undefined
    if (typeof move === "string") moved.push(pathFacts(move))
  }
  for (const m of moved) items.push(m)
  return { items, complete: true }
}

/** A glob's fixed directory prefix (`/repo/src/**` → `/repo/src`). */
const globBase = (pattern: string): string => {
  const cut = pattern.search(/[*?[{]/)
  if (cut < 0) return pattern
  const head = pattern.slice(0, cut)
  return head.slice(0, head.lastIndexOf("/") + 1) || "."
}

/**
 * How many paths and entries a permissions request lists, counted on the raw request without
 * reading them (reading checks every item, and costs more than the count says is worth it).
 */
export const askedPathCount = (permissions: unknown): number => {
  const fs = Json.isRecord(permissions) ? permissions["fileSystem"] : undefined
  if (!Json.isRecord(fs)) return 0
  let count = 0
  for (const key of ["read", "write", "entries"]) {
    const list = fs[key]
    if (Array.isArray(list)) count += list.length
  }
  return count
}

const tooManyPaths: PermissionFacts = {
  plain: { items: [], complete: false },
  entries: { items: [], complete: false },
  network: false
}

const permissionFacts = (permissions: unknown): PermissionFacts | undefined => {
  if (askedPathCount(permissions) > MaxPaths) return tooManyPaths
  const read = PermissionsGrant.readRequested(permissions)
  if (Either.isLeft(read)) return undefined
  const fs = read.right.fileSystem
  const plainPaths = [...(fs?.read ?? []), ...(fs?.write ?? [])]
  const rawEntries = fs?.entries ?? []
  const plain = plainPaths.slice(0, MaxPaths).map(pathFacts)
  const entries = rawEntries.slice(0, MaxPaths - plain.length).map((e): EntryFacts => {
    switch (e.path.type) {
      case "path":
        return { type: "path", path: pathFacts(e.path.path) }
      case "glob_pattern":
        return { type: "glob_pattern", dotDot: e.path.pattern.split("/").includes(".."), base: pathFacts(globBase(e.path.pattern)) }
      case "special":
        return { type: "special", access: e.access }
    }
  })
  return {
    plain: { items: plain, complete: plain.length === plainPaths.length },
    entries: { items: entries, complete: entries.length === rawEntries.length },
    network: read.right.network?.enabled === true
  }
}

const factsOf = (request: ServerRequests.ServerRequest, context: CardContext): Facts => {
  const line = lazy((): string | undefined => {
    switch (request.method) {
      case "item/commandExecution/requestApproval":
        return request.params.command ?? undefined
      case "execCommandApproval":
        // Joined only until it is too long to read (a longer line is never read anyway).
        return ShellCommand.join(request.params.command, MaxCommandLength)
      default:
        return undefined
    }
  })
  return {
    line,
    unwrapped: lazy(() => ShellCommand.unwrap(line() ?? "")),
    commands: lazy(() => ShellCommand.commands(line() ?? "")),
    fileChanges: lazy((): FileChangeFacts => {
      switch (request.method) {
        case "item/fileChange/requestApproval":
          return { paths: contextPaths(context), grantRoot: optionalPath(request.params.grantRoot) }
        case "applyPatchApproval":
          return {
            paths: legacyPaths(request.params.fileChanges) ?? contextPaths(context),
            grantRoot: optionalPath(request.params.grantRoot)
          }
        default:
          return { paths: { items: [], complete: true }, grantRoot: undefined }
      }
    }),
    permissions: lazy(() => request.method === "item/permissions/requestApproval" ? permissionFacts(request.params.permissions) : undefined)
  }
}

// ---------------------------------------------------------------------------------------------
// Matching

type Effect_ = "allow" | "deny"

const matchCommand = (prefix: ReadonlyArray<string>, facts: Facts, effect: Effect_): boolean => {
  const line = facts.line()
  if (line === undefined) return false
  if (line.length > MaxCommandLength) return effect === "deny"
  if (effect === "allow") {
    const u = facts.unwrapped()
    return u.simple && u.argv !== undefined && startsWith(u.argv, 0, prefix, false)
  }
  // A deny sees every command the line may run; what could not be read may run anything.
  const commands = facts.commands()
  return !commands.complete || commands.starts.some((s) => startsWith(s.words, s.at, prefix, true))
}

/** Lexically under `root` (already normalised), or equal to it. */
const isUnder = (path: string, root: string): boolean => path === root || path.startsWith(root === "/" ? "/" : `${root}/`)

/** Certainly under `root`: absolute, no `..` segment, no NUL, and under after normalising. */
const certainlyUnder = (p: PathFacts, root: string): boolean => p.clean && isUnder(p.resolved, root)

/** May be under `root`: relative (cannot be placed) or under it, lexically or after resolving `..`. */
const mayBeUnder = (p: PathFacts, root: string): boolean =>
  !p.absolute || isUnder(p.resolved, root) || isUnder(p.normalized, root) || isUnder(p.raw, root)

/** May overlap `root`: under it, or a parent of it (a grant of `/` covers everything). */
const mayOverlap = (p: PathFacts, root: string): boolean => mayBeUnder(p, root) || isUnder(root, p.resolved)

const matchFileChange = (under: string, facts: Facts, effect: Effect_): boolean => {
  const { grantRoot, paths } = facts.fileChanges()
  const root = posix.resolve(under)
  if (effect === "allow") {
    return paths.complete && paths.items.length > 0 && paths.items.every((p) => certainlyUnder(p, root)) &&
      (grantRoot === undefined || certainlyUnder(grantRoot, root))
  }
  // Unknown changes (none known, or more than were read) may be anywhere.
  if (paths.items.length === 0 || !paths.complete) return true
  return paths.items.some((p) => mayOverlap(p, root)) || (grantRoot !== undefined && mayOverlap(grantRoot, root))
}

const matchPermissions = (under: string, facts: Facts, effect: Effect_): boolean => {
  const asked = facts.permissions()
  if (asked === undefined) return effect === "deny"
  const root = posix.resolve(under)
  const { entries, network, plain } = asked
  const complete = plain.complete && entries.complete
  if (effect === "allow") {
    if (network || !complete) return false
    if (plain.items.length + entries.items.length === 0) return false
    return plain.items.every((p) => certainlyUnder(p, root)) && entries.items.every((e) => {
      switch (e.type) {
        case "path":
          return certainlyUnder(e.path, root)
        case "glob_pattern":
          return !e.dotDot && certainlyUnder(e.base, root)
        case "special":
          return false
      }
    })
  }
  if (!complete) return true
  return plain.items.some((p) => mayOverlap(p, root)) || entries.items.some((e) => {
    switch (e.type) {
      case "path":
        return mayOverlap(e.path, root)
      case "glob_pattern":
        return mayOverlap(e.base, root)
      case "special":
        return e.access !== "deny"
    }
  })
}

const isEmptyRecord = (value: object): boolean => Json.isEmpty(value)

const isToolCallApproval = (p: ServerRequests.ElicitationParams): boolean => {
  if (p._meta?.["codex_approval_kind"] !== "mcp_tool_call" || p.mode !== "form") return false
  const schema = p.requestedSchema
  if (typeof schema !== "object" || schema === null) return false
  const props = (schema as Record<string, unknown>)["properties"]
  return props === undefined || (typeof props === "object" && props !== null && isEmptyRecord(props))
}

const matchMcp = (matcher: typeof McpMatcher.Type, p: ServerRequests.ElicitationParams, effect: Effect_): boolean => {
  if (p.serverName !== matcher.server) return false
  const toolCall = p._meta?.["codex_approval_kind"] === "mcp_tool_call"
  const toolMatches = matcher.tool === undefined || (toolCall && p._meta?.["tool_name"] === matcher.tool)
  if (effect === "allow") return isToolCallApproval(p) && toolMatches
  return toolMatches
}

const matches = (rule: Rule, request: ServerRequests.ServerRequest, facts: Facts): boolean => {
  const m = rule.match
  if (m.method !== undefined && m.method !== request.method) return false
  if (m.command !== undefined) return matchCommand(m.command.argvPrefix, facts, rule.effect)
  if (m.path !== undefined) {
    switch (request.method) {
      case "item/fileChange/requestApproval":
      case "applyPatchApproval":
        return matchFileChange(m.path.under, facts, rule.effect)
      case "item/permissions/requestApproval":
        return matchPermissions(m.path.under, facts, rule.effect)
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

/**
 * Deny rules first (any order), then the first allow rule that matches and applies.
 *
 * Linear in the request: what rules look at (the command's words and every command it may run,
 * the changed or asked paths) is read once per evaluation, bounded (`MaxCommandLength`,
 * `ShellCommand.WorkPerChar`, `MaxPaths`), and then compared rule by rule. A bound never loses a
 * deny: a request read only in part is not allowed by any rule of the kind that stopped reading,
 * and is denied by every deny rule of that kind.
 */
export const evaluate = (rules: Rules, request: ServerRequests.DecodedRequest, context: CardContext): Verdict => {
  if (request._tag !== "Known") return NoMatch
  const facts = factsOf(request, context)
  const safely = (rule: Rule): boolean => {
    try {
      return matches(rule, request, facts)
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

/**
 * A rules file could not be used; `reason` says at which step.
 *
 * `Read` (missing, not a regular file,
 * larger than {@link MaxRulesFileBytes}, unreadable), `Extension` (not `.json`, `.yaml` or `.yml`),
 * `Parse` (not valid JSON or YAML, duplicate keys), `Schema` (not a valid rules document).
 */
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

/**
 * Parse and decode rules text; `format` is what the file extension said. Fails with a
 * `RulesFileError` of reason `Parse` or `Schema`; `path` only names the source in messages.
 */
export const parse = (path: string, text: string, format: "json" | "yaml"): Either.Either<Rules, RulesFileError> =>
  Either.flatMap(parseText(path, text, format), (data) => {
    if (data === null || data === undefined) {
      return Either.left(new RulesFileError({ path, reason: "Schema", detail: "is empty; expected an object with a rules list" }))
    }
    return Either.mapLeft(decodeRules(data), (detail) => new RulesFileError({ path, reason: "Schema", detail: `is not a valid rules file: ${detail}` }))
  })

/**
 * Read a rules file (`.json`, `.yaml` or `.yml`), decoded strictly (an unknown key is an error).
 * Fails with a `RulesFileError` (see its `reason`).
 *
 * @example
 * ```ts
 * import { Policy } from "@warden/approvals"
 * import { Supervisor } from "@warden/supervisor"
 * import { Effect, Layer } from "effect"
 *
 * const WardenLive = Layer.unwrapEffect(
 *   Effect.map(Policy.load("warden-rules.yaml"), (rules) => Supervisor.layer({ approvals: { rules } }))
 * ) // fails with RulesFileError | ConfigError
 * ```
 */
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
