/**
 * Smoke tests of the testkit against the REAL pinned codex binary (0.171.0), driven directly over
 * stdio by a raw driver (test/support/AppServerChild.ts): the ScriptedModel scripts the model,
 * RealCodex prepares the launch, McpServer provides MCP tools. Each test checks that every process it
 * started (codex and its descendants) is gone once its scope is closed, and that the temporary
 * directories were removed.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, ExecutionStrategy, Exit, Scope } from "effect"
import { McpServer, RealCodex, ScriptedModel, Step } from "../src/index.js"
import * as AppServerChild from "./support/AppServerChild.js"
import type { Frame } from "./support/AppServerChild.js"

interface Ctx {
  readonly model: ScriptedModel.Service
  readonly launch: RealCodex.Launch
  readonly child: AppServerChild.AppServerChild
  /** initialize → initialized → thread/start (on-request, workspace-write); returns the thread id. */
  readonly startThread: Effect.Effect<string, AppServerChild.DriverError>
  /** turn/start with one text input; returns the turn id. */
  readonly startTurn: (threadId: string, text: string) => Effect.Effect<string, AppServerChild.DriverError>
  readonly turnCompleted: (turnId: string) => Effect.Effect<Frame, AppServerChild.DriverError>
}

/**
 * Runs `body` with a model, a launch and a running app-server in their own scope, closes that scope,
 * then asserts no process of the tree remains and the directories are gone.
 */
const withCodex = <A, E>(
  name: string,
  script: ScriptedModel.ScriptInput,
  options: Omit<RealCodex.Options, "baseUrl">,
  body: (ctx: Ctx) => Effect.Effect<A, E, Scope.Scope>
) =>
  Effect.gen(function* () {
    const before = new Set(AppServerChild.descendants(process.pid))
    const scope = yield* Effect.flatMap(Effect.scope, (s) => Scope.fork(s, ExecutionStrategy.sequential))
    const model = yield* ScriptedModel.make(script).pipe(Scope.extend(scope))
    const launch = yield* RealCodex.make({ ...options, baseUrl: model.baseUrl }).pipe(Scope.extend(scope))
    const t0 = Date.now()
    const child = yield* AppServerChild.spawn(launch).pipe(Scope.extend(scope))
    let initMs = 0
    let turnStartedAt = 0
    const ctx: Ctx = {
      model,
      launch,
      child,
      startThread: Effect.gen(function* () {
        const init = yield* child.request("initialize", { clientInfo: { name: "warden-testkit", version: "0.0.0" } })
        initMs = Date.now() - t0
        assert.strictEqual(init.codexHome, launch.codexHome)
        yield* child.notify("initialized")
        const started = yield* child.request("thread/start", {
          approvalPolicy: "on-request",
          sandbox: "workspace-write",
          cwd: launch.workspace
        })
        return started.thread.id as string
      }),
      startTurn: (threadId, text) =>
        Effect.sync(() => {
          turnStartedAt = Date.now()
        }).pipe(
          Effect.zipRight(child.request("turn/start", { threadId, input: [{ type: "text", text }] })),
          Effect.map((r) => r.turn.id as string)
        ),
      turnCompleted: (turnId) =>
        child.waitFor(`turn/completed ${turnId}`, (f) => f.method === "turn/completed" && f.params.turn.id === turnId)
    }
    let tree: Array<number> = []
    const result = yield* body(ctx).pipe(
      Effect.onExit((exit) =>
        Effect.sync(() => {
          tree = [child.pid, ...AppServerChild.descendants(child.pid)]
        }).pipe(Effect.zipRight(Scope.close(scope, exit)))
      )
    )
    const turnMs = Date.now() - turnStartedAt
    // eslint-disable-next-line no-console
    console.info(
      `[testkit e2e timing] ${name}: spawn→initialize ${initMs} ms, turn/start→turn/completed ${turnMs} ms, total ${Date.now() - t0} ms`
    )
    assert.deepStrictEqual(tree.filter(AppServerChild.isAlive), [], "no process of the app-server tree remains")
    assert.deepStrictEqual(
      AppServerChild.descendants(process.pid).filter((p) => !before.has(p)),
      []
    )
    assert.isFalse(Fs.existsSync(launch.codexHome), "CODEX_HOME removed")
    assert.isFalse(Fs.existsSync(launch.workspace), "workspace removed")
    const exited = yield* child.exited
    assert.isTrue(exited.code === 0 || exited.signal !== null, `exited: ${JSON.stringify(exited)}`)
    return result
  })

