import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import {
  Cause,
  Chunk,
  Effect,
  Exit,
  Fiber,
  Metric,
  MetricLabel,
  Option,
  Queue,
  Scope,
  Stream,
  TestClock,
  Tracer
} from "effect"
import { Telemetry } from "../src/index.js"
import { advance, advanceUntilDone, commandApproval, supervise, waitFor } from "./support.js"

const item = (prompt: string, extra: Record<string, unknown> = {}) => ({ prompt, cwd: "/tmp/ws", ...extra })

describe("Supervisor on a fake app-server", () => {
  it.scoped("performs the handshake and exposes its result", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise()
      const init = yield* supervisor.ready
      assert.strictEqual(init.userAgent, "fake-app-server/0.171.0")
      const written = fake.peer.writtenSoFar()
      assert.strictEqual(written[0]?.["method"], "initialize")
      assert.deepStrictEqual(
        (written[0]?.["params"] as { clientInfo?: { name?: string } } | undefined)?.clientInfo?.name,
        "warden"
      )
      assert.deepStrictEqual(written[1], { jsonrpc: "2.0", method: "initialized" })
    })
  )

  it.scoped("runs a work item to its result", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({}, { finalMessage: "all good" })
      const result = yield* supervisor.run(item("do it", { id: 0 }))
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(result.finalMessage, "all good")
      assert.strictEqual(result.threadId, "thr_1")
      const start = fake.requestsSoFar().find((r) => r.method === "thread/start")!
      assert.strictEqual(start.params.approvalPolicy, "on-request")
      assert.strictEqual(start.params.cwd, "/tmp/ws")
      const turn = fake.requestsSoFar().find((r) => r.method === "turn/start")!
      assert.deepStrictEqual(turn.params, { threadId: "thr_1", input: [{ type: "text", text: "do it" }] })
    })
  )

  it.scoped("events packed right behind the thread/start response are not lost, and arrive in order", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise(
        {},
        {
          turns: "manual",
          behaviour: {
            // The real server packs the thread's first events right behind the response.
            "thread/start": (_params, ctx) =>
              Effect.gen(function* () {
                const thread = { id: "thr_packed" }
                yield* ctx.peer.sendRaw(
                  [
                    { id: ctx.requestId, result: { thread } },
                    { method: "thread/started", params: { thread } },
                    { method: "thread/status/changed", params: { threadId: "thr_packed", status: { type: "idle" } } },
                    { method: "warning", params: { threadId: "thr_packed", message: "packed" } }
                  ]
                    .map((f) => JSON.stringify(f) + "\n")
                    .join("")
                )
                return "silence" as const
              })
          }
        }
      )
      const handle = yield* supervisor.start(item("x"))
      assert.strictEqual(yield* handle.threadId, "thr_packed")
      yield* fake.nextRequest("turn/start")
      yield* fake.notify("item/agentMessage/delta", {
        threadId: "thr_packed",
        turnId: "turn_1",
        itemId: "m",
        delta: "a"
      })
      yield* fake.notify("item/agentMessage/delta", {
        threadId: "thr_packed",
        turnId: "turn_1",
        itemId: "m",
        delta: "b"
      })
      yield* fake.completeTurn("thr_packed", "turn_1", "completed", { message: "ab" })
      const result = yield* handle.await
      assert.strictEqual(result.finalMessage, "ab")
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(handle.events))
      const notifications = events.flatMap((e) =>
        e._tag === "Notification"
          ? [e.method + (e.method === "item/agentMessage/delta" ? ":" + (e.params as any).delta : "")]
          : []
      )
      assert.deepStrictEqual(notifications.slice(0, 3), ["thread/started", "thread/status/changed", "warning"])
      assert.deepStrictEqual(
        notifications.filter((m) => m.startsWith("item/agentMessage/delta")),
        ["item/agentMessage/delta:a", "item/agentMessage/delta:b"]
      )
      assert.strictEqual(events[events.length - 1]?._tag, "TurnCompleted")
    })
  )

  /**
   * One item, one turn of 1,200 `item/agentMessage/delta` (delta = its index), completed;
   * `early` reads the handle's events from the start. The events read, and the deltas among them.
   */
  const itemOfDeltas = (early: boolean) =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({}, { turns: "manual" })
      const handle = yield* supervisor.start(item("x"))
      const reader = early ? yield* Effect.fork(Stream.runCollect(handle.events)) : undefined
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      for (let i = 0; i < 1_200; i++)
        yield* fake.notify("item/agentMessage/delta", { threadId, turnId: "turn_1", itemId: "m", delta: String(i) })
      yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "done" })
      assert.strictEqual((yield* handle.await).status, "completed")
      const events = Chunk.toReadonlyArray(
        reader === undefined ? yield* Stream.runCollect(handle.events) : yield* Fiber.join(reader)
      )
      const deltas = events.flatMap((e) =>
        e._tag === "Notification" && e.method === "item/agentMessage/delta"
          ? [Number((e.params as { delta: string }).delta)]
          : []
      )
      return { events, deltas }
    })

  it.scoped(
    "a handle whose events nobody reads keeps its latest 500: a reader that comes after 1,200 deltas starts there, in order, to the end",
    () =>
      Effect.gen(function* () {
        const { deltas, events } = yield* itemOfDeltas(false)
        assert.strictEqual(events.length, 500, "the latest 500 events were kept")
        assert.strictEqual(events[events.length - 1]?._tag, "TurnCompleted")
        assert.strictEqual(deltas[deltas.length - 1], 1_199, "up to the last delta")
        assert.deepStrictEqual(
          deltas,
          Array.from({ length: deltas.length }, (_, i) => 1_200 - deltas.length + i),
          "the latest ones, in order, none missing between"
        )
        assert.isAbove(deltas[0]!, 0, "older ones were let go")
      })
  )

  it.scoped("a reader from the start gets every event, however many", () =>
    Effect.gen(function* () {
      const { deltas, events } = yield* itemOfDeltas(true)
      assert.deepStrictEqual(
        deltas,
        Array.from({ length: 1_200 }, (_, i) => i)
      )
      assert.strictEqual(events[0]?._tag, "ThreadReady")
    })
  )

  it.scoped("a card is answered through the inbox and the answer is written once", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({}, { turns: "manual" })
      const handle = yield* supervisor.start(item("x"))
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      const approvals = yield* supervisor.subscribeApprovals
      const id = yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
      const opened = yield* Queue.take(approvals)
      assert.strictEqual(opened._tag, "CardOpened")
      const card = opened._tag === "CardOpened" ? opened.card : undefined
      assert.strictEqual(card?.threadId, threadId)
      assert.strictEqual(card?.summary.kind, "command")
      const answered = yield* supervisor.inbox.answer(card!.id, Decision.Accept)
      assert.strictEqual(answered._tag, "Settled")
      const frame = yield* fake.answerTo(id)
      assert.deepStrictEqual(frame["result"], { decision: "accept" })
      yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "ran it" })
      const result = yield* handle.await
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(fake.answersSoFar().filter((a) => a["id"] === id).length, 1)
    })
  )

  it.scoped("no head-of-line blocking: thread B completes while A's card is open", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({}, { turns: "manual" })
      const a = yield* supervisor.start(item("A"))
      const threadA = yield* a.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadA, "turn_1"))
      const b = yield* supervisor.start(item("B"))
      const threadB = yield* b.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.completeTurn(threadB, "turn_2", "completed", { message: "B done" })
      const resultB = yield* b.await
      assert.strictEqual(resultB.finalMessage, "B done")
      assert.strictEqual((yield* supervisor.inbox.open).length, 1)
      const waitingA = yield* Effect.fork(a.await)
      yield* Effect.yieldNow()
      assert.isTrue(Option.isNone(yield* Fiber.poll(waitingA)))
    })
  )

  it.scoped("a request without an answer fails at its deadline; the connection stays up", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise(
        { connection: { requestTimeouts: { "thread/start": "30 seconds" } } },
        { behaviour: { "thread/start": () => "silence" } }
      )
      yield* supervisor.ready
      const running = yield* Effect.fork(supervisor.run(item("x")))
      yield* fake.nextRequest("thread/start")
      yield* advance("30 seconds")
      const exit = yield* Fiber.await(running)
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.strictEqual(error?.reason, "start-failed")
      assert.match(error?.detail ?? "", /thread\/start .* no answer within 30000 ms/)
      assert.isTrue(fake.peer.stdinEnded() === false)
    })
  )

  it.scoped("-32001 overload answers are retried with backoff", () =>
    Effect.gen(function* () {
      let calls = 0
      const { fake, supervisor } = yield* supervise(
        {},
        {
          behaviour: {
            "thread/start": () =>
              ++calls <= 2
                ? { error: { code: -32001, message: "Server overloaded; retry later." } }
                : { result: { thread: { id: "thr_x" } } }
          }
        }
      )
      const running = yield* Effect.fork(supervisor.run(item("x")))
      yield* fake.nextRequest("thread/start")
      yield* advanceUntilDone(running, "100 millis")
      const result = yield* Fiber.join(running)
      assert.strictEqual(result.threadId, "thr_x")
      assert.strictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/start").length, 3)
    })
  )

  it.scoped("the child dying mid-turn settles everything with the cause and the stderr tail", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({ restart: { maxAttempts: 0 } }, { turns: "manual" })
      const approvals = yield* supervisor.subscribeApprovals
      const handle = yield* supervisor.start(item("x"))
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
      yield* Queue.take(approvals)
      const before = fake.peer.writtenSoFar().length
      yield* fake.peer.writeStderr("thread 'main' panicked at codex-rs/core: out of cheese\n")
      yield* fake.peer.exit(null, "SIGKILL")
      const exit = yield* Effect.exit(handle.await)
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.strictEqual(error?.reason, "connection-lost")
      assert.match(error?.detail ?? "", /SIGKILL/)
      assert.match(error?.detail ?? "", /out of cheese/)
      const settled = yield* Queue.take(approvals)
      assert.strictEqual(settled._tag === "CardSettled" && settled.settlement.outcome, "connection-lost")
      assert.strictEqual(fake.peer.writtenSoFar().length, before)
      assert.strictEqual((yield* supervisor.inbox.open).length, 0)
    })
  )
})

