/**
 * 9. Flat memory under a long run: 10,000 work items one after another on one connection.
 *
 * The real Supervisor on the in-memory transport (the real ConnectionCore and FrameDecoder; the
 * peer keeps no log of what the client wrote, `keepLog: false`, so the test double's memory does
 * not count). Each work item is one thread and one turn, as codex 0.171.0 plays it: thread/start
 * (+ thread/started), turn/start (+ turn/started), the agent message item streamed as 8 deltas,
 * a command approval request that a handler accepts, `serverRequest/resolved`, the command item,
 * token usage, the final message, turn/completed, and the item's thread/unsubscribe as it ends.
 * Every turn opens and settles one card, so the settled-card history fills as a fleet's would.
 *
 * Measured: `heapUsed` after full collections (`global.gc`) after the first 1,000 turns and after
 * every further 1,000; the target is the last against the first (≤ 1.1x). The peer forgets a turn
 * once it completed; what it holds is constant.
 */
import { Decision } from "@warden/protocol"
import { Supervisor } from "@warden/supervisor"
import { MemoryTransport } from "@warden/transport"
import { Effect, Exit, Scope } from "effect"
import type { BenchResult } from "./support/Report.js"
import { heapAfterGc, nowMs, round } from "./support/Stats.js"

export interface Options {
  readonly quick: boolean
  readonly log: (line: string) => void
}

const line = (frame: unknown) => JSON.stringify(frame) + "\n"

/** A peer that plays one turn per work item and forgets it once completed. */
const peer = () => {
  let threads = 0
  let turns = 0
  let serverIds = 0
  let completed = 0
  /** Open approval requests: id → the turn to complete once answered. */
  const open = new Map<number, { readonly threadId: string; readonly turnId: string }>()
  const program = (peer: MemoryTransport.Peer): Effect.Effect<void> =>
    Effect.gen(function* () {
      while (true) {
        const [frames, done] = yield* peer.written.takeAll
        let out = ""
        for (const frame of frames) {
          const id = frame["id"] as number | undefined
          const method = frame["method"] as string | undefined
          const params = frame["params"] as Record<string, any> | undefined
          if (method === undefined) {
            // The client's answer to our approval request: the command runs, the turn ends.
            const turn = id !== undefined ? open.get(id) : undefined
            if (turn === undefined) continue
            open.delete(id!)
            const { threadId, turnId } = turn
            out += line({ method: "serverRequest/resolved", params: { threadId, requestId: id } })
            out += line({
              method: "item/completed",
              params: {
                threadId,
                turnId,
                item: {
                  type: "commandExecution",
                  id: "call_1",
                  command: "echo hi",
                  cwd: "/tmp/bench",
                  status: "completed",
                  aggregatedOutput: "hi\n",
                  exitCode: 0
                }
              }
            })
            out += line({
              method: "thread/tokenUsage/updated",
              params: {
                threadId,
                turnId,
                tokenUsage: { total: { totalTokens: 1200, inputTokens: 1000, outputTokens: 200 } }
              }
            })
            out += line({
              method: "item/completed",
              params: { threadId, turnId, item: { type: "agentMessage", id: "msg_2", text: "done" } }
            })
            out += line({
              method: "turn/completed",
              params: { threadId, turn: { id: turnId, status: "completed", items: [], error: null } }
            })
            completed++
            continue
          }
          if (id === undefined) continue // initialized
          switch (method) {
            case "initialize":
              out += line({
                id,
                result: {
                  userAgent: "bench-peer/0.171.0",
                  codexHome: "/tmp/bench",
                  platformFamily: "unix",
                  platformOs: "linux"
                }
              })
              break
            case "thread/start": {
              const thread = { id: `thr_${++threads}`, preview: "", ephemeral: false }
              out += line({ id, result: { thread } })
              out += line({ method: "thread/started", params: { thread } })
              break
            }
            case "turn/start": {
              const threadId = String(params?.["threadId"])
              const turnId = `turn_${++turns}`
              const turn = { id: turnId, status: "inProgress", items: [], error: null }
              out += line({ id, result: { turn } })
              out += line({ method: "turn/started", params: { threadId, turn } })
              out += line({
                method: "item/started",
                params: { threadId, turnId, item: { type: "agentMessage", id: "msg_1", text: "" } }
              })
              for (let i = 0; i < 8; i++)
                out += line({
                  method: "item/agentMessage/delta",
                  params: { threadId, turnId, itemId: "msg_1", delta: `word ${i} ` }
                })
              out += line({
                method: "item/completed",
                params: {
                  threadId,
                  turnId,
                  item: {
                    type: "agentMessage",
                    id: "msg_1",
                    text: "word 0 word 1 word 2 word 3 word 4 word 5 word 6 word 7"
                  }
                }
              })
              out += line({
                method: "item/started",
                params: {
                  threadId,
                  turnId,
                  item: {
                    type: "commandExecution",
                    id: "call_1",
                    command: "echo hi",
                    cwd: "/tmp/bench",
                    status: "inProgress"
                  }
                }
              })
              const requestId = ++serverIds
              open.set(requestId, { threadId, turnId })
              out += line({
                method: "item/commandExecution/requestApproval",
                id: requestId,
                params: { threadId, turnId, itemId: "call_1", command: "echo hi", cwd: "/tmp/bench", reason: "bench" }
              })
              break
            }
            case "thread/unsubscribe":
              // The work item's end: Warden lets go of its thread.
              out += line({ id, result: { status: "unsubscribed" } })
              break
            default:
              out += line({ id, error: { code: -32600, message: `the bench peer does not answer ${method}` } })
          }
        }
        if (out.length > 0) yield* peer.sendRaw(out)
        if (done) return
      }
    })
  return {
    memory: MemoryTransport.make({ keepLog: false, program }),
    completed: () => completed,
    open: () => open.size
  }
}

