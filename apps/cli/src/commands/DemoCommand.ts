/**
 * `warden demo`: Warden end to end with no account and no network. It starts the test kit's
 * scripted model and MCP server on loopback, runs the pinned real codex binary against them, and
 * runs three work items at once, each of which asks for one approval:
 *
 * - item 0 runs a command outside the sandbox (command approval);
 * - item 1 writes a file outside the workspace (apply_patch: file-change approval);
 * - item 2 calls the MCP tool `poke` (MCP tool-call approval).
 *
 * On a terminal the person answers the cards on the board. Without one, a demo policy answers so
 * that each outcome shows: the command is accepted, the file change declined, and the MCP call
 * left to a short deadline (~2 s) and refused by it. Then a summary table; exit 0 when every item
 * completed.
 */
import { Command } from "@effect/cli"
import type { Approvals } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import { McpServer, RealCodex, ScriptedModel, Step } from "@warden/testkit"
import { ChildProcessTransport } from "@warden/transport"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ExitCodes from "../contract/ExitCodes.js"
import * as Screen from "../terminal/Screen.js"
import * as SupervisedRun from "./SupervisedRun.js"
import * as Summary from "../terminal/Summary.js"
import { version } from "../startup/Version.js"

/** The MCP server's name in the demo (its tools are `mcp__demo.*`). */
export const McpName = "demo"

/** How long a card waits without a terminal (the MCP card is left to it). */
export const UnattendedDeadline = "2 seconds"
const unattendedLabel = "~2 s"
/** How long a card waits for the person on a terminal. */
export const AttendedDeadline = "5 minutes"

/** The demo policy used without a terminal: one accepted, one declined, one left to the deadline. */
export const demoPolicy: Approvals.Handler = (card) => {
  switch (card.method) {
    case "item/commandExecution/requestApproval":
      return Effect.succeed(Decision.Accept)
    case "item/fileChange/requestApproval":
      return Effect.succeed(Decision.Decline)
    default:
      return Effect.succeed(undefined)
  }
}

/** A directory outside the workspace and outside the sandbox's writable roots (/tmp is one of them). */
const outsideDir = Effect.acquireRelease(
  Effect.sync(() => {
    for (const base of ["/var/tmp", Os.homedir()]) {
      try {
        return Fs.mkdtempSync(Path.join(base, "warden-demo-"))
      } catch {
        // try the next
      }
    }
    return Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-demo-"))
  }),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

export const script = (notePath: string): ScriptedModel.ScriptInput => ({
  lanes: {
    command: [
      Step.execCommand({
        cmd: "echo 'hello from the warden demo'",
        escalated: true,
        justification: "the demo asks to run a command outside the sandbox"
      }),
      Step.message("Done with the command step.")
    ],
    file: [
      Step.applyPatch(notePath, "A note Warden's demo tried to write outside the workspace.\n"),
      Step.message("Done with the file step.")
    ],
    mcp: [
      Step.mcpCall(McpName, McpServer.tools.needsApproval, { why: "the warden demo" }),
      Step.message("Done with the MCP step.")
    ]
  }
})

export const handler = () =>
  Effect.scoped(
    Effect.gen(function* () {
      const attended = process.stdin.isTTY === true
      const screen = Screen.make()
      const outside = yield* outsideDir
      const notePath = Path.join(outside, "note.txt")
      const model = yield* ScriptedModel.make(script(notePath)).pipe(
        Effect.mapError((e) => new ExitCodes.CliExit({ code: ExitCodes.Failed, message: e.message }))
      )
      const launch = yield* RealCodex.make({
        baseUrl: model.baseUrl,
        mcpServers: [McpServer.registration({ name: McpName })]
      }).pipe(Effect.mapError((e) => new ExitCodes.CliExit({ code: ExitCodes.Failed, message: e.message })))
      screen.err(
        `warden demo: a scripted model on ${model.baseUrl}, the pinned codex at ${launch.command}, three work items at once.`
      )
      screen.err(
        attended
          ? "Answer each card on the board: [a] accept once, [s] accept for session, [d] decline, [v] details (Ctrl-C refuses every open card and stops)."
          : `No terminal: the demo policy answers. Command: accept; file change: decline; MCP tool: left to its ${unattendedLabel} deadline.`
      )
      const item = (prompt: string) => ({
        prompt,
        cwd: launch.workspace,
        sandbox: "workspace-write",
        approvalPolicy: "on-request"
      })
      const result = yield* SupervisedRun.run({
        transport: ChildProcessTransport.layer({
          command: launch.command,
          args: launch.args,
          env: launch.env,
          cwd: launch.cwd
        }),
        supervisor: {
          connection: { clientInfo: { name: "warden", title: "Warden demo", version } },
          approvals: {
            deadlines: { default: attended ? AttendedDeadline : UnattendedDeadline },
            ...(attended ? {} : { handler: demoPolicy })
          },
          concurrency: 3,
          restart: { maxAttempts: 0 }
        },
        items: [
          item(`${ScriptedModel.laneMarker("command")} Run a command outside the sandbox.`),
          item(`${ScriptedModel.laneMarker("file")} Write a note outside the workspace, at ${notePath}.`),
          item(`${ScriptedModel.laneMarker("mcp")} Call the MCP tool ${McpName}.${McpServer.tools.needsApproval}.`)
        ],
        answering: attended ? "prompt" : "none",
        json: false,
        audit: undefined,
        title: "warden demo",
        screen
      })
      const wrote = Fs.existsSync(notePath)
      for (const line of Summary.lines(result.tally, result.exitCode)) screen.out(line)
      screen.out(`The note outside the workspace was ${wrote ? "written" : "not written"}.`)
      if (result.exitCode !== ExitCodes.Ok) return yield* new ExitCodes.CliExit({ code: result.exitCode })
    })
  )

export const command = Command.make("demo", {}, handler).pipe(
  Command.withDescription(
    "see Warden work with no account and no network: a scripted model, the pinned codex, three work items that each ask for an approval"
  )
)
