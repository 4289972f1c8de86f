/**
 * The card race: a decision (rule, handler, person) against the deadline against the closing of
 * the card's scope. Whatever wins, `settle` runs once, synchronously: it writes at most one
 * answer, removes the card from every registry, publishes the settlement, and schedules the card
 * scope's close (which interrupts the handler and the deadline).
 *
 * Everything that decides is synchronous on purpose: "at that instant" guarantees (a connection
 * loss leaves no card open) cannot hold if settling had to wait for a fiber.
 */
import type { Decision as DecisionNs, ServerRequests } from "@warden/protocol"
import { Decision, ServerRequests as SR } from "@warden/protocol"
import { Cause, Clock, Duration, Effect, Either, ExecutionStrategy, Exit, Scope } from "effect"
import type { ApprovalEvent } from "./ApprovalEvent.js"
import type { CardView, Outcome, Settlement, Source } from "./Card.js"
import { describeSource } from "./Card.js"

/** Where answers go: a synchronous, non-blocking write; false when nothing could be written. */
export interface Line {
  readonly write: (frame: Record<string, unknown>) => boolean
  readonly isOpen: () => boolean
}

/** Why a card's scope closed before a decision. */
export type CloseReason =
  | { readonly _tag: "Withdrawn" }
  | { readonly _tag: "ConnectionLost"; readonly detail: string }
  | { readonly _tag: "ThreadStopped" }
  | { readonly _tag: "TurnEnded" }
  | { readonly _tag: "Shutdown" }

/** Shared bookkeeping the card reports to (the desk and the supervisor-wide inbox). */
export interface CardHooks {
  readonly onSettled: (card: LiveCard, settlement: Settlement) => void
  readonly publish: (event: ApprovalEvent) => void
  /** Fork an effect into a long-lived owner (never a root fiber nobody owns). */
  readonly fork: (effect: Effect.Effect<void>) => void
}

export type Handler = (card: CardView) => Effect.Effect<DecisionNs.Decision | undefined, unknown>

const outcomeOf = (decision: DecisionNs.Decision): Outcome => {
  switch (decision._tag) {
    case "Decline":
      return "declined"
    case "Cancel":
      return "cancelled"
    case "Elicitation":
      return decision.action === "accept" ? "accepted" : decision.action === "decline" ? "declined" : "cancelled"
    case "ApplyNetworkPolicyAmendment":
      return decision.action === "allow" ? "accepted" : "declined"
    default:
      return Decision.isAcceptance(decision) ? "accepted" : "declined"
  }
}

export class LiveCard {
  private result: Settlement | undefined
  private scope: Scope.CloseableScope | undefined

  constructor(
    readonly view: CardView,
    readonly request: ServerRequests.DecodedRequest,
    private readonly line: Line,
    private readonly hooks: CardHooks,
    private readonly now: () => number
  ) {}

  get settlement(): Settlement | undefined {
    return this.result
  }

  attachScope(scope: Scope.CloseableScope): void {
    this.scope = scope
  }

  /**
   * A decision from a rule, handler or person. Returns the settlement (this one, or the one that
   * had already won, in which case the decision is reported late and nothing is written).
   */
  decide(decision: DecisionNs.Decision, source: Source): Settlement {
    if (this.result) {
      this.hooks.publish({
        _tag: "LateDecision",
        card: this.view,
        decision: Decision.describe(decision),
        source,
        outcome: this.result.outcome,
        at: this.now()
      })
      return this.result
    }
    const request = this.request
    if (request._tag !== "Known") {
      return this.refuse("refused", source, `${request.method} cannot be answered here`, Decision.describe(decision))
    }
    const encoded = SR.answerFor(request, decision)
    if (Either.isLeft(encoded)) {
      // Refused, not coerced: the nearest expressible word is still not what was decided.
      return this.refuse("refused", source, encoded.left, Decision.describe(decision))
    }
    // An answer that says exactly what the refusal says (an empty grant, no answers) is a refusal,
    // whatever word produced it: the audit must not record it as an acceptance.
    const outcome = outcomeOf(decision)
    const saysNo = outcome === "accepted" && JSON.stringify(encoded.right) === JSON.stringify(SR.refusalFor(request))
    return this.finish(saysNo ? "declined" : outcome, source, encoded.right, Decision.describe(decision), undefined)
  }

  /** Settle with this method's refusal (written only if the line can carry it). */
  refuse(outcome: Outcome, source: Source, detail: string | undefined, decision?: string): Settlement {
    return this.finish(outcome, source, SR.refusalFor(this.request), decision, detail)
  }

