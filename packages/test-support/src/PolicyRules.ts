/**
 * Policy rules for tests, from plain data: the rule builders and `rules`, which decodes a list as
 * a rules file is decoded (a bad rule throws). The approvals' tests and the ledger's share this one.
 */
import { Policy } from "@warden/approvals"
import { Either } from "effect"

/** Rules from plain data (a test's own, so a bad one throws). */
export const rules = (...list: ReadonlyArray<unknown>): Policy.Rules => {
  const decoded = Policy.decodeRules({ rules: list })
  if (Either.isLeft(decoded)) throw new Error(decoded.left)
  return decoded.right
}

/** Allows the commands that start with `argvPrefix`. */
export const allowCmd = (id: string, ...argvPrefix: Array<string>) => ({
  id,
  effect: "allow",
  match: { command: { argvPrefix } }
})
/** Denies the commands that start with `argvPrefix`. */
export const denyCmd = (id: string, ...argvPrefix: Array<string>) => ({
  id,
  effect: "deny",
  match: { command: { argvPrefix } }
})
/** Allows file changes under `under`. */
export const allowPath = (id: string, under: string) => ({ id, effect: "allow", match: { path: { under } } })
/** Denies file changes under `under`. */
export const denyPath = (id: string, under: string) => ({ id, effect: "deny", match: { path: { under } } })
/** Allows the MCP tool calls to `server` (to its `tool` only, when given). */
export const allowMcp = (id: string, server: string, tool?: string) => ({
  id,
  effect: "allow",
  match: { mcp: tool === undefined ? { server } : { server, tool } }
})