describe("Supervisor failure paths", () => {
  it.scoped("restart + resume: the child dies mid-turn, the thread is resumed on a new child and completes", () =>
    Effect.gen(function* () {
      const { fake, supervisor, events } = yield* supervise(
        { restart: { policy: "resume", maxAttempts: 2, backoff: "1 second" } },
        { turns: "manual" }
      )
      const handle = yield* supervisor.start(item("work", { id: 7 }))
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.peer.writeStderr("panic: lost the plot\n")
      yield* fake.peer.exit(1)
      yield* waitFor(
        events,
        (e): e is Extract<typeof e, { _tag: "ConnectionRestarting" }> => e._tag === "ConnectionRestarting"
      )
      yield* advance("1 second")
      const resume = yield* fake.nextRequest("thread/resume")
      assert.strictEqual(resume.params.threadId, threadId)
      assert.strictEqual(resume.connection, 2)
      const turn = yield* fake.nextRequest("turn/start")
      assert.strictEqual(turn.connection, 2)
      assert.deepStrictEqual(turn.params.input, [{ type: "text", text: "work" }])
      yield* fake.completeTurn(threadId, "turn_2", "completed", { message: "resumed fine" })
      const result = yield* handle.await
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(result.resumes, 1)
      const tags = Chunk.toReadonlyArray(yield* Stream.runCollect(handle.events)).map((e) => e._tag)
      assert.includeMembers(tags, ["ConnectionLost", "Resumed"])
      assert.isBelow(tags.indexOf("ConnectionLost"), tags.lastIndexOf("ThreadReady"))
    })
  )

  it.scoped("restart policy fail: the work item fails with the cause", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({ restart: { policy: "fail" } }, { turns: "manual" })
      const handle = yield* supervisor.start(item("work"))
      yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.peer.exit(3)
      const exit = yield* Effect.exit(handle.await)
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.strictEqual(error?.reason, "connection-lost")
      assert.match(error?.detail ?? "", /exited with code 3/)
    })
  )

  it.scoped("a slot gives up after its bounded restarts; queued work fails with the cause", () =>
    Effect.gen(function* () {
      const { fake, supervisor, events } = yield* supervise(
        { restart: { maxAttempts: 1, backoff: "1 second" } },
        {
          behaviour: { initialize: () => "silence" }
        }
      )
      void fake
      const running = yield* Effect.fork(supervisor.run(item("x")))
      // The handshake never answers: each connection's initialize times out after 2 minutes.
      yield* advance("2 minutes")
      yield* waitFor(
        events,
        (e): e is Extract<typeof e, { _tag: "ConnectionRestarting" }> => e._tag === "ConnectionRestarting"
      )
      yield* advance("1 second")
      yield* advance("2 minutes")
      const gaveUp = yield* waitFor(
        events,
        (e): e is Extract<typeof e, { _tag: "ConnectionGaveUp" }> => e._tag === "ConnectionGaveUp"
      )
      assert.match(gaveUp.detail, /initialize/)
      const exit = yield* Fiber.await(running)
      assert.isTrue(Exit.isFailure(exit))
    })
  )

  /** A started item in its first turn (manual turns) with one command card open. */
  const itemWithOpenCard = Effect.gen(function* () {
    const { fake, supervisor } = yield* supervise({}, { turns: "manual" })
    const approvals = yield* supervisor.subscribeApprovals
    const handle = yield* supervisor.start(item("x"))
    const threadId = yield* handle.threadId
    yield* fake.nextRequest("turn/start")
    const id = yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
    yield* Queue.take(approvals)
    return { fake, handle, id, supervisor, threadId }
  })

  it.scoped("stopping a work item mid-turn interrupts the turn and refuses its open card", () =>
    Effect.gen(function* () {
      const { fake, handle, id, supervisor, threadId } = yield* itemWithOpenCard
      const stopping = yield* Effect.fork(handle.stop)
      const interrupt = yield* fake.nextRequest("turn/interrupt")
      assert.deepStrictEqual(interrupt.params, { threadId, turnId: "turn_1" })
      yield* Fiber.join(stopping)
      const answer = yield* fake.answerTo(id)
      assert.deepStrictEqual(answer["result"], { decision: "decline" })
      assert.strictEqual((yield* supervisor.inbox.open).length, 0)
    })
  )

  it.scoped(
    "an item that ends lets go of its thread: thread/start asked codex to unload it once let go, the end sends thread/unsubscribe",
    () =>
      Effect.gen(function* () {
        // codex keeps a thread (and its writer lock) loaded until it has had no subscriber for
        // thread_unload_delay_secs (30 minutes by default): meanwhile no other app-server process on
        // the codex home can resume it (docs/scaling.md, "a moved item's thread held by a survivor").
        const { fake, supervisor } = yield* supervise()
        const result = yield* supervisor.run(item("x"))
        const start = fake.requestsSoFar().find((r) => r.method === "thread/start")!
        assert.deepStrictEqual(start.params.config, { thread_unload_delay_secs: 0 })
        assert.deepStrictEqual(
          fake
            .requestsSoFar()
            .map((r) => r.method)
            .slice(-2),
          ["turn/start", "thread/unsubscribe"]
        )
        assert.deepStrictEqual(fake.requestsSoFar().at(-1)!.params, { threadId: result.threadId })
      })
  )

  it.scoped("the item's own config is kept and may set the unload delay itself; thread/resume carries it too", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise()
      yield* supervisor.run(
        item("x", { config: { model_reasoning_effort: "low" }, threadParams: { config: { from_params: true } } })
      )
      const start = fake.requestsSoFar().find((r) => r.method === "thread/start")!
      assert.deepStrictEqual(start.params.config, {
        thread_unload_delay_secs: 0,
        from_params: true,
        model_reasoning_effort: "low"
      })
      yield* supervisor.run(item("y", { threadId: "thr_1", config: { thread_unload_delay_secs: 60 } }))
      const resume = fake.requestsSoFar().find((r) => r.method === "thread/resume")!
      assert.deepStrictEqual(resume.params.config, { thread_unload_delay_secs: 60 })
      assert.deepStrictEqual(
        fake
          .requestsSoFar()
          .filter((r) => r.method === "thread/unsubscribe")
          .map((r) => r.params),
        [{ threadId: "thr_1" }, { threadId: "thr_1" }]
      )
    })
  )

  it.scoped("stopped mid-turn: the turn is interrupted and its card refused before the thread is let go", () =>
    Effect.gen(function* () {
      const { fake, handle, id, threadId } = yield* itemWithOpenCard
      yield* handle.stop
      // codex unloads a thread only once no turn runs: the interrupt must come first (measured on 0.171.0).
      const written = fake.peer.writtenSoFar()
      const at = (match: (f: Record<string, unknown>) => boolean) => written.findIndex(match)
      const interrupt = at((f) => f["method"] === "turn/interrupt")
      const refusal = at((f) => f["id"] === id && f["method"] === undefined)
      const unsubscribe = at((f) => f["method"] === "thread/unsubscribe")
      assert.isTrue(
        interrupt >= 0 && refusal > interrupt && unsubscribe > refusal,
        JSON.stringify({ interrupt, refusal, unsubscribe })
      )
      assert.deepStrictEqual(written[unsubscribe]!["params"], { threadId })
    })
  )

  it.scoped(
    "an app-server that never answers thread/unsubscribe holds the item's end for interruptTimeout at most",
    () =>
      Effect.gen(function* () {
        const { fake, supervisor } = yield* supervise(
          { interruptTimeout: "5 seconds" },
          { behaviour: { "thread/unsubscribe": () => "silence" } }
        )
        const running = yield* Effect.fork(supervisor.run(item("x")))
        yield* fake.nextRequest("thread/unsubscribe")
        assert.isNull(yield* Fiber.poll(running).pipe(Effect.map(Option.getOrNull)))
        yield* advance("5 seconds")
        const result = yield* Fiber.join(running)
        assert.strictEqual(result.status, "completed")
      })
  )

  it.scoped("stall watchdog: no event for the stall timeout interrupts the turn and fails the item as stalled", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({ stallTimeout: "10 minutes" }, { turns: "manual" })
      const handle = yield* supervisor.start(item("x"))
      yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      yield* advance("10 minutes")
      yield* fake.nextRequest("turn/interrupt")
      const exit = yield* Effect.exit(handle.await)
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.strictEqual(error?.reason, "stalled")
    })
  )

  it.scoped("stall watchdog waits while a card is open", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({ stallTimeout: "1 minute" }, { turns: "manual" })
      const approvals = yield* supervisor.subscribeApprovals
      const handle = yield* supervisor.start(item("x"))
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
      const opened = yield* Queue.take(approvals)
      yield* advance("5 minutes")
      assert.isFalse(fake.requestsSoFar().some((r) => r.method === "turn/interrupt"))
      yield* supervisor.inbox.answer(opened._tag === "CardOpened" ? opened.card.id : "", Decision.Decline)
      yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "ok" })
      assert.strictEqual((yield* handle.await).status, "completed")
    })
  )

  it.scoped("a second request on an open id takes the connection down as a protocol error", () =>
    Effect.gen(function* () {
      const { fake, supervisor, events } = yield* supervise({ restart: { maxAttempts: 0 } }, { turns: "manual" })
      const handle = yield* supervisor.start(item("x"))
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"), 5)
      yield* fake.request(
        "item/fileChange/requestApproval",
        { threadId, turnId: "turn_1", itemId: "p", startedAtMs: 0 },
        5
      )
      const lost = yield* waitFor(
        events,
        (e): e is Extract<typeof e, { _tag: "ConnectionLost" }> => e._tag === "ConnectionLost"
      )
      assert.strictEqual(lost.reason._tag, "Protocol")
      assert.match(lost.message, /request id 5 .* still open/)
      // Neither request was answered: one answer cannot settle two.
      assert.deepStrictEqual(fake.answersSoFar(), [])
      assert.isTrue(Exit.isFailure(yield* Effect.exit(handle.await)))
    })
  )

  it.scoped("an unreadable frame ends the connection with a message saying so", () =>
    Effect.gen(function* () {
      const { fake, supervisor, events } = yield* supervise({ restart: { maxAttempts: 0 } }, { turns: "manual" })
      const handle = yield* supervisor.start(item("x"))
      yield* handle.threadId
      yield* fake.peer.sendRaw('{"id": 3, "method": "item/commandExecution/requestAppro\n')
      const lost = yield* waitFor(
        events,
        (e): e is Extract<typeof e, { _tag: "ConnectionLost" }> => e._tag === "ConnectionLost"
      )
      assert.strictEqual(lost.reason._tag, "Protocol")
      assert.match(lost.message, /unreadable frame/)
      const exit = yield* Effect.exit(handle.await)
      assert.strictEqual(
        Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error.reason,
        "connection-lost"
      )
    })
  )

  it.scoped("a refused resume rolls back the registration and fails the item", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise()
      const exit = yield* Effect.exit(supervisor.run(item("x", { threadId: "thr_unknown" })))
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.strictEqual(error?.reason, "resume-failed")
      assert.match(error?.detail ?? "", /thread not found/)
      // A notification for that thread now goes nowhere near a work item.
      yield* fake.notify("turn/started", { threadId: "thr_unknown", turn: { id: "t" } })
      const again = yield* supervisor.run(item("y"))
      assert.strictEqual(again.status, "completed")
    })
  )

  it.scoped(
    "a thread codex never saved: ifThreadMissing start runs the item on a new thread and says so; by default it fails",
    () =>
      Effect.gen(function* () {
        // codex 0.171.0's answer for a thread without a rollout (measured on the binary).
        const noRollout = (params: { threadId: string }) => ({
          error: { code: -32600, message: `no rollout found for thread id ${params.threadId}` }
        })
        const { fake, supervisor, events } = yield* supervise({}, { behaviour: { "thread/resume": noRollout } })
        const failed = yield* Effect.exit(supervisor.run(item("x", { threadId: "thr_lost" })))
        const error = Exit.isFailure(failed) && failed.cause._tag === "Fail" ? failed.cause.error : undefined
        assert.strictEqual(error?.reason, "resume-failed")
        assert.match(error?.detail ?? "", /no rollout found/)

        const result = yield* supervisor.run(item("again", { threadId: "thr_lost", ifThreadMissing: "start" }))
        assert.strictEqual(result.status, "completed")
        assert.notStrictEqual(result.threadId, "thr_lost")
        const seen = Array.from(yield* Queue.takeAll(events)).flatMap((e) => (e._tag === "Work" ? [e.event] : []))
        const fresh = seen.find((e) => e._tag === "ThreadStartedFresh")
        assert.deepInclude(fresh, { _tag: "ThreadStartedFresh", missingThreadId: "thr_lost" })
        const ready = seen.filter((e) => e._tag === "ThreadReady").at(-1)
        assert.deepInclude(ready, { _tag: "ThreadReady", threadId: result.threadId, resumed: false })
        // The resume was asked once per item, then thread/start for the second, whose thread is let
        // go when it ends (the refused resumes never held one).
        assert.deepStrictEqual(
          fake
            .requestsSoFar()
            .map((r) => r.method)
            .filter((m) => m.startsWith("thread/")),
          ["thread/resume", "thread/resume", "thread/start", "thread/unsubscribe"]
        )
      })
  )

  it.scoped(
    "a thread another app-server process still writes (a dead runner's, until it exits) is asked again for up to 180 s, then refused",
    () =>
      Effect.gen(function* () {
        let held = 3
        const heldThenFree = (params: { threadId: string }) =>
          held-- > 0
            ? { error: { code: -32600, message: `thread ${params.threadId} already has an active writer` } }
            : { result: { thread: { id: params.threadId }, model: "m" } }
        const { fake, supervisor } = yield* supervise({}, { behaviour: { "thread/resume": heldThenFree } })
        const fiber = yield* Effect.fork(supervisor.run(item("x", { threadId: "thr_held" })))
        for (let i = 0; i < 3; i++) {
          yield* fake.nextRequest("thread/resume")
          yield* TestClock.adjust("500 millis")
        }
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(result.threadId, "thr_held")
        assert.strictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/resume").length, 4)

        const always = yield* supervise(
          {},
          {
            behaviour: {
              "thread/resume": (params: { threadId: string }) => ({
                error: { code: -32600, message: `thread ${params.threadId} already has an active writer` }
              })
            }
          }
        )
        const stuck = yield* Effect.fork(Effect.exit(always.supervisor.run(item("y", { threadId: "thr_stuck" }))))
        yield* always.fake.nextRequest("thread/resume")
        for (let i = 0; i < 360; i++) {
          yield* TestClock.adjust("500 millis")
          yield* always.fake.nextRequest("thread/resume")
        }
        const exit = yield* Fiber.join(stuck)
        const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
        assert.strictEqual(error?.reason, "resume-failed")
        assert.match(error?.detail ?? "", /active writer/)
        assert.strictEqual(always.fake.requestsSoFar().filter((r) => r.method === "thread/resume").length, 361)
      })
  )

  it.scoped("ifThreadMissing start does not hide another refusal of the resume", () =>
    Effect.gen(function* () {
      const { supervisor } = yield* supervise(
        {},
        { behaviour: { "thread/resume": () => ({ error: { code: -32600, message: "invalid session id" } }) } }
      )
      const exit = yield* Effect.exit(supervisor.run(item("x", { threadId: "bad", ifThreadMissing: "start" })))
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.strictEqual(error?.reason, "resume-failed")
      assert.match(error?.detail ?? "", /invalid session id/)
    })
  )

  it.scoped("a thread already run by a live work item cannot be resumed by a second one", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({}, { turns: "manual" })
      const first = yield* supervisor.start(item("first"))
      const threadId = yield* first.threadId
      const exit = yield* Effect.exit(supervisor.run(item("second", { threadId })))
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.strictEqual(error?.reason, "resume-failed")
      assert.match(error?.detail ?? "", /already run by another work item/)
      assert.isFalse(fake.requestsSoFar().some((r) => r.method === "thread/resume"))
      // The first item still gets its events.
      yield* fake.nextRequest("turn/start")
      yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "still mine" })
      assert.strictEqual((yield* first.await).finalMessage, "still mine")
    })
  )

  it.scoped("admission: with concurrency 1, items run one after another in FIFO order", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({ concurrency: 1 }, { turns: "manual" })
      const first = yield* supervisor.start(item("first"))
      const second = yield* supervisor.start(item("second"))
      const third = yield* supervisor.start(item("third"))
      const t1 = yield* first.threadId
      yield* fake.nextRequest("turn/start")
      assert.strictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/start").length, 1)
      yield* fake.completeTurn(t1, "turn_1", "completed", { message: "1" })
      yield* first.await
      const t2 = yield* second.threadId
      const turn2 = yield* fake.nextRequest("turn/start")
      assert.deepStrictEqual(turn2.params.input[0].text, "second")
      yield* fake.completeTurn(t2, "turn_2", "completed", { message: "2" })
      yield* second.await
      yield* third.threadId
      const turn3 = yield* fake.nextRequest("turn/start")
      assert.deepStrictEqual(turn3.params.input[0].text, "third")
    })
  )

  it.scoped("steer goes into the running turn with its id", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({}, { turns: "manual" })
      const { events } = yield* Effect.succeed({ events: yield* supervisor.subscribe })
      const handle = yield* supervisor.start(item("x"))
      const threadId = yield* handle.threadId
      yield* waitFor(
        events,
        (e): e is Extract<typeof e, { _tag: "Work" }> => e._tag === "Work" && e.event._tag === "TurnStarted"
      )
      yield* handle.steer("also do y")
      const steer = yield* fake.nextRequest("turn/steer")
      assert.deepStrictEqual(steer.params, {
        threadId,
        expectedTurnId: "turn_1",
        input: [{ type: "text", text: "also do y" }]
      })
    })
  )

  it.scoped("interrupt: the turn completes as interrupted; a missed interrupt deadline recycles the connection", () =>
    Effect.gen(function* () {
      const { fake, supervisor, events } = yield* supervise(
        { interruptTimeout: "5 seconds", restart: { maxAttempts: 0 } },
        {
          turns: "manual",
          behaviour: { "turn/interrupt": () => "silence" }
        }
      )
      const handle = yield* supervisor.start(item("x"))
      yield* handle.threadId
      yield* waitFor(
        events,
        (e): e is Extract<typeof e, { _tag: "Work" }> => e._tag === "Work" && e.event._tag === "TurnStarted"
      )
      const interrupting = yield* Effect.fork(handle.interrupt)
      yield* fake.nextRequest("turn/interrupt")
      yield* advance("5 seconds")
      yield* Fiber.join(interrupting)
      const lost = yield* waitFor(
        events,
        (e): e is Extract<typeof e, { _tag: "ConnectionLost" }> => e._tag === "ConnectionLost"
      )
      assert.match(lost.message, /turn\/interrupt got no answer/)
    })
  )

  it.scoped("follow-up prompts run as further turns on the same thread", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise()
      const result = yield* supervisor.run(item("one", { followUps: ["two"] }))
      assert.strictEqual(result.turns.length, 2)
      const turns = fake.requestsSoFar().filter((r) => r.method === "turn/start")
      assert.deepStrictEqual(
        turns.map((t) => t.params.input[0].text),
        ["one", "two"]
      )
      assert.deepStrictEqual(
        turns.map((t) => t.params.threadId),
        [result.threadId, result.threadId]
      )
    })
  )
})

