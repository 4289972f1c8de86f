/**
 * Remembered decisions are allow rules kept when a person answers "always", scoped to what was
 * asked, so the next matching card is accepted without asking.
 *
 * Three scopes, the same three a policy allow can name, read with the policy's own allow
 * semantics (`Policy.evaluate`):
 * - `Command`: the argv of a *simple* command (one command, no operators, no expansions, codex's
 *   `bash -lc` wrapper peeled), `exact` (the same words, no more: what `scopeFor` derives) or as a
 *   prefix (a person widening it on purpose, e.g. `git status`).
 * - `Path`: a root under which every changed file (`target: "files"`: file-change and patch
 *   approvals) or every asked path (`target: "permissions"`: no network, no special paths) must
 *   certainly lie. Never `/`.
 * - `Mcp`: one MCP server's one tool, for its yes/no tool-call approvals only.
 *
 * What a remembered allow never does:
 * - override a deny: `decide` evaluates the configured rules first, so a deny rule that matches
 *   wins over every remembered allow, whatever either says (a property test checks it over
 *   generated rules and requests);
 * - widen beyond what was asked: it matches only requests that certainly stay inside its scope
 *   (the policy's allow semantics), only yes/no approvals (`Policy.allowApplies`), and what a match
 *   decides is `Accept` (this request, once), never a session-wide grant; `scopeFor` derives the
 *   narrowest scope that covers a card (its exact argv, the deepest common root of its paths);
 * - store a secret: a scope whose words or paths `SecretMask` would mask is refused.
 */
import { Policy, SecretMask, ShellCommand } from "@warden/approvals"
import type { Card } from "@warden/approvals"
import { Json, PermissionsGrant } from "@warden/protocol"
import type { ServerRequests } from "@warden/protocol"
import { Either, ParseResult, Schema } from "effect"
import * as posix from "node:path/posix"

// ---------------------------------------------------------------------------------------------
// Data

/** The most words a remembered command's argv may have. */
export const MaxWords = 64
/** The longest word a remembered command's argv may hold, in characters. */
export const MaxWordLength = 500
/** The longest root a remembered path scope may name, in characters. */
export const MaxPathLength = 1_024

const Word = Schema.String.pipe(
  Schema.filter((w) =>
    w.length > 0 && w.length <= MaxWordLength && !w.includes("\u0000")
      ? undefined
      : `a word must be 1 to ${MaxWordLength} characters, no NUL`
  )
)

const Root = Schema.String.pipe(
  Schema.filter((p) => {
    if (!p.startsWith("/") || p.includes("\u0000") || p.length > MaxPathLength)
      return "must be an absolute path (starting with /), no NUL"
    if (p.split("/").includes("..") || p.split("/").includes(".")) return "must not contain . or .. segments"
    if (posix.normalize(p).replace(/\/+$/, "") === "") return "must not be / (that would allow everything)"
    return undefined
  })
)

const NonEmpty = Schema.String.pipe(
  Schema.filter((s) =>
    s.length > 0 && s.length <= 200 && !s.includes("\u0000") ? undefined : "must be 1 to 200 characters, no NUL"
  )
)

/**
 * A remembered scope for a simple command, matched on its argv (codex's `bash -lc` wrapper peeled).
 *
 * With `exact` the command must have these words and no more (what `scopeFor` derives); without
 * it, these words first (a person widening it on purpose, e.g. `git status`). 1 to `MaxWords`
 * words of 1 to `MaxWordLength` characters, no NUL.
 */
export const CommandScope = Schema.TaggedStruct("Command", {
  /** The command's words, the program first. */
  argv: Schema.NonEmptyArray(Word).pipe(Schema.maxItems(MaxWords)),
  /** The same words and no more (true), or these words first (false). */
  exact: Schema.Boolean
})

/**
 * A remembered scope for file changes or permission grants under one root directory.
 *
 * Every changed file (and the grant root), or every asked path, must certainly lie under `root`.
 * The root is absolute, has no `.` or `..` segment, is at most `MaxPathLength` characters, and is
 * never `/`.
 */
export const PathScope = Schema.TaggedStruct("Path", {
  /** The directory everything asked must lie under. */
  root: Root,
  /** `files`: file-change and patch approvals; `permissions`: permission grants. */
  target: Schema.Literal("files", "permissions")
})

/**
 * A remembered scope for one MCP server's one tool, for its yes/no tool-call approvals only.
 *
 * A form that asks for content is never allowed by it. Both names are 1 to 200 characters, no NUL.
 */
