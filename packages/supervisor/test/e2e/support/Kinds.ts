/**
 * The server request kinds codex 0.171.0 can be made to send, each with how to trigger it from the
 * ScriptedModel, what its card must say, which decision accepts it, and what acceptance and refusal
 * must visibly do. `runKind` drives one kind through the real binary in one of four ways:
 *
 * - accept: the person accepts through the inbox; the effect happens (the command ran with exit 0,
 *   the file is on disk, the grant lets a later sandboxed write succeed, the MCP tool returns, the
 *   answer reaches the model);
 * - decline: the person declines; the turn still completes and the item is declined (or failed);
 * - deadline: nobody answers; the card refuses by itself at a ~300 ms deadline and the turn goes on;
 * - interrupt: the work item's turn is interrupted while the card is open; the card is withdrawn by
 *   the server or refused, and the turn ends interrupted.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { assert } from "@effect/vitest"
import type { Card } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import type { Decision as DecisionNs } from "@warden/protocol"
import { McpServer, ScriptedModel, Step } from "@warden/testkit"
import type { RealCodex } from "@warden/testkit"
import { Effect, Exit } from "effect"
import type { Scope } from "effect"
import type { Supervisor, WorkItem } from "../../../src/index.js"
import type { Real } from "./RealSupervisor.js"
import { item, mcpName, mcpRegistration, withRealSupervisor } from "./RealSupervisor.js"

export type Mode = "accept" | "decline" | "deadline" | "interrupt"

type Item = Record<string, unknown>

export interface Context {
  readonly real: Real
  /** A fresh directory outside the workspace and outside /tmp (the sandbox keeps /tmp writable). */
  readonly outside: string
  readonly result: WorkItem.WorkResult
  readonly itemById: (id: string) => Item | undefined
  /** The output the model was sent for `callId` (JSON text), if any. */
  readonly outputFor: (callId: string) => Effect.Effect<string | undefined>
}

export interface Kind {
  readonly name: string
  readonly method: string
  readonly codex: Omit<RealCodex.Options, "baseUrl">
  readonly supervisor?: Supervisor.SupervisorConfig
  readonly threadParams?: Readonly<Record<string, unknown>>
  readonly steps: (outside: string) => ReadonlyArray<typeof Step.Step.Encoded>
  readonly summary: (card: Card.CardView, outside: string) => void
  readonly accept: DecisionNs.Decision
  readonly accepted: (ctx: Context) => Effect.Effect<void>
  /** After a decline or a refusal (deadline): the request's effect did not happen. */
  readonly refused: (ctx: Context) => Effect.Effect<void>
}

const asRecord = (u: unknown): Item => (typeof u === "object" && u !== null ? (u as Item) : {})

const done = Step.message("done")

export const command: Kind = {
  name: "command",
  method: "item/commandExecution/requestApproval",
  codex: {},
  steps: () => [
    Step.execCommand({
      cmd: "echo warden-e2e-ran",
      escalated: true,
      justification: "e2e: run outside the sandbox",
      callId: "call_cmd"
    }),
    done
  ],
  summary: (card) => {
    assert.strictEqual(card.summary.kind, "command")
    if (card.summary.kind === "command") {
      assert.include(card.summary.command, "echo warden-e2e-ran")
      assert.strictEqual(card.summary.reason, "e2e: run outside the sandbox")
    }
  },
  accept: Decision.Accept,
  accepted: ({ itemById }) =>
    Effect.sync(() => {
      const item = itemById("call_cmd")
      assert.strictEqual(item?.["status"], "completed", JSON.stringify(item))
      assert.strictEqual(item?.["exitCode"], 0)
      assert.include(String(item?.["aggregatedOutput"]), "warden-e2e-ran")
    }),
  refused: ({ itemById }) =>
    Effect.sync(() => {
      const item = itemById("call_cmd")
      assert.strictEqual(item?.["status"], "declined", JSON.stringify(item))
      assert.notInclude(String(item?.["aggregatedOutput"] ?? ""), "warden-e2e-ran")
    })
}

