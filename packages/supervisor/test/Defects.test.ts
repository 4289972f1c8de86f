/**
 * The promise under defects and hostile input: whatever an embedder's handler does, whatever
 * throws while a frame is handled, whatever the app-server does with its stdout, every request
 * gets one answer (or the connection ends and settles it), and the slot serves the next item.
 */
import { assert, describe, it } from "@effect/vitest"
import { Approvals, type ApprovalEvent } from "@warden/approvals"
import type { Decision } from "@warden/protocol"
import { FakeAppServer } from "@warden/testkit"
import { Transport } from "@warden/transport"
import { Duration, Effect, Exit, Fiber, Mailbox, Option, Queue, Scope, TestClock, Tracer } from "effect"
import * as AppServerConnection from "../src/internal/AppServerConnection.js"
import type { ThreadSignal } from "../src/internal/ThreadRoute.js"
import { Supervisor } from "../src/index.js"
import { advance, commandApproval, supervise, waitFor } from "./support.js"

const item = (prompt: string, extra: Record<string, unknown> = {}) => ({ prompt, cwd: "/tmp/ws", ...extra })
const accept = (): Decision.Decision => ({ _tag: "Accept" })

const settledOf = (events: Queue.Dequeue<ApprovalEvent.ApprovalEvent>) =>
  Effect.gen(function* () {
    while (true) {
      const event = yield* Queue.take(events)
      if (event._tag === "CardSettled") return event.settlement
    }
  })

const isLost = (e: Supervisor.SupervisorEvent): e is Extract<Supervisor.SupervisorEvent, { _tag: "ConnectionLost" }> =>
  e._tag === "ConnectionLost"
const isReady = (
  e: Supervisor.SupervisorEvent
): e is Extract<Supervisor.SupervisorEvent, { _tag: "ConnectionReady" }> => e._tag === "ConnectionReady"

/** Run one item on a fake whose turns complete by hand. */
const runManual = (
  fake: FakeAppServer.FakeAppServer,
  supervisor: Supervisor.SupervisorShape,
  prompt: string,
  turnId: string
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const handle = yield* supervisor.start(item(prompt))
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.completeTurn(threadId, turnId, "completed", { message: prompt })
      return yield* handle.await
    })
  )