export const McpScope = Schema.TaggedStruct("Mcp", {
  /** The MCP server's name. */
  server: NonEmpty,
  /** The tool's name. */
  tool: NonEmpty
})

/**
 * What a remembered rule allows, as one of three scopes (`Command`, `Path`, `Mcp`).
 *
 * Decode untrusted input with `validateScope`, which also refuses a scope holding a secret.
 */
export const RememberedScope = Schema.Union(CommandScope, PathScope, McpScope)
export type RememberedScope = typeof RememberedScope.Type

/** Where a remembered rule came from. */
export interface Origin {
  /** The run the card was opened in. */
  readonly runId: string
  /** The card that was answered "always". */
  readonly cardId: string
}

/**
 * A remembered allow rule as the ledger stores and returns it (`remember`, `rememberedRules`,
 * `revoke`).
 *
 * A revoked or expired rule is kept (listed with `all`) but no longer matches (`isActive`).
 */
export interface RememberedRule {
  /** The rule's id, given by the ledger; a card's source names it as `remembered:<id>`. */
  readonly id: string
  /** What it allows. */
  readonly scope: RememberedScope
  /** Who answered "always" (a person's name, `stdin`, a program's name). */
  readonly author: string
  /** When it was remembered (epoch ms). */
  readonly createdAt: number
  /** Epoch ms after which it no longer matches; undefined: until revoked. */
  readonly expiresAt: number | undefined
  /** The card it was remembered from, if given. */
  readonly from: Origin | undefined
  /** Why, in words (masked, at most 1 000 characters). */
  readonly note: string | undefined
  /** When it was revoked (epoch ms); undefined: not revoked. */
  readonly revokedAt: number | undefined
  /** Who revoked it. */
  readonly revokedBy: string | undefined
}

/** What `remember` takes. */
export interface RememberInput {
  /** What to allow (checked with `validateScope`: a scope too wide or holding a secret is refused). */
  readonly scope: RememberedScope
  /** Who answered "always": 1 to 200 characters once trimmed. */
  readonly author: string
  /** Epoch ms after which it no longer matches; must be after now. Default: until revoked. */
  readonly expiresAt?: number
  /** The card it is remembered from. */
  readonly from?: Origin
  /** Why, in words (stored masked, cut to 1 000 characters). */
  readonly note?: string
}

const formatIssues = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .slice(0, 4)
    .map((i) => `${i.path.length > 0 ? `at ${i.path.map(String).join(".")}: ` : ""}${i.message}`)
    .join("; ")

/**
 * Check a scope before it is stored, for its shape and for anything in it that looks secret.
 *
 * The shape is `RememberedScope`'s, decoded strictly (an unknown key is refused); a word, root,
 * server or tool that `SecretMask` would mask is refused too, since a remembered rule is kept for
 * months and listed to anyone who asks, and so is one that holds the mask itself (built from
 * masked facts: it would match nothing). Left: why not, in words.
 */
export const validateScope = (input: unknown): Either.Either<RememberedScope, string> =>
  Either.flatMap(
    Either.mapLeft(
      Schema.decodeUnknownEither(RememberedScope, { onExcessProperty: "error", errors: "all" })(input),
      formatIssues
    ),
    (scope): Either.Either<RememberedScope, string> => {
      // A masked value (`•••`) stands for a secret that is not there: a rule naming it matches nothing.
      if (JSON.stringify(scope).includes(SecretMask.Mask))
        return Either.left("it holds a masked value (a secret was there), which no request could match")
      const secret = "it holds a value that looks secret; a remembered rule never stores one"
      switch (scope._tag) {
        case "Command": {
          const masked = SecretMask.maskArgv(scope.argv)
          return masked.length === scope.argv.length && masked.every((w, i) => w === scope.argv[i])
            ? Either.right(scope)
            : Either.left(`the command cannot be remembered: ${secret}`)
        }
        case "Path":
          return SecretMask.maskText(scope.root) === scope.root
            ? Either.right(scope)
            : Either.left(`the path cannot be remembered: ${secret}`)
        case "Mcp":
          return SecretMask.maskText(scope.server) === scope.server && SecretMask.maskText(scope.tool) === scope.tool
            ? Either.right(scope)
            : Either.left(`the MCP tool cannot be remembered: ${secret}`)
      }
    }
  )

/** Whether a rule is in force at `now`, neither revoked nor expired. */
export const isActive = (rule: RememberedRule, now: number): boolean =>
  rule.revokedAt === undefined && (rule.expiresAt === undefined || now < rule.expiresAt)

/** How a card's source names the rule that decided it (`remembered:<id>`). */
export const sourceOf = (rule: RememberedRule): string => `remembered:${rule.id}`

