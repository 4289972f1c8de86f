/**
 * The card race: a decision (rule, handler, person) against the deadline against the closing of
 * the card's parent scope (its thread). Whatever wins, `finish` runs once, synchronously: it
 * writes at most one answer, removes the card from every registry (desk, inbox, deadline timer,
 * its parent's cards), publishes the settlement, ends the card's span, and has a handler that is
 * still deciding interrupted.
 *
 * Everything that decides is synchronous on purpose: "at that instant" guarantees (a connection
 * loss leaves no card open) cannot hold if settling had to wait for a fiber.
 *
 * A waiting card holds no fiber, scope or timer of its own: the desk's `DeadlineTimer` keeps every
 * deadline with one fiber, and a parent scope settles its cards with one finalizer
 * (`ParentCards`). Only a handler runs in a fiber of its own (never on the read loop; interrupted when its card settles).
 * So 10,000 open cards cost memory, not fibers, and settling them all (a connection loss) is a
 * loop of synchronous steps with nothing left to interrupt (measured in bench/, issue 8).
 */
import type { Decision as DecisionNs, ServerRequests } from "@warden/protocol"
import { Decision, ServerRequests as SR } from "@warden/protocol"
import { Cause, Clock, Duration, Effect, Either, Exit, Fiber, Scope } from "effect"
import type { Tracer } from "effect"
import type { ApprovalEvent } from "../ApprovalEvent.js"
import type { CardView, Outcome, Settlement, Source } from "../Card.js"
import { describeSource } from "../Card.js"
import type { DeadlineTimer } from "../DeadlineTimer.js"

/** Where a card's answer goes, written synchronously without blocking (false when nothing could be written). */
export interface Line {
  readonly write: (frame: Record<string, unknown>) => boolean
  readonly isOpen: () => boolean
}

/** Why a card closed before a decision. */
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
  /** Fork an effect into a long-lived owner (never a root fiber nobody owns), after the caller's step. */
  readonly fork: (effect: Effect.Effect<void>) => void
}

/**
 * A program that decides cards, given each card's masked view.
 *
 * It returns the decision, or `undefined` for no opinion (a person through `answer`, or the
 * deadline, decides then).
 *
 * It is called in a fiber of its own, never on the connection's read loop, after the rules and
 * the safety filter, and is interrupted when its card settles without it. A Promise is accepted as
 * well as an Effect. A failure, a defect, a synchronous throw, a rejection, or a return that is
 * neither an Effect nor a Promise refuses that card alone (outcome `refused`, source `handler`);
 * one that never returns leaves the card to its deadline or its thread's close.
 *
 * @example
 * ```ts
 * const handler: Approvals.Handler = (card) =>
 *   Effect.succeed(card.summary.kind === "command" && card.summary.argv?.[0] === "echo" ? Decision.Accept : undefined)
 * ```
 */
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
  /** What to undo when the card settles: its deadline, its parent's entry, its span. */
  private cleanups: Array<() => void> | undefined
  /** The handler's fiber while it is deciding. */
  private handler: Fiber.RuntimeFiber<void> | undefined

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

  /** Run `cleanup` when the card settles (at once if it already has). */
  onSettle(cleanup: () => void): void {
    if (this.result) cleanup()
    else (this.cleanups ??= []).push(cleanup)
  }

  /** The handler's fiber: interrupted if the card settles while it still runs. */
  attachHandler(fiber: Fiber.RuntimeFiber<void>): void {
    if (this.result) this.hooks.fork(Effect.asVoid(Fiber.interrupt(fiber)))
    else this.handler = fiber
  }

  /** The handler is done deciding (its fiber is about to end): nothing to interrupt. */
  detachHandler(): void {
    this.handler = undefined
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
    // An answer that cannot be written (a BigInt or a cycle in a form's content) is refused here,
    // where the decision is known, not found later by the writer.
    let text: string
    try {
      text = JSON.stringify(encoded.right)
    } catch (error) {
      return this.refuse("refused", source, `the decision cannot be written as JSON: ${error instanceof Error ? error.message : String(error)}`, Decision.describe(decision))
    }
    const outcome = outcomeOf(decision)
    const saysNo = outcome === "accepted" && text === JSON.stringify(SR.refusalFor(request))
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
    const cleanups = this.cleanups
    this.cleanups = undefined
    // Whatever a cleanup does (a tracer ending the span is the embedder's code), the card leaves
    // every registry and its settlement is published: a throw here is reported, not propagated.
    if (cleanups) for (const cleanup of cleanups) guarded(cleanup, this.hooks)
    guarded(() => this.hooks.onSettled(this, settlement), this.hooks)
    this.hooks.publish({ _tag: "CardSettled", settlement })
    const handler = this.handler
    this.handler = undefined
    if (handler) this.hooks.fork(Effect.asVoid(Fiber.interrupt(handler)))
    return settlement
  }
}