describe("handlers never run on the read loop", () => {
  it.scoped("a handler that returns a Promise (not an Effect) decides its card, and the connection lives on", () =>
    Effect.gen(function* () {
      const handler = (() => Promise.resolve(accept())) as unknown as Approvals.ApprovalsConfig["handler"]
      const { events, fake, supervisor } = yield* supervise(
        { approvals: { ...(handler ? { handler } : {}) } },
        { turns: "manual" }
      )
      const approvals = yield* supervisor.subscribeApprovals
      const handle = yield* supervisor.start(item("x"))
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      const first = yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
      assert.deepStrictEqual((yield* fake.answerTo(first))["result"], { decision: "accept" })
      assert.strictEqual((yield* settledOf(approvals)).outcome, "accepted")
      const second = yield* fake.request(
        "item/commandExecution/requestApproval",
        commandApproval(threadId, "turn_1", "call_2")
      )
      assert.deepStrictEqual((yield* fake.answerTo(second))["result"], { decision: "accept" })
      yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "ok" })
      assert.strictEqual((yield* handle.await).status, "completed")
      assert.isTrue(Option.isNone(yield* Queue.poll(events).pipe(Effect.map(Option.filter(isLost)))))
    })
  )

  it.scoped(
    "a handler that throws, returns a non-Effect, fails or dies costs only its card: refused; later frames are read",
    () =>
      Effect.gen(function* () {
        const behaviours: Array<() => unknown> = [
          () => {
            throw new Error("the handler threw synchronously")
          },
          () => 42,
          () => Effect.fail("no"),
          () => Effect.dieMessage("the handler died"),
          () => Promise.reject(new Error("rejected"))
        ]
        let next = 0
        const handler = (() => behaviours[next++]!()) as unknown as Approvals.ApprovalsConfig["handler"]
        const { fake, supervisor } = yield* supervise(
          { approvals: { ...(handler ? { handler } : {}) } },
          { turns: "manual" }
        )
        const approvals = yield* supervisor.subscribeApprovals
        const handle = yield* supervisor.start(item("x"))
        const threadId = yield* handle.threadId
        yield* fake.nextRequest("turn/start")
        const details: Array<string> = []
        for (let i = 0; i < behaviours.length; i++) {
          const id = yield* fake.request(
            "item/commandExecution/requestApproval",
            commandApproval(threadId, "turn_1", `call_${i}`)
          )
          assert.deepStrictEqual((yield* fake.answerTo(id))["result"], { decision: "decline" }, `card ${i}`)
          const settlement = yield* settledOf(approvals)
          assert.strictEqual(settlement.outcome, "refused")
          assert.strictEqual(settlement.source._tag, "Handler")
          details.push(settlement.detail ?? "")
        }
        assert.include(details[0], "the handler threw synchronously")
        assert.include(details[1], "returned number, not an Effect or a Promise")
        assert.include(details[4], "rejected")
        yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "still here" })
        assert.strictEqual((yield* handle.await).finalMessage, "still here")
      })
  )

  it.scoped(
    "a handler that never returns, even uninterruptibly: its card settles at its deadline and the thread's close does not wait for it",
    () =>
      Effect.gen(function* () {
        const handler: Approvals.ApprovalsConfig["handler"] = () =>
          Effect.uninterruptible(Effect.zipRight(Effect.sleep("1 day"), Effect.succeed(accept())))
        const { fake, supervisor } = yield* supervise(
          { approvals: { handler, deadlines: { default: "1 second" } } },
          { turns: "manual" }
        )
        const approvals = yield* supervisor.subscribeApprovals
        const handle = yield* supervisor.start(item("x"))
        const threadId = yield* handle.threadId
        yield* fake.nextRequest("turn/start")
        const id = yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
        yield* advance("1 second")
        assert.deepStrictEqual((yield* fake.answerTo(id))["result"], { decision: "decline" })
        assert.strictEqual((yield* settledOf(approvals)).outcome, "timeout")
        yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "done" })
        // The item ends (its thread scope closes) although the handler is still in its uninterruptible sleep.
        assert.strictEqual((yield* handle.await).status, "completed")
      })
  )
})

describe("a defect while handling a frame ends the connection, and the slot recovers", () => {
  it.scoped(
    "a throw inside the read loop (here: the embedder's tracer) ends the connection as InternalDefect; the card settles; the slot restarts and serves the next item",
    () =>
      Effect.gen(function* () {
        const base = yield* Effect.tracer
        let armed = true
        const tracer = Tracer.make({
          span: (name, parent, context, links, startTime, kind, options) => {
            if (armed && name === "warden.card") {
              armed = false
              throw new Error("the tracer exploded")
            }
            return base.span(name, parent, context, links, startTime, kind, options)
          },
          context: base.context
        })
        const { events, fake, supervisor } = yield* supervise(
          { restart: { policy: "fail", backoff: "1 second" } },
          { turns: "manual" }
        ).pipe(Effect.withTracer(tracer))
        const approvals = yield* supervisor.subscribeApprovals
        const handle = yield* supervisor.start(item("x"))
        const threadId = yield* handle.threadId
        yield* fake.nextRequest("turn/start")
        yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
        const lost = yield* waitFor(events, isLost)
        assert.strictEqual(lost.reason._tag, "InternalDefect")
        assert.include(lost.message, "the tracer exploded")
        assert.include(lost.message, "Warden failed while serving the app-server")
        const settlement = yield* settledOf(approvals)
        assert.strictEqual(settlement.outcome, "connection-lost")
        const failed = yield* Effect.flip(handle.await)
        assert.strictEqual(failed.reason, "connection-lost")
        // The work item may fail before the child is told to stop (the runner learns of the loss at
        // once); the slot stops it (its connection's scope closes) before it announces the restart.
        yield* waitFor(
          events,
          (e): e is Extract<typeof e, { _tag: "ConnectionRestarting" }> => e._tag === "ConnectionRestarting"
        )
        assert.include(fake.peer.signals(), "SIGTERM", "the child is stopped")
        // The slot restarts and serves a new work item (no wedge).
        yield* advance("1 second")
        yield* waitFor(events, isReady)
        assert.strictEqual((yield* runManual(fake, supervisor, "after the defect", "turn_2")).status, "completed")
        assert.strictEqual(fake.connections(), 2)
      }).pipe(Effect.provide(Approvals.layer()))
  )

  it.scoped(
    "on the connection itself: a connectionCards that throws on a request; pending requests fail with the cause, `ended` resolves",
    () =>
      Effect.gen(function* () {
        const fake = FakeAppServer.make({ behaviour: { "thread/start": () => Effect.succeed("silence" as const) } })
        const connection = yield* fake.memory.transport.connect
        const real = yield* Approvals.make()
        const hostile: Approvals.ApprovalsShape = {
          ...real,
          cardsFor: (line, overrides, owner) => {
            const connectionCards = real.cardsFor(line, overrides, owner)
            return {
              ...connectionCards,
              open: () => {
                throw new Error("injected: the connection's cards broke")
              },
              // What the read loop calls (opening in its own step).
              openNow: () => {
                throw new Error("injected: the connection's cards broke")
              }
            }
          }
        }
        const server = yield* AppServerConnection.make(connection, hostile)
        const pending = yield* Effect.fork(server.request("thread/start", {}))
        yield* fake.nextRequest("thread/start")
        assert.strictEqual(server.pendingCount(), 1)
        yield* fake.request("item/commandExecution/requestApproval", commandApproval("thr_x", "turn_1"))
        const ended = yield* server.ended
        assert.strictEqual(ended.reason._tag, "InternalDefect")
        assert.include(
          ended.message,
          "handling item/commandExecution/requestApproval request threw: injected: the connection's cards broke"
        )
        const error = yield* Fiber.join(pending).pipe(Effect.flip)
        assert.strictEqual(error._tag, "ConnectionLost")
        assert.include(error.message, "injected: the connection's cards broke")
        assert.strictEqual(server.pendingCount(), 0)
        assert.isFalse(server.isOpen())
      })
  )
})