export const fileChange: Kind = {
  name: "file change",
  method: "item/fileChange/requestApproval",
  codex: {},
  steps: (outside) => [
    Step.applyPatch(Path.join(outside, "patched.txt"), "hello from warden\n", { callId: "call_patch" }),
    done
  ],
  summary: (card, outside) => {
    assert.strictEqual(card.summary.kind, "fileChange")
    if (card.summary.kind === "fileChange") {
      assert.deepStrictEqual(
        card.summary.changes.map((c) => c.path),
        [Path.join(outside, "patched.txt")]
      )
    }
    assert.include(card.title, Path.join(outside, "patched.txt"))
  },
  accept: Decision.Accept,
  accepted: ({ itemById, outside }) =>
    Effect.sync(() => {
      assert.strictEqual(Fs.readFileSync(Path.join(outside, "patched.txt"), "utf8"), "hello from warden\n")
      assert.strictEqual(itemById("call_patch")?.["status"], "completed")
    }),
  refused: ({ itemById, outside }) =>
    Effect.sync(() => {
      assert.isFalse(Fs.existsSync(Path.join(outside, "patched.txt")), "nothing written")
      assert.strictEqual(itemById("call_patch")?.["status"], "declined")
    })
}

export const permissions: Kind = {
  name: "permissions",
  method: "item/permissions/requestApproval",
  codex: { features: ["request_permissions_tool"] },
  steps: (outside) => [
    Step.requestPermissions({ reason: "e2e wants to write outside", write: [outside], callId: "call_perm" }),
    // A sandboxed write (no escalation): it succeeds only if the grant took effect.
    Step.execCommand({ cmd: `touch ${outside}/granted && echo wrote-granted`, callId: "call_touch" }),
    done
  ],
  summary: (card, outside) => {
    assert.strictEqual(card.summary.kind, "permissions")
    assert.include(JSON.stringify(card.summary.kind === "permissions" ? card.summary.permissions : null), outside)
  },
  accept: Decision.Accept,
  accepted: ({ itemById, outside }) =>
    Effect.sync(() => {
      const touch = itemById("call_touch")
      assert.strictEqual(touch?.["exitCode"], 0, String(touch?.["aggregatedOutput"]))
      assert.isTrue(Fs.existsSync(Path.join(outside, "granted")), "the granted write happened")
    }),
  refused: ({ itemById, outside }) =>
    Effect.sync(() => {
      const touch = itemById("call_touch")
      assert.notStrictEqual(touch?.["exitCode"], 0, String(touch?.["aggregatedOutput"]))
      assert.isFalse(Fs.existsSync(Path.join(outside, "granted")), "the sandbox still refuses the write")
    })
}

export const userInput: Kind = {
  name: "user input",
  method: "item/tool/requestUserInput",
  codex: { features: ["default_mode_request_user_input"] },
  steps: () => [
    Step.requestUserInput(
      [
        {
          id: "colour",
          header: "Colour",
          question: "Which colour?",
          options: [
            { label: "Red", description: "Warm." },
            { label: "Blue", description: "Cool." }
          ]
        }
      ],
      { callId: "call_rui" }
    ),
    done
  ],
  summary: (card) => {
    assert.strictEqual(card.summary.kind, "userInput")
    assert.deepStrictEqual(card.summary.kind === "userInput" ? card.summary.questions.map((q) => q.id) : [], ["colour"])
  },
  accept: { _tag: "Answers", answers: { colour: ["Blue"] } },
  accepted: ({ outputFor }) =>
    Effect.map(outputFor("call_rui"), (output) => {
      assert.include(output ?? "", "Blue", "the answer reached the model")
    }),
  refused: ({ outputFor }) =>
    Effect.map(outputFor("call_rui"), (output) => {
      assert.isDefined(output, "the tool call still got an output")
      assert.notInclude(output ?? "", "Blue")
    })
}

const mcpItem = (ctx: Context, callId: string) => ctx.itemById(callId)
const mcpText = (item: Item | undefined) =>
  JSON.stringify(asRecord(item?.["result"])["content"] ?? item?.["error"] ?? null)

