/**
 * What the rules decide about one request (the semantics are `Policy`'s module comment): the facts
 * rules look at, read once per evaluation and bounded (the command line, its unwrapped words,
 * every command it may run, the changed or asked paths), then matched rule by rule, deny rules
 * first. It runs on the connection's read loop: linear in the request, and a bound never loses a
 * deny.
 */
import { Json, PermissionsGrant, type ServerRequests } from "@warden/protocol"
import { Either } from "effect"
import * as posix from "node:path/posix"
import type { CardContext } from "../Card.js"
import type { Verdict } from "../Policy.js"
import type { Commands, Unwrapped } from "../ShellCommand.js"
import { commands } from "./CommandStarts.js"
import { OmittedChanges } from "./FileChanges.js"
import type { McpMatcher, Rule, Rules } from "./RuleSchema.js"
import { join, programName } from "./ShellLexer.js"
import { unwrap } from "./ShellWrapper.js"

const NoMatch: Verdict = { _tag: "NoMatch" }

/** `words` from index `at` start with `prefix`, word for word (the first also by basename when asked). */
const startsWith = (
  words: ReadonlyArray<string>,
  at: number,
  prefix: ReadonlyArray<string>,
  byBasename: boolean
): boolean => {
  if (words.length - at < prefix.length) return false
  for (let i = 0; i < prefix.length; i++) {
    const w = words[at + i]!
    const p = prefix[i]!
    if (w === p) continue
    if (byBasename && i === 0 && !p.includes("/") && programName(w) === p) continue
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
  readonly unwrapped: () => Unwrapped
  readonly commands: () => Commands
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
    const body =
      typeof change === "object" && change !== null && kinds.length > 0
        ? (change as Record<string, unknown>)[kinds[0]!]
        : undefined
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
        return {
          type: "glob_pattern",
          dotDot: e.path.pattern.split("/").includes(".."),
          base: pathFacts(globBase(e.path.pattern))
        }
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
        return join(request.params.command, MaxCommandLength)
      default:
        return undefined
    }
  })
  return {
    line,
    unwrapped: lazy(() => unwrap(line() ?? "")),
    commands: lazy(() => commands(line() ?? "")),
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
    permissions: lazy(() =>
      request.method === "item/permissions/requestApproval" ? permissionFacts(request.params.permissions) : undefined
    )
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
const isUnder = (path: string, root: string): boolean =>
  path === root || path.startsWith(root === "/" ? "/" : `${root}/`)

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
    return (
      paths.complete &&
      paths.items.length > 0 &&
      paths.items.every((p) => certainlyUnder(p, root)) &&
      (grantRoot === undefined || certainlyUnder(grantRoot, root))
    )
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
    return (
      plain.items.every((p) => certainlyUnder(p, root)) &&
      entries.items.every((e) => {
        switch (e.type) {
          case "path":
            return certainlyUnder(e.path, root)
          case "glob_pattern":
            return !e.dotDot && certainlyUnder(e.base, root)
          case "special":
            return false
        }
      })
    )
  }
  if (!complete) return true
  return (
    plain.items.some((p) => mayOverlap(p, root)) ||
    entries.items.some((e) => {
      switch (e.type) {
        case "path":
          return mayOverlap(e.path, root)
        case "glob_pattern":
          return mayOverlap(e.base, root)
        case "special":
          return e.access !== "deny"
      }
    })
  )
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
