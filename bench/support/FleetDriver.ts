/**
 * The fleet benchmark's Warden process (bench/Fleet.ts spawns it): one Supervisor over one real
 * app-server, N work items at once, every approval accepted by a handler. It measures, over the same
 * window (from the first submit, the supervisor ready and modules loaded, to the last item
 * finished): its own CPU (`process.cpuUsage`); the app-server's own (utime + stime of the codex
 * process alone, from /proc); and the app-server with the commands it ran (its waited-for
 * children's cutime + cstime, and any still alive). The commands are the agent's workload, not
 * its runtime: a `bash -lc` spends ~0.5 s of CPU in the login profile here, so the second
 * figure mostly measures bash. One JSON line on stdout.
 *
 *   node --import tsx bench/support/FleetDriver.ts '{"items":100,"command":...,"args":[...],"env":{...},"cwd":"...","workspace":"..."}'
 */
import type { ApprovalEvent } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import { Supervisor } from "@warden/supervisor"
import { ScriptedModel } from "@warden/testkit"
import { ChildProcessTransport } from "@warden/transport"
import { Effect, Queue } from "effect"
import { childPids, cpuOfPid, treeCpu } from "./ProcCpu.js"

export interface DriverInput {
  readonly items: number
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly cwd: string
  readonly workspace: string
}

export interface DriverOutput {
  readonly items: number
  readonly completed: number
  readonly accepted: number
  readonly cards: number
  readonly wallMs: number
  readonly wardenCpuMs: number
  /** The app-server processes' own CPU (utime + stime), their children excluded. */
  readonly appServerCpuMs: number
  /** The app-server processes and every command they ran (children waited for, and still alive). */
  readonly appServerWithCommandsCpuMs: number
  readonly appServerPids: ReadonlyArray<number>
}

const ownCpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

const program = (input: DriverInput) =>
  Effect.scoped(
    Effect.gen(function* () {
      const supervisor = yield* Supervisor.make({
        concurrency: input.items,
        approvals: { handler: () => Effect.succeed(Decision.Accept) }
      }).pipe(
        Effect.provide(
          ChildProcessTransport.layer({ command: input.command, args: input.args, env: input.env, cwd: input.cwd })
        )
      )
      const approvals = yield* supervisor.subscribeApprovals
      yield* supervisor.ready
      const appServerPids = childPids()
      const ownOf = () => appServerPids.reduce((s, p) => s + cpuOfPid(p, true), 0)
      const treeOf = () => appServerPids.reduce((s, p) => s + treeCpu(p), 0)
      const ownStart = ownOf()
      const treeStart = treeOf()
      const wardenStart = ownCpuMs()
      const started = performance.now()
      const results = yield* Effect.forEach(
        Array.from({ length: input.items }, (_, i) => i),
        (i) =>
          supervisor
            .run({
              id: i,
              prompt: `${ScriptedModel.laneMarker(`t${i}`)} run the fleet command`,
              cwd: input.workspace,
              sandbox: "workspace-write"
            })
            .pipe(Effect.either),
        { concurrency: "unbounded" }
      )
      const wallMs = performance.now() - started
      const wardenCpuMs = ownCpuMs() - wardenStart
      const appServerCpuMs = ownOf() - ownStart
      const appServerWithCommandsCpuMs = treeOf() - treeStart
      const events = Array.from(yield* Queue.takeAll(approvals)) as Array<ApprovalEvent.ApprovalEvent>
      const settled = events.filter((e) => e._tag === "CardSettled")
      const output: DriverOutput = {
        items: input.items,
        completed: results.filter((r) => r._tag === "Right" && r.right.status === "completed").length,
        accepted: settled.filter(
          (e) => e._tag === "CardSettled" && e.settlement.outcome === "accepted" && e.settlement.written
        ).length,
        cards: settled.length,
        wallMs,
        wardenCpuMs,
        appServerCpuMs,
        appServerWithCommandsCpuMs,
        appServerPids
      }
      return output
    })
  )

const input = JSON.parse(process.argv[2] ?? "{}") as DriverInput
Effect.runPromise(program(input)).then(
  (output) => {
    process.stdout.write(JSON.stringify(output) + "\n")
    process.exit(0)
  },
  (error) => {
    process.stderr.write(`fleet driver failed: ${String(error)}\n`)
    process.exit(1)
  }
)
