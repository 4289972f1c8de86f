import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import { Chunk, Effect, Exit, Fiber, Option, Queue, Stream, TestClock } from "effect"
import { commandApproval, supervise } from "./support.js"

const item = (prompt: string, extra: Record<string, unknown> = {}) => ({ prompt, cwd: "/tmp/ws", ...extra })

describe("Supervisor on a fake app-server", () => {
  it.scoped("performs the handshake and exposes its result", () =>
    Effect.gen(function*() {
      const { fake, supervisor } = yield* supervise()
      const init = yield* supervisor.ready
      assert.strictEqual(init.userAgent, "fake-app-server/0.171.0")
      const written = fake.peer.writtenSoFar()
      assert.strictEqual(written[0]?.["method"], "initialize")
      assert.deepStrictEqual((written[0]?.["params"] as any).clientInfo.name, "warden")
      assert.deepStrictEqual(written[1], { jsonrpc: "2.0", method: "initialized" })
    }))

  it.scoped("runs a work item to its result", () =>
    Effect.gen(function*() {
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
    }))

  it.scoped("events packed right behind the thread/start response are not lost, and arrive in order", () =>
    Effect.gen(function*() {
      const { fake, supervisor } = yield* supervise({}, {
        turns: "manual",
        behaviour: {
          // The real server packs the thread's first events right behind the response.
          "thread/start": (_params, ctx) =>
            Effect.gen(function*() {
              const thread = { id: "thr_packed" }
              yield* ctx.peer.sendRaw(
                [
                  { id: ctx.requestId, result: { thread } },
                  { method: "thread/started", params: { thread } },
                  { method: "thread/status/changed", params: { threadId: "thr_packed", status: { type: "idle" } } },
                  { method: "warning", params: { threadId: "thr_packed", message: "packed" } }
                ].map((f) => JSON.stringify(f) + "\n").join("")
              )
              return "silence" as const
            })
        }
      })
      const handle = yield* supervisor.start(item("x"))
      assert.strictEqual(yield* handle.threadId, "thr_packed")
      yield* fake.nextRequest("turn/start")
      yield* fake.notify("item/agentMessage/delta", { threadId: "thr_packed", turnId: "turn_1", itemId: "m", delta: "a" })
      yield* fake.notify("item/agentMessage/delta", { threadId: "thr_packed", turnId: "turn_1", itemId: "m", delta: "b" })
      yield* fake.completeTurn("thr_packed", "turn_1", "completed", { message: "ab" })
      const result = yield* handle.await
      assert.strictEqual(result.finalMessage, "ab")
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(handle.events))
      const notifications = events.flatMap((e) => (e._tag === "Notification" ? [e.method + (e.method === "item/agentMessage/delta" ? ":" + (e.params as any).delta : "")] : []))
      assert.deepStrictEqual(notifications.slice(0, 3), ["thread/started", "thread/status/changed", "warning"])
      assert.deepStrictEqual(notifications.filter((m) => m.startsWith("item/agentMessage/delta")), ["item/agentMessage/delta:a", "item/agentMessage/delta:b"])
      assert.strictEqual(events[events.length - 1]?._tag, "TurnCompleted")
    }))

  it.scoped("a card is answered through the inbox and the answer is written once", () =>
    Effect.gen(function*() {
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
    }))

  it.scoped("no head-of-line blocking: thread B completes while A's card is open", () =>
    Effect.gen(function*() {
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
    }))

  it.scoped("a request without an answer fails at its deadline; the connection stays up", () =>
    Effect.gen(function*() {
      const { fake, supervisor } = yield* supervise(
        { connection: { requestTimeouts: { "thread/start": "30 seconds" } } },
        { behaviour: { "thread/start": () => "silence" } }
      )
      yield* supervisor.ready
      const running = yield* Effect.fork(supervisor.run(item("x")))
      yield* fake.nextRequest("thread/start")
      yield* TestClock.adjust("30 seconds")
      const exit = yield* Fiber.await(running)
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.strictEqual(error?.reason, "start-failed")
      assert.match(error?.detail ?? "", /thread\/start .* no answer within 30000 ms/)
      assert.isTrue(fake.peer.stdinEnded() === false)
    }))

  it.scoped("-32001 overload answers are retried with backoff", () =>
    Effect.gen(function*() {
      let calls = 0
      const { fake, supervisor } = yield* supervise({}, {
        behaviour: {
          "thread/start": () => (++calls <= 2 ? { error: { code: -32001, message: "Server overloaded; retry later." } } : { result: { thread: { id: "thr_x" } } })
        }
      })
      const running = yield* Effect.fork(supervisor.run(item("x")))
      yield* fake.nextRequest("thread/start")
      yield* TestClock.adjust("1 second")
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(running)
      assert.strictEqual(result.threadId, "thr_x")
      assert.strictEqual(fake.requestsSoFar().filter((r) => r.method === "thread/start").length, 3)
    }))

  it.scoped("the child dying mid-turn settles everything with the cause and the stderr tail", () =>
    Effect.gen(function*() {
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
    }))
})