const guarded = (run: () => void, hooks: CardHooks): void => {
  try {
    run()
  } catch (defect) {
    hooks.fork(Effect.logError("a card's settlement step threw", Cause.die(defect)))
  }
}

/** What a handler's exit means for the card: its decision, no opinion, or a refusal. */
const settleFromHandler = (card: LiveCard, exit: Exit.Exit<DecisionNs.Decision | undefined, unknown>): void => {
  if (Exit.isSuccess(exit)) {
    if (exit.value !== undefined) card.decide(exit.value, { _tag: "Handler" })
    return
  }
  if (Exit.isInterrupted(exit) && card.settlement) return
  // A handler that fails or dies is a refusal, never a silent hang.
  card.refuse("refused", { _tag: "Handler" }, `the handler failed: ${Cause.pretty(exit.cause).split("\n")[0]}`)
}

// Card spans capture no call-site stack trace: it would always point here, and capturing it (an
// Error per span, formatted whenever a span ends failed or interrupted) was a measurable share of
// each card's cost (bench/, issue 8).
const spanOptions = (card: LiveCard) => ({ attributes: cardAttributes(card), captureStackTrace: false })

/**
 * A desk's registry of cards by parent scope: the first card under a parent adds ONE finalizer to
 * it, which settles that parent's open cards when it closes (the thread stopped, the supervisor
 * shuts down). A settled card leaves the registry at once.
 */
export interface ParentCards {
  readonly add: (parent: Scope.Scope, card: LiveCard, reason: CloseReason) => Effect.Effect<void>
}

export const parentCards = (): ParentCards => {
  const byParent = new WeakMap<Scope.Scope, Map<LiveCard, CloseReason>>()
  return {
    add: (parent, card, reason) =>
      Effect.suspend(() => {
        let cards = byParent.get(parent)
        const first = cards === undefined
        if (cards === undefined) {
          cards = new Map()
          byParent.set(parent, cards)
        }
        const mine = cards
        mine.set(card, reason)
        card.onSettle(() => mine.delete(card))
        if (!first) return Effect.void
        // Added to a scope that is already closed, a finalizer runs at once: the card settles.
        return Scope.addFinalizer(parent, Effect.sync(() => {
          byParent.delete(parent) // a card opened under it later settles at once (see above)
          for (const [open, why] of Array.from(mine)) open.close(why)
        }))
      })
  }
}

export interface RaceOptions {
  readonly deadline: Duration.Duration
  readonly handler: Handler | undefined
  readonly onParentClose: CloseReason
  /** The desk's deadlines. */
  readonly timer: DeadlineTimer
  /** The desk's cards by parent scope. */
  readonly parents: ParentCards
  /** The card's span, when the desk made it already (telemetry on: a child of its turn's span). */
  readonly span?: Tracer.Span | undefined
}

/**
 * Start the race for a card whose rules and filters did not already decide: the deadline (the
 * desk's timer), the closing of `parent` (the desk's parent registry) and, while it decides, the
 * handler.
 *
 * Nothing of the handler runs here (this is called from the connection's read loop): it is
 * called inside its own fiber, so a handler that throws, returns something that is
 * not an Effect or a Promise, dies, blocks, or never returns costs only its card (refused, or
 * settled by the deadline or the parent's close), never the loop.
 */