  /** The card's scope closed before a decision. */
  close(reason: CloseReason): Settlement {
    if (this.result) return this.result
    switch (reason._tag) {
      case "Withdrawn":
        // The server already moved on (serverRequest/resolved): an answer now would be noise.
        return this.finish("withdrawn", { _tag: "Withdrawn" }, undefined, undefined, "withdrawn by the server")
      case "ConnectionLost":
        return this.finish("connection-lost", { _tag: "ConnectionLost", detail: reason.detail }, undefined, undefined, reason.detail)
      case "ThreadStopped":
        return this.refuse("refused", { _tag: "ThreadStopped" }, "the thread was stopped")
      case "TurnEnded":
        return this.refuse("refused", { _tag: "TurnEnded" }, "the turn ended")
      case "Shutdown":
        return this.refuse("shutdown", { _tag: "Shutdown" }, "the supervisor is shutting down")
    }
  }

  private finish(
    outcome: Outcome,
    source: Source,
    reply: ServerRequests.Reply | undefined,
    decision: string | undefined,
    detail: string | undefined
  ): Settlement {
    if (this.result) return this.result
    let written = false
    let finalOutcome = outcome
    let finalDetail = detail
    if (reply !== undefined) {
      if (this.line.isOpen() && this.line.write(SR.replyFrame(this.view.requestId, reply))) {
        written = true
      } else {
        // Nothing can be written on a dead line; the card still settles so nobody waits on it.
        finalOutcome = "connection-lost"
        finalDetail = detail ? `${detail}; the connection could not carry the answer` : "the connection could not carry the answer"
      }
    }
    const settledAt = this.now()
    const settlement: Settlement = {
      card: this.view,
      outcome: finalOutcome,
      source,
      decision,
      reply: written ? reply : undefined,
      written,
      detail: finalDetail,
      settledAt,
      latencyMs: Math.max(0, settledAt - this.view.openedAt)
    }
    this.result = settlement
    this.hooks.onSettled(this, settlement)
    this.hooks.publish({ _tag: "CardSettled", settlement })
    const scope = this.scope
    if (scope) this.hooks.fork(Scope.close(scope, Exit.void))
    return settlement
  }
}

/**
 * Start the race for a card whose rules and filters did not already decide: the optional handler
 * and the deadline run as fibers in the card's own scope (a child of `parent`). Closing `parent`
 * (thread stop, shutdown) settles the card through the scope's finalizer.
 */
export const race = (
  card: LiveCard,
  parent: Scope.Scope,
  options: { readonly deadline: Duration.Duration; readonly handler: Handler | undefined; readonly onParentClose: CloseReason }
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const scope = yield* Scope.fork(parent, ExecutionStrategy.sequential)
    card.attachScope(scope)
    yield* Scope.addFinalizer(scope, Effect.sync(() => card.close(options.onParentClose)))

    // Card spans capture no call-site stack trace: it would always point here, and capturing it
    // (an Error per span, formatted when the span ends interrupted, as the deadline's span does
    // whenever a decision wins) was a measurable share of each card's cost (bench/, issue 8).

    const deadline = Effect.sleep(options.deadline).pipe(
      Effect.zipRight(Effect.sync(() => card.refuse("timeout", { _tag: "Deadline" }, `no decision within ${Duration.format(options.deadline)}`)))
    )
    yield* deadline.pipe(
      Effect.withSpan("warden.card", { attributes: cardAttributes(card), captureStackTrace: false }),
      Effect.annotateLogs({ cardId: card.view.id, method: card.view.method, threadId: card.view.threadId ?? "" }),
      Effect.interruptible,
      Effect.forkIn(scope)
    )

    const handler = options.handler
    if (handler) {
      yield* Effect.suspend(() => handler(card.view)).pipe(
        Effect.withSpan("warden.card.handler", { attributes: cardAttributes(card), captureStackTrace: false }),
        Effect.exit,
        Effect.flatMap((exit) =>
          Effect.sync(() => {
            if (Exit.isSuccess(exit)) {
              if (exit.value !== undefined) card.decide(exit.value, { _tag: "Handler" })
              return
            }
            if (Exit.isInterrupted(exit) && card.settlement) return
            // A handler that fails or dies is a refusal, never a silent hang.
            card.refuse("refused", { _tag: "Handler" }, `the handler failed: ${Cause.pretty(exit.cause).split("\n")[0]}`)
          })
        ),
        Effect.interruptible,
        Effect.forkIn(scope)
      )
    }
    // If something settled the card while we were setting up, its scope close was scheduled
    // before the scope was attached: close it now.
    if (card.settlement) yield* Scope.close(scope, Exit.void)
  })

const cardAttributes = (card: LiveCard) => ({
  "warden.card_id": card.view.id,
  "warden.method": card.view.method,
  "warden.thread_id": card.view.threadId ?? "",
  "warden.turn_id": card.view.turnId ?? ""
})

export const sourceLabel = describeSource
export const nowFrom = (clock: Clock.Clock) => () => clock.unsafeCurrentTimeMillis()
