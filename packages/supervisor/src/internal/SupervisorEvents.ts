/**
 * The supervisor's events: one PubSub every part publishes to synchronously (a slot's connection
 * coming and going, admission's moves, every work item's events and its end), and, with telemetry
 * on, the metrics counted from them and from the approval events.
 *
 * Scope and fibers: `make` runs in the supervisor's scope and forks no fiber. With telemetry on
 * the card metrics are counted from the approval events as they are published (an observer
 * removed when the scope closes, after the shutdown's refusals were counted), and the
 * supervisor's event metrics where the event is published, synchronously.
 */
import type { ApprovalEvent, Approvals } from "@warden/approvals"
import { Card, Observers } from "@warden/approvals"
import { Cause, Effect, Exit, PubSub, type Queue, Runtime, Stream } from "effect"
import type { Scope } from "effect"
import type { SupervisorEvent } from "../Supervisor.js"
import { Attributes, labelsOf, Metrics } from "../Telemetry.js"

export interface SupervisorEvents {
  /** Publish an event (and count it, telemetry on); synchronous, safe anywhere. */
  readonly publish: (event: SupervisorEvent) => void
  /** Events from the moment of subscription. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<SupervisorEvent>, never, Scope.Scope>
  /** Events from the moment the stream starts. */
  readonly stream: Stream.Stream<SupervisorEvent>
  /** Call `observer` with every event as it is published, until the caller's scope closes. */
  readonly observe: (observer: (event: SupervisorEvent) => void) => Effect.Effect<void, never, Scope.Scope>
}

/** The supervisor's events, in its scope; `telemetry` turns the metrics on. */
export const make = (
  approvals: Approvals.ApprovalsShape,
  telemetry: boolean
): Effect.Effect<SupervisorEvents, never, Scope.Scope> =>
  Effect.gen(function* () {
    const events = yield* PubSub.unbounded<SupervisorEvent>()
    const instrument = telemetry ? instrumentEvent() : undefined
    if (telemetry) yield* countCards(approvals)
    const runtime = yield* Effect.runtime<never>()
    // An observer must not throw (`SupervisorShape.observe`); if one does, the others and the
    // publisher go on, and the log says so once, after this step.
    const observers = Observers.make<SupervisorEvent>((defect) =>
      Runtime.runFork(runtime)(
        Effect.logError("an observer of supervisor events threw (said once per observer)", Cause.die(defect)),
        { immediate: false }
      )
    )
    return {
      publish: (event) => {
        events.unsafeOffer(event)
        instrument?.(event)
        observers.deliver(event)
      },
      subscribe: PubSub.subscribe(events),
      stream: Stream.fromPubSub(events),
      observe: observers.observe
    }
  })

/** Metrics of the supervisor's own events (telemetry on): restarts, losses, ended work items. Cheap, synchronous. */
const instrumentEvent = () => {
  const bySlot = labelsOf([Attributes.slot])
  const byReason = labelsOf([Attributes.reason])
  const byStatus = labelsOf([Attributes.status])
  return (event: SupervisorEvent): void => {
    switch (event._tag) {
      case "ConnectionRestarting":
        Metrics.restarts.unsafeUpdate(1, bySlot(String(event.slot)))
        return
      case "ConnectionLost":
        Metrics.losses.unsafeUpdate(1, byReason(event.reason._tag))
        return
      case "ItemFinished": {
        const exit = event.exit
        const status = Exit.isSuccess(exit)
          ? exit.value.status
          : exit.cause._tag === "Fail"
            ? exit.cause.error.reason
            : Exit.isInterrupted(exit)
              ? "interrupted"
              : "defect"
        Metrics.workItems.unsafeUpdate(1, byStatus(status))
        return
      }
      default:
        return
    }
  }
}

/**
 * Card metrics (telemetry on), counted from the approval events as they are published
 * (`observeEvents`: a few metric updates, synchronously): the open cards by method, and each
 * settlement's latency and count by method, outcome and source.
 */
const countCards = (approvals: Approvals.ApprovalsShape): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const open = new Map<string, number>()
    const byMethod = labelsOf([Attributes.method])
    const bySettlement = labelsOf([Attributes.method, Attributes.outcome, Attributes.source])
    const gauge = (method: string, delta: number) => {
      const now = Math.max(0, (open.get(method) ?? 0) + delta)
      open.set(method, now)
      Metrics.openCards.unsafeUpdate(now, byMethod(method))
    }
    const count = (event: ApprovalEvent.ApprovalEvent) => {
      if (event._tag === "CardOpened") gauge(event.card.method, 1)
      else if (event._tag === "CardSettled") {
        const { card, outcome, source, latencyMs } = event.settlement
        gauge(card.method, -1)
        const labels = bySettlement(card.method, outcome, Card.describeSource(source))
        Metrics.cardsSettled.unsafeUpdate(1, labels)
        Metrics.cardLatency.unsafeUpdate(latencyMs, labels)
      }
    }
    // Counted in the step that publishes the event (no fiber woken per event). The supervisor's
    // close settles the cards still open (shutdown) just before this scope closes: counted too.
    yield* approvals.observeEvents(count)
  })
