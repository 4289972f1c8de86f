/**
 * Our requests to the app-server and their pending replies: `request` (typed per client method,
 * its result decoded with the protocol's schema), `notify`, the `-32001` retries, and with
 * telemetry on a `warden.request` span and a latency sample per request.
 *
 * Scope and fibers: a request runs in its caller's fiber and holds no fiber of its own. Its
 * pending entry (`PendingRequests`) is settled by the read loop (the response, the server's
 * error) or by the connection's end (`ConnectionEnd`: every entry fails); its deadline is an entry
 * of the connection's one deadline timer, whose fiber lives in the connection's scope and resumes
 * the caller with `RequestTimeout` itself. Nothing here outlives the connection's scope: closing
 * it ends the connection, which fails every entry still pending.
 */
import { DeadlineTimer } from "@warden/approvals"
import { ClientMethods, Json, JsonRpc } from "@warden/protocol"
import type { Transport as TransportNs } from "@warden/transport"
import { Deferred, Duration, Effect, Exit, Random, RuntimeFlags } from "effect"
import type { Clock } from "effect"
import type * as Config from "../Config.js"
import type { ConnectionLost, RequestError } from "../Errors.js"
import { RequestTimeout, UnexpectedResult } from "../Errors.js"
import { labelsOf, Metrics } from "../Telemetry.js"
import type { ConnectionEnd } from "./ConnectionEnd.js"
import { startSpanIn } from "./ItemSpans.js"
import type * as PendingRequests from "./PendingRequests.js"

/** Per request: its own deadline, or a hook on its raw result. */
export interface RequestOptions {
  readonly timeout?: Duration.DurationInput
  /**
   * Runs in the read loop when the response arrives, before the next frame is handled, with the
   * raw result (not yet decoded). Internal use: it must be cheap and must not throw.
   */
  readonly onResult?: (result: unknown) => void
}

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
    this.wake(
      Effect.fail(
        new RequestTimeout({ method: this.method, id: this.requestId, timeoutMs: Duration.toMillis(this.timeout) })
      )
    )
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

/** A typed client request, as the connection's `request` is. */
export type Request = <M extends ClientMethods.ClientMethod>(
  method: M,
  params: ClientMethods.ParamsOf<M>,
  options?: RequestOptions
) => Effect.Effect<ClientMethods.ResultOf<M>, RequestError>

export interface ClientRequests {
  readonly request: Request
  readonly notify: (method: string, params?: unknown) => Effect.Effect<void, ConnectionLost>
}

export interface Options {
  readonly connection: TransportNs.Connection
  /** The connection's id (the `warden.connection` attribute of a request's span). */
  readonly id: number
  readonly config: Config.ResolvedConnection
  readonly pending: PendingRequests.PendingRequests
  readonly timer: DeadlineTimer.DeadlineTimer
  readonly end: ConnectionEnd
  readonly clock: Clock.Clock
  /** Codex said it is under pressure (an overload answer): for adaptive admission. */
  readonly pressure: (reason: string) => void
  /** Telemetry on: a span and a latency sample per request. */
  readonly telemetry: boolean
}

