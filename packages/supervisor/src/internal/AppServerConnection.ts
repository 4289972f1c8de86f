/**
 * The connection actor: one `codex app-server` (or any peer behind a Transport connection).
 *
 * It owns the read loop, our pending requests, the desk of open cards, and the thread routes.
 * The read loop handles every frame synchronously and never awaits a handler: responses resume
 * their callers (and thread/start|resume register the thread's route right there), notifications are
 * offered to unbounded mailboxes, server requests open cards whose races run in their own fibers.
 *
 * The connection's end is handled in one place (`endWith`): pending requests fail with the typed
 * cause, open cards settle as connection-lost, then (once the microtasks that queued have run)
 * every thread route is told and `ended` resolves. It is
 * reached however the read loop ends: the peer's end (read to the last frame), a defect in the
 * loop or in handling one frame (the connection is aborted as `InternalDefect`, naming what
 * died), an interruption, or the scope's close.
 */
import type { Approvals } from "@warden/approvals"
import { Card, DeadlineTimer, SecretMask } from "@warden/approvals"
import { ClientMethods, Json, JsonRpc, ServerRequests } from "@warden/protocol"
import type { Transport as TransportNs } from "@warden/transport"
import { ConnectionEnded as ConnectionEndedNs } from "@warden/transport"
import { Cause, Deferred, Duration, Effect, ExecutionStrategy, Exit, FiberSet, Option, PubSub, Random, RuntimeFlags, Scope } from "effect"
import type { Fiber } from "effect"
import * as Config from "../Config.js"
import type { RequestError } from "../Errors.js"
import { ConnectionLost, RequestTimeout, UnexpectedResult } from "../Errors.js"
import { labelsOf, Metrics } from "../Telemetry.js"
import * as Admission from "./Admission.js"
import * as PendingRequests from "./PendingRequests.js"
import type { ThreadRoute } from "./ThreadRoute.js"

type Connection = TransportNs.Connection
type ConnectionEnded = ConnectionEndedNs.ConnectionEnded
const ConnectionEnded = ConnectionEndedNs.ConnectionEnded

export interface ClientInfo {
  readonly name: string
  readonly title?: string
  readonly version: string
}

/** `SupervisorConfig.connection`, as an embedder writes it (its defaults: `Config.defaults.connection`). */
export interface ConnectionConfig {
  readonly clientInfo?: ClientInfo
  /** Default deadline for our requests. */
  readonly requestTimeout?: Duration.DurationInput
  readonly requestTimeouts?: Readonly<Record<string, Duration.DurationInput>>
  /** Retries of `-32001` (server overloaded): exponential backoff with jitter, bounded. */
  readonly overloadRetries?: number
  readonly overloadBackoff?: Duration.DurationInput
  /** Capabilities sent in `initialize` (e.g. `{ experimentalApi: true }` for dynamic tools). */
  readonly capabilities?: Record<string, unknown>
}

/** What the app-server answered to `initialize` (decoded with the protocol's schema). */
export type InitializeResult = ClientMethods.ResultOf<"initialize">

export interface ConnectionEvent {
  readonly method: string
  readonly params: unknown
}

export interface RequestOptions {
  readonly timeout?: Duration.DurationInput
  /**
   * Runs in the read loop when the response arrives, before the next frame is handled, with the
   * raw result (not yet decoded). Internal use: it must be cheap and must not throw.
   */
  readonly onResult?: (result: unknown) => void
}