const serverRequest = (method: string) => (f: Frame) => f.method === method && f.id !== undefined

describe("real codex app-server (0.171.0) driven by the testkit", () => {
  it.live("RealCodex.version runs the pinned binary", () =>
    Effect.gen(function* () {
      const version = yield* RealCodex.version
      const pinned = yield* RealCodex.pinnedVersion
      assert.strictEqual(version, `codex-cli ${pinned}`)
      const exe = yield* RealCodex.binaryPath
      assert.isTrue(exe.endsWith(Path.join("bin", "codex")))
    })
  )

  it.scopedLive("RealCodex.make builds the launch and removes its directories on scope close", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const launch = yield* RealCodex.make({
        baseUrl: "http://127.0.0.1:1/v1",
        features: ["request_permissions_tool"],
        config: { "sandbox_workspace_write.network_access": "false" },
        mcpServers: [McpServer.registration({ name: "tk" })],
        requestMaxRetries: 2
      }).pipe(Scope.extend(scope))
      assert.isTrue(Fs.statSync(launch.workspace).isDirectory())
      assert.strictEqual(launch.env["CODEX_HOME"], launch.codexHome)
      assert.strictEqual(launch.env["OPENAI_API_KEY"], "dummy")
      assert.strictEqual(launch.cwd, launch.workspace)
      assert.deepStrictEqual(launch.args.slice(0, 3), ["app-server", "-c", `model_provider="mock"`])
      assert.include(
        launch.args,
        `model_providers.mock={name="mock", base_url="http://127.0.0.1:1/v1", wire_api="responses", env_key="OPENAI_API_KEY", supports_websockets=false, request_max_retries=2, stream_max_retries=0}`
      )
      assert.include(launch.args.join(" "), "--disable plugins --enable request_permissions_tool")
      assert.include(
        launch.args,
        `mcp_servers.tk={command=${JSON.stringify(process.execPath)}, args=[${JSON.stringify(McpServer.scriptPath)}]}`
      )
      assert.include(launch.args, "sandbox_workspace_write.network_access=false")
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(Fs.existsSync(launch.codexHome))
      const bad = yield* Effect.flip(
        RealCodex.make({ baseUrl: "x", mcpServers: [{ name: "a b", command: "x", args: [] }] })
      )
      assert.strictEqual(bad.reason, "InvalidOption")
    })
  )

  it.scopedLive("escalated exec_command: approval request, accept, exit 0, output reaches the model", () =>
    withCodex(
      "command approval",
      {
        lanes: {
          cmd: [
            Step.execCommand({
              cmd: "echo warden-smoke-output",
              escalated: true,
              justification: "smoke: run outside the sandbox",
              callId: "call_smoke"
            }),
            Step.message("after accept")
          ]
        }
      },
      {},
      ({ child, model, startThread, startTurn, turnCompleted }) =>
        Effect.gen(function* () {
          const threadId = yield* startThread
          const turnId = yield* startTurn(threadId, `${ScriptedModel.laneMarker("cmd")} run the smoke command`)

          const approval = yield* child.waitFor(
            "command approval",
            serverRequest("item/commandExecution/requestApproval")
          )
          assert.strictEqual(approval.params.threadId, threadId)
          assert.strictEqual(approval.params.turnId, turnId)
          assert.strictEqual(approval.params.itemId, "call_smoke")
          assert.strictEqual(approval.params.reason, "smoke: run outside the sandbox")
          assert.include(approval.params.command, "echo warden-smoke-output")
          yield* child.respond(approval.id!, { decision: "accept" })

          const item = yield* child.waitFor(
            "commandExecution completed",
            (f) => f.method === "item/completed" && f.params.item.id === "call_smoke"
          )
          assert.strictEqual(item.params.item.type, "commandExecution")
          assert.strictEqual(item.params.item.status, "completed")
          assert.strictEqual(item.params.item.exitCode, 0)
          assert.include(item.params.item.aggregatedOutput, "warden-smoke-output")

          const done = yield* turnCompleted(turnId)
          assert.strictEqual(done.params.turn.status, "completed")
          const resolved = yield* child.waitFor("serverRequest/resolved", (f) => f.method === "serverRequest/resolved")
          assert.strictEqual(resolved.params.requestId, approval.id)

          const requests = yield* model.requests
          assert.deepStrictEqual(
            requests.map((r) => [r.lane, r.served]),
            [
              ["cmd", "Reply"],
              ["cmd", "Reply"]
            ]
          )
          const last = ScriptedModel.lastInputItem(requests[1]!) as ScriptedModel.FunctionCallOutput
          assert.strictEqual(last.type, "function_call_output")
          assert.strictEqual(last.call_id, "call_smoke")
          assert.include(String(last.output), "warden-smoke-output")
          assert.include(String(last.output), "exited with code 0")
        })
    )
  )

  it.scopedLive(
    "MCP: read-only tool runs unasked, own elicitation/create and tool-call approval reach the client",
    () =>
      Effect.gen(function* () {
        const logDir = yield* Effect.acquireRelease(
          Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-mcp-log-"))),
          (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
        )
        const logFile = Path.join(logDir, "mcp.jsonl")
        yield* withCodex(
          "mcp",
          [
            Step.mcpCall("tk", McpServer.tools.readOnly, { why: "smoke" }, { callId: "call_ping" }),
            Step.mcpCall("tk", McpServer.tools.elicits, { why: "smoke" }, { callId: "call_ask" }),
            Step.mcpCall("tk", McpServer.tools.needsApproval, { why: "smoke" }, { callId: "call_poke" }),
            Step.message("after mcp")
          ],
          { mcpServers: [McpServer.registration({ name: "tk", logFile })] },
          ({ child, model, startThread, startTurn, turnCompleted }) =>
            Effect.gen(function* () {
              const threadId = yield* startThread
              const turnId = yield* startTurn(threadId, "use the mcp tools")
              const completedItem = (id: string) =>
                child.waitFor(
                  `mcpToolCall ${id} completed`,
                  (f) => f.method === "item/completed" && f.params.item.id === id
                )

              const ping = yield* completedItem("call_ping")
              const mcpProcesses = AppServerChild.descendants(child.pid).filter((pid) =>
                AppServerChild.commandLine(pid).includes(McpServer.scriptPath)
              )
              assert.strictEqual(
                mcpProcesses.length,
                1,
                "codex started the testkit MCP server (its child, stopped with it)"
              )
              assert.strictEqual(ping.params.item.type, "mcpToolCall")
              assert.strictEqual(ping.params.item.status, "completed")
              assert.deepStrictEqual(ping.params.item.result.content, [{ type: "text", text: "pong: smoke" }])

              const ask = yield* child.waitFor("ask elicitation", serverRequest("mcpServer/elicitation/request"))
              assert.strictEqual(ask.params.serverName, "tk")
              assert.strictEqual(ask.params.threadId, threadId)
              assert.strictEqual(ask.params.message, McpServer.askMessage)
              assert.deepStrictEqual(Object.keys(ask.params.requestedSchema.properties), ["colour"])
              yield* child.respond(ask.id!, { action: "accept", content: { colour: "green" } })
              const asked = yield* completedItem("call_ask")
              assert.strictEqual(asked.params.item.status, "completed")
              assert.include(asked.params.item.result.content[0].text, `"colour":"green"`)

              const poke = yield* child.waitFor(
                "poke approval",
                (f) => serverRequest("mcpServer/elicitation/request")(f) && f.id !== ask.id
              )
              assert.strictEqual(poke.params._meta.codex_approval_kind, "mcp_tool_call")
              assert.strictEqual(poke.params._meta.tool_name, "poke")
              yield* child.respond(poke.id!, { action: "accept" })
              const poked = yield* completedItem("call_poke")
              assert.strictEqual(poked.params.item.status, "completed")
              assert.deepStrictEqual(poked.params.item.result.content, [{ type: "text", text: "poked: smoke" }])

              const done = yield* turnCompleted(turnId)
              assert.strictEqual(done.params.turn.status, "completed")
              const serverRequests = (yield* child.frames).filter((f) => f.method !== undefined && f.id !== undefined)
              assert.deepStrictEqual(
                serverRequests.map((f) => f.method),
                ["mcpServer/elicitation/request", "mcpServer/elicitation/request"],
                "the read-only tool asked nothing"
              )

              const requests = yield* model.requests
              assert.include(ScriptedModel.toolNames(requests[0]!), McpServer.namespace("tk"))
              const askOutput = ScriptedModel.outputFor(requests[2]!, "call_ask")
              assert.isTrue(askOutput._tag === "Some" && JSON.stringify(askOutput.value.output).includes("green"))
              const received = (yield* McpServer.readLog(logFile)) as ReadonlyArray<Frame>
              assert.deepStrictEqual(
                received.filter((m) => m.method === "tools/call").map((m) => m.params.name),
                ["ping", "ask", "poke"]
              )
            })
        )
      })
  )

  it.scopedLive(
    "request_permissions (feature flag): permissions approval, grant for the turn, granted write succeeds",
    () =>
      Effect.gen(function* () {
        const outside = yield* Effect.acquireRelease(
          Effect.sync(() => Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-perm-")))),
          (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
        )
        yield* withCodex(
          "permissions",
          [
            Step.requestPermissions({ reason: "smoke wants to write outside", write: [outside], callId: "call_perm" }),
            Step.execCommand({ cmd: `touch ${outside}/granted && echo wrote-granted`, callId: "call_touch" }),
            Step.message("after grant")
          ],
          { features: ["request_permissions_tool"] },
          ({ child, model, startThread, startTurn, turnCompleted }) =>
            Effect.gen(function* () {
              const threadId = yield* startThread
              const turnId = yield* startTurn(threadId, "ask for permissions")
              const ask = yield* child.waitFor(
                "permissions approval",
                serverRequest("item/permissions/requestApproval")
              )
              assert.strictEqual(ask.params.itemId, "call_perm")
              assert.strictEqual(ask.params.reason, "smoke wants to write outside")
              assert.deepStrictEqual(ask.params.permissions.fileSystem.write, [outside])
              yield* child.respond(ask.id!, {
                permissions: { fileSystem: { write: [outside] } },
                scope: "turn"
              })
              const touch = yield* child.waitFor(
                "touch completed",
                (f) => f.method === "item/completed" && f.params.item.id === "call_touch"
              )
              assert.strictEqual(touch.params.item.exitCode, 0, touch.params.item.aggregatedOutput)
              assert.isTrue(Fs.existsSync(Path.join(outside, "granted")))
              const done = yield* turnCompleted(turnId)
              assert.strictEqual(done.params.turn.status, "completed")
              const requests = yield* model.requests
              assert.include(ScriptedModel.toolNames(requests[0]!), "request_permissions")
              assert.isTrue(ScriptedModel.outputFor(requests[1]!, "call_perm")._tag === "Some")
            })
        )
      })
  )

  it.scopedLive(
    "request_user_input (feature flag): the question reaches the client, the answer reaches the model",
    () =>
      withCodex(
        "user input",
        [
          Step.requestUserInput(
            [
              {
                id: "colour_choice",
                header: "Colour",
                question: "Which colour?",
                options: [
                  { label: "Red (Recommended)", description: "Warm." },
                  { label: "Blue", description: "Cool." }
                ]
              }
            ],
            { callId: "call_rui" }
          ),
          Step.message("after input")
        ],
        { features: ["default_mode_request_user_input"] },
        ({ child, model, startThread, startTurn, turnCompleted }) =>
          Effect.gen(function* () {
            const threadId = yield* startThread
            const turnId = yield* startTurn(threadId, "ask me")
            const ask = yield* child.waitFor("user input request", serverRequest("item/tool/requestUserInput"))
            assert.strictEqual(ask.params.itemId, "call_rui")
            assert.strictEqual(ask.params.questions[0].id, "colour_choice")
            yield* child.respond(ask.id!, { answers: { colour_choice: { answers: ["Blue"] } } })
            const done = yield* turnCompleted(turnId)
            assert.strictEqual(done.params.turn.status, "completed")
            const output = ScriptedModel.outputFor((yield* model.requests)[1]!, "call_rui")
            assert.isTrue(output._tag === "Some" && JSON.stringify(output.value.output).includes("Blue"))
          })
      )
  )
})
