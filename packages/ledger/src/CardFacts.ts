/**
 * The facts of a card that a rule matches on (command line and argv, cwd, changed or asked paths,
 * MCP server and tool, permissions asked), as the ledger stores them.
 *
 * They are taken from the card's masked summary (`CardView.summary`, built by approvals'
 * `CardSummary` through `SecretMask`), so they never hold a secret and are bounded as a card is
 * (`CardSummary.Bounds`).
 *
 * `toRequest` turns stored facts back into a request `Policy.evaluate` can read, for replaying
 * candidate rules and for matching remembered rules against recorded cards. Where the summary cut
 * something (a command line longer than a card shows, more changes than it lists, permissions too
 * large to copy) the facts say `complete: false`: the rules then read what was kept, and a cut
 * change list is read as unknown changes (no path allow matches it, every path deny does).
 */
import { Card, SecretMask, ShellCommand } from "@warden/approvals"
import type { Card as CardTypes } from "@warden/approvals"
import { ServerRequests } from "@warden/protocol"

/** One changed file of a file-change card, as the card lists it (masked). */
export interface PathFact {
  /** The file's path (masked; cut when too long for display). */
  readonly path: string
  /** add, delete, update, move-from, move-to, ... or `Card.OmittedChanges` for the changes not listed. */
  readonly kind: string
}

/** What an MCP elicitation or tool-call card asked about, as rules match it. */
export interface McpFact {
  /** The MCP server's name. */
  readonly server: string
  /** The tool's name (a tool-call approval's `_meta.tool_name`); undefined when the card names none. */
  readonly tool: string | undefined
  /** An MCP tool-call approval (`_meta.codex_approval_kind: "mcp_tool_call"`). */
  readonly toolCall: boolean
  /** The form asks for no content (a yes/no approval: the card offered a plain Accept). */
  readonly noFields: boolean
  /** The elicitation's mode (`form` or `url`); `form` for a tool-call approval. */
  readonly mode: string
}

/**
 * A card's facts as stored with it (`CardRecord.facts`), built by `fromView` and read back into a
 * request by `toRequest`.
 *
 * Which fields are set depends on `kind`: `command`, `argv`, `simple` and `cwd` for a command;
 * `paths` and `grantRoot` for a file change; `permissions`, `asked` and `cwd` for permissions;
 * `mcp` for an MCP tool call or elicitation. `complete` and `masked` say how far a replay can
 * trust them.
 */
export interface CardFacts {
  /** The summary's kind: command, fileChange, permissions, mcpToolCall, elicitation, userInput, dynamicTool, other. */
  readonly kind: CardTypes.CardSummary["kind"]
  /** The command line inside codex's shell wrapper (masked). */
  readonly command?: string
  /** Its words (masked), when the line could be read. */
  readonly argv?: ReadonlyArray<string>
  /** One command, no operators, no expansions: the only kind an allow (or a remembered allow) may match. */
  readonly simple?: boolean
  /** The working directory of a command, or of a permissions request (masked). */
  readonly cwd?: string
  /** Changed files (file changes), in the card's order. */
  readonly paths?: ReadonlyArray<PathFact>
  /** The root under which a file change asks writes be allowed for the rest of the session, if any (masked). */
  readonly grantRoot?: string
  /** The permissions asked, as a masked copy of the request's `permissions`. */
  readonly permissions?: unknown
  /** What the permissions ask, one line each (`write /repo`, `read /etc/hosts`, `network`). */
  readonly asked?: ReadonlyArray<string>
  /** The server and tool of an MCP tool call or elicitation. */
  readonly mcp?: McpFact
  /** Nothing was cut for display: the facts are the whole request's. */
  readonly complete: boolean
  /** Some value was masked (a rule naming it cannot be replayed exactly). */
  readonly masked: boolean
}

const endsCut = (s: string): boolean => s.endsWith(SecretMask.Elided)

const containsMask = (value: unknown): boolean => {
  try {
    return (JSON.stringify(value) ?? "").includes(SecretMask.Mask)
  } catch {
    return true
  }
}