export interface AppServer {
  readonly id: number
  readonly init: InitializeResult
  /**
   * Send one of the client methods and wait for its answer, decoded with the protocol's schema
   * (`UnexpectedResult` when it does not decode). Params that cannot be written as JSON fail with
   * `UnexpectedResult` too, before anything is sent or registered.
   */
  readonly request: <M extends ClientMethods.ClientMethod>(
    method: M,
    params: ClientMethods.ParamsOf<M>,
    options?: RequestOptions
  ) => Effect.Effect<ClientMethods.ResultOf<M>, RequestError>
  readonly notify: (method: string, params?: unknown) => Effect.Effect<void, ConnectionLost>
  readonly registerThread: (route: ThreadRoute) => void
  readonly unregisterThread: (route: ThreadRoute) => void
  /** Whether a live work item already routes this thread on this connection. */
  readonly hasThread: (threadId: string) => boolean
  readonly desk: Approvals.Desk
  readonly isOpen: () => boolean
  /** The end, once it has been handled (pending failed, cards settled, threads told). */
  readonly ended: Effect.Effect<ConnectionEnded>
  readonly endedNow: () => ConnectionEnded | undefined
  /** Notifications that belong to no thread we run (account, config, process news...). */
  readonly connectionEvents: PubSub.PubSub<ConnectionEvent>
  readonly stderrTail: () => string
  /** End the connection as a protocol fault of the peer's (e.g. a duplicate open request id). */
  readonly abort: (detail: string) => Effect.Effect<void>
  readonly close: Effect.Effect<void>
  readonly pendingCount: () => number
  /** Deadlines on the connection's timer (our requests' and `after`'s): for tests and diagnostics. */
  readonly deadlineCount: () => number
  readonly routeCount: () => number
  /**
   * Call `expire` once `after` has passed, unless the returned canceller runs first. It runs on the
   * connection's deadline timer (the one fiber that keeps our requests' deadlines, in the
   * connection's scope: it ends with the connection), synchronously: it must be cheap and must
   * not wait. Keep to a few distinct lengths: the timer keeps one ordered set per length.
   */
  readonly after: (after: Duration.Duration, expire: () => void) => () => void
}

const record = Json.asRecord

/** Thread id of a notification: `params.threadId`, or `params.thread.id` for thread/started. Hot path: no Schema. */
export const threadIdOf = (method: string, params: unknown): string | undefined => {
  const p = record(params)
  if (!p) return undefined
  const direct = p["threadId"]
  if (typeof direct === "string") return direct
  if (method === "thread/started") {
    const id = record(p["thread"])?.["id"]
    return typeof id === "string" ? id : undefined
  }
  return undefined
}

/** What the connection measures when telemetry is on (`Telemetry`); nothing when undefined. */
export interface Instrumentation {
  /** Record `warden.read_loop.lag` (a clock read and a histogram update per batch of frames). */
  readonly readLoopLag: boolean
}

let connectionCounter = 0

const firstLine = (text: string): string => {
  const line = text.split("\n", 1)[0] ?? ""
  return line.length > 0 ? line : text.slice(0, 200)
}

/**
 * The end as it may leave Warden: the stderr tail and any detail (a frame preview, a write error)
 * through the one masking function, `SecretMask.maskText` (an `Authorization: Bearer …` line on
 * stderr, an `OPENAI_API_KEY=…` in a frame preview never reach an error, an event or a log).
 */
export const maskEnded = (ended: ConnectionEnded): ConnectionEnded => {
  const reason = ended.reason
  const masked = "detail" in reason ? { ...reason, detail: SecretMask.maskText(reason.detail) } : reason
  return new ConnectionEnded({ reason: masked, stderrTail: SecretMask.maskText(ended.stderrTail) })
}

/** A frame whose handling threw: the read loop dies with it, and the connection ends naming it. */
export class FrameHandlingDefect extends Error {
  constructor(frame: Record<string, unknown>, readonly defect: unknown) {
    const method = typeof frame["method"] === "string" ? frame["method"] : undefined
    const what = method !== undefined ? `${method}${frame["id"] !== undefined ? " request" : ""}` : "a response"
    super(`handling ${what} threw: ${defect instanceof Error ? defect.message : String(defect)}`)
    this.name = "FrameHandlingDefect"
  }
}

/**
 * What the direct reader leaves the read loop's fiber in `incoming`, ahead of the frames it did not
 * handle: the rest of a frame it began (the effect its handling returned, or its defect).
 */
class HandOver {
  readonly [key: string]: unknown
  constructor(readonly effect: Effect.Effect<void>) {}
}

/**
 * Resumes after every microtask queued before it, Promise reactions included: a sleep of zero,
 * which the live Clock keeps with a timer (a macrotask), and a virtual clock (the TestClock, the
 * property tests' StepClock) ends at once, so deterministic schedules stay deterministic.
 */
