/**
 * A tiny stdio MCP server for tests (`mcp-server.mjs` beside this file, plain Node, no SDK) and the
 * `-c mcp_servers.NAME={...}` override that registers it with codex.
 *
 * Its tools (codex offers them to the model in the namespace `mcp__<NAME>`; call them with
 * `Step.mcpCall(NAME, tool, {why})`):
 * - `ping` (annotated `readOnlyHint: true`): codex runs it without asking; returns `pong: <why>`.
 * - `poke` (not read-only): codex first sends `mcpServer/elicitation/request` with
 *   `_meta.codex_approval_kind: "mcp_tool_call"` and an empty form; declining fails the tool call.
 * - `ask` (read-only): sends its own `elicitation/create` (a form asking `colour`: red/green/blue)
 *   that codex forwards as `mcpServer/elicitation/request`; returns
 *   `elicitation answer: <JSON of the answer>`.
 */
import * as Fs from "node:fs"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"

/** Absolute path of the server script. */
export const scriptPath: string = fileURLToPath(new URL("./mcp-server.mjs", import.meta.url))

/** The server's tool names by what codex does with them (see the module doc). */
export const tools = {
  /** Read-only: no approval. */
  readOnly: "ping",
  /** Not read-only: codex asks an `mcp_tool_call` elicitation before running it. */
  needsApproval: "poke",
  /** Sends its own `elicitation/create` and returns the answer. */
  elicits: "ask"
} as const

/** The message of the `ask` tool's elicitation. */
export const askMessage = "Testkit MCP server asks: which colour?"

/** How codex should start an MCP server. */
export interface Registration {
  /** The key under `mcp_servers` (letters, digits, `_`, `-`); the model sees `mcp__<name>`. */
  readonly name: string
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>>
}

/** The testkit server, started with this Node (`process.execPath`). `logFile`: every message it
 * receives is appended there, one JSON per line (see {@link readLog}). */
export const registration = (options?: { readonly name?: string; readonly logFile?: string }): Registration => ({
  name: options?.name ?? "testkit",
  command: process.execPath,
  args: [scriptPath, ...(options?.logFile === undefined ? [] : ["--log", options.logFile])]
})

/** The namespace codex offers the server's tools in. */
export const namespace = (name: string): string => `mcp__${name}`

const toml = (s: string) => JSON.stringify(s)

/** `mcp_servers.NAME={command="...", args=[...], env={...}}`, the value of one `-c` flag. */
export const override = (registration: Registration): string => {
  const fields = [
    `command=${toml(registration.command)}`,
    `args=[${registration.args.map(toml).join(", ")}]`,
    ...(registration.env === undefined
      ? []
      : [
          `env={${Object.entries(registration.env)
            .map(([k, v]) => `${toml(k)}=${toml(v)}`)
            .join(", ")}}`
        ])
  ]
  return `mcp_servers.${registration.name}={${fields.join(", ")}}`
}

/** The messages the server received, from its `logFile` (empty if it does not exist yet). */
export const readLog = (logFile: string): Effect.Effect<ReadonlyArray<unknown>> =>
  Effect.sync(() => {
    if (!Fs.existsSync(logFile)) return []
    return Fs.readFileSync(logFile, "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l) as unknown)
  })
