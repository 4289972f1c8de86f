/**
 * The slot pool: one slot per app-server process (`pool`), each with its own loop: connect through
 * the `Transport`, handshake, serve until the connection ends, then restart with backoff (from
 * `restart.backoff`, doubling) unless `restart.maxAttempts` consecutive failures were reached (a
 * connection that stayed up `restart.stableAfter` resets the count). A slot that gives up is Down:
 * the work items waiting for it fail with its error.
 *
 * Scope and fibers: `make` runs in the supervisor's scope and forks there one fiber per slot (its
 * loop), supervised: a loop that dies anyway leaves its slot Down, never a slot that looks alive
 * and serves nobody. Each connection lives in a scope of its loop's, closed when the connection
 * ended or the loop is interrupted (the child is stopped then). The shutdown finalizer, added
 * after the loops were forked, runs before they are interrupted when the supervisor's scope
 * closes: it stops the loops from restarting and refuses the open cards of every ready connection
 * (outcome `shutdown`) while the children can still hear it; then the loops are interrupted and
 * their connections closed.
 */
import type { Approvals } from "@warden/approvals"
import { SecretMask } from "@warden/approvals"
import { Transport as TransportNs } from "@warden/transport"
import { Cause, Duration, Effect, Exit, Stream, SubscriptionRef } from "effect"
import type { Scope } from "effect"
import type * as Config from "../Config.js"
import { WorkItemFailed } from "../Errors.js"
import type { SupervisorEvent } from "../Supervisor.js"
import type { TelemetryShape } from "../Telemetry.js"
import * as AppServerConnection from "./AppServerConnection.js"

export type SlotState =
  | { readonly _tag: "Starting" }
  | { readonly _tag: "Ready"; readonly server: AppServerConnection.AppServer }
  | { readonly _tag: "Down"; readonly error: WorkItemFailed }

export interface Slot {
  readonly index: number
  readonly state: SubscriptionRef.SubscriptionRef<SlotState>
  /** Work items on this slot now (the pool picks the slot with the fewest). */
  threads: number
  /** A work item leaves the slot (one effect per slot, every item's scope finalizer). */
  readonly leave: Effect.Effect<void>
}

export interface SlotPool {
  /** The slot with the fewest work items of those not Down (the first slot when all are). */
  readonly pick: Effect.Effect<Slot>
  /** The slot's server once ready (skipping `notId`, a connection known dead); fails when the slot is down. */
  readonly serverOf: (slot: Slot, notId?: number) => Effect.Effect<AppServerConnection.AppServer, WorkItemFailed>
  /** The first ready connection's `initialize` result (waits for it). */
  readonly ready: Effect.Effect<AppServerConnection.InitializeResult, WorkItemFailed>
}

export interface Options {
  readonly approvals: Approvals.ApprovalsShape
  readonly config: Pick<Config.ResolvedConfig, "pool" | "restart" | "connection">
  /** Codex said it is under pressure: for adaptive admission. */
  readonly pressure: (reason: string) => void
  readonly telemetry: TelemetryShape | undefined
  readonly publish: (event: SupervisorEvent) => void
}

