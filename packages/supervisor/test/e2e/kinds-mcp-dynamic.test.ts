/**
 * End to end against the REAL pinned codex app-server, through the Supervisor on the child
 * process transport: MCP elicitations (the testkit MCP server's `poke`, a tool-call approval, and
 * `ask`, the server's own form) and dynamic tool calls (`item/tool/call`, with `experimentalApi`
 * and `dynamicTools`), each accepted, declined, left to its ~300 ms deadline, and interrupted while
 * open (see support/Kinds.ts for what each checks).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { dynamicTool, elicitation, mcpToolCall, runKind } from "./support/Kinds.js"

for (const kind of [mcpToolCall, elicitation, dynamicTool]) {
  describe(`${kind.name} on the real codex app-server`, () => {
    it.scopedLive("accept: the card says what it is about, and the tool returns", () =>
      runKind(kind, "accept").pipe(Effect.tap((outcome) => assert.strictEqual(outcome, "accepted")))
    )
    it.scopedLive("decline: the turn goes on and completes, the tool call did not happen", () =>
      runKind(kind, "decline").pipe(Effect.tap((outcome) => assert.strictEqual(outcome, "declined")))
    )
    it.scopedLive("deadline: an unanswered card refuses itself at its deadline; the turn goes on", () =>
      runKind(kind, "deadline").pipe(Effect.tap((outcome) => assert.strictEqual(outcome, "timeout")))
    )
    it.scopedLive("interrupt while the card is open: the card is withdrawn or refused, the turn ends interrupted", () =>
      runKind(kind, "interrupt").pipe(Effect.tap((outcome) => assert.include(["withdrawn", "refused"], outcome)))
    )
  })
}