describe("a defect while connecting is a failed attempt, not a dead slot", () => {
  it.scoped("connect dies once: the slot restarts with backoff and serves the next item", () =>
    Effect.gen(function* () {
      const fake = FakeAppServer.make({ turns: "manual" })
      let attempts = 0
      const transport: Transport.TransportShape = {
        connect: Effect.suspend(() =>
          ++attempts === 1 ? Effect.dieMessage("the transport broke") : fake.memory.transport.connect
        )
      }
      const supervisor = yield* Supervisor.make({ restart: { backoff: "1 second" } }).pipe(
        Effect.provideService(Transport.Transport, transport),
        Effect.orDie
      )
      const events = yield* supervisor.subscribe
      yield* advance("1 second")
      yield* waitFor(events, isReady)
      assert.strictEqual(attempts, 2)
      assert.strictEqual((yield* runManual(fake, supervisor, "after", "turn_1")).status, "completed")
    })
  )
})

describe("stdout EOF is the end of the connection", () => {
  it.scoped(
    "the app-server closes stdout and stays alive with a card open: ConnectionLost (StdoutClosed), the card settles, the child is stopped, the slot restarts",
    () =>
      Effect.gen(function* () {
        const { events, fake, supervisor } = yield* supervise(
          { restart: { policy: "fail", backoff: "1 second" } },
          { turns: "manual" }
        )
        const approvals = yield* supervisor.subscribeApprovals
        const handle = yield* supervisor.start(item("x"))
        const threadId = yield* handle.threadId
        yield* fake.nextRequest("turn/start")
        yield* fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1"))
        yield* fake.peer.closeStdout
        yield* advance(Duration.millis(500)) // the drain grace: an exiting child would have exited by now
        const lost = yield* waitFor(events, isLost)
        assert.deepStrictEqual(lost.reason, { _tag: "StdoutClosed" })
        assert.include(lost.message, "closed its stdout without exiting")
        assert.strictEqual((yield* settledOf(approvals)).outcome, "connection-lost")
        assert.strictEqual((yield* Effect.flip(handle.await)).reason, "connection-lost")
        assert.include(fake.peer.signals(), "SIGTERM")
        yield* advance("1 second")
        yield* waitFor(events, isReady)
        assert.strictEqual((yield* runManual(fake, supervisor, "next", "turn_2")).status, "completed")
      })
  )
})