/** The facts of a card, from its masked summary. Never throws. */
export const fromView = (view: CardTypes.CardView): CardFacts => {
  let summary: CardTypes.CardSummary
  try {
    summary = view.summary
  } catch {
    return { kind: "other", complete: false, masked: false }
  }
  const facts = ((): CardFacts => {
    switch (summary.kind) {
      case "command": {
        const unwrapped = ShellCommand.unwrap(summary.command)
        const argv = summary.argv
        const cut = endsCut(summary.command) || (argv !== undefined && (argv.length >= 256 || argv.some(endsCut)))
        return {
          kind: "command",
          command: summary.command,
          ...(argv !== undefined ? { argv } : {}),
          simple: unwrapped.simple && argv !== undefined,
          ...(summary.cwd !== undefined ? { cwd: summary.cwd } : {}),
          complete: !cut,
          masked: false
        }
      }
      case "fileChange": {
        const paths = summary.changes.map((c): PathFact => ({ path: c.path, kind: c.kind }))
        const cut =
          paths.some((p) => p.kind === Card.OmittedChanges || endsCut(p.path)) ||
          (summary.grantRoot !== undefined && endsCut(summary.grantRoot))
        return {
          kind: "fileChange",
          paths,
          ...(summary.grantRoot !== undefined ? { grantRoot: summary.grantRoot } : {}),
          complete: !cut,
          masked: false
        }
      }
      case "permissions": {
        const asked = Card.permissionsAsked(summary.permissions)
        let cut = true
        try {
          cut = (JSON.stringify(summary.permissions) ?? "").includes(SecretMask.Elided)
        } catch {
          cut = true
        }
        return {
          kind: "permissions",
          permissions: summary.permissions,
          ...(asked !== undefined ? { asked } : {}),
          cwd: summary.cwd,
          complete: !cut && asked !== undefined,
          masked: false
        }
      }
      case "mcpToolCall":
        return {
          kind: "mcpToolCall",
          mcp: {
            server: summary.server,
            tool: summary.tool,
            toolCall: true,
            noFields: view.offers.includes("Accept"),
            mode: "form"
          },
          complete: true,
          masked: false
        }
      case "elicitation":
        return {
          kind: "elicitation",
          mcp: {
            server: summary.server,
            tool: undefined,
            toolCall: false,
            noFields: summary.fields.length === 0,
            mode: summary.mode
          },
          complete: true,
          masked: false
        }
      default:
        return { kind: summary.kind, complete: true, masked: false }
    }
  })()
  return { ...facts, masked: containsMask(facts) }
}

/** What `toRequest` needs of a recorded card. */
export interface RecordedRequest {
  readonly method: string
  readonly threadId: string | undefined
  readonly turnId: string | undefined
  readonly facts: CardFacts
}

/** A request and its context rebuilt from facts, as `Policy.evaluate` reads them. */
export interface Rebuilt {
  readonly request: ServerRequests.DecodedRequest
  readonly context: CardTypes.CardContext
}

const str = (s: string | undefined): string => s ?? ""

/**
 * The request a card's facts describe, for `Policy.evaluate` (replay) and remembered rules.
 * Undefined for methods rules never decide (questions, dynamic tools, token refresh, ...) and for
 * facts of another kind than the method's.
 */
export const toRequest = (card: RecordedRequest): Rebuilt | undefined => {
  const f = card.facts
  const threadId = str(card.threadId)
  const turnId = str(card.turnId)
  const decoded = (params: Record<string, unknown>, context: CardTypes.CardContext = {}): Rebuilt | undefined => {
    const request = ServerRequests.decode(0, card.method, params)
    return request._tag === "Known" ? { request, context } : undefined
  }
  switch (card.method) {
    case "item/commandExecution/requestApproval":
      if (f.kind !== "command" || f.command === undefined) return undefined
      return decoded({
        threadId,
        turnId,
        itemId: "",
        command: f.command,
        ...(f.cwd !== undefined ? { cwd: f.cwd } : {})
      })
    case "execCommandApproval":
      if (f.kind !== "command" || f.command === undefined) return undefined
      return decoded({
        conversationId: threadId,
        callId: "",
        command: f.simple === true && f.argv !== undefined ? f.argv : ["/bin/bash", "-lc", f.command],
        cwd: str(f.cwd)
      })
    case "item/fileChange/requestApproval":
      if (f.kind !== "fileChange") return undefined
      return decoded(
        { threadId, turnId, itemId: "", ...(f.grantRoot !== undefined ? { grantRoot: f.grantRoot } : {}) },
        { fileChanges: f.paths ?? [] }
      )
    case "applyPatchApproval":
      if (f.kind !== "fileChange") return undefined
      // No change map: the rules read the recorded changes (the context), as they read a fileChange item's.
      return decoded(
        {
          conversationId: threadId,
          callId: "",
          fileChanges: null,
          ...(f.grantRoot !== undefined ? { grantRoot: f.grantRoot } : {})
        },
        { fileChanges: f.paths ?? [] }
      )
    case "item/permissions/requestApproval":
      if (f.kind !== "permissions") return undefined
      return decoded({ threadId, turnId, itemId: "", cwd: str(f.cwd), permissions: f.permissions ?? null })
    case "mcpServer/elicitation/request": {
      const m = f.mcp
      if (m === undefined) return undefined
      return decoded({
        threadId,
        turnId,
        serverName: m.server,
        mode: m.mode,
        message: "",
        requestedSchema: { type: "object", properties: m.noFields ? {} : { content: { type: "string" } } },
        _meta: m.toolCall
          ? { codex_approval_kind: "mcp_tool_call", ...(m.tool !== undefined ? { tool_name: m.tool } : {}) }
          : null
      })
    }
    default:
      return undefined
  }
}