/** The scope in one line (`command git status …`, `files under /repo`, `mcp probe.poke`). */
export const describeScope = (scope: RememberedScope): string => {
  switch (scope._tag) {
    case "Command":
      return `command ${ShellCommand.join(scope.argv)}${scope.exact ? "" : " …"}`
    case "Path":
      return `${scope.target === "files" ? "file changes" : "permissions"} under ${scope.root}`
    case "Mcp":
      return `mcp ${scope.server}.${scope.tool}`
  }
}

// ---------------------------------------------------------------------------------------------
// Matching

const CommandMethods: ReadonlyArray<string> = ["item/commandExecution/requestApproval", "execCommandApproval"]
const FileMethods: ReadonlyArray<string> = ["item/fileChange/requestApproval", "applyPatchApproval"]
const PermissionMethods: ReadonlyArray<string> = ["item/permissions/requestApproval"]
const McpMethods: ReadonlyArray<string> = ["mcpServer/elicitation/request"]

const methodsOf = (scope: RememberedScope): ReadonlyArray<string> => {
  switch (scope._tag) {
    case "Command":
      return CommandMethods
    case "Path":
      return scope.target === "files" ? FileMethods : PermissionMethods
    case "Mcp":
      return McpMethods
  }
}

/** The command line of a command approval, as `Policy` reads it. */
const commandLine = (request: ServerRequests.ServerRequest): string | undefined => {
  switch (request.method) {
    case "item/commandExecution/requestApproval":
      return request.params.command ?? undefined
    case "execCommandApproval":
      return ShellCommand.join(request.params.command, Policy.MaxCommandLength)
    default:
      return undefined
  }
}

/** The rule's scope as a policy allow rule (exact commands are matched apart: see `rememberedFor`). */
const toPolicyRule = (rule: RememberedRule): Policy.Rule | undefined => {
  const id = sourceOf(rule)
  const scope = rule.scope
  switch (scope._tag) {
    case "Command":
      return scope.exact ? undefined : { id, effect: "allow", match: { command: { argvPrefix: scope.argv } } }
    case "Path":
      return { id, effect: "allow", match: { path: { under: scope.root } } }
    case "Mcp":
      return { id, effect: "allow", match: { mcp: { server: scope.server, tool: scope.tool } } }
  }
}

/** The words of a simple command line (wrapper peeled), or undefined. */
const simpleArgv = (line: string | undefined): ReadonlyArray<string> | undefined => {
  if (line === undefined || line.length > Policy.MaxCommandLength) return undefined
  const u = ShellCommand.unwrap(line)
  return u.simple ? u.argv : undefined
}

const sameWords = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean =>
  a.length === b.length && a.every((w, i) => w === b[i])

/**
 * The remembered rule that allows this request at `now`, if any. Pure, synchronous and linear in
 * the request (it reads the request once for all the rules, as `Policy.evaluate` does).
 *
 * This is the remembered rules ALONE: it does not look at deny rules. Deciding a card goes through
 * `decide`, which consults the configured rules first; a lookup that calls this directly must do so
 * only after the configured rules said `NoMatch`.
 */
export const rememberedFor = (
  request: ServerRequests.DecodedRequest,
  context: Card.CardContext,
  rules: ReadonlyArray<RememberedRule>,
  now: number
): RememberedRule | undefined => {
  if (request._tag !== "Known") return undefined
  // The rules first: with none in force for the method (most runs have none at all), nothing of
  // the policy's code is run, or loaded where the CLI loads it on first use.
  const live = rules.filter((r) => isActive(r, now) && methodsOf(r.scope).includes(request.method))
  if (live.length === 0 || !Policy.allowApplies(request)) return undefined
  const exact = live.filter((r) => r.scope._tag === "Command" && r.scope.exact)
  if (exact.length > 0) {
    const argv = simpleArgv(commandLine(request))
    if (argv !== undefined) {
      const hit = exact.find((r) => r.scope._tag === "Command" && sameWords(r.scope.argv, argv))
      if (hit) return hit
    }
  }
  const byId = new Map<string, RememberedRule>()
  const policyRules: Array<Policy.Rule> = []
  for (const rule of live) {
    const p = toPolicyRule(rule)
    if (p === undefined) continue
    byId.set(p.id, rule)
    policyRules.push(p)
  }
  if (policyRules.length === 0) return undefined
  const verdict = Policy.evaluate({ rules: policyRules }, request, context)
  return verdict._tag === "Allow" ? byId.get(verdict.ruleId) : undefined
}