describe("pool", () => {
  it.scoped("threads spread across app-server processes and stay on theirs", () =>
    Effect.gen(function* () {
      const { fake, supervisor } = yield* supervise({ pool: 2 }, { turns: "manual" })
      const a = yield* supervisor.start(item("A"))
      const b = yield* supervisor.start(item("B"))
      const threadA = yield* a.threadId
      const threadB = yield* b.threadId
      const starts = fake.requestsSoFar().filter((r) => r.method === "thread/start")
      assert.deepStrictEqual(starts.map((r) => r.connection).sort(), [1, 2])
      const turnA = yield* fake.nextRequest("turn/start")
      const turnB = yield* fake.nextRequest("turn/start")
      // The fake numbers threads in the order it handled thread/start: thr_k came from starts[k-1].
      const creator = (threadId: string) => starts[Number(threadId.slice("thr_".length)) - 1]!.connection
      for (const turn of [turnA, turnB]) assert.strictEqual(turn.connection, creator(turn.params.threadId))
      assert.notStrictEqual(creator(threadA), creator(threadB))
    })
  )
})

describe("observing events", () => {
  it.scoped(
    "an observer sees every event as it is published, in the subscription's order; a throwing one does not stop the others; gone with its scope",
    () =>
      Effect.gen(function* () {
        const { fake, supervisor, events } = yield* supervise(
          { approvals: { handler: () => Effect.succeed(Decision.Decline) } },
          { turns: "manual" }
        )
        const seen: Array<string> = []
        const observing = yield* Scope.make()
        yield* Scope.extend(
          supervisor.observe(() => {
            throw new Error("an observer that throws")
          }),
          observing
        )
        yield* Scope.extend(
          supervisor.observe((event) => seen.push(event._tag === "Work" ? event.event._tag : event._tag)),
          observing
        )
        const handle = yield* supervisor.start({ id: "x", prompt: "go" })
        const threadId = yield* handle.threadId
        yield* fake.nextRequest("turn/start")
        yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "ok" })
        yield* handle.await
        // The subscription got the same events, in the same order.
        const subscribed = Chunk.toReadonlyArray(yield* Queue.takeAll(events)).map((event) =>
          event._tag === "Work" ? event.event._tag : event._tag
        )
        assert.deepStrictEqual(seen, subscribed.slice(subscribed.length - seen.length))
        assert.includeMembers(seen, ["ThreadReady", "TurnCompleted", "ItemFinished"])
        yield* Scope.close(observing, Exit.void)
        const count = seen.length
        const again = yield* supervisor.start({ id: "y", prompt: "go" })
        yield* again.threadId
        assert.strictEqual(seen.length, count, "nothing seen once its scope closed")
      })
  )
})