export const make = (options: Options): ClientRequests => {
  const { clock, config, connection, end, id, pending, pressure, timer } = options
  const calls: Calls = { pending, timer }

  const timeoutFor = (method: string, requestOptions?: RequestOptions) =>
    requestOptions?.timeout !== undefined
      ? Duration.decode(requestOptions.timeout)
      : (config.requestTimeouts.get(method) ?? config.requestTimeout)

  /** Write the request and register its call; resumes at once when it cannot be sent. */
  const send = (call: Call, params: unknown, resume: (outcome: Effect.Effect<unknown, RequestError>) => void): void => {
    if (end.handled() || !connection.isOpen()) return resume(Effect.fail(end.lost()))
    const requestId = pending.nextId()
    const sent = connection.trySend(JsonRpc.request(requestId, call.method, params))
    if (sent === "unencodable") {
      return resume(
        Effect.fail(
          new UnexpectedResult({
            method: call.method,
            detail: "its params cannot be written as JSON (a BigInt, a cycle, ...); nothing was sent"
          })
        )
      )
    }
    if (sent === "closed") return resume(Effect.fail(end.lost()))
    call.requestId = requestId
    call.resume = resume
    pending.add(requestId, call)
    timer.schedule(call, call.timeout)
  }

  const isOverload = (error: RequestError) =>
    error._tag === "RemoteError" && error.code === JsonRpc.ErrorCodes.ServerOverloaded
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
    requestOptions: RequestOptions | undefined,
    retry: number
  ): Effect.Effect<ClientMethods.ResultOf<M>, RequestError> => {
    pressure("the app-server is overloaded (-32001)")
    if (retry >= maxRetries) return Effect.fail(error)
    return Effect.flatMap(Random.nextRange(0.8, 1.2), (jitter) =>
      Effect.raceFirst(
        Effect.sleep(Duration.millis(Math.min(5_000, firstBackoff * 2 ** retry) * jitter)).pipe(Effect.interruptible),
        Deferred.await(end.signal).pipe(Effect.interruptible)
      )
    ).pipe(Effect.zipRight(attempt(method, params, requestOptions, retry + 1)))
  }

  /**
   * One request, decoded with the protocol's schema (`UnexpectedResult` when it does not):
   * written, then waited for as one `Effect.async` with no canceler, under ONE frame that
   * decodes the result, retries `-32001` and, when the caller can be interrupted, removes the
   * entry and the deadline on an interruption (the frame runs uninterruptibly, the wait alone
   * interruptibly: what `Effect.async`'s canceler does, at a third of its bytes per waiting
   * caller; docs/performance.md). The entry exists only once the writer accepted the frame: a
   * frame that cannot be written leaves nothing behind. The deadline resumes the caller itself,
   * so it holds for callers that cannot be interrupted (turn/start; turn/interrupt while a work
   * item stops): for them the wait has no interruption hook, as none can come.
   */
  const attempt = <M extends ClientMethods.ClientMethod>(
    method: M,
    params: ClientMethods.ParamsOf<M>,
    requestOptions: RequestOptions | undefined,
    retry: number
  ): Effect.Effect<ClientMethods.ResultOf<M>, RequestError> =>
    Effect.withFiberRuntime((_, status) => {
      const call = new Call(calls, method, timeoutFor(method, requestOptions), requestOptions?.onResult)
      const wait = Effect.async<unknown, RequestError>((resume) => send(call, params, resume))
      const interruptible = RuntimeFlags.interruptible(status.runtimeFlags)
      const waited = Effect.matchCauseEffect(interruptible ? Effect.interruptible(wait) : wait, {
        onFailure: (cause): Effect.Effect<ClientMethods.ResultOf<M>, RequestError> => {
          call.cancel() // interrupted (or the registration died): the entry and the deadline go
          if (cause._tag === "Fail" && isOverload(cause.error)) {
            const retried = overloaded(cause.error, method, params, requestOptions, retry)
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

  const decoded: Request = (method, params, requestOptions) => attempt(method, params, requestOptions, 0)

  const byRequest = labelsOf(["rpc.method", "warden.outcome"])

  /**
   * With telemetry on, each request is a `warden.request` span (kind client; its error, if any,
   * is the span's status: the typed error, whose messages are masked) and one sample of
   * `warden.request.duration` by method and outcome. Our requests run in the callers' fibers,
   * never on the read loop. The span is started and ended beside the request (`startSpanIn`), a
   * child of the caller's span, not set as the fiber's current one (nothing is made under it, so
   * no change of the fiber's context per request).
   */
  const instrumented: Request = (method, params, requestOptions) =>
    Effect.withFiberRuntime((fiber) => {
      const start = clock.unsafeCurrentTimeMillis()
      const endSpan = startSpanIn(fiber, "warden.request", "client", {
        "rpc.system": "jsonrpc",
        "rpc.method": method,
        "warden.connection": id
      })
      return Effect.onExit(decoded(method, params, requestOptions), (exit) =>
        Effect.sync(() => {
          const outcome = Exit.isSuccess(exit)
            ? "ok"
            : exit.cause._tag === "Fail"
              ? exit.cause.error._tag
              : Exit.isInterrupted(exit)
                ? "interrupted"
                : "defect"
          Metrics.requestLatency.unsafeUpdate(clock.unsafeCurrentTimeMillis() - start, byRequest(method, outcome))
          endSpan?.(exit)
        })
      )
    })

  const notify = (method: string, params?: unknown) =>
    Effect.suspend(() => (end.write(JsonRpc.notification(method, params)) ? Effect.void : Effect.fail(end.lost())))

  return { request: options.telemetry ? instrumented : decoded, notify }
}