export const afterQueuedMicrotasks: Effect.Effect<void> = Effect.sleep(Duration.zero)

/** What a {@link Call} reaches: the connection's pending requests and its deadline timer. */
interface Calls {
  readonly pending: PendingRequests.PendingRequests
  readonly timer: DeadlineTimer.DeadlineTimer
}

/**
 * One request of ours in flight: its pending entry (settled from the read loop or the
 * connection's end) and its deadline entry (kept in place by the connection's timer) in one
 * object, with no closure per request. `resume` is set while the caller waits and cleared by
 * whichever of the answer, the deadline or the caller's interruption comes first: each resumes
 * (or leaves) once, and the other two find nothing to do.
 */
class Call extends DeadlineTimer.Timed implements PendingRequests.Entry {
  requestId = -1
  resume: ((outcome: Effect.Effect<unknown, RequestError>) => void) | undefined = undefined
  constructor(
    readonly calls: Calls,
    readonly method: ClientMethods.ClientMethod,
    readonly timeout: Duration.Duration,
    readonly onResult: ((result: unknown) => void) | undefined
  ) {
    super()
  }
  /** The answer, the server's error or the connection's end (the entry is already taken). */
  settle(outcome: Effect.Effect<unknown, RequestError>): void {
    this.calls.timer.cancel(this)
    this.wake(outcome)
  }
  /** The deadline passed (the timer has already unscheduled it). */
  onDeadline(): void {
    this.calls.pending.remove(this.requestId)
    this.wake(Effect.fail(new RequestTimeout({ method: this.method, id: this.requestId, timeoutMs: Duration.toMillis(this.timeout) })))
  }
  /** The caller left without an answer (interrupted): the entry and the deadline go, if still there. */
  cancel(): void {
    if (this.resume === undefined) return
    this.resume = undefined
    this.calls.timer.cancel(this)
    this.calls.pending.remove(this.requestId)
  }
  private wake(outcome: Effect.Effect<unknown, RequestError>): void {
    const resume = this.resume
    this.resume = undefined
    resume?.(outcome)
  }
}

/**
 * Run a connection: start the reader, perform the handshake (`initialize`, then `initialized`),
 * and return the actor. The reader lives in the caller's scope.
 */