/** Effect's tracer, keeping every span it makes. */
const recordingTracer = Effect.map(Effect.tracer, (base) => {
  const spans: Array<Tracer.Span> = []
  const recording = Tracer.make({
    span: (...args) => {
      const span = base.span(...args)
      spans.push(span)
      return span
    },
    context: base.context
  })
  return { recording, spans }
})

describe("observability", () => {
  it.scoped("connection, thread, turn and card spans are opened through Effect's tracer", () =>
    Effect.gen(function* () {
      const base = yield* Effect.tracer
      const names: Array<string> = []
      const recording = Tracer.make({
        span: (name, ...rest) => {
          names.push(name)
          return base.span(name, ...rest)
        },
        context: base.context
      })
      yield* Effect.gen(function* () {
        const { fake, supervisor } = yield* supervise(
          { approvals: { handler: () => Effect.succeed(Decision.Decline) } },
          { turns: "manual" }
        )
        const handle = yield* supervisor.start(item("x"))
        const threadId = yield* handle.threadId
        yield* fake.nextRequest("turn/start")
        const id = yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
        yield* fake.answerTo(id)
        yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "ok" })
        yield* handle.await
      }).pipe(Effect.withTracer(recording))
      assert.includeMembers(names, [
        "warden.connection",
        "warden.thread",
        "warden.turn",
        "warden.card",
        "warden.card.handler",
        "warden.workItem"
      ])
    })
  )

  it.scoped(
    "without Telemetry (the default): no warden.* metric moves, no request span, cards' spans under the connection's as before",
    () =>
      Effect.gen(function* () {
        const { recording, spans } = yield* recordingTracer
        const snapshot = () =>
          Metric.unsafeSnapshot()
            .filter((m) => m.metricKey.name.startsWith("warden."))
            .map((m) => JSON.stringify(m.metricState))
        const before = snapshot()
        yield* Effect.gen(function* () {
          const { fake, supervisor } = yield* supervise(
            { approvals: { handler: () => Effect.succeed(Decision.Decline) } },
            { turns: "manual" }
          )
          const handle = yield* supervisor.start(item("x"))
          const threadId = yield* handle.threadId
          yield* fake.nextRequest("turn/start")
          const id = yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
          yield* fake.answerTo(id)
          yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "ok" })
          yield* handle.await
        }).pipe(Effect.withTracer(recording))
        assert.deepStrictEqual(snapshot(), before, "no warden.* metric changed")
        assert.isFalse(spans.some((s) => s.name === "warden.request"))
        const card = spans.find((s) => s.name === "warden.card")
        assert.strictEqual(
          card?.parent._tag === "Some" ? (card.parent.value as Tracer.Span).name : undefined,
          "warden.connection"
        )
        assert.isUndefined(card?.attributes.get("warden.source"), "the settlement is not described")
      })
  )

  it.scoped(
    "with Telemetry: each client request is a client span under its caller's, with the span annotations in force, ended with the request's exit (a refused turn/start: failed); none with tracing off",
    () =>
      Effect.gen(function* () {
        const { recording, spans } = yield* recordingTracer
        const refused = { error: { code: -32600, message: "no turn for you" } }
        yield* Effect.gen(function* () {
          const { supervisor } = yield* supervise({}, { turns: "manual", behaviour: { "turn/start": () => refused } })
          const handle = yield* supervisor.start(item("x"))
          yield* Effect.exit(handle.await)
        }).pipe(Effect.annotateSpans("tenant", "t-1"), Effect.provide(Telemetry.layer), Effect.withTracer(recording))
        const requests = spans.filter((s) => s.name === "warden.request")
        const byMethod = (method: string) => requests.find((s) => s.attributes.get("rpc.method") === method)
        const parentName = (span: Tracer.Span | undefined) =>
          span?.parent._tag === "Some" ? (span.parent.value as Tracer.Span).name : undefined
        const threadStart = byMethod("thread/start")
        const turnStart = byMethod("turn/start")
        assert.strictEqual(parentName(threadStart), "warden.thread")
        assert.strictEqual(parentName(turnStart), "warden.turn")
        for (const span of [threadStart, turnStart]) {
          assert.strictEqual(span?.kind, "client")
          assert.strictEqual(span?.attributes.get("rpc.system"), "jsonrpc")
          assert.strictEqual(span?.attributes.get("tenant"), "t-1", "the span annotations in force")
          assert.strictEqual(typeof span?.attributes.get("warden.connection"), "number")
        }
        assert.isTrue(threadStart?.status._tag === "Ended" && Exit.isSuccess(threadStart.status.exit))
        assert.isTrue(
          turnStart?.status._tag === "Ended" &&
            Exit.isFailure(turnStart.status.exit) &&
            Cause.failureOption(turnStart.status.exit.cause).pipe(
              Option.exists((e) => (e as { readonly _tag?: unknown })._tag === "RemoteError")
            ),
          "the refused request's span ends with its typed error"
        )

        spans.length = 0
        yield* Effect.gen(function* () {
          const { supervisor } = yield* supervise({}, {})
          const handle = yield* supervisor.start(item("y"))
          yield* handle.await
        }).pipe(Effect.withTracerEnabled(false), Effect.provide(Telemetry.layer), Effect.withTracer(recording))
        assert.isFalse(
          spans.some((s) => s.name === "warden.request"),
          "no request span while tracing is off"
        )
      })
  )

  it.scoped(
    "with Telemetry: a restart is a second connection span, the resume a second thread span and events on the item's; restarts and losses are counted",
    () =>
      Effect.gen(function* () {
        const { recording, spans } = yield* recordingTracer
        const lossesBefore = (yield* Metric.value(Metric.tagged(Telemetry.Metrics.losses, "warden.reason", "Exited")))
          .count
        yield* Effect.gen(function* () {
          const { fake, supervisor, events } = yield* supervise(
            { restart: { policy: "resume", maxAttempts: 2, backoff: "1 second" } },
            { turns: "manual" }
          )
          const handle = yield* supervisor.start(item("work", { id: 7 }))
          const threadId = yield* handle.threadId
          yield* fake.nextRequest("turn/start")
          yield* fake.peer.exit(1)
          yield* waitFor(
            events,
            (e): e is Extract<typeof e, { _tag: "ConnectionRestarting" }> => e._tag === "ConnectionRestarting"
          )
          yield* advance("1 second")
          yield* fake.nextRequest("thread/resume")
          yield* fake.nextRequest("turn/start")
          yield* fake.completeTurn(threadId, "turn_2", "completed", { message: "resumed fine" })
          assert.strictEqual((yield* handle.await).resumes, 1)
        }).pipe(Effect.provide(Telemetry.layer), Effect.withTracer(recording))
        const named = (name: string) => spans.filter((s) => s.name === name)
        assert.deepStrictEqual(
          named("warden.connection").map((s) => s.attributes.get("warden.restart")),
          [0, 1]
        )
        assert.deepStrictEqual(
          named("warden.thread").map((s) => s.attributes.get("warden.resume")),
          [false, true]
        )
        const [workItem] = named("warden.workItem")
        assert.isTrue(workItem !== undefined && workItem.parent._tag === "None", "a work item is the root of its trace")
        const events =
          (
            workItem as unknown as {
              readonly events?: ReadonlyArray<readonly [string, bigint, Record<string, unknown>]>
            }
          ).events ?? []
        assert.deepStrictEqual(
          events.map(([name]) => name),
          ["warden.connection_lost", "warden.resume"]
        )
        assert.strictEqual(events[1]?.[2]["warden.attempt"], 1)
        const threads = named("warden.thread")
        for (const thread of threads)
          assert.strictEqual(thread.parent._tag === "Some" ? thread.parent.value.spanId : undefined, workItem?.spanId)
        assert.strictEqual(
          (yield* Metric.value(Metric.tagged(Telemetry.Metrics.losses, "warden.reason", "Exited"))).count -
            lossesBefore,
          1
        )
        assert.isAtLeast((yield* Metric.value(Metric.tagged(Telemetry.Metrics.restarts, "warden.slot", "0"))).count, 1)
        assert.isAtLeast(
          (yield* Metric.value(
            Metric.taggedWithLabels(Telemetry.Metrics.requestLatency, [
              MetricLabel.make("rpc.method", "thread/resume"),
              MetricLabel.make("warden.outcome", "ok")
            ])
          )).count,
          1
        )
      })
  )
})
