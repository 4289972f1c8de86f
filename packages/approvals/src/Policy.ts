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
 *   part (nesting deeper than `ShellCommand.commands` follows, or more re-reading of nested scripts and
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
import type { ServerRequests } from "@warden/protocol"
import type { Effect, Either } from "effect"
import type { CardContext } from "./Card.js"
import * as RuleEvaluation from "./internal/RuleEvaluation.js"
import * as RuleSchema from "./internal/RuleSchema.js"
import * as RulesFile from "./internal/RulesFile.js"

// ---------------------------------------------------------------------------------------------
// Schema

/**
 * Matches commands by their argv prefix, word for word (`["git", "status"]`).
 *
 * An allow matches only a simple command, a deny any command the line may run (see the module
 * doc). At least one non-empty word.
 */
export const CommandMatcher = RuleSchema.CommandMatcher
/**
 * Matches file changes and permission requests by where they write or ask.
 *
 * Paths are compared with the absolute root `under` lexically (symbolic links are not followed).
 */
export const PathMatcher = RuleSchema.PathMatcher
/** Matches MCP elicitations by the server that sent them and, optionally, the tool being approved. */
export const McpMatcher = RuleSchema.McpMatcher

/**
 * What a rule matches, exactly one of `command`, `path` or `mcp`.
 *
 * It may be narrowed to one server-request `method` (which must be one that kind of match applies
 * to).
 */
export const Match = RuleSchema.Match
export type Match = RuleSchema.Match

/**
 * One rule, with its id, its effect (`allow` or `deny`) and what it matches.
 *
 * The `id` is named in settlements and the audit trail as `rule:<id>`; `description` is optional.
 */
export const Rule = RuleSchema.Rule
export type Rule = RuleSchema.Rule

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
export const Rules = RuleSchema.Rules
export type Rules = RuleSchema.Rules

/** Decode rules from already parsed data, strictly (unknown keys are errors); `Left` holds the issues as text. */
export const decodeRules: (input: unknown) => Either.Either<Rules, string> = RuleSchema.decodeRules

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

/** Command lines longer than this are not read (no allow matches them, every command deny does). */
export const MaxCommandLength: number = RuleEvaluation.MaxCommandLength

/**
 * Paths a path rule reads per request (changed files and move targets, or asked permission paths
 * and entries). A request with more (or whose change list was cut, see `Card.OmittedChanges`) is
 * not read past them: no path allow matches it, every path deny does (what was not read may be
 * anywhere).
 */
export const MaxPaths: number = RuleEvaluation.MaxPaths

/**
 * How many paths and entries a permissions request lists, counted on the raw request without
 * reading them (reading checks every item, and costs more than the count says is worth it).
 */
export const askedPathCount: (permissions: unknown) => number = RuleEvaluation.askedPathCount

/** Can a rule's Allow answer this request? Only yes/no approvals (see the module comment). */
export const allowApplies: (request: ServerRequests.DecodedRequest) => boolean = RuleEvaluation.allowApplies

/**
 * Deny rules first (any order), then the first allow rule that matches and applies.
 *
 * Linear in the request: what rules look at (the command's words and every command it may run,
 * the changed or asked paths) is read once per evaluation, bounded (`MaxCommandLength`,
 * `ShellCommand.WorkPerChar`, `MaxPaths`), and then compared rule by rule. A bound never loses a
 * deny: a request read only in part is not allowed by any rule of the kind that stopped reading,
 * and is denied by every deny rule of that kind.
 */
export const evaluate: (rules: Rules, request: ServerRequests.DecodedRequest, context: CardContext) => Verdict =
  RuleEvaluation.evaluate

// ---------------------------------------------------------------------------------------------
// Loading

/**
 * A rules file could not be used; `reason` says at which step.
 *
 * `Read` (missing, not a regular file,
 * larger than {@link MaxRulesFileBytes}, unreadable), `Extension` (not `.json`, `.yaml` or `.yml`),
 * `Parse` (not valid JSON or YAML, duplicate keys), `Schema` (not a valid rules document).
 */
export { RulesFileError } from "./internal/RulesFile.js"

/** Rules files larger than this are refused (a policy is small; a huge file is a mistake). */
export const MaxRulesFileBytes: number = RulesFile.MaxRulesFileBytes

/**
 * Parse and decode rules text; `format` is what the file extension said. Fails with a
 * `RulesFileError` of reason `Parse` or `Schema`; `path` only names the source in messages.
 */
export const parse: (
  path: string,
  text: string,
  format: "json" | "yaml"
) => Either.Either<Rules, RulesFile.RulesFileError> = RulesFile.parse

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
export const load: (path: string) => Effect.Effect<Rules, RulesFile.RulesFileError> = RulesFile.load
