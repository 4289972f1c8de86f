/**
 * An in-memory peer on the in-memory transport that plays codex app-server's side.
 *
 * By default it answers the handshake and the thread/turn methods the way 0.171.0 does (thread id
 * at `result.thread.id`, `thread/started` right behind the response, turn/interrupt followed by
 * `turn/completed` interrupted, thread/unsubscribe `unsubscribed`). Tests override any method (answer, error, silence), push server
 * requests and notifications, and read what the client answered. For misbehaviour, the
 * underlying `peer` writes garbage, oversized frames, split UTF-8, exits mid-frame, and so on.
 *
 * Every connection (a restart makes a new one) runs the same program; state such as thread ids
 * is shared, so a thread can be resumed on the next connection.
 */
import { MemoryTransport } from "@warden/transport"
import type { Transport } from "@warden/transport"
import { Effect, Queue } from "effect"
import type { Layer } from "effect"

type JsonObject = Transport.JsonObject
type Peer = MemoryTransport.Peer

/** How the fake answers a client request, with a `result`, a JSON-RPC `error`, or `"silence"` (no answer at all). */
export type Answer =
  | { readonly result: unknown }
  | { readonly error: { readonly code: number; readonly message: string } }
  | "silence"

/** A request the client sent, as the fake read it. */
export interface ClientRequest {
  /** Which connection it came on (1-based; a restart makes a new one). */
  readonly connection: number
  readonly id: number | string
  readonly method: string
  readonly params: any
}

/** What a `Behaviour` can use besides the params (the connection, the request id, the peer and the fake itself). */
export interface Context {
  readonly connection: number
  /** The id of the client request being answered. */
  readonly requestId: number | string
  readonly peer: Peer
  readonly server: FakeAppServer
}

/**
 * A method's answer, computed from the request's params.
 *
 * It returns an {@link Answer}, or an Effect of one (run on the peer's program, so the fake reads
 * nothing else until it completes).
 *
 * @example
 * ```ts
 * const refuseResume: FakeAppServer.Behaviour = (params) => ({
 *   error: { code: -32600, message: `no thread ${params.threadId}` }
 * })
 * ```
 */
export type Behaviour = (params: any, context: Context) => Answer | Effect.Effect<Answer>

/** The in-memory transport's options, plus method overrides and how turns end. */
export interface Options extends MemoryTransport.Options {
  /** Per-method overrides of the default answers. */
  readonly behaviour?: Readonly<Record<string, Behaviour>>
  /** `"complete"` (default): a started turn completes at once with an agent message. `"manual"`: the test completes it. */
  readonly turns?: "complete" | "manual"
  /** The agent message of turns that complete at once (default `done`). */
  readonly finalMessage?: string
}

/**
 * A fake app-server, with the `layer` for the code under test and the test's handles on it.
 *
 * It records what the client sent and answered, and makes the server's own moves (requests,
 * notifications, completing turns).
 */
export interface FakeAppServer {
  /** The `Transport` to provide to the client (each `connect` is a new connection to this fake). */
  readonly layer: Layer.Layer<Transport.Transport>
  /** The underlying in-memory transport. */
  readonly memory: MemoryTransport.MemoryTransport
  /** The latest connection's peer. */
  readonly peer: Peer
  /** Every client request, in order, across connections. */
  readonly requests: Queue.Dequeue<ClientRequest>
  /** Every client request so far, in order (a snapshot). */
  readonly requestsSoFar: () => ReadonlyArray<ClientRequest>
  /** Wait for the next client request with this method (buffered: none is missed). */
  readonly nextRequest: (method: string) => Effect.Effect<ClientRequest>
  /** Wait for the client's answer to a server request id (buffered). */
  readonly answerTo: (id: number | string) => Effect.Effect<JsonObject>
  /** Answers to server requests seen so far, by id. */
  readonly answersSoFar: () => ReadonlyArray<JsonObject>
  /** Send a server→client request; ids count up from 0 per connection unless given. */
  readonly request: (method: string, params: unknown, id?: number | string) => Effect.Effect<number | string>
  /** Send a server→client notification on the latest connection. */
  readonly notify: (method: string, params: unknown) => Effect.Effect<void>
  /** Complete a turn as the server does: serverRequest/resolved for its open requests, then turn/completed. */
  readonly completeTurn: (
    threadId: string,
    turnId: string,
    status?: "completed" | "interrupted" | "failed",
    options?: { readonly message?: string; readonly error?: unknown }
  ) => Effect.Effect<void>
  /** Ids of the threads `thread/start` created so far (the default behaviour's `thr_1`, `thr_2`, ...). */
  readonly threads: () => ReadonlyArray<string>
  /** How many connections the client has opened. */
  readonly connections: () => number
}