export const mcpToolCall: Kind = {
  name: "MCP tool call (poke)",
  method: "mcpServer/elicitation/request",
  codex: { mcpServers: [mcpRegistration()] },
  steps: () => [Step.mcpCall(mcpName, McpServer.tools.needsApproval, { why: "e2e" }, { callId: "call_poke" }), done],
  summary: (card) => {
    assert.strictEqual(card.summary.kind, "mcpToolCall")
    if (card.summary.kind === "mcpToolCall") {
      assert.strictEqual(card.summary.server, mcpName)
      assert.strictEqual(card.summary.tool, "poke")
    }
  },
  accept: Decision.Accept,
  accepted: (ctx) =>
    Effect.sync(() => {
      const item = mcpItem(ctx, "call_poke")
      assert.strictEqual(item?.["status"], "completed", JSON.stringify(item))
      assert.include(mcpText(item), "poked: e2e")
    }),
  refused: (ctx) =>
    Effect.sync(() => {
      const item = mcpItem(ctx, "call_poke")
      assert.strictEqual(item?.["status"], "failed", JSON.stringify(item))
      assert.notInclude(mcpText(item), "poked: e2e")
    })
}

export const elicitation: Kind = {
  name: "MCP elicitation (ask)",
  method: "mcpServer/elicitation/request",
  codex: { mcpServers: [mcpRegistration()] },
  steps: () => [Step.mcpCall(mcpName, McpServer.tools.elicits, { why: "e2e" }, { callId: "call_ask" }), done],
  summary: (card) => {
    assert.strictEqual(card.summary.kind, "elicitation")
    if (card.summary.kind === "elicitation") {
      assert.strictEqual(card.summary.server, mcpName)
      assert.strictEqual(card.summary.message, McpServer.askMessage)
      assert.deepStrictEqual(
        card.summary.fields.map((f) => f.name),
        ["colour"]
      )
    }
  },
  accept: { _tag: "Elicitation", action: "accept", content: { colour: "green" } },
  accepted: (ctx) =>
    Effect.sync(() => {
      const item = mcpItem(ctx, "call_ask")
      assert.strictEqual(item?.["status"], "completed", JSON.stringify(item))
      assert.include(mcpText(item), `\\"colour\\":\\"green\\"`)
    }),
  refused: (ctx) =>
    Effect.sync(() => {
      const item = mcpItem(ctx, "call_ask")
      assert.notInclude(mcpText(item), "green")
      assert.include(mcpText(item), "decline", "the MCP server heard a decline")
    })
}

export const dynamicTool: Kind = {
  name: "dynamic tool call",
  method: "item/tool/call",
  codex: {},
  supervisor: { connection: { capabilities: { experimentalApi: true } } },
  threadParams: {
    dynamicTools: [
      {
        type: "function",
        name: "warden_dyn",
        description: "An e2e dynamic tool",
        inputSchema: { type: "object", properties: { x: { type: "string" } } }
      }
    ]
  },
  steps: () => [Step.functionCall("warden_dyn", { x: "hello" }, { callId: "call_dyn" }), done],
  summary: (card) => {
    assert.strictEqual(card.summary.kind, "dynamicTool")
    if (card.summary.kind === "dynamicTool") {
      assert.strictEqual(card.summary.tool, "warden_dyn")
      assert.deepStrictEqual(card.summary.arguments, { x: "hello" })
    }
  },
  accept: { _tag: "ToolResult", contentItems: [{ type: "inputText", text: "dyn says hi" }], success: true },
  accepted: (ctx) =>
    Effect.gen(function* () {
      assert.strictEqual(ctx.itemById("call_dyn")?.["status"], "completed", JSON.stringify(ctx.itemById("call_dyn")))
      assert.include((yield* ctx.outputFor("call_dyn")) ?? "", "dyn says hi")
    }),
  refused: (ctx) =>
    Effect.gen(function* () {
      assert.strictEqual(ctx.itemById("call_dyn")?.["status"], "failed", JSON.stringify(ctx.itemById("call_dyn")))
      assert.notInclude((yield* ctx.outputFor("call_dyn")) ?? "", "dyn says hi")
    })
}

