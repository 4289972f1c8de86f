/**
 * End to end against the REAL pinned codex app-server, through the Supervisor on the child
 * process transport: what happens around the cards when things go wrong or pile up.
 *
 * - two threads on one process: A's card left open while B runs a whole turn (no head-of-line
 *   blocking), then A is declined and completes;
 * - SIGKILL of the child mid-turn with a card open: the work item fails with a cause naming the
 *   signal and carrying the stderr tail, the card settles connection-lost, nothing is written;
 * - SIGKILL while an approved command runs outside the sandbox (in its own session): the command
 *   dies with codex, nothing is left behind;
 * - the supervisor shutting down (ending the child's stdin) with a card open: the refusal is
 *   written while the child can still hear it, the command never runs, the child is gone;
 * - the model failing with HTTP 500: the work item ends failed with codexErrorInfo;
 * - resume after restart: the child killed mid-turn, restarted on the same CODEX_HOME, the thread
 *   resumed and the turn run again to completion; the events say ConnectionLost and Resumed.
 *
 * Each test asserts that no process it started remains (support/RealSupervisor.ts).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import { ProcessTree, ScriptedModel, Step } from "@warden/testkit"
import { Chunk, type Duration, Effect, Exit, Schedule, Stream } from "effect"
import type { Supervisor } from "../../src/index.js"
import { outsideDir } from "./support/Kinds.js"
import { item, withRealSupervisor } from "./support/RealSupervisor.js"

const escalated = (cmd: string, callId: string) =>
  Step.execCommand({ cmd, escalated: true, justification: "e2e: outside the sandbox", callId })

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined

type Event<T extends Supervisor.SupervisorEvent["_tag"]> = Extract<Supervisor.SupervisorEvent, { _tag: T }>

/** Poll /proc (no event tells us) until `check` holds, bounded. */
const eventually = <A>(what: string, check: () => A | undefined, timeout: Duration.DurationInput = "5 seconds") =>
  Effect.suspend(() => {
    const value = check()
    return value === undefined ? Effect.fail(new Error(`not yet: ${what}`)) : Effect.succeed(value)
  }).pipe(
    Effect.retry(Schedule.spaced("20 millis")),
    Effect.timeoutFail({ duration: timeout, onTimeout: () => new Error(`timed out waiting until ${what}`) })
  )