export const run = async (options: Options): Promise<BenchResult> => {
  const total = options.quick ? 1_000 : 10_000
  const every = total / 10
  options.log(`flat memory: ${total} work items of one turn and one card each, one after another; heap every ${every}`)
  const bench = peer()
  const scope = Effect.runSync(Scope.make())
  const checkpoints: Array<{ readonly turns: number; readonly heap: number; readonly ms: number }> = []
  try {
    const supervisor = await Effect.runPromise(
      Scope.extend(
        Supervisor.make({ approvals: { handler: () => Effect.succeed(Decision.Accept) } }).pipe(
          Effect.provide(bench.memory.layer)
        ),
        scope
      )
    )
    await Effect.runPromise(supervisor.ready)
    const heap0 = await heapAfterGc()
    let t = nowMs()
    for (let done = 0; done < total; ) {
      await Effect.runPromise(
        Effect.forEach(
          Array.from({ length: every }, (_, i) => done + i),
          (i) =>
            Effect.flatMap(supervisor.run({ id: i, prompt: `turn ${i}`, cwd: "/tmp/bench" }), (result) =>
              result.status === "completed"
                ? Effect.void
                : Effect.die(new Error(`work item ${i} ended ${result.status}`))
            ),
          { discard: true }
        )
      )
      done += every
      const ms = nowMs() - t
      checkpoints.push({ turns: done, heap: await heapAfterGc(), ms })
      t = nowMs()
    }
    if (bench.completed() !== total || bench.open() !== 0)
      throw new Error(`flat memory: ${bench.completed()}/${total} turns completed, ${bench.open()} requests open`)
    const first = checkpoints[0]!
    const last = checkpoints[checkpoints.length - 1]!
    const ratio = last.heap / first.heap
    const after = checkpoints.slice(1).map((c) => c.heap / first.heap)
    const mib = (bytes: number) => bytes / 2 ** 20
    return {
      name: "flatMemory",
      title: "9. Flat memory under a long run",
      params: {
        turns: total,
        checkpointEvery: every,
        cardsPerTurn: 1,
        handler: "() => Effect.succeed(Decision.Accept)",
        peerLog: "off"
      },
      metrics: {
        heapConnectedMiB: mib(heap0),
        heapAfterFirstMiB: mib(first.heap),
        heapAfterAllMiB: mib(last.heap),
        growthPerTurnBytes: (last.heap - first.heap) / (total - first.turns),
        msPerTurnMedianBlock: [...checkpoints.map((c) => c.ms / every)].sort((a, b) => a - b)[checkpoints.length >> 1]!
      },
      ratios: { heapLastVsFirst: ratio, heapMaxVsFirst: Math.max(...after) },
      targets: [
        {
          name: `heap after ${total.toLocaleString("en-US")} turns ÷ heap after the first ${every.toLocaleString("en-US")}, ratio`,
          target: "<= 1.1x",
          value: round(ratio, 4),
          met: ratio <= 1.1,
          spread: { min: Math.min(...after), max: Math.max(...after), runs: 1 }
        }
      ],
      tables: [
        {
          title: `Heap after full collections, every ${every.toLocaleString("en-US")} turns (one work item, one turn, one card each)`,
          columns: ["turns", "heap MiB", "÷ first checkpoint", "ms per turn in the block"],
          rows: [
            ["connected, before the first turn", mib(heap0), "", ""],
            ...checkpoints.map((c) => [c.turns, mib(c.heap), `${(c.heap / first.heap).toFixed(3)}x`, c.ms / every])
          ]
        }
      ],
      notes: [
        `The settled-card history keeps the last settlements (default 1,000: Approvals.DefaultSettledHistory) so a late answer learns which outcome won; see docs/performance.md for what one entry holds.`,
        "One run; the checkpoints after the first give the spread of the ratio along the run."
      ]
    }
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}