/**
 * What `decide` says about a request, a configured rule's verdict or a remembered rule's allow.
 *
 * `Allow` and `Deny` name a configured rule, `Remembered` a remembered one (decide `Accept`, for
 * this request only), and `NoMatch` leaves the card to the safety filter, a handler or a person.
 */
export type Verdict =
  | Policy.Verdict
  /** No configured rule matched; this remembered rule allows the request (decision: Accept). */
  | { readonly _tag: "Remembered"; readonly rule: RememberedRule }

/**
 * Decide a request by the configured rules first and by the remembered rules only when those say
 * nothing, so a remembered allow never overrides a deny.
 *
 * The configured rules are read as `Policy.evaluate` reads them (a deny that matches wins, then
 * the first allow); then a remembered rule in force at `now` that allows the request
 * (`rememberedFor`); otherwise `NoMatch` (a person or a handler decides). Pure and synchronous.
 *
 * @example
 * ```ts
 * import type { Card, Policy } from "@warden/approvals"
 * import { Remembered } from "@warden/ledger"
 * import type { ServerRequests } from "@warden/protocol"
 *
 * declare const rules: Policy.Rules
 * declare const remembered: ReadonlyArray<Remembered.RememberedRule> // from ledger.rememberedRules()
 * declare const request: ServerRequests.DecodedRequest
 * declare const context: Card.CardContext
 *
 * const verdict = Remembered.decide(rules, remembered, request, context, Date.now())
 * // "Deny" whenever a configured deny matches, whatever was remembered.
 * const source = verdict._tag === "Remembered" ? Remembered.sourceOf(verdict.rule) : verdict._tag
 * ```
 */
export const decide = (
  configured: Policy.Rules | undefined,
  remembered: ReadonlyArray<RememberedRule>,
  request: ServerRequests.DecodedRequest,
  context: Card.CardContext,
  now: number
): Verdict => {
  if (configured !== undefined) {
    const verdict = Policy.evaluate(configured, request, context)
    if (verdict._tag !== "NoMatch") return verdict
  }
  const rule = rememberedFor(request, context, remembered, now)
  return rule ? { _tag: "Remembered", rule } : { _tag: "NoMatch" }
}

// ---------------------------------------------------------------------------------------------
// Deriving a scope from what was asked

/** A path an allow may place: absolute, no NUL, no `..` segment. */
const cleanAbsolute = (p: string): boolean => p.startsWith("/") && !p.includes("\u0000") && !p.split("/").includes("..")

/** The deepest directory all `paths` (normalised) lie under or are. */
const commonRoot = (paths: ReadonlyArray<string>): string => {
  const split = paths.map((p) =>
    posix
      .resolve(p)
      .split("/")
      .filter((s) => s.length > 0)
  )
  const first = split[0] ?? []
  let n = first.length
  for (const parts of split) {
    let i = 0
    while (i < n && i < parts.length && parts[i] === first[i]) i++
    n = i
  }
  return `/${first.slice(0, n).join("/")}`
}

/** The paths of a legacy patch (and its move targets); "unreadable" when it has more than are read. */
const legacyPaths = (fileChanges: unknown): ReadonlyArray<string> | "unreadable" | undefined => {
  if (typeof fileChanges !== "object" || fileChanges === null || Array.isArray(fileChanges)) return undefined
  const record = fileChanges as Record<string, unknown>
  // never enumerated past what is read (a frame's large object is not enumerated at all)
  const paths = Json.keysWithin(record, Policy.MaxPaths).keys
  if (paths === undefined) return "unreadable"
  const out: Array<string> = []
  for (const path of paths) {
    out.push(path)
    const change = record[path]
    if (typeof change !== "object" || change === null) continue
    const kinds = Json.keysWithin(change, 16).keys
    if (kinds === undefined) return "unreadable"
    const body = kinds.length > 0 ? (change as Record<string, unknown>)[kinds[0]!] : undefined
    const move = typeof body === "object" && body !== null ? (body as Record<string, unknown>)["move_path"] : undefined
    if (typeof move === "string") out.push(move)
  }
  return out.length > 0 ? out : undefined
}

const filesRoot = (
  changed: ReadonlyArray<string>,
  grantRoot: string | null | undefined
): Either.Either<string, string> => {
  if (changed.length === 0) return Either.left("the changes are not known")
  if (changed.length > Policy.MaxPaths) return Either.left("too many changes to place")
  const all =
    grantRoot !== undefined && grantRoot !== null
      ? [...changed.map(posix.dirname), grantRoot]
      : changed.map(posix.dirname)
  if (!changed.every(cleanAbsolute) || !all.every(cleanAbsolute))
    return Either.left("a path is relative or has a .. segment")
  return Either.right(commonRoot(all))
}

