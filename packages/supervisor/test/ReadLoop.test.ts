/**
 * The read loop handles a chunk's frames in the transport's `data` call while its fiber waits for
 * frames (issue 14, fourth pass: no wake-up of its fiber per chunk), and hands the rest of a chunk
 * to its fiber at the first frame that needs one: what the loop promises holds either way (frame
 * order, handlers never called on its stack, a throw ends the connection with everything settled).
 */
import { assert, describe, it } from "@effect/vitest"
import { Approvals } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import { FakeAppServer } from "@warden/testkit"
import { Effect, Fiber, Mailbox, Option, Scope } from "effect"
import * as AppServerConnection from "../src/internal/AppServerConnection.js"
import type { ThreadRoute, ThreadSignal } from "../src/internal/ThreadRoute.js"
import { commandApproval } from "./support.js"

/** Let forked fibers run (the read loop goes back to waiting); no time passes. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

const line = (frame: Record<string, unknown>) => JSON.stringify(frame) + "\n"
const approvalRequest = (id: number, itemId: string) => ({
  id,
  method: "item/commandExecution/requestApproval",
  params: commandApproval("thr_1", "turn_1", itemId)
})

const connect = (
  approvals: Approvals.ApprovalsConfig = {},
  hostile?: (connectionCards: Approvals.Desk) => Approvals.Desk
) =>
  Effect.gen(function* () {
    const fake = FakeAppServer.make({ behaviour: { "thread/start": () => Effect.succeed("silence" as const) } })
    const connection = yield* fake.memory.transport.connect
    const real = yield* Approvals.make(approvals)
    const shape: Approvals.ApprovalsShape =
      hostile === undefined
        ? real
        : { ...real, cardsFor: (l, overrides, owner) => hostile(real.cardsFor(l, overrides, owner)) }
    const server = yield* AppServerConnection.make(connection, shape)
    // A route for thr_1, as a runner registers one.
    const signals = yield* Mailbox.make<ThreadSignal>()
    const cardScope = yield* Scope.make()
    const route: ThreadRoute = {
      threadId: "thr_1",
      receive: (signal) => void signals.unsafeOffer(signal),
      cardScope,
      workItem: 0,
      routed: 0
    }
    server.registerThread(route)
    yield* settle
    return { fake, server, signals, route, send: (text: string) => fake.memory.peer.unsafeSendRaw(text) }
  })

describe("the read loop handles a chunk in the data call while its fiber waits", () => {
  it.scoped("a response settles its request and a notification reaches its thread before the data call returns", () =>
    Effect.gen(function* () {
      const { fake, send, server, signals } = yield* connect()
      const caller = yield* Effect.fork(server.request("thread/start", {}))
      const sent = yield* fake.nextRequest("thread/start")
      yield* settle
      assert.strictEqual(server.pendingCount(), 1)
      send(
        line({
          method: "turn/started",
          params: { threadId: "thr_1", turn: { id: "turn_1", items: [], status: "inProgress" } }
        }) + line({ id: sent.id, result: { thread: { id: "thr_2" }, model: "m" } })
      )
      // Nothing has run but the data call itself.
      assert.strictEqual(server.pendingCount(), 0, "the response was read in the call")
      assert.strictEqual(Option.getOrThrow(signals.unsafeSize()), 1, "the notification was routed in the call")
      assert.strictEqual(server.deadlineCount(), 0)
      yield* Fiber.join(caller)
    })
  )

  it.scoped(
    "a card opened in the data call: its handler is called after it (a scheduler task), never in it; then it answers",
    () =>
      Effect.gen(function* () {
        let calledDuringTheCall = 0
        let inTheCall = false
        const { fake, send, server } = yield* connect({
          handler: () => {
            if (inTheCall) calledDuringTheCall++
            return Effect.succeed(Decision.Accept)
          }
        })
        // A thread's first card adds its scope's finalizer: an effect, run by the loop's fiber.
        send(line(approvalRequest(1, "call_1")))
        assert.deepStrictEqual((yield* fake.answerTo(1))["result"], { decision: "accept" })
        yield* settle
        // Its second opens in the call.
        inTheCall = true
        send(line(approvalRequest(2, "call_2")))
        inTheCall = false
        assert.strictEqual(server.connectionCards.size(), 1, "opened in the data call")
        assert.strictEqual(calledDuringTheCall, 0, "its handler was not called in it")
        assert.deepStrictEqual((yield* fake.answerTo(2))["result"], { decision: "accept" })
        assert.strictEqual(server.connectionCards.size(), 0)
        assert.strictEqual(calledDuringTheCall, 0)
      })
  )

  it.scoped(
    "a frame that needs the loop's fiber (a thread's first card) hands the rest of its chunk over, in order",
    () =>
      Effect.gen(function* () {
        const { fake, send, server, signals } = yield* connect({ handler: () => Effect.never })
        const caller = yield* Effect.fork(server.request("thread/start", {}))
        const sent = yield* fake.nextRequest("thread/start")
        yield* settle
        // The card opens (its thread's first: handed over), then the server withdraws it, then a
        // notification and a response: each after the one before it.
        send(
          line(approvalRequest(7, "call_7")) +
            line({ method: "serverRequest/resolved", params: { threadId: "thr_1", requestId: 7 } }) +
            line({
              method: "item/started",
              params: { threadId: "thr_1", item: { id: "i", type: "agentMessage", text: "" } }
            }) +
            line({ id: sent.id, result: { thread: { id: "thr_2" }, model: "m" } })
        )
        assert.strictEqual(server.pendingCount(), 1, "the frames after the first card wait for the loop's fiber")
        assert.strictEqual(Option.getOrThrow(signals.unsafeSize()), 0)
        yield* Fiber.join(caller)
        assert.strictEqual(server.connectionCards.size(), 0, "withdrawn after it opened")
        assert.isUndefined(
          fake.answersSoFar().find((a) => a["id"] === 7),
          "a withdrawn card is not answered"
        )
        assert.strictEqual(Option.getOrThrow(signals.unsafeSize()), 2, "serverRequest/resolved and item/started")
        // Next chunk: the fiber waits again, so it is read in the call.
        send(
          line({
            method: "item/completed",
            params: { threadId: "thr_1", item: { id: "i", type: "agentMessage", text: "x" } }
          })
        )
        assert.strictEqual(Option.getOrThrow(signals.unsafeSize()), 3)
      })
  )

  it.scoped(
    "a throw while a frame is handled in the data call ends the connection as InternalDefect: the call does not throw, no later frame is read, every card settles, every request fails",
    () =>
      Effect.gen(function* () {
        let breakNext = false
        const { fake, send, server } = yield* connect({ handler: () => Effect.never }, (connectionCards) => ({
          ...connectionCards,
          openNow: (request, options, fiber, flags) => {
            if (breakNext) throw new Error("injected: the connection's cards broke")
            return connectionCards.openNow(request, options, fiber, flags)
          }
        }))
        send(line(approvalRequest(1, "call_1")))
        yield* settle
        assert.strictEqual(server.connectionCards.size(), 1)
        const caller = yield* Effect.fork(server.request("thread/start", {}))
        const sent = yield* fake.nextRequest("thread/start")
        yield* settle
        breakNext = true
        send(
          line(approvalRequest(2, "call_2")) + line({ id: sent.id, result: { thread: { id: "thr_2" }, model: "m" } })
        )
        const ended = yield* server.ended
        assert.strictEqual(ended.reason._tag, "InternalDefect")
        assert.include(
          ended.message,
          "handling item/commandExecution/requestApproval request threw: injected: the connection's cards broke"
        )
        const error = yield* Fiber.join(caller).pipe(Effect.flip)
        assert.strictEqual(error._tag, "ConnectionLost", "the response after the throw was not read")
        assert.strictEqual(server.connectionCards.size(), 0, "the open card settled (connection lost)")
        assert.strictEqual(server.pendingCount(), 0)
      })
  )
})

describe("what the read loop keeps for a thread", () => {
  const fileChange = (method: "item/started" | "item/completed", itemId: string, path: string) =>
    line({
      method,
      params: {
        threadId: "thr_1",
        turnId: "turn_1",
        item: {
          type: "fileChange",
          id: itemId,
          changes: [{ path, kind: { type: "add" }, diff: "+x\n" }],
          status: method === "item/started" ? "inProgress" : "completed"
        }
      }
    })
  const patchApproval = (id: number, itemId: string) =>
    line({
      id,
      method: "item/fileChange/requestApproval",
      params: { threadId: "thr_1", turnId: "turn_1", itemId, reason: null, grantRoot: null }
    })

  it.scoped(
    "a fileChange item's changes from item/started to item/completed: its card shows them, then the route lets them go (a long thread does not keep every patch it made)",
    () =>
      Effect.gen(function* () {
        const { route, send, server } = yield* connect({ handler: () => Effect.never })
        assert.isUndefined(route.fileChanges, "an idle thread holds no map")
        send(fileChange("item/started", "fc_1", "/repo/a.txt") + fileChange("item/started", "fc_2", "/repo/b.txt"))
        send(patchApproval(1, "fc_1"))
        yield* settle
        const summary = server.connectionCards.openCards()[0]?.summary
        assert.deepStrictEqual(
          summary?.kind === "fileChange" ? summary.changes.map((c) => c.path) : summary,
          ["/repo/a.txt"],
          "the card shows its item's changes"
        )
        send(fileChange("item/completed", "fc_1", "/repo/a.txt"))
        assert.deepStrictEqual([...route.fileChanges!.keys()], ["fc_2"], "a completed item's changes are let go")
        send(
          line({
            method: "turn/completed",
            params: { threadId: "thr_1", turn: { id: "turn_1", items: [], status: "completed" } }
          })
        )
        assert.strictEqual(route.fileChanges!.size, 0, "the turn's end lets go of the rest")
      })
  )
})