/**
 * A new fake app-server on a new in-memory transport. Nothing runs until the client connects;
 * each connection then runs the same program, and the fake's state (threads, counters, recorded
 * requests and answers) is shared across connections. A method with neither an override nor a
 * default is answered with a JSON-RPC error (`-32600`).
 *
 * @example
 * ```ts
 * import { Supervisor } from "@warden/supervisor"
 * import { FakeAppServer } from "@warden/testkit"
 * import { Effect } from "effect"
 *
 * const test = Effect.scoped(
 *   Effect.gen(function*() {
 *     const fake = FakeAppServer.make({ turns: "manual" })
 *     const supervisor = yield* Supervisor.make({
 *       approvals: { rules: { rules: [{ id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } }] } }
 *     }).pipe(Effect.provide(fake.layer))
 *     const handle = yield* supervisor.start({ prompt: "clean up" })
 *     const threadId = yield* handle.threadId // "thr_1"
 *     yield* fake.nextRequest("turn/start") // answered with turn "turn_1"
 *     const id = yield* fake.request("item/commandExecution/requestApproval", {
 *       threadId, turnId: "turn_1", itemId: "call_1", command: "rm -rf /tmp/scratch", cwd: "/tmp"
 *     })
 *     const answer = yield* fake.answerTo(id) // { id: 0, result: { decision: "decline" } }
 *     yield* fake.completeTurn(threadId, "turn_1", "completed", { message: "ok" })
 *     return yield* handle.await // status "completed", finalMessage "ok"
 *   })
 * )
 * ```
 */
