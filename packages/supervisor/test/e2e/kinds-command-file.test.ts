/**
 * End to end against the REAL pinned codex app-server, through the Supervisor on the child
 * process transport: command approvals and file-change approvals, each accepted, declined, left to
 * its ~300 ms deadline, and interrupted while open (see support/Kinds.ts for what each checks).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { command, fileChange, runKind } from "./support/Kinds.js"

for (const kind of [command, fileChange]) {
  describe(`${kind.name} approval on the real codex app-server`, () => {
    it.scopedLive("accept: the card says what it is about, and the effect happens", () =>
      runKind(kind, "accept").pipe(Effect.tap((outcome) => assert.strictEqual(outcome, "accepted")))
    )
    it.scopedLive("decline: the turn goes on and completes, the item is declined", () =>
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