describe("the Supervisor on the real codex app-server, under pressure and failure", () => {
  it.scopedLive("two threads on one process: B completes a whole turn while A's card stays open", () =>
    withRealSupervisor(
      {
        name: "two threads, no head-of-line blocking",
        script: {
          lanes: {
            A: [escalated("echo from-A", "call_a"), Step.message("A done")],
            B: [escalated("echo from-B", "call_b"), Step.message("B done")]
          }
        }
      },
      (real) =>
        Effect.gen(function* () {
          const a = yield* real.supervisor.start(item(real, "A", "A"))
          const cardA = yield* real.cardOf("A")
          const b = yield* real.supervisor.start(item(real, "B", "B"))
          const cardB = yield* real.cardOf("B")
          assert.notStrictEqual(yield* a.threadId, yield* b.threadId)
          assert.notStrictEqual(
            cardA.requestId,
            cardB.requestId,
            "server request ids are per process, shared by threads"
          )

          assert.strictEqual((yield* real.supervisor.inbox.answer(cardB.id, Decision.Accept))._tag, "Settled")
          const resultB = yield* b.await
          assert.strictEqual(resultB.status, "completed")
          assert.strictEqual(resultB.finalMessage, "B done")
          assert.strictEqual(resultB.items.find((i) => i["id"] === "call_b")?.["exitCode"], 0)

          // A's card is still open, untouched, and A's work item still waits on it.
          assert.deepStrictEqual(
            (yield* real.supervisor.inbox.open).map((c) => c.id),
            [cardA.id]
          )
          assert.isFalse(
            (yield* real.approvals.all).some((e) => e._tag === "CardSettled" && e.settlement.card.id === cardA.id)
          )

          assert.strictEqual((yield* real.supervisor.inbox.answer(cardA.id, Decision.Decline))._tag, "Settled")
          const resultA = yield* a.await
          assert.strictEqual(resultA.status, "completed")
          assert.strictEqual(resultA.finalMessage, "A done")
          assert.strictEqual(resultA.items.find((i) => i["id"] === "call_a")?.["status"], "declined")
        })
    )
  )

  it.scopedLive(
    "SIGKILL of the child mid-turn: the work item fails naming the signal, with the stderr tail; the card settles connection-lost",
    () =>
      withRealSupervisor(
        {
          name: "SIGKILL mid-turn",
          script: { lanes: { k: [escalated("echo never-runs", "call_k")] } },
          supervisor: { restart: { policy: "fail", maxAttempts: 0 } }
        },
        (real) =>
          Effect.gen(function* () {
            const handle = yield* real.supervisor.start(item(real, "K", "k"))
            const card = yield* real.cardOf("K")
            const pids = real.codexPids()
            assert.strictEqual(pids.length, 1, "one app-server child")
            process.kill(pids[0]!, "SIGKILL")

            const exit = yield* Effect.exit(handle.await)
            const failure = failureOf(exit)
            assert.strictEqual(failure?.reason, "connection-lost", String(exit))
            assert.match(failure?.detail ?? "", /killed by signal SIGKILL/)
            const lost = yield* real.events.first(
              "ConnectionLost",
              (e): e is Event<"ConnectionLost"> => e._tag === "ConnectionLost"
            )
            assert.deepStrictEqual(lost.reason, { _tag: "Exited", code: null, signal: "SIGKILL" })
            assert.isAbove(lost.stderrTail.trim().length, 0, "codex wrote to stderr before it died")
            assert.include(
              failure?.detail ?? "",
              lost.stderrTail.trim().split("\n").slice(-1)[0]!,
              "the cause carries the stderr tail"
            )

            const settled = yield* real.settlementOf(card.id)
            assert.strictEqual(settled.outcome, "connection-lost")
            assert.isFalse(settled.written, "nothing can be written to a dead child")
            assert.strictEqual((yield* real.supervisor.inbox.open).length, 0)
            const work = (yield* real.events.all).flatMap((e) => (e._tag === "Work" ? [e.event._tag] : []))
            assert.include(work, "ConnectionLost")
          })
      )
  )

  it.scopedLive(
    "SIGKILL while an approved command runs outside the sandbox: the command dies with codex, nothing remains",
    () =>
      withRealSupervisor(
        {
          name: "SIGKILL with a command running",
          script: {
            lanes: {
              s: [
                Step.execCommand({
                  cmd: "sleep 41.731",
                  escalated: true,
                  justification: "e2e",
                  callId: "call_sleep",
                  yieldTimeMs: 30_000
                })
              ]
            }
          },
          supervisor: { restart: { policy: "fail", maxAttempts: 0 } }
        },
        (real) =>
          Effect.gen(function* () {
            const handle = yield* real.supervisor.start(item(real, "S", "s"))
            const card = yield* real.cardOf("S")
            yield* real.supervisor.inbox.answer(card.id, Decision.Accept)
            const [sleeper] = yield* eventually("the approved command runs", () => {
              const found = ProcessTree.find(process.pid, "sleep 41.731")
              return found.length > 0 ? found : undefined
            })
            const [codex] = real.codexPids()
            assert.notInclude(ProcessTree.commandLine(sleeper!), "bwrap", "escalated: it runs outside the sandbox")
            process.kill(codex!, "SIGKILL")
            const failure = failureOf(yield* Effect.exit(handle.await))
            assert.strictEqual(failure?.reason, "connection-lost")
            assert.match(failure?.detail ?? "", /SIGKILL/)
            yield* eventually("the command died with codex", () => (ProcessTree.isAlive(sleeper!) ? undefined : true))
          })
      )
  )

  it.scopedLive(
    "shutdown with a card open: the refusal is written before stdin closes, the command never runs, the child exits",
    () =>
      Effect.gen(function* () {
        const outside = yield* outsideDir
        const marker = Path.join(outside, "marker")
        yield* withRealSupervisor(
          { name: "stdin closed with a card open", script: { lanes: { c: [escalated(`touch ${marker}`, "call_c")] } } },
          (real) =>
            Effect.gen(function* () {
              const handle = yield* real.supervisor.start(item(real, "C", "c"))
              const card = yield* real.cardOf("C")
              const pids = real.codexPids()
              assert.strictEqual(pids.length, 1)
              const t0 = Date.now()
              yield* real.stop
              const stopMs = Date.now() - t0
              const settled = yield* real.settlementOf(card.id)
              assert.isTrue(
                settled.written,
                `the refusal was written while the child could hear it (${settled.outcome})`
              )
              assert.include(["refused", "shutdown"], settled.outcome)
              assert.deepStrictEqual(settled.reply, { _tag: "Result", result: { decision: "decline" } })
              const exit = yield* Effect.exit(handle.await)
              assert.isTrue(Exit.isFailure(exit), "the work item was stopped")
              assert.isFalse(Fs.existsSync(marker), "the command never ran")
              // eslint-disable-next-line no-console
              console.info(`[e2e] supervisor stop with a card open took ${stopMs} ms`)
            })
        )
      })
  )

  it.scopedLive("the model answers HTTP 500 until codex gives up: the work item ends failed with codexErrorInfo", () =>
    withRealSupervisor(
      {
        name: "HTTP 500 until failure",
        script: { lanes: { h: Step.times(4, Step.httpError(500, "e2e: upstream broken")) } },
        codex: { requestMaxRetries: 1 }
      },
      (real) =>
        Effect.gen(function* () {
          const result = yield* real.supervisor.run(item(real, "H", "h"))
          assert.strictEqual(result.status, "failed")
          const turn = result.turns[0]!
          assert.isDefined(turn.error, "turn/completed carried the error")
          assert.isDefined(turn.error?.codexErrorInfo, JSON.stringify(turn.error))
          assert.include(JSON.stringify(turn.error?.codexErrorInfo), "internalServerError")
          assert.isTrue(
            result.errors.some((e) => e.willRetry === false && e.codexErrorInfo !== undefined),
            JSON.stringify(result.errors)
          )
          const requests = yield* real.model.requests
          assert.isAtLeast(requests.length, 2, "codex retried once before giving up")
          assert.isTrue(requests.every((r) => r.served === "HttpError"))
        })
    )
  )

  it.scopedLive(
    "resume after restart: the child dies mid-turn, a new child on the same CODEX_HOME resumes the thread and the turn completes",
    () =>
      withRealSupervisor(
        {
          name: "resume after restart",
          script: { lanes: { r: [Step.stall(), Step.message("after resume")] } },
          supervisor: { restart: { policy: "resume", backoff: "50 millis", maxAttempts: 3 } }
        },
        (real) =>
          Effect.gen(function* () {
            const first = yield* real.supervisor.ready
            assert.strictEqual(first.codexHome, real.launch.codexHome)
            const handle = yield* real.supervisor.start(item(real, "R", "r"))
            const threadId = yield* handle.threadId
            yield* real.model.awaitRequests(1, "r") // the turn is streaming (stalled) now
            const [pid] = real.codexPids()
            assert.isDefined(pid)
            process.kill(pid!, "SIGKILL")

            const result = yield* handle.await
            assert.strictEqual(result.status, "completed")
            assert.strictEqual(result.finalMessage, "after resume")
            assert.strictEqual(result.threadId, threadId)
            assert.strictEqual(result.resumes, 1)

            // The work item's own event stream (it ends with the item).
            const work = Chunk.toReadonlyArray(yield* Stream.runCollect(handle.events))
            assert.isTrue(work.some((e) => e._tag === "ConnectionLost" && e.threadId === threadId))
            assert.isTrue(work.some((e) => e._tag === "Resumed" && e.threadId === threadId && e.attempt === 1))
            assert.isTrue(work.some((e) => e._tag === "ThreadReady" && e.resumed && e.threadId === threadId))
            const order = work.flatMap((e) =>
              e._tag === "ConnectionLost" || e._tag === "Resumed" || e._tag === "TurnCompleted" ? [e._tag] : []
            )
            assert.deepStrictEqual(order, ["ConnectionLost", "Resumed", "TurnCompleted"])
            const events = yield* real.events.all
            const ready = events.filter((e): e is Event<"ConnectionReady"> => e._tag === "ConnectionReady")
            assert.isAtLeast(ready.length, 1)
            assert.strictEqual(ready[ready.length - 1]!.init.codexHome, real.launch.codexHome, "the same CODEX_HOME")
            const [newPid] = real.codexPids()
            assert.isDefined(newPid)
            assert.notStrictEqual(newPid, pid, "a new child")
            const requests = yield* real.model.requests
            assert.deepStrictEqual(
              requests.map((r) => r.served),
              ["Stall", "Reply"]
            )
            assert.include(ScriptedModel.userTexts(requests[1]!).join("\n"), "[lane:r]")
          })
      )
  )
})