/** Start `config.pool` slots in the caller's scope (the supervisor's); `make` does not wait for them. */
export const make = (options: Options): Effect.Effect<SlotPool, never, Scope.Scope | TransportNs.Transport> =>
  Effect.gen(function* () {
    const { approvals, config, pressure, publish, telemetry } = options
    const transport = yield* TransportNs.Transport
    const { maxAttempts, backoff } = config.restart
    const stableAfter = Duration.toMillis(config.restart.stableAfter)

    const slots: Array<Slot> = []
    for (let index = 0; index < config.pool; index++) {
      const slot: Slot = {
        index,
        state: yield* SubscriptionRef.make<SlotState>({ _tag: "Starting" }),
        threads: 0,
        leave: Effect.sync(() => {
          slot.threads--
        })
      }
      slots.push(slot)
    }

    // Set by the shutdown finalizer, before the slots' fibers are interrupted; a slot loop ends by
    // itself when it sees it (after a connection ended, before its back-off). An interruption that
    // reaches a slot fiber while it closes its connection's scope (waiting, uninterruptibly, for
    // the transport's stopper) is erased when that finalizer ends (Effect 3.22's `addFinalizer`
    // puts the fiber's FiberRefs back, `currentInterruptedCause` included): the slot would sleep
    // its back-off and restart the app-server while the supervisor's close waits for it, forever.
    // See docs/performance.md (the stall watchdog).
    let isStopping = false
    const stopped = () => isStopping

    const slotLoop = (slot: Slot) =>
      Effect.gen(function* () {
        let consecutive = 0
        let restarts = 0 // how many times this slot started its app-server again (the connection span's warden.restart)
        while (true) {
          if (stopped()) return
          let readyAt: number | undefined
          const outcome = yield* Effect.scoped(
            Effect.gen(function* () {
              const connection = yield* transport.connect.pipe(
                Effect.tapError((error) =>
                  Effect.sync(() =>
                    publish({
                      _tag: "ConnectionFailed",
                      slot: slot.index,
                      reason: { _tag: "SpawnFailed", detail: error.detail },
                      message: error.message,
                      stderrTail: ""
                    })
                  )
                )
              )
              const server = yield* AppServerConnection.make(
                connection,
                approvals,
                config.connection,
                pressure,
                telemetry && { readLoopLag: telemetry.readLoopLag ?? true }
              ).pipe(
                Effect.tapError((error) =>
                  // The end is reported once stdout drained and the child exited, so its tail is whole.
                  (connection.isOpen()
                    ? Effect.succeed(connection.endedNow())
                    : connection.ended.pipe(
                        Effect.timeoutOption("2 seconds"),
                        Effect.map((ended) => (ended._tag === "Some" ? ended.value : connection.endedNow()))
                      )
                  ).pipe(
                    Effect.map((raw) => {
                      const ended = raw && AppServerConnection.maskEnded(raw)
                      publish({
                        _tag: "ConnectionFailed",
                        slot: slot.index,
                        reason: ended?.reason,
                        message:
                          ended && error._tag === "ConnectionLost" ? ended.message : SecretMask.maskText(error.message),
                        stderrTail: ended?.stderrTail ?? SecretMask.maskText(connection.stderrTail())
                      })
                    })
                  )
                )
              )
              readyAt = yield* Effect.clockWith((c) => c.currentTimeMillis)
              yield* SubscriptionRef.set(slot.state, { _tag: "Ready", server })
              publish({ _tag: "ConnectionReady", slot: slot.index, connection: server.id, init: server.init })
              const ended = yield* server.ended
              if (stopped()) return "the supervisor is stopping"
              yield* SubscriptionRef.set(slot.state, { _tag: "Starting" })
              publish({
                _tag: "ConnectionLost",
                slot: slot.index,
                connection: server.id,
                reason: ended.reason,
                message: ended.message,
                stderrTail: ended.stderrTail
              })
              return ended.message
            }).pipe(
              Effect.withSpan("warden.connection", {
                attributes: { "warden.slot": slot.index, "warden.restart": restarts },
                captureStackTrace: false
              })
            )
          ).pipe(
            Effect.catchAll((error) => Effect.succeed(error.message)),
            // A defect while connecting counts as a failed attempt (restart with backoff, bounded),
            // never as the end of the slot; interruption (the supervisor stopping) still ends it.
            Effect.catchAllCause((cause) =>
              Cause.isInterruptedOnly(cause)
                ? Effect.failCause(cause)
                : Effect.as(
                    Effect.logError("app-server connection failed with a defect", cause),
                    `Warden failed while connecting: ${Cause.squash(cause)}`
                  )
            )
          )
          if (stopped()) return
          const endedAt = yield* Effect.clockWith((c) => c.currentTimeMillis)
          // Only a connection that got through the handshake and then stayed up counts as stable.
          consecutive = readyAt !== undefined && endedAt - readyAt >= stableAfter ? 1 : consecutive + 1
          if (consecutive > maxAttempts) {
            const error = new WorkItemFailed({
              reason: "connection-lost",
              detail: `the app-server could not be kept running (${maxAttempts} restarts); last: ${outcome}`,
              threadId: undefined
            })
            yield* SubscriptionRef.set(slot.state, { _tag: "Down", error })
            publish({ _tag: "ConnectionGaveUp", slot: slot.index, detail: error.detail })
            return
          }
          const delay = Duration.times(backoff, 2 ** (consecutive - 1))
          publish({
            _tag: "ConnectionRestarting",
            slot: slot.index,
            attempt: consecutive,
            delayMs: Duration.toMillis(delay)
          })
          yield* Effect.sleep(delay)
          restarts++
        }
      })

    for (const slot of slots) {
      yield* slotLoop(slot).pipe(
        // Supervised: a slot loop that dies anyway leaves the slot Down (waiting items fail with
        // the cause), never a slot that looks alive and serves nobody.
        Effect.onExit((exit) =>
          Exit.isFailure(exit) && !Exit.isInterrupted(exit)
            ? Effect.zipRight(
                Effect.logError("app-server slot crashed", exit.cause),
                SubscriptionRef.set(slot.state, {
                  _tag: "Down",
                  error: new WorkItemFailed({
                    reason: "connection-lost",
                    detail: `the app-server slot failed: ${Cause.squash(exit.cause)}`,
                    threadId: undefined
                  })
                })
              )
            : Effect.void
        ),
        Effect.interruptible,
        Effect.forkScoped
      )
    }

    // Runs before the slots' scopes close: refuse open cards while the children can hear it.
    yield* Effect.addFinalizer(() =>
      Effect.zipRight(
        Effect.sync(() => {
          isStopping = true
        }),
        Effect.forEach(
          slots,
          (slot) =>
            Effect.map(SubscriptionRef.get(slot.state), (state) => {
              if (state._tag === "Ready") state.server.connectionCards.closeWhere(() => true, { _tag: "Shutdown" })
            }),
          { discard: true }
        )
      )
    )

    const serverOf = (slot: Slot, notId?: number) =>
      slot.state.changes.pipe(
        Stream.filter((s) => s._tag === "Down" || (s._tag === "Ready" && s.server.id !== notId && s.server.isOpen())),
        Stream.take(1),
        Stream.runHead,
        Effect.flatMap((state) => {
          if (state._tag === "Some" && state.value._tag === "Ready") return Effect.succeed(state.value.server)
          if (state._tag === "Some" && state.value._tag === "Down") return Effect.fail(state.value.error)
          return Effect.fail(
            new WorkItemFailed({
              reason: "connection-lost",
              detail: "the supervisor is shutting down",
              threadId: undefined
            })
          )
        })
      )

    const pick = Effect.gen(function* () {
      let best: Slot | undefined
      for (const slot of slots) {
        const state = yield* SubscriptionRef.get(slot.state)
        if (state._tag === "Down") continue
        if (!best || slot.threads < best.threads) best = slot
      }
      return best ?? slots[0]!
    })

    const ready = Effect.flatMap(pick, (slot) => Effect.map(serverOf(slot), (server) => server.init))

    return { pick, serverOf, ready }
  })