export const race = (card: LiveCard, parent: Scope.Scope, options: RaceOptions): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (card.settlement) return
    // The card's span lasts from here to its settlement.
    const span = options.span ?? (yield* startSpan(card, undefined))

    card.onSettle(options.timer.add(options.deadline, () => {
      card.refuse("timeout", { _tag: "Deadline" }, `no decision within ${Duration.format(options.deadline)}`)
    }))
    yield* options.parents.add(parent, card, options.onParentClose)

    const handler = options.handler
    if (handler && !card.settlement) {
      const fiber = yield* Effect.suspend(() => decisionOf(handler(card.view))).pipe(
        Effect.withSpan("warden.card.handler", { ...spanOptions(card), parent: span }),
        Effect.exit,
        Effect.flatMap((exit) =>
          Effect.sync(() => {
            card.detachHandler()
            settleFromHandler(card, exit)
          })
        ),
        Effect.interruptible,
        // Not in `parent`: closing a scope waits for its fibers, and a handler that will not be
        // interrupted (an uninterruptible region that never ends) would wedge the thread's close.
        // Its life is bounded by its card instead: whatever settles the card (a decision, the
        // deadline, the parent's close, the connection's end) interrupts it, and nobody waits.
        Effect.forkDaemon
      )
      card.attachHandler(fiber)
    }
  })

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function"

/**
 * What a handler returned, as an effect: an Effect as it is, a Promise awaited (its rejection is
 * a failure); anything else is a failure that names what came back (a refusal, never a hang).
 */
const decisionOf = (returned: unknown): Effect.Effect<DecisionNs.Decision | undefined, unknown> => {
  if (Effect.isEffect(returned)) return returned as Effect.Effect<DecisionNs.Decision | undefined, unknown>
  if (isPromiseLike(returned)) {
    return Effect.tryPromise({ try: () => Promise.resolve(returned) as Promise<DecisionNs.Decision | undefined>, catch: (error) => error })
  }
  return Effect.fail(`the handler returned ${returned === null ? "null" : typeof returned}, not an Effect or a Promise`)
}

/**
 * Open the card's span (`warden.card`), ended when the card settles.
 *
 * Without a `parent` (telemetry off) the span is a child of the caller's and only says the
 * outcome, ended synchronously in the settlement. With one (the turn's span, telemetry on) and
 * `fork`, the settlement is described on it (source, decision, latency, whether the answer was
 * written, the card's kind and masked title: never the request itself) and a log record is written
 * in it, by a fiber of `fork`'s, off the read loop: building the masked summary of a large patch
 * and running the logger are not the loop's work. The span's end time is the settlement's.
 */
export const startSpan = (
  card: LiveCard,
  parent: Tracer.AnySpan | undefined,
  fork?: (effect: Effect.Effect<void>) => void
): Effect.Effect<Tracer.Span> =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const span = yield* Effect.makeSpan("warden.card", parent === undefined ? spanOptions(card) : { ...spanOptions(card), parent })
    card.onSettle(() => {
      const settlement = card.settlement
      span.attribute("warden.outcome", settlement?.outcome ?? "")
      const endTime = clock.unsafeCurrentTimeNanos()
      if (parent === undefined || fork === undefined || settlement === undefined) return span.end(endTime, Exit.void)
      fork(describeSettled(card, settlement, span, endTime))
    })
    return span
  })

/** A settled card's span described and ended, and its log record written (telemetry on; its own fiber). */
const describeSettled = (card: LiveCard, settlement: Settlement, span: Tracer.Span, endTime: bigint): Effect.Effect<void> =>
  Effect.suspend(() => {
    const source = describeSource(settlement.source)
    span.attribute("warden.source", source)
    if (settlement.decision !== undefined) span.attribute("warden.decision", settlement.decision)
    span.attribute("warden.latency_ms", settlement.latencyMs)
    span.attribute("warden.written", settlement.written)
    // The masked summary (built once, shared with the board, the audit and the ledger).
    span.attribute("warden.card.kind", card.view.summary.kind)
    span.attribute("warden.card.title", card.view.title)
    if (card.view.workItem !== undefined) span.attribute("warden.item", String(card.view.workItem))
    span.end(endTime, Exit.void)
    return Effect.logInfo(`card ${settlement.outcome}`).pipe(
      Effect.annotateLogs({
        cardId: card.view.id,
        method: card.view.method,
        threadId: card.view.threadId ?? "",
        turnId: card.view.turnId ?? "",
        outcome: settlement.outcome,
        source
      }),
      Effect.withParentSpan(span)
    )
  })

const cardAttributes = (card: LiveCard) => ({
  "warden.card_id": card.view.id,
  "warden.method": card.view.method,
  "warden.thread_id": card.view.threadId ?? "",
  "warden.turn_id": card.view.turnId ?? ""
})

export const sourceLabel = describeSource
export const nowFrom = (clock: Clock.Clock) => () => clock.unsafeCurrentTimeMillis()