/** A fresh directory under /var/tmp (outside the workspace and /tmp), removed afterwards. */
export const outsideDir = Effect.acquireRelease(
  Effect.sync(() => Fs.realpathSync(Fs.mkdtempSync(Path.join("/var/tmp", "warden-e2e-")))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** Drive `kind` through the real binary with the Supervisor, in `mode`. */
/** Drive one kind in one mode; returns how its card settled (the test file states what it expects). */
export const runKind = (kind: Kind, mode: Mode): Effect.Effect<Card.Outcome | undefined, Error, Scope.Scope> =>
  Effect.gen(function* () {
    const outside = yield* outsideDir
    let outcome: Card.Outcome | undefined
    yield* withRealSupervisor(
      {
        name: `${kind.name} (${mode})`,
        script: { lanes: { k: kind.steps(outside) } },
        codex: kind.codex,
        supervisor: {
          ...kind.supervisor,
          ...(mode === "deadline" ? { approvals: { deadlines: { default: "300 millis" } } } : {}),
          stallTimeout: "30 seconds",
          interruptTimeout: "5 seconds",
          restart: { maxAttempts: 0 }
        }
      },
      (real) =>
        Effect.gen(function* () {
          const handle = yield* real.supervisor.start(
            item(real, "k1", "k", kind.threadParams ? { threadParams: kind.threadParams } : {})
          )
          const card = yield* real.cardOf("k1")
          assert.strictEqual(card.method, kind.method)
          kind.summary(card, outside)
          assert.strictEqual(card.threadId, yield* handle.threadId)

          switch (mode) {
            case "accept":
            case "decline": {
              const answered = yield* real.supervisor.inbox.answer(
                card.id,
                mode === "accept" ? kind.accept : Decision.Decline
              )
              assert.strictEqual(answered._tag, "Settled")
              if (answered._tag === "Settled") {
                outcome = answered.settlement.outcome
                assert.strictEqual(
                  answered.settlement.outcome,
                  mode === "accept" ? "accepted" : "declined",
                  answered.settlement.detail
                )
                assert.isTrue(answered.settlement.written)
              }
              break
            }
            case "deadline": {
              const settled = yield* real.settlementOf(card.id)
              outcome = settled.outcome
              assert.strictEqual(settled.outcome, "timeout")
              assert.strictEqual(settled.source._tag, "Deadline")
              assert.isTrue(settled.written, "the refusal was written")
              assert.isAtLeast(settled.latencyMs, 250)
              break
            }
            case "interrupt": {
              yield* handle.interrupt
              const settled = yield* real.settlementOf(card.id)
              outcome = settled.outcome
              assert.include(["withdrawn", "refused"], settled.outcome, settled.detail)
              // eslint-disable-next-line no-console
              console.info(
                `[e2e] ${kind.name}: interrupted with the card open -> ${settled.outcome} (${settled.source._tag}), written: ${settled.written}`
              )
              break
            }
          }

          const exit = yield* Effect.exit(handle.await)
          assert.isTrue(Exit.isSuccess(exit), Exit.isFailure(exit) ? String(exit.cause) : "")
          if (Exit.isFailure(exit)) return
          const result = exit.value
          const items = new Map(result.items.map((i) => [String(i["id"]), i]))
          const requests = yield* real.model.requests
          const ctx: Context = {
            real,
            outside,
            result,
            itemById: (id) => items.get(id),
            outputFor: (callId) =>
              Effect.succeed(
                (() => {
                  for (const r of [...requests].reverse()) {
                    const o = ScriptedModel.outputFor(r, callId)
                    if (o._tag === "Some") return JSON.stringify(o.value.output)
                  }
                  return undefined
                })()
              )
          }
          if (mode === "interrupt") {
            assert.strictEqual(result.status, "interrupted")
            assert.isUndefined(items.get("call_cmd")?.["exitCode"] ?? undefined)
            return
          }
          assert.strictEqual(result.status, "completed", "the turn carried on to its end")
          assert.strictEqual(result.finalMessage, "done")
          yield* mode === "accept" ? kind.accepted(ctx) : kind.refused(ctx)
          assert.deepStrictEqual((yield* real.supervisor.inbox.open).length, 0)
          assert.isFalse(
            requests.some((r) => r.served === "Exhausted"),
            "the model was asked no more than scripted"
          )
        })
    )
    return outcome
  })
