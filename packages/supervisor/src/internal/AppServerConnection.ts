/**
 * The connection actor: one `codex app-server` (or any peer behind a Transport connection), made
 * of four parts that share its state (the pending requests, the connection's open cards, the thread
 * routes):
 *
 * - `ClientRequests`: our requests and their pending replies (deadlines, `-32001` retries);
 * - `FrameRouter`: each frame routed synchronously, in the read loop's step: responses resume
 *   their callers, notifications go to their thread's route, server requests open cards;
 * - `ReadLoop`: the fiber that takes the frames and never awaits a handler;
 * - `ConnectionEnd`: the end, in one place (pending requests fail, cards settle connection-lost,
 *   routes are told, `ended` resolves), however it comes.
 *
 * Scope and fibers, all in the caller's scope (the slot's connection scope): a child scope for the
 * connection's small fibers (the deadline timers of our requests and of the connection's cards, a
 * settled card's handler interruption), made first so that it closes last, after the end was
 * handled, and a deadline still holds while the connection closes; the read loop's fiber; and the
 * scope's end path (`ConnectionEnd.onScopeClose`), which runs first when the scope closes.
 */
import type { Approvals } from "@warden/approvals"
import { DeadlineTimer } from "@warden/approvals"
import type { ClientMethods } from "@warden/protocol"
import type { Transport as TransportNs } from "@warden/transport"
import type { ConnectionEnded as ConnectionEndedNs } from "@warden/transport"
import { Deferred, type Duration, Effect, ExecutionStrategy, FiberSet, Option, PubSub, Scope } from "effect"
import * as Config from "../Config.js"
import type { ConnectionLost, RequestError } from "../Errors.js"
import * as ClientRequests from "./ClientRequests.js"
import * as ConnectionEnd from "./ConnectionEnd.js"
import * as FrameRouter from "./FrameRouter.js"
import * as PendingRequests from "./PendingRequests.js"
import * as ReadLoop from "./ReadLoop.js"
import type { ThreadRoute } from "./ThreadRoute.js"

type ConnectionEnded = ConnectionEndedNs.ConnectionEnded

export { afterQueuedMicrotasks, maskEnded } from "./ConnectionEnd.js"
export type { RequestOptions } from "./ClientRequests.js"
export { FrameHandlingDefect, threadIdOf } from "./FrameRouter.js"
export type { ConnectionEvent } from "./FrameRouter.js"

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
    options?: ClientRequests.RequestOptions
  ) => Effect.Effect<ClientMethods.ResultOf<M>, RequestError>
  readonly notify: (method: string, params?: unknown) => Effect.Effect<void, ConnectionLost>
  readonly registerThread: (route: ThreadRoute) => void
  readonly unregisterThread: (route: ThreadRoute) => void
  /** Whether a live work item already routes this thread on this connection. */
  readonly hasThread: (threadId: string) => boolean
  readonly connectionCards: Approvals.ConnectionCards
  readonly isOpen: () => boolean
  /** The end, once it has been handled (pending failed, cards settled, threads told). */
  readonly ended: Effect.Effect<ConnectionEnded>
  readonly endedNow: () => ConnectionEnded | undefined
  /** Notifications that belong to no thread we run (account, config, process news...). */
  readonly connectionEvents: PubSub.PubSub<FrameRouter.ConnectionEvent>
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

/** What the connection measures when telemetry is on (`Telemetry`); nothing when undefined. */
export interface Instrumentation {
  /** Record `warden.read_loop.lag` (a clock read and a histogram update per batch of frames). */
  readonly readLoopLag: boolean
}

let connectionCounter = 0

/**
 * Run a connection: start the reader, perform the handshake (`initialize`, then `initialized`),
 * and return the actor. The reader lives in the caller's scope.
 */
export const make = (
  connection: TransportNs.Connection,
  approvals: Approvals.ApprovalsShape,
  config: Config.ResolvedConnection = Config.defaults.connection,
  /** Codex said it is under pressure (an overload answer, a rate limit reached): for adaptive admission. */
  pressure: (reason: string) => void = () => {},
  telemetry: Instrumentation | undefined = undefined
): Effect.Effect<AppServer, RequestError, Scope.Scope> =>
  Effect.gen(function* () {
    const id = ++connectionCounter
    // Request deadlines live here: a scope made before the end path is added as a finalizer, so it
    // closes after it (after the end is handled), and a deadline still holds while the connection closes.
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
    const timer = DeadlineTimer.make({ nanos: () => clock.unsafeCurrentTimeNanos(), ...fibers })
    const pending = PendingRequests.make()
    const routes = new Map<string, ThreadRoute>()
    const connectionEvents = yield* PubSub.unbounded<FrameRouter.ConnectionEvent>()

    // the connection's cards are made after the end (its line asks the end whether it is alive); the end reads it
    // only when the connection ends, after `make` returned.
    const end: ConnectionEnd.ConnectionEnd = yield* ConnectionEnd.make(connection, {
      pending,
      cardsLost: (message) => connectionCards.connectionLost(message),
      routes,
      spawn: fibers.spawn
    })
    // The connection cards' deadline timer and card fibers live in this connection's scope.
    const connectionCards = approvals.cardsFor({ write: end.write, isOpen: end.isOpen }, undefined, fibers)
    const router = FrameRouter.make({ connection, pending, connectionCards, routes, connectionEvents, pressure })
    yield* ReadLoop.start({ connection, router, end, measureLag: telemetry?.readLoopLag === true })
    // Added after the read loop's fiber: it runs first when the scope closes (see ConnectionEnd).
    yield* Effect.addFinalizer(() => end.onScopeClose)

    const { notify, request } = ClientRequests.make({
      connection,
      id,
      config,
      pending,
      timer,
      end,
      clock,
      pressure,
      telemetry: telemetry !== undefined
    })

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
      connectionCards,
      isOpen: end.isOpen,
      ended: Deferred.await(end.signal),
      endedNow: end.handled,
      connectionEvents,
      stderrTail: connection.stderrTail,
      abort: router.abort,
      close: connection.close,
      pendingCount: pending.size,
      deadlineCount: timer.size,
      routeCount: () => routes.size,
      after: timer.add
    }
  })