describe("exact request ids", () => {
  it.scoped(
    "a request id beyond 2^53 - 1 is a protocol error that names it; nothing is answered under a rounded id",
    () =>
      Effect.gen(function* () {
        const { events, fake, supervisor } = yield* supervise({ restart: { maxAttempts: 0 } }, { turns: "manual" })
        const handle = yield* supervisor.start(item("x"))
        const threadId = yield* handle.threadId
        yield* fake.nextRequest("turn/start")
        const params = JSON.stringify(commandApproval(threadId, "turn_1"))
        yield* fake.peer.sendRaw(
          `{"id": 9007199254740993, "method": "item/commandExecution/requestApproval", "params": ${params}}\n`
        )
        const lost = yield* waitFor(events, isLost)
        assert.strictEqual(lost.reason._tag, "Protocol")
        assert.include(lost.message, "not an exact integer")
        assert.isUndefined(
          fake.answersSoFar().find((a) => typeof a["id"] === "number" && a["id"] > 2 ** 52),
          "no answer under a rounded id"
        )
      })
  )
})

describe("payloads JSON cannot carry", () => {
  it.scoped(
    "a work item whose config holds a BigInt fails with a typed error; nothing is left pending; the next item runs",
    () =>
      Effect.gen(function* () {
        const { fake, supervisor } = yield* supervise()
        const exit = yield* Effect.exit(supervisor.run(item("bad", { config: { limit: 10n } })))
        assert.isTrue(Exit.isFailure(exit) && exit.cause._tag === "Fail", "a typed failure, not a defect")
        const failure = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
        assert.strictEqual(failure?.reason, "start-failed")
        assert.include(failure?.detail ?? "", "cannot be written as JSON")
        assert.isUndefined(
          fake.requestsSoFar().find((r) => r.method === "thread/start"),
          "nothing was sent"
        )
        assert.strictEqual((yield* supervisor.run(item("good"))).status, "completed")
      })
  )

  it.scoped("on the connection: an unencodable request registers no pending entry", () =>
    Effect.gen(function* () {
      const fake = FakeAppServer.make()
      const connection = yield* fake.memory.transport.connect
      const server = yield* AppServerConnection.make(connection, yield* Approvals.make())
      const error = yield* Effect.flip(server.request("thread/start", { config: { n: 1n } } as never))
      assert.strictEqual(error._tag, "UnexpectedResult")
      assert.strictEqual(server.pendingCount(), 0)
      assert.isTrue(server.isOpen())
    })
  )

  it.scoped("a decision JSON cannot carry (a BigInt in a form's content) is refused, not a crash", () =>
    Effect.gen(function* () {
      const handler: Approvals.ApprovalsConfig["handler"] = () =>
        Effect.succeed({ _tag: "Elicitation", action: "accept", content: { n: 1n } } as unknown as Decision.Decision)
      const { fake, supervisor } = yield* supervise({ approvals: { handler } }, { turns: "manual" })
      const approvals = yield* supervisor.subscribeApprovals
      const handle = yield* supervisor.start(item("x"))
      const threadId = yield* handle.threadId
      yield* fake.nextRequest("turn/start")
      const id = yield* fake.request("mcpServer/elicitation/request", {
        threadId,
        turnId: "turn_1",
        serverName: "srv",
        mode: "form",
        message: "How many?",
        requestedSchema: { type: "object", properties: { n: { type: "number" } }, required: ["n"] }
      })
      const answer = yield* fake.answerTo(id)
      assert.deepStrictEqual(answer["result"], { action: "decline" })
      const settlement = yield* settledOf(approvals)
      assert.strictEqual(settlement.outcome, "refused")
      assert.include(settlement.detail ?? "", "content.n", "the refusal names the field")
    })
  )
})

