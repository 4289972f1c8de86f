#!/usr/bin/env node
// A tiny stdio MCP server for tests (no SDK): JSON-RPC 2.0, one JSON object per line.
// Handles initialize, notifications/initialized, ping, tools/list, tools/call.
// Tools:
//   ping  annotated readOnlyHint:true: returns "pong: <why>" (codex runs it without asking)
//   poke  not read-only (destructiveHint:true): returns "poked: <why>" (codex asks an
//         mcpServer/elicitation/request with _meta.codex_approval_kind "mcp_tool_call" first)
//   ask   readOnlyHint:true; sends its own `elicitation/create` request to the client and returns
//         "elicitation answer: <JSON of the result>" (or "elicitation error: <JSON>", isError true)
// Options: --log FILE appends every message received from the client, one JSON per line.
// Exits when stdin ends.
import { appendFileSync } from "node:fs"
import { createInterface } from "node:readline"

const logIndex = process.argv.indexOf("--log")
const logFile = logIndex >= 0 ? process.argv[logIndex + 1] : undefined

const send = (message) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n")
const text = (t, isError = false) => ({ content: [{ type: "text", text: t }], ...(isError ? { isError: true } : {}) })

const whyArg = {
  type: "object",
  properties: { why: { type: "string", description: "Why the tool is called." } },
  additionalProperties: false
}

const tools = [
  {
    name: "ping",
    title: "Ping",
    description: "Returns pong. Annotated read-only.",
    inputSchema: whyArg,
    annotations: { title: "Ping", readOnlyHint: true }
  },
  {
    name: "poke",
    title: "Poke",
    description: "Returns poked. Not annotated read-only (may need approval).",
    inputSchema: whyArg,
    annotations: { title: "Poke", readOnlyHint: false, destructiveHint: true }
  },
  {
    name: "ask",
    title: "Ask",
    description: "Asks the user a question through an MCP elicitation and returns the answer.",
    inputSchema: whyArg,
    annotations: { title: "Ask", readOnlyHint: true }
  }
]

let nextServerId = 1
const pending = new Map() // our request id -> resolve(responseMessage)

const request = (method, params) =>
  new Promise((resolve) => {
    const id = `testkit-${nextServerId++}`
    pending.set(id, resolve)
    send({ id, method, params })
  })

const callTool = async (name, args) => {
  const why = typeof args?.why === "string" ? args.why : ""
  switch (name) {
    case "ping":
      return text(`pong: ${why}`)
    case "poke":
      return text(`poked: ${why}`)
    case "ask": {
      const answer = await request("elicitation/create", {
        message: "Testkit MCP server asks: which colour?",
        requestedSchema: {
          type: "object",
          properties: { colour: { type: "string", title: "Colour", enum: ["red", "green", "blue"] } },
          required: ["colour"]
        }
      })
      return "error" in answer
        ? text(`elicitation error: ${JSON.stringify(answer.error)}`, true)
        : text(`elicitation answer: ${JSON.stringify(answer.result)}`)
    }
    default:
      return undefined
  }
}

const handle = async (msg) => {
  if (logFile !== undefined) appendFileSync(logFile, JSON.stringify(msg) + "\n")
  // a response to one of our requests
  if (msg.method === undefined && msg.id !== undefined) {
    const resolve = pending.get(msg.id)
    if (resolve !== undefined) {
      pending.delete(msg.id)
      resolve(msg)
    }
    return
  }
  if (msg.id === undefined) return // notifications (notifications/initialized, cancelled, ...)
  switch (msg.method) {
    case "initialize":
      return send({
        id: msg.id,
        result: {
          protocolVersion: msg.params?.protocolVersion ?? "2025-06-18",
          capabilities: { tools: { listChanged: false } },
          serverInfo: { name: "warden-testkit-mcp", version: "0.1.0" }
        }
      })
    case "ping":
      return send({ id: msg.id, result: {} })
    case "tools/list":
      return send({ id: msg.id, result: { tools } })
    case "tools/call": {
      const result = await callTool(msg.params?.name, msg.params?.arguments)
      return result === undefined
        ? send({ id: msg.id, error: { code: -32602, message: `unknown tool ${msg.params?.name}` } })
        : send({ id: msg.id, result })
    }
    default:
      return send({ id: msg.id, error: { code: -32601, message: `method not found: ${msg.method}` } })
  }
}

const rl = createInterface({ input: process.stdin })
rl.on("line", (line) => {
  if (line.trim() === "") return
  let msg
  try {
    msg = JSON.parse(line)
  } catch {
    process.stderr.write(`testkit mcp: unparsable line: ${line.slice(0, 200)}\n`)
    return
  }
  handle(msg).catch((e) => process.stderr.write(`testkit mcp: ${e?.stack ?? e}\n`))
})
rl.on("close", () => process.exit(0))
