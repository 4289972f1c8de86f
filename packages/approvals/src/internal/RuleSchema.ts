/**
 * The rules file format as Schema: what a rule matches (a command's argv prefix, a path root, an
 * MCP server and tool, optionally one method), rules with unique ids, decoded strictly. What the
 * rules mean when evaluated is `RuleEvaluation`'s; reading a file is `RulesFile`'s.
 */
import { Either, ParseResult, Schema } from "effect"
import { ServerRequests } from "@warden/protocol"

const shownActual = (actual: unknown): string => {
  try {
    return (JSON.stringify(actual) ?? String(actual)).slice(0, 80)
  } catch {
    return "(unprintable)"
  }
}

const Method = Schema.suspend(
  (): Schema.Schema<ServerRequests.ServerRequestMethod> =>
    Schema.Literal(...ServerRequests.ServerRequestMethods).annotations({
      message: (issue) => ({
        message: `${shownActual(issue.actual)} is not a server-request method; use one of: ${ServerRequests.ServerRequestMethods.join(", ")}`,
        override: true
      })
    })
)

const AbsolutePath = Schema.String.pipe(
  Schema.filter((s) =>
    s.startsWith("/") && !s.includes("\u0000") ? undefined : "must be an absolute path (starting with /)"
  )
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

/** A policy: rules with unique ids (`Policy.Rules`, the schema of a rules file and of the `rules` setting). */
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
  Either.mapLeft(Schema.decodeUnknownEither(Rules, { onExcessProperty: "error", errors: "all" })(input), formatIssues)

const formatIssues = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const shown = issues
    .slice(0, 6)
    .map((i) => `${i.path.length > 0 ? `at ${i.path.map(String).join(".")}: ` : ""}${i.message}`)
  return [...shown, ...(issues.length > shown.length ? [`(and ${issues.length - shown.length} more)`] : [])].join("; ")
}