describe("requests of ours: exactly one resume, nothing left behind", () => {
  const silentConnection = Effect.gen(function* () {
    const fake = FakeAppServer.make({ behaviour: { "thread/start": () => Effect.succeed("silence" as const) } })
    const connection = yield* fake.memory.transport.connect
    const server = yield* AppServerConnection.make(connection, yield* Approvals.make())
    return { fake, server }
  })

  it.scoped(
    "an interrupted request leaves no pending entry and no deadline; its late response is ignored (no hook runs)",
    () =>
      Effect.gen(function* () {
        const { fake, server } = yield* silentConnection
        let hooked = 0
        const fiber = yield* Effect.fork(server.request("thread/start", {}, { onResult: () => void hooked++ }))
        const sent = yield* fake.nextRequest("thread/start")
        assert.strictEqual(server.pendingCount(), 1)
        assert.strictEqual(server.deadlineCount(), 1)
        yield* Fiber.interrupt(fiber)
        // Removed by the interruption itself, not later (the deadline is 2 minutes away).
        assert.strictEqual(server.pendingCount(), 0)
        assert.strictEqual(server.deadlineCount(), 0)
        yield* fake.peer.sendFrame({ id: sent.id, result: { thread: { id: "thr_late" }, model: "m" } })
        // The read loop handles frames in order: once a later request's answer is read, so was the late one.
        yield* server.request("turn/interrupt", { threadId: "thr_x", turnId: "turn_x" })
        assert.strictEqual(hooked, 0)
        assert.isTrue(server.isOpen())
      })
  )

  it.scoped(
    "a caller interrupted while it waits in a larger program: the entry and the deadline go at once, the program's finalizers run",
    () =>
      Effect.gen(function* () {
        const { fake, server } = yield* silentConnection
        let finalized = 0
        const fiber = yield* Effect.fork(
          server
            .request("thread/start", {})
            .pipe(Effect.asVoid, Effect.either, Effect.ensuring(Effect.sync(() => void finalized++)))
        )
        yield* fake.nextRequest("thread/start")
        assert.deepStrictEqual([server.pendingCount(), server.deadlineCount()], [1, 1])
        const exit = yield* Fiber.interrupt(fiber)
        assert.isTrue(Exit.isInterrupted(exit))
        assert.deepStrictEqual([server.pendingCount(), server.deadlineCount(), finalized], [0, 0, 1])
      })
  )

  it.scoped(
    "an uninterruptible caller's request is not cut short by an interruption: it ends at its deadline, leaving nothing",
    () =>
      Effect.gen(function* () {
        const { fake, server } = yield* silentConnection
        const fiber = yield* Effect.fork(
          Effect.uninterruptible(Effect.either(server.request("thread/start", {}, { timeout: "2 seconds" })))
        )
        yield* fake.nextRequest("thread/start")
        const interrupting = yield* Effect.fork(Fiber.interrupt(fiber))
        // Let the interruption reach the waiting fiber (an interruptible wait would end here).
        for (let i = 0; i < 10; i++) yield* Effect.yieldNow()
        assert.deepStrictEqual([server.pendingCount(), server.deadlineCount()], [1, 1], "still waiting")
        yield* TestClock.adjust("2 seconds")
        const exit = yield* Fiber.join(interrupting)
        // The request ended by its deadline; the interruption then took effect (nothing after it ran).
        assert.isTrue(Exit.isInterrupted(exit))
        assert.deepStrictEqual([server.pendingCount(), server.deadlineCount()], [0, 0])
      })
  )

  it.scoped("a request interrupted before it is sent sends nothing and registers nothing", () =>
    Effect.gen(function* () {
      const { fake, server } = yield* silentConnection
      const exit = yield* Effect.exit(Effect.zipRight(Effect.interrupt, server.request("thread/start", {})))
      assert.isTrue(Exit.isInterrupted(exit))
      assert.deepStrictEqual([server.pendingCount(), server.deadlineCount()], [0, 0])
      assert.isUndefined(fake.requestsSoFar().find((r) => r.method === "thread/start"))
    })
  )

  it.scoped(
    "a request past its deadline fails RequestTimeout once, frees its entry, and a late response runs no hook",
    () =>
      Effect.gen(function* () {
        const { fake, server } = yield* silentConnection
        let hooked = 0
        const fiber = yield* Effect.fork(
          server.request("thread/start", {}, { timeout: "2 seconds", onResult: () => void hooked++ })
        )
        const sent = yield* fake.nextRequest("thread/start")
        yield* TestClock.adjust("2 seconds")
        const error = yield* Fiber.join(fiber).pipe(Effect.flip)
        assert.strictEqual(error._tag, "RequestTimeout")
        assert.strictEqual(server.pendingCount(), 0)
        assert.strictEqual(server.deadlineCount(), 0)
        yield* fake.peer.sendFrame({ id: sent.id, result: { thread: { id: "thr_late" }, model: "m" } })
        // The read loop handles frames in order: once a later request's answer is read, so was the late one.
        yield* server.request("turn/interrupt", { threadId: "thr_x", turnId: "turn_x" })
        assert.strictEqual(hooked, 0)
      })
  )

  /** A thread route registered on `server`, as a runner registers one: its signals. */
  const routeOf = (server: { readonly registerThread: (route: never) => void }, threadId: string) =>
    Effect.gen(function* () {
      const signals = yield* Mailbox.make<ThreadSignal>()
      server.registerThread({
        threadId,
        receive: (signal: ThreadSignal) => void signals.unsafeOffer(signal),
        cardScope: yield* Scope.make(),
        workItem: 0,
        fileChanges: new Map(),
        runningCommands: new Set<string>(),
        routed: 0
      } as never)
      return signals
    })

  it.scopedLive(
    "on the connection's end, a Promise caller of a pending request hears ConnectionLost before any thread route is told; then every route is told and `ended` resolves",
    () =>
      Effect.gen(function* () {
        const { fake, server } = yield* silentConnection
        const order: Array<string> = []
        const signals = yield* routeOf(server, "thr_1")
        // A runner stand-in: records when it takes the route's signal.
        const runner = yield* Effect.fork(
          Effect.map(signals.take, (signal) => void order.push(`route told: ${signal._tag}`))
        )
        // A caller as the facade and `runPromise` callers are: a root fiber and its Promise.
        const caller = Effect.runPromise(Effect.either(server.request("thread/start", {}))).then((result) => {
          order.push(`caller failed: ${result._tag === "Left" ? result.left._tag : "answered"}`)
        })
        yield* fake.nextRequest("thread/start")
        yield* fake.peer.exit(1)
        const ended = yield* server.ended
        yield* Fiber.join(runner)
        yield* Effect.promise(() => caller)
        // Told in the same step as the callers failed, the route's runner woke two Promise
        // reactions before the caller heard (docs/performance.md, issue 14, third pass).
        assert.deepStrictEqual(order, ["caller failed: ConnectionLost", "route told: ConnectionLost"])
        assert.strictEqual(ended.reason._tag, "Exited")
        assert.deepStrictEqual([server.pendingCount(), server.deadlineCount()], [0, 0])
      })
  )

  // Live: the deferral is a real timer, which the scope's close interrupts before it fires.
  it.scopedLive(
    "closing the connection's scope (a stop) still tells every thread route, once, and resolves `ended`",
    () =>
      Effect.gen(function* () {
        const fake = FakeAppServer.make()
        const scope = yield* Scope.make()
        const connection = yield* Scope.extend(fake.memory.transport.connect, scope)
        const server = yield* Scope.extend(AppServerConnection.make(connection, yield* Approvals.make()), scope)
        const signals = yield* routeOf(server, "thr_1")
        yield* Scope.close(scope, Exit.void)
        const told = yield* signals.takeAll.pipe(Effect.timeout("5 seconds"))
        assert.deepStrictEqual(
          Array.from(told[0], (signal) => signal._tag),
          ["ConnectionLost"]
        )
        assert.strictEqual((yield* server.ended).reason._tag, "ClosedByUs")
      })
  )

  it.scoped(
    "a thread route whose scope has closed is never registered (a late thread/start response routes nothing)",
    () =>
      Effect.gen(function* () {
        const { server } = yield* silentConnection
        const route = {
          threadId: "thr_1",
          signals: yield* Mailbox.make<never>(),
          cardScope: yield* Scope.make(),
          workItem: 0,
          fileChanges: new Map(),
          runningCommands: new Set<string>(),
          routed: 0
        }
        server.registerThread({ ...route, closed: true } as never)
        assert.strictEqual(server.routeCount(), 0)
        server.registerThread(route as never)
        assert.strictEqual(server.routeCount(), 1)
      })
  )
})