/**
 * Derive the narrowest remembered scope that covers this request, or say in words why none can be.
 *
 * The scope is the exact argv of a simple command, the deepest root of the changed files (and
 * the grant root) or of the asked paths, or the MCP server and tool of a tool-call approval. Left
 * when nothing narrow enough can be derived (a compound command, unknown, cut or relative paths,
 * network or special permissions, a root of `/`, a form that asks for content, a value that looks
 * secret, a request that is not a yes/no approval). The scope is checked with `validateScope`, as
 * `remember` checks it.
 *
 * @example
 * ```ts
 * import type { Card } from "@warden/approvals"
 * import { Ledger, Remembered } from "@warden/ledger"
 * import type { ServerRequests } from "@warden/protocol"
 * import { Effect, Either } from "effect"
 *
 * // A person answered "always" to card c3 of run r1.
 * const always = (request: ServerRequests.DecodedRequest, context: Card.CardContext) =>
 *   Effect.gen(function*() {
 *     const scope = Remembered.scopeFor(request, context)
 *     if (Either.isLeft(scope)) return yield* Effect.logInfo(`cannot remember: ${scope.left}`)
 *     const ledger = yield* Ledger.Ledger
 *     const rule = yield* ledger.remember({ scope: scope.right, author: "alice", from: { runId: "r1", cardId: "c3" } })
 *     yield* Effect.logInfo(`remembered ${Remembered.describeScope(rule.scope)}`)
 *   })
 * ```
 */
export const scopeFor = (
  request: ServerRequests.DecodedRequest,
  context: Card.CardContext
): Either.Either<RememberedScope, string> => {
  if (request._tag !== "Known" || !Policy.allowApplies(request)) {
    return Either.left("only yes/no approvals (commands, file changes, permissions, MCP tool calls) can be remembered")
  }
  const derived = ((): Either.Either<unknown, string> => {
    switch (request.method) {
      case "item/commandExecution/requestApproval":
      case "execCommandApproval": {
        const argv = simpleArgv(commandLine(request))
        return argv === undefined
          ? Either.left("only a simple command (one command, no operators, no expansions) can be remembered")
          : Either.right({ _tag: "Command", argv, exact: true })
      }
      case "item/fileChange/requestApproval": {
        const changes = context.fileChanges ?? []
        if (changes.some((c) => c.kind === "omitted")) return Either.left("the change list was cut")
        return Either.map(
          filesRoot(
            changes.map((c) => c.path),
            request.params.grantRoot
          ),
          (root) => ({ _tag: "Path", root, target: "files" })
        )
      }
      case "applyPatchApproval": {
        const legacy = legacyPaths(request.params.fileChanges)
        if (legacy === "unreadable") return Either.left("too many changes to place")
        const changed = legacy ?? (context.fileChanges ?? []).map((c) => c.path)
        return Either.map(filesRoot(changed, request.params.grantRoot), (root) => ({
          _tag: "Path",
          root,
          target: "files"
        }))
      }
      case "item/permissions/requestApproval": {
        if (Policy.askedPathCount(request.params.permissions) > Policy.MaxPaths)
          return Either.left("too many paths asked")
        const read = PermissionsGrant.readRequested(request.params.permissions)
        if (Either.isLeft(read)) return Either.left("the permissions asked cannot be read")
        if (read.right.network?.enabled === true) return Either.left("network access cannot be remembered")
        const fs = read.right.fileSystem
        const paths: Array<string> = [...(fs?.read ?? []), ...(fs?.write ?? [])]
        for (const entry of fs?.entries ?? []) {
          if (entry.path.type !== "path")
            return Either.left("only plain paths can be remembered (no globs, no special paths)")
          paths.push(entry.path.path)
        }
        if (paths.length === 0) return Either.left("nothing is asked")
        if (!paths.every(cleanAbsolute)) return Either.left("a path is relative or has a .. segment")
        return Either.right({ _tag: "Path", root: commonRoot(paths), target: "permissions" })
      }
      case "mcpServer/elicitation/request": {
        const tool = request.params._meta?.["tool_name"]
        return typeof tool === "string" && tool.length > 0
          ? Either.right({ _tag: "Mcp", server: request.params.serverName, tool })
          : Either.left("the MCP request names no tool")
      }
      default:
        return Either.left(`${request.method} cannot be remembered`)
    }
  })()
  return Either.flatMap(derived, validateScope)
}