export const make = (options: Options = {}): FakeAppServer => {
  const seen: Array<ClientRequest> = []
  const answers: Array<JsonObject> = []
  const requests = Effect.runSync(Queue.unbounded<ClientRequest>())
  const waitingRequests = new Map<string, Array<ClientRequest>>()
  const requestWaiters = new Map<string, Array<(r: ClientRequest) => void>>()
  const answerWaiters = new Map<number | string, Array<(f: JsonObject) => void>>()
  const threads: Array<string> = []
  let threadCounter = 0
  let turnCounter = 0
  let connection = 0
  let nextServerId = 0
  /** Open server requests per turn, so completing a turn can withdraw them. */
  const openByTurn = new Map<string, Set<number | string>>()
  const answered = new Set<number | string>()

  const deliverRequest = (r: ClientRequest) => {
    seen.push(r)
    requests.unsafeOffer(r)
    const waiters = requestWaiters.get(r.method)
    if (waiters && waiters.length > 0) return waiters.shift()!(r)
    const list = waitingRequests.get(r.method) ?? []
    list.push(r)
    waitingRequests.set(r.method, list)
  }

  let self: FakeAppServer

  const send = (peer: Peer, frame: JsonObject) => peer.sendFrame(frame)

  const turnCompleted = (threadId: string, turnId: string, status: string, message?: string, error?: unknown) => {
    const items = message !== undefined ? [{ type: "agentMessage", id: `msg_${turnId}`, text: message }] : []
    return {
      method: "turn/completed",
      params: { threadId, turn: { id: turnId, status, items, error: error ?? null } }
    }
  }

  const completeTurn: FakeAppServer["completeTurn"] = (threadId, turnId, status = "completed", opts) =>
    Effect.gen(function* () {
      // As measured on 0.171.0: a normal end resolves pending requests before turn/completed;
      // an interrupt sends turn/completed first, then serverRequest/resolved.
      const resolvePending = Effect.gen(function* () {
        const open = openByTurn.get(turnId)
        if (!open) return
        openByTurn.delete(turnId)
        for (const requestId of open) {
          if (!answered.has(requestId))
            yield* send(self.peer, { method: "serverRequest/resolved", params: { threadId, requestId } })
        }
      })
      if (status !== "interrupted") yield* resolvePending
      if (opts?.message !== undefined) {
        const item = { type: "agentMessage", id: `msg_${turnId}`, text: opts.message }
        yield* send(self.peer, { method: "item/started", params: { threadId, turnId, item } })
        yield* send(self.peer, { method: "item/completed", params: { threadId, turnId, item } })
      }
      yield* send(self.peer, turnCompleted(threadId, turnId, status, opts?.message, opts?.error))
      if (status === "interrupted") yield* resolvePending
    })

  const defaults: Record<string, Behaviour> = {
    initialize: () => ({
      result: {
        userAgent: "fake-app-server/0.171.0",
        codexHome: "/tmp/fake-codex-home",
        platformFamily: "unix",
        platformOs: "linux"
      }
    }),
    "thread/start": () => {
      const id = `thr_${++threadCounter}`
      threads.push(id)
      return { result: { thread: { id, preview: "", ephemeral: false } } }
    },
    "thread/resume": (params) =>
      threads.includes(params?.threadId)
        ? { result: { thread: { id: params.threadId } } }
        : { error: { code: -32600, message: `thread not found: ${params?.threadId}` } },
    "turn/start": () => ({
      result: { turn: { id: `turn_${++turnCounter}`, status: "inProgress", items: [], error: null } }
    }),
    "turn/steer": (params) => ({ result: { turnId: params?.expectedTurnId } }),
    "turn/interrupt": () => ({ result: {} }),
    "thread/unsubscribe": () => ({ result: { status: "unsubscribed" } })
  }

  const program = (peer: Peer): Effect.Effect<void> =>
    Effect.gen(function* () {
      const conn = ++connection
      nextServerId = 0
      while (true) {
        const [frames, done] = yield* peer.written.takeAll
        for (const frame of frames) {
          if (frame["method"] === undefined && frame["id"] !== undefined) {
            // The client's answer to one of our requests.
            answers.push(frame)
            answered.add(frame["id"] as number | string)
            const waiters = answerWaiters.get(frame["id"] as number | string)
            if (waiters && waiters.length > 0) waiters.shift()!(frame)
            continue
          }
          if (frame["id"] === undefined) continue // a client notification (initialized)
          const method = frame["method"] as string
          const id = frame["id"] as number | string
          const params = frame["params"] as any
          deliverRequest({ connection: conn, id, method, params })
          const behaviour = options.behaviour?.[method] ?? defaults[method]
          const context: Context = { connection: conn, requestId: id, peer, server: self }
          const produced = behaviour
            ? behaviour(params, context)
            : { error: { code: -32600, message: `unknown method ${method}` } }
          const answer = Effect.isEffect(produced) ? yield* produced : produced
          if (answer === "silence") continue
          if ("error" in answer) {
            yield* send(peer, { id, error: answer.error })
            continue
          }
          yield* send(peer, { id, result: answer.result as never })
          // What the real server sends right behind these responses.
          if (method === "thread/start") {
            const thread = (answer.result as any)?.thread
            if (thread?.id) yield* send(peer, { method: "thread/started", params: { thread } })
          } else if (method === "turn/start") {
            const turn = (answer.result as any)?.turn
            const threadId = params?.threadId
            if (turn?.id) {
              yield* send(peer, { method: "turn/started", params: { threadId, turn } })
              if ((options.turns ?? "complete") === "complete") {
                yield* completeTurn(threadId, turn.id, "completed", { message: options.finalMessage ?? "done" })
              }
            }
          } else if (method === "turn/interrupt" && !options.behaviour?.["turn/interrupt"]) {
            yield* completeTurn(params?.threadId, params?.turnId, "interrupted")
          }
        }
        if (done) return
      }
    })

  const memory = MemoryTransport.make({ ...options, program })

  self = {
    layer: memory.layer,
    memory,
    peer: memory.peer,
    requests,
    requestsSoFar: () => seen.slice(),
    nextRequest: (method) =>
      Effect.async<ClientRequest>((resume) => {
        const buffered = waitingRequests.get(method)
        if (buffered && buffered.length > 0) return resume(Effect.succeed(buffered.shift()!))
        const list = requestWaiters.get(method) ?? []
        const waiter = (r: ClientRequest) => resume(Effect.succeed(r))
        list.push(waiter)
        requestWaiters.set(method, list)
        return Effect.sync(() => {
          const l = requestWaiters.get(method)
          if (l) l.splice(l.indexOf(waiter), 1)
        })
      }),
    answerTo: (id) =>
      Effect.async<JsonObject>((resume) => {
        const found = answers.find((a) => a["id"] === id)
        if (found) return resume(Effect.succeed(found))
        const list = answerWaiters.get(id) ?? []
        const waiter = (f: JsonObject) => resume(Effect.succeed(f))
        list.push(waiter)
        answerWaiters.set(id, list)
        return Effect.sync(() => {
          const l = answerWaiters.get(id)
          if (l) l.splice(l.indexOf(waiter), 1)
        })
      }),
    answersSoFar: () => answers.slice(),
    request: (method, params, id) =>
      Effect.suspend(() => {
        const requestId = id ?? nextServerId++
        const turnId = (params as any)?.turnId
        if (typeof turnId === "string") {
          const set = openByTurn.get(turnId) ?? new Set()
          set.add(requestId)
          openByTurn.set(turnId, set)
        }
        answered.delete(requestId)
        return Effect.as(send(memory.peer, { id: requestId, method, params: params as never }), requestId)
      }),
    notify: (method, params) => send(memory.peer, { method, params: params as never }),
    completeTurn,
    threads: () => threads.slice(),
    connections: () => connection
  }
  return self
}