export const make = (
  connection: Connection,
  approvals: Approvals.ApprovalsShape,
  config: Config.ResolvedConnection = Config.defaults.connection,
  /** Codex said it is under pressure (an overload answer, a rate limit reached): for adaptive admission. */
  pressure: (reason: string) => void = () => {},
  telemetry: Instrumentation | undefined = undefined
): Effect.Effect<AppServer, RequestError, Scope.Scope> =>
  Effect.gen(function*() {
    const id = ++connectionCounter
    // Request deadlines live here: a scope made before the finalizer below is added, so it closes
    // after it (after the end is handled), and a deadline still holds while the connection closes.
    const deadlines = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
    // The connection's small fibers (the two deadline timers, a settled card's handler
    // interruption) live in one FiberSet of this scope: they end with the connection, not with
    // the supervisor. One timer fiber for every pending request's deadline (asleep until the next
    // one), not a fiber per request: a connection loss with many requests pending has nothing to
    // interrupt.
    const clock = yield* Effect.clock
    const runConnectionFiber = yield* FiberSet.makeRuntime<never>().pipe(Scope.extend(deadlines))
    const fibers = {
      spawn: (effect: Effect.Effect<void>) => runConnectionFiber(effect, { immediate: false }),
      fork: (effect: Effect.Effect<void>) => {
        runConnectionFiber(effect, { immediate: false })
      }
    }
    const requestTimer = DeadlineTimer.make({ nanos: () => clock.unsafeCurrentTimeNanos(), ...fibers })
    const pending = PendingRequests.make()
    const routes = new Map<string, ThreadRoute>()
    const connectionEvents = yield* PubSub.unbounded<ConnectionEvent>()
    const endSignal = yield* Deferred.make<ConnectionEnded>()
    let handledEnd: ConnectionEnded | undefined

    // Writes are synchronous enqueues onto the transport's single writer; false when dead (or
    // unencodable: a card's answer was checked when it was decided, so that cannot happen there).
    const writeNow = (frame: Record<string, unknown>): boolean =>
      handledEnd === undefined && connection.trySend(frame) === "queued"

    // The desk's deadline timer and card fibers live in this connection's scope.
    const desk = approvals.desk({ write: writeNow, isOpen: () => handledEnd === undefined && connection.isOpen() }, undefined, fibers)

    const lostError = () => {
      if (handledEnd) return new ConnectionLost({ ended: handledEnd }) // masked once, by endWith
      const reported = connection.endedNow()
      return new ConnectionLost({ ended: reported && maskEnded(reported) })
    }

    /**
     * The one end path: pending requests fail, open cards settle as connection-lost, every thread
     * route is told, `ended` resolves. Each step is guarded so that `ended` always resolves.
     */
    const endWith = (raw: ConnectionEnded) => {
      if (handledEnd) return
      // Everything downstream (errors, events, logs, the CLI) sees the masked end only.
      const ended = maskEnded(raw)
      handledEnd = ended
      const error = new ConnectionLost({ ended })
      try {
        pending.failAll(error)
        desk.connectionLost(ended.message)
      } finally {
        tellRoutesLater(error, ended)
      }
    }

    /**
     * Every thread route is told of the end, then `ended` resolves, once the microtasks queued
     * by the end have run (`afterQueuedMicrotasks`: a macrotask on the live clock, at once on a
     * virtual one). Told in the same step, 1,000 runners woke in the microtasks right behind the
     * failed callers' fibers, and a Promise's caller (`runPromise`, the facade), which hears of
     * its fiber's end two Promise reactions later, heard behind all of them (docs/performance.md,
     * issue 14, third pass). However the deferring fiber ends (its scope closing with the
     * connection's, interrupted before it ran), its observer tells the routes: they are told
     * exactly once.
     */
    const tellRoutesLater = (error: ConnectionLost, ended: ConnectionEnded) => {
      let told = false
      const tell = () => {
        if (told) return
        told = true
        try {
          // Each route is told, whatever another one does (`receive` must not throw; a runner's
          // own bookkeeping is guarded, see ThreadRunner).
          for (const route of routes.values()) {
            try {
              route.receive({ _tag: "ConnectionLost", error })
            } catch {
              // nothing to do here: the route's runner failed its own work item
            }
          }
        } finally {
          Deferred.unsafeDone(endSignal, Effect.succeed(ended))
        }
      }
      try {
        fibers.spawn(afterQueuedMicrotasks).addObserver(tell)
      } catch (defect) {
        tell() // no fiber to defer with: tell now
        throw defect
      }
    }

    /**
     * The read loop ended other than by reading to the peer's end: Warden failed. The transport is
     * told (so the child is stopped, bounded) and the end is handled at once, with what died in
     * the reason (masked and bounded: it may quote a frame).
     */
    const endByDefect = (cause: Cause.Cause<unknown>) =>
      Effect.suspend(() => {
        if (handledEnd) return Effect.void
        const what = Cause.isInterruptedOnly(cause)
          ? "the read loop was interrupted"
          : `the read loop died: ${firstLine(Cause.pretty(cause))}`
        const detail = SecretMask.truncate(SecretMask.maskText(what), 1_000)
        return connection.abort(detail, "InternalDefect").pipe(
          Effect.zipRight(Effect.sync(() => endWith(new ConnectionEnded({ reason: { _tag: "InternalDefect", detail }, stderrTail: connection.stderrTail() })))),
          Effect.zipRight(Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError("connection ended by a defect in Warden", cause))
        )
      })

    // --- routing (synchronous) ------------------------------------------------------------

    const routeNotification = (method: string, params: unknown) => {
      const threadId = threadIdOf(method, params)
      const p = record(params)
      if (method === "serverRequest/resolved" && p) {
        const requestId = p["requestId"]
        if (typeof requestId === "number" || typeof requestId === "string") desk.withdraw(requestId)
      }
      const route = threadId !== undefined ? routes.get(threadId) : undefined
      if (route) {
        if (method === "item/started" || method === "item/completed") {
          const item = record(p?.["item"])
          const itemId = item?.["id"]
          if (item && typeof itemId === "string") {
            // Kept while the item runs (its approval request does not carry them), made on first use.
            if (item["type"] === "fileChange") {
              if (method === "item/started") (route.fileChanges ??= new Map()).set(itemId, Card.fileChangesOf(item))
              else route.fileChanges?.delete(itemId)
            }
            if (item["type"] === "commandExecution") {
              if (method === "item/started") (route.runningCommands ??= new Set()).add(itemId)
              else route.runningCommands?.delete(itemId)
            }
          }
        } else if (method === "turn/completed") {
          const turnId = record(p?.["turn"])?.["id"]
          route.runningCommands?.clear()
          route.fileChanges?.clear()
          // The server resolves its own pending requests at turn end; refuse any we still hold.
          desk.closeWhere((card) => card.threadId === threadId && (turnId === undefined || card.turnId === turnId), { _tag: "TurnEnded" })
        }
        route.routed++
        route.receive({ _tag: "Notification", method, params })
        return
      }
      if (method === "account/rateLimits/updated") {
        const reason = Admission.pressureOfRateLimits(params)
        if (reason !== undefined) pressure(reason)
      }
      connectionEvents.unsafeOffer({ method, params })
    }

    // A card's context without file changes is its route's work item only: one object per route,
    // held by every card of it (an open card is kept small: docs/performance.md, issue 14).
    const contexts = new WeakMap<ThreadRoute, Card.CardContext>()
    const noContext: Card.CardContext = {}
    const contextOf = (route: ThreadRoute | undefined): Card.CardContext => {
      if (route === undefined || route.workItem === undefined) return noContext
      let context = contexts.get(route)
      if (context === undefined) {
        context = { workItem: route.workItem }
        contexts.set(route, context)
      }
      return context
    }

    const openCard = (requestId: JsonRpc.RequestId, method: string, params: unknown) => {
      const decoded = ServerRequests.decode(requestId, method, params)
      const threadId = ServerRequests.threadIdFor(decoded)
      const route = threadId !== undefined ? routes.get(threadId) : undefined
      const itemId = record(params)?.["itemId"]
      const fileChanges = route && typeof itemId === "string" ? route.fileChanges?.get(itemId) : undefined
      const options: Approvals.OpenOptions = {
        parent: route?.cardScope,
        ...(route?.traceParent !== undefined ? { traceParent: route.traceParent } : {}),
        context: fileChanges
          ? { fileChanges, ...(route?.workItem !== undefined ? { workItem: route.workItem } : {}) }
          : contextOf(route)
      }
      // Opened in the read loop's own step (`openNow`): an effect only when something must wait.
      const opened = reading === undefined
        ? desk.open(decoded, options)
        : desk.openNow(decoded, options, reading.fiber, reading.runtimeFlags)
      return Effect.isEffect(opened)
        ? Effect.flatMap(opened, (result) => duplicate(result, requestId, method) ?? Effect.void)
        : duplicate(opened, requestId, method)
    }
    // Not a closure per card: under esbuild's `keepNames` (the bundled `warden run`, tsx) a named
    // inner function costs a `defineProperty` of its name each time it is made, ~0.5 µs (issue 14, fourth pass).
    const duplicate = (result: Approvals.OpenResult, requestId: JsonRpc.RequestId, method: string) =>
      result._tag === "Duplicate"
        ? abort(`the server sent request id ${JSON.stringify(requestId)} (${method}) while a request with that id is still open`)
        : undefined

    /** The read loop's fiber (cards are opened in its steps), once it runs. */
    let reading: { readonly fiber: Fiber.RuntimeFiber<unknown, unknown>; readonly runtimeFlags: RuntimeFlags.RuntimeFlags } | undefined

    let aborted = false
    const abort = (detail: string) =>
      Effect.suspend(() => {
        aborted = true
        return connection.abort(detail)
      })

    /** Handle one frame; returns an effect only for what must run in order (opening a card, aborting). */
    const handle = (frame: Record<string, unknown>): Effect.Effect<void> | undefined => {
      // Most frames are notifications (deltas, item events): route them without the classified
      // object (what `classify` answers for a string method and no id, minus one allocation).
      const method = frame["method"]
      if (typeof method === "string" && frame["id"] === undefined) {
        routeNotification(method, frame["params"])
        return undefined
      }
      const message = JsonRpc.classify(frame)
      switch (message._tag) {
        case "Response":
          pending.resolve(message.id, message.result)
          return undefined
        case "ErrorResponse":
          pending.reject(message.id, message.error)
          return undefined
        case "Notification":
          routeNotification(message.method, message.params)
          return undefined
        case "Request":
          return openCard(message.id, message.method, message.params)
        case "Invalid":
          // It may have been an approval request whose id we cannot read: the connection is unusable.
          return abort(`unclassifiable frame: ${message.detail}`)
      }
    }

    const measureLag = telemetry?.readLoopLag === true && connection.takeArrival !== undefined
    /**
     * The read loop, while its fiber waits for frames (`takeAll`, nothing buffered): the transport
     * gives it each chunk's frames in the `data` callback (`setDirectReader`), and it handles them
     * there, as the loop would, without waking its fiber (issue 14, fourth pass). At the first
     * frame whose handling must run an effect (a thread's first card, a span, an abort) or throws,
     * it hands the rest to the fiber: that effect (or the defect, `Effect.die`) first, then the
     * frames it did not handle, through `incoming`, in order.
     */
    const readDirectly = (frames: ReadonlyArray<TransportNs.JsonObject>): ReadonlyArray<TransportNs.JsonObject> | undefined => {
      const startedAt = measureLag ? performance.now() : undefined
      for (let i = 0; i < frames.length; i++) {
        const frame = frames[i]!
        let effect: Effect.Effect<void> | undefined
        try {
          effect = handle(frame)
        } catch (defect) {
          effect = Effect.die(new FrameHandlingDefect(frame, defect))
        }
        if (effect !== undefined) return [new HandOver(effect), ...frames.slice(i + 1)]
      }
      if (startedAt !== undefined) Metrics.readLoopLag.unsafeUpdate(performance.now() - startedAt, [])
      return undefined
    }
    const direct = connection.setDirectReader
    const reader = Effect.gen(function*() {
      reading = yield* Effect.withFiberRuntime<typeof reading>((fiber, status) => Effect.succeed({ fiber, runtimeFlags: status.runtimeFlags }))
      while (true) {
        // Set only while `takeAll` waits with nothing buffered (unset in the step it returns in).
        direct?.(readDirectly)
        const [frames, done] = yield* connection.incoming.takeAll
        direct?.(undefined)
        // Read in the same synchronous step as takeAll: no chunk can arrive in between.
        const arrivedAt = measureLag ? connection.takeArrival!() : undefined
        for (const frame of frames) {
          if (aborted) break
          if (frame instanceof HandOver) {
            yield* frame.effect // a frame the direct reader began: its effect, or its defect
            continue
          }
          let effect: Effect.Effect<void> | undefined
          try {
            effect = handle(frame)
          } catch (defect) {
            return yield* Effect.die(new FrameHandlingDefect(frame, defect))
          }
          if (effect) yield* effect
        }
        if (arrivedAt !== undefined) Metrics.readLoopLag.unsafeUpdate(performance.now() - arrivedAt, [])
        if (done || aborted) break
      }
      const ended = yield* connection.ended
      endWith(ended)
    })
    // Supervised: however the reader ends, the end path runs (see endByDefect).
    yield* reader.pipe(
      Effect.ensuring(Effect.sync(() => direct?.(undefined))),
      Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : endByDefect(exit.cause))),
      Effect.interruptible,
      Effect.forkScoped
    )
    // Closing the scope (supervisor stop) must also leave nothing pending.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        if (handledEnd) return Effect.void
        return connection.close.pipe(
          Effect.zipRight(connection.ended),
          Effect.timeoutOption("5 seconds"),
          Effect.flatMap((ended) =>
            Effect.sync(() =>
              endWith(
                ended._tag === "Some"
                  ? ended.value
                  : new ConnectionEnded({ reason: { _tag: "ClosedByUs" }, stderrTail: connection.stderrTail() })
              )
            )
          )
        )
      })
    )

    // --- requests -------------------------------------------------------------------------

    const calls: Calls = { pending, timer: requestTimer }

    const timeoutFor = (method: string, options?: RequestOptions) =>
      options?.timeout !== undefined
        ? Duration.decode(options.timeout)
        : config.requestTimeouts.get(method) ?? config.requestTimeout

    /** Write the request and register its call; resumes at once when it cannot be sent. */
    const send = (call: Call, params: unknown, resume: (outcome: Effect.Effect<unknown, RequestError>) => void): void => {
      if (handledEnd || !connection.isOpen()) return resume(Effect.fail(lostError()))
      const requestId = pending.nextId()
      const sent = connection.trySend(JsonRpc.request(requestId, call.method, params))
      if (sent === "unencodable") {
        return resume(Effect.fail(new UnexpectedResult({ method: call.method, detail: "its params cannot be written as JSON (a BigInt, a cycle, ...); nothing was sent" })))
      }
      if (sent === "closed") return resume(Effect.fail(lostError()))
      call.requestId = requestId
      call.resume = resume
      pending.add(requestId, call)
      requestTimer.schedule(call, call.timeout)
    }

    const isOverload = (error: RequestError) => error._tag === "RemoteError" && error.code === JsonRpc.ErrorCodes.ServerOverloaded
    const maxRetries = config.overloadRetries
    const firstBackoff = Duration.toMillis(config.overloadBackoff)

    /**
     * `-32001` (server overloaded) is retried with exponential backoff (x2, capped at 5 s) and
     * jitter, at most `overloadRetries` times. The back-off ends early when the connection ends,
     * so the retry then fails at once with the cause; both sides of that race are interruptible,
     * so this holds for callers in uninterruptible regions too (turn/start, a stop's turn/interrupt).
     * Every -32001 is pressure for adaptive admission, retried or not.
     */
    const overloaded = <M extends ClientMethods.ClientMethod>(
      error: RequestError,
      method: M,
      params: ClientMethods.ParamsOf<M>,
      options: RequestOptions | undefined,
      retry: number
    ): Effect.Effect<ClientMethods.ResultOf<M>, RequestError> => {
      pressure("the app-server is overloaded (-32001)")
      if (retry >= maxRetries) return Effect.fail(error)
      return Effect.flatMap(Random.nextRange(0.8, 1.2), (jitter) =>
        Effect.raceFirst(
          Effect.sleep(Duration.millis(Math.min(5_000, firstBackoff * 2 ** retry) * jitter)).pipe(Effect.interruptible),
          Deferred.await(endSignal).pipe(Effect.interruptible)
        )).pipe(Effect.zipRight(attempt(method, params, options, retry + 1)))
    }

    /**
     * One request, decoded with the protocol's schema (`UnexpectedResult` when it does not):
     * written, then waited for as one `Effect.async` with no canceler, under ONE frame that
     * decodes the result, retries `-32001` and, when the caller can be interrupted, removes the
     * entry and the deadline on an interruption (the frame runs uninterruptibly, the wait alone
     * interruptibly: what `Effect.async`'s canceler does, at a third of its bytes per waiting
     * caller; docs/performance.md, issue 14, third pass). The entry exists only once the writer
     * accepted the frame: a frame that cannot be written leaves nothing behind. The deadline
     * resumes the caller itself, so it holds for callers that cannot be interrupted (turn/start;
     * turn/interrupt while a work item stops): for them the wait has no interruption hook, as
     * none can come.
     */
    const attempt = <M extends ClientMethods.ClientMethod>(
      method: M,
      params: ClientMethods.ParamsOf<M>,
      options: RequestOptions | undefined,
      retry: number
    ): Effect.Effect<ClientMethods.ResultOf<M>, RequestError> =>
      Effect.withFiberRuntime((_, status) => {
        const call = new Call(calls, method, timeoutFor(method, options), options?.onResult)
        const wait = Effect.async<unknown, RequestError>((resume) => send(call, params, resume))
        const interruptible = RuntimeFlags.interruptible(status.runtimeFlags)
        const waited = Effect.matchCauseEffect(interruptible ? Effect.interruptible(wait) : wait, {
          onFailure: (cause): Effect.Effect<ClientMethods.ResultOf<M>, RequestError> => {
            call.cancel() // interrupted (or the registration died): the entry and the deadline go
            if (cause._tag === "Fail" && isOverload(cause.error)) {
              const retried = overloaded(cause.error, method, params, options, retry)
              return interruptible ? Effect.interruptible(retried) : retried
            }
            return Effect.failCause(cause)
          },
          onSuccess: (raw) =>
            Effect.mapError(
              ClientMethods.decodeResult(method, raw),
              (invalid) => new UnexpectedResult({ method, detail: Json.describeParseError(invalid.cause) })
            )
        })
        return interruptible ? Effect.uninterruptible(waited) : waited
      })

    const decoded = <M extends ClientMethods.ClientMethod>(
      method: M,
      params: ClientMethods.ParamsOf<M>,
      options?: RequestOptions
    ): Effect.Effect<ClientMethods.ResultOf<M>, RequestError> => attempt(method, params, options, 0)

    /**
     * With telemetry on, each request is a `warden.request` span (kind client; its error, if any,
     * is the span's status: the typed error, whose messages are masked) and one sample of
     * `warden.request.duration` by method and outcome. Our requests run in the callers' fibers,
     * never on the read loop.
     */
    const instrumented = <M extends ClientMethods.ClientMethod>(
      method: M,
      params: ClientMethods.ParamsOf<M>,
      options?: RequestOptions
    ): Effect.Effect<ClientMethods.ResultOf<M>, RequestError> =>
      Effect.suspend(() => {
        const start = clock.unsafeCurrentTimeMillis()
        return decoded(method, params, options).pipe(
          Effect.onExit((exit) =>
            Effect.sync(() => {
              const outcome = Exit.isSuccess(exit) ? "ok" : exit.cause._tag === "Fail" ? exit.cause.error._tag : Exit.isInterrupted(exit) ? "interrupted" : "defect"
              Metrics.requestLatency.unsafeUpdate(clock.unsafeCurrentTimeMillis() - start, byRequest(method, outcome))
            })
          ),
          Effect.withSpan("warden.request", {
            kind: "client",
            attributes: { "rpc.system": "jsonrpc", "rpc.method": method, "warden.connection": id },
            captureStackTrace: false
          })
        )
      })

    const byRequest = labelsOf(["rpc.method", "warden.outcome"])
    const request = telemetry === undefined ? decoded : instrumented

    const notify = (method: string, params?: unknown) =>
      Effect.suspend(() => (writeNow(JsonRpc.notification(method, params)) ? Effect.void : Effect.fail(lostError())))

    // --- handshake ------------------------------------------------------------------------

    const init = yield* request("initialize", {
      clientInfo: config.clientInfo,
      ...(Option.isSome(config.capabilities) ? { capabilities: config.capabilities.value } : {})
    })
    yield* notify("initialized")

    return {
      id,
      init,
      request,
      notify,
      registerThread: (route) => {
        if (route.threadId !== undefined && route.closed !== true) routes.set(route.threadId, route)
      },
      hasThread: (threadId) => routes.has(threadId),
      unregisterThread: (route) => {
        if (route.threadId !== undefined && routes.get(route.threadId) === route) routes.delete(route.threadId)
      },
      desk,
      isOpen: () => handledEnd === undefined && connection.isOpen(),
      ended: Deferred.await(endSignal),
      endedNow: () => handledEnd,
      connectionEvents,
      stderrTail: connection.stderrTail,
      abort,
      close: connection.close,
      pendingCount: pending.size,
      deadlineCount: requestTimer.size,
      routeCount: () => routes.size,
      after: requestTimer.add
    }
  })
