/**
 * A pending card: one server request waiting for its decision, and how it settles. A decision
 * (rule, handler, person), its deadline, its withdrawal, the close of its parent scope (its
 * thread) or the end of its connection settles it; whatever comes first, `finish` runs once,
 * synchronously: it writes at most one answer, takes the card out of every registry (its
 * connection's open cards, the engine's, the deadline timer, its parent's list), publishes the
 * settlement, ends the card's span, and has a handler that is still deciding interrupted.
 *
 * Everything that settles is synchronous on purpose: "at that instant" guarantees (a connection
 * loss leaves no card open) cannot hold if settling had to wait for a fiber.
 *
 * A pending card holds no fiber, scope or timer of its own: the connection's `DeadlineTimer`
 * keeps every deadline with one fiber, and a parent scope settles its cards with one finalizer
 * (`ParentCards`). Only a handler runs in a fiber of its own (`HandlerPool`: never on the read
 * loop; interrupted when its card settles), and only when what it returned has something left to
 * run. So 10,000 open cards cost memory, not fibers, and settling them all (a connection loss) is
 * a loop of synchronous steps with nothing left to interrupt (measured in bench/).
 *
 * A card is one object (`PendingCard`) and its view: it is its own deadline entry and its own
 * link in its parent's list, and what every card of a connection shares (the line, the
 * registries, the timer) is one object per connection (`ConnectionShared`), so an open card
 * allocates no closure, array or map of its own. A card gets a span only when someone can see it
 * (`CardSpans`).
 */
import type { Decision as DecisionNs, ServerRequests } from "@warden/protocol"
import { Decision, ServerRequests as SR } from "@warden/protocol"
import { Cause, Duration, Effect, Either, Exit, FiberId } from "effect"
import type { Chunk, Clock, Fiber, HashMap, Option, Tracer } from "effect"
import type { ApprovalEvent } from "../ApprovalEvent.js"
import type { CloseReason, Line } from "../Approvals.js"
import type { CardContext, CardSummary as CardSummaryT, CardView, Outcome, Settlement, Source } from "../Card.js"
import type { DeadlineTimer } from "../DeadlineTimer.js"
import { Timed } from "../DeadlineTimer.js"
import type { Describer, LogContext } from "./CardSpans.js"
import { endSpan } from "./CardSpans.js"
import * as CardSummary from "./CardSummary.js"
import { outcomeOf } from "./Outcomes.js"
import type { ParentGroup } from "./ParentCards.js"
import { unlinkParent } from "./ParentCards.js"

/**
 * What every card of one connection shares: one object per connection, so that a card holds one
 * reference instead of a closure per hook.
 */
export interface ConnectionShared {
  readonly line: Line
  /** Wall-clock time (epoch milliseconds): what cards show. */
  readonly now: () => number
  /** The connection's deadlines (a card is its own entry). */
  readonly timer: DeadlineTimer
  /** The card settled: it leaves the connection's open cards and the engine's. */
  readonly onSettled: (card: PendingCard) => void
  readonly publish: (event: ApprovalEvent) => void
  /** An answer is about to be written (`ApprovalsShape.observeAnswers`); never throws. */
  readonly answering: (card: CardView, outcome: Outcome, source: Source, decision: string | undefined) => void
  /** Fork an effect into a long-lived owner (never a root fiber nobody owns), after the caller's step. */
  readonly fork: (effect: Effect.Effect<void>) => void
}

/** A card's view: its own accessors `summary` and `title` build the masked summary on first read. */
class View implements CardView {
  readonly id: CardView["id"]
  readonly requestId: CardView["requestId"]
  readonly method: string
  readonly threadId: string | undefined
  readonly turnId: string | undefined
  readonly workItem: string | number | undefined
  declare readonly summary: CardSummaryT
  declare readonly title: string
  // Assigned after `summary` and `title` are defined, so the keys keep the order they always had.
  declare readonly offers: CardView["offers"]
  declare readonly openedAt: number
  declare readonly deadlineAt: number
  // The request and context, for the summary only: a view (kept in the settled history) holds
  // nothing of the connection.
  readonly #request: ServerRequests.DecodedRequest
  readonly #context: CardContext
  #summarized: CardSummary.Summarized | undefined

  constructor(
    id: CardView["id"],
    request: ServerRequests.DecodedRequest,
    context: CardContext,
    offers: CardView["offers"],
    openedAt: number,
    deadlineAt: number,
    summarized?: CardSummary.Summarized
  ) {
    this.id = id
    this.requestId = request.id
    this.method = request.method
    this.threadId = SR.threadIdFor(request)
    this.turnId = SR.turnIdFor(request)
    this.workItem = context.workItem
    this.#request = request
    this.#context = context
    this.#summarized = summarized
    // Own, enumerable accessors (as an object literal's getters were: JSON, spreads and
    // Object.keys see `summary` and `title`), shared by every view so the object stays compact.
    Object.defineProperty(this, "summary", summaryProperty)
    Object.defineProperty(this, "title", titleProperty)
    ;(this as { offers: CardView["offers"] }).offers = offers
    ;(this as { openedAt: number }).openedAt = openedAt
    ;(this as { deadlineAt: number }).deadlineAt = deadlineAt
  }

  /** The masked summary, built once, on first read (an inbox, the audit, a UI, a handler that looks). */
  static summarized(view: View): CardSummary.Summarized {
    return (view.#summarized ??= CardSummary.summarize(view.#request, view.#context))
  }

  /** The masked summary if it was made already (`Card.portable` carries it), else undefined. */
  static made(view: View): CardSummary.Summarized | undefined {
    return view.#summarized
  }

  /** What its summary is made from (`Card.portable`). */
  static request(view: View): ServerRequests.DecodedRequest {
    return view.#request
  }

  static context(view: View): CardContext {
    return view.#context
  }
}

/** What `Card.portable` makes: a view's data, with what its summary is made from (see there). */
export type PortableCard = {
  readonly id: CardView["id"]
  readonly openedAt: number
  readonly deadlineAt: number
  readonly offers: CardView["offers"]
} & (
  | {
      readonly _tag: "Request"
      readonly request: ServerRequests.DecodedRequest
      readonly context: CardContext
      /** The masked summary and title, when the view had made them before it was copied. */
      readonly summarized?: { readonly summary: CardSummaryT; readonly title: string }
    }
  | {
      readonly _tag: "View"
      readonly requestId: CardView["requestId"]
      readonly method: string
      readonly threadId: string | undefined
      readonly turnId: string | undefined
      readonly workItem: string | number | undefined
      readonly summary: CardSummaryT
      readonly title: string
    }
)

/** See `Card.portable`. */
export const portableCard = (view: CardView): PortableCard => {
  if (view instanceof View) {
    const made = View.made(view)
    return {
      _tag: "Request",
      id: view.id,
      openedAt: view.openedAt,
      deadlineAt: view.deadlineAt,
      offers: view.offers,
      request: View.request(view),
      context: View.context(view),
      ...(made !== undefined ? { summarized: made } : {})
    }
  }
  return {
    _tag: "View",
    id: view.id,
    openedAt: view.openedAt,
    deadlineAt: view.deadlineAt,
    offers: [...view.offers],
    requestId: view.requestId,
    method: view.method,
    threadId: view.threadId,
    turnId: view.turnId,
    workItem: view.workItem,
    summary: view.summary,
    title: view.title
  }
}

/** See `Card.fromPortable`. */
export const cardFromPortable = (card: PortableCard): CardView =>
  card._tag === "Request"
    ? new View(card.id, card.request, card.context, card.offers, card.openedAt, card.deadlineAt, card.summarized)
    : {
        id: card.id,
        requestId: card.requestId,
        method: card.method,
        threadId: card.threadId,
        turnId: card.turnId,
        workItem: card.workItem,
        summary: card.summary,
        title: card.title,
        offers: card.offers,
        openedAt: card.openedAt,
        deadlineAt: card.deadlineAt
      }

const summaryProperty: PropertyDescriptor = {
  get(this: View) {
    return View.summarized(this).summary
  },
  enumerable: true,
  configurable: true
}
const titleProperty: PropertyDescriptor = {
  get(this: View) {
    return View.summarized(this).title
  },
  enumerable: true,
  configurable: true
}

/** The offers of a card, shared between cards that offer the same (a handful of distinct lists). */
const offerLists: Array<ReadonlyArray<DecisionNs.DecisionTag>> = []
const sharedOffers = (offers: ReadonlyArray<DecisionNs.DecisionTag>): ReadonlyArray<DecisionNs.DecisionTag> => {
  for (const known of offerLists) {
    if (known.length === offers.length && known.every((tag, i) => tag === offers[i])) return known
  }
  const kept = Object.freeze([...offers])
  if (offerLists.length < 64) offerLists.push(kept)
  return kept
}
const declineOnly: ReadonlyArray<DecisionNs.DecisionTag> = Object.freeze(["Decline"])

const DeadlineSource: Source = { _tag: "Deadline" }
const HandlerSource: Source = { _tag: "Handler" }

/**
 * A card's span (only for cards that have one): what makes it, and the clock that ends it. With
 * telemetry (a `describer`) it is made when first needed (`CardSpans.cardSpan`), at the time the
 * card opened: by its describer after it settled, in a batch, or when a handler's span needs it
 * as a parent; without, when the card opens.
 */
export interface SpanState {
  span: Tracer.Span | undefined
  /** Its parent: the turn's span with telemetry, else the caller's (or none). */
  readonly parent: Option.Option<Tracer.AnySpan>
  readonly startTime: bigint
  readonly clock: Clock.Clock
  /** The tracer that makes it (its handler's span is made by the same). */
  readonly tracer: Tracer.Tracer
  /** Telemetry on: what describes the settlement on the span, off the read loop. */
  readonly describer: Describer | undefined
  /** What was in force in the fiber that opened the card (its handler's span takes them too). */
  readonly ambient: {
    /** With telemetry: what its log records are written with (its loggers, annotations...: `CardSpans.logContextOf`). */
    readonly log: LogContext | undefined
    readonly annotations: HashMap.HashMap<string, unknown>
    readonly links: Chunk.Chunk<Tracer.SpanLink>
    readonly timing: boolean
  }
  /**
   * Telemetry on: a handler that answered at once (no fiber), when and how; its span is made,
   * started and ended at that time, with the card's by the describer.
   */
  answered: { readonly at: bigint; readonly exit: Exit.Exit<unknown, unknown> } | undefined
}

/**
 * One pending card: its view, its settlement once settled, and the links the deadline timer and
 * its parent's list keep in it. `decide`, `refuse` and `close` settle it (the first wins: a later
 * decision is reported late, never written); `attachHandler` and `handlerEnded` tie it to its
 * handler's fiber.
 */
export class PendingCard extends Timed {
  readonly view: CardView
  private result: Settlement | undefined = undefined
  /** The handler's fiber while it is deciding. */
  private handler: Fiber.RuntimeFiber<unknown, unknown> | undefined = undefined
  private spanState: SpanState | undefined = undefined
  /** Its parent's list of open cards (see `parentCards`), and why closing that parent closes it. */
  parentGroup: ParentGroup | undefined = undefined
  parentPrev: PendingCard | undefined = undefined
  parentNext: PendingCard | undefined = undefined
  closeReason: CloseReason | undefined = undefined

  constructor(
    private readonly connection: ConnectionShared,
    readonly request: ServerRequests.DecodedRequest,
    context: CardContext,
    id: CardView["id"],
    /** How long it waits (the timeout's detail names it). */
    readonly deadline: Duration.Duration
  ) {
    super()
    const openedAt = connection.now()
    this.view = new View(
      id,
      request,
      context,
      request._tag === "Known" ? sharedOffers(SR.offersFor(request)) : declineOnly,
      openedAt,
      openedAt + Duration.toMillis(deadline)
    )
  }

  get settlement(): Settlement | undefined {
    return this.result
  }

  /** The card's span (made now or later: `SpanState`), ended (or described) when it settles. */
  attachSpan(state: SpanState): void {
    this.spanState = state
  }

  /** Its span's clock and tracer, while its span is open. */
  spanParts(): SpanState | undefined {
    return this.spanState
  }

  /** The handler's fiber: interrupted if the card settles while it still runs. */
  attachHandler(fiber: Fiber.RuntimeFiber<unknown, unknown>): void {
    if (this.result) fiber.unsafeInterruptAsFork(FiberId.none)
    else this.handler = fiber
  }

  /** The handler's fiber ended: what its exit means for the card (a decision, no opinion, a refusal). */
  handlerEnded(exit: Exit.Exit<DecisionNs.Decision | undefined, unknown>): void {
    this.handler = undefined // nothing to interrupt any more
    try {
      settleFromHandler(this, exit)
    } catch (defect) {
      // Settling is ours and does not throw; if it did, the card must not be left open.
      this.connection.fork(Effect.logError("settling a handler's decision threw", Cause.die(defect)))
      this.refuse("refused", HandlerSource, "the handler's decision could not be settled")
    }
  }

  /** The deadline passed (called by the connection's timer). */
  override onDeadline(): void {
    this.refuse("timeout", DeadlineSource, `no decision within ${Duration.format(this.deadline)}`)
  }

  /**
   * A decision from a rule, handler or person. Returns the settlement (this one, or the one that
   * had already won, in which case the decision is reported late and nothing is written).
   */
  decide(decision: DecisionNs.Decision, source: Source): Settlement {
    if (this.result) {
      this.connection.publish({
        _tag: "LateDecision",
        card: this.view,
        decision: Decision.describe(decision),
        source,
        outcome: this.result.outcome,
        at: this.connection.now()
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
      return this.refuse(
        "refused",
        source,
        `the decision cannot be written as JSON: ${error instanceof Error ? error.message : String(error)}`,
        Decision.describe(decision)
      )
    }
    const outcome = outcomeOf(decision)
    const saysNo = outcome === "accepted" && text === refusalText(request)
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
        return this.finish(
          "connection-lost",
          { _tag: "ConnectionLost", detail: reason.detail },
          undefined,
          undefined,
          reason.detail
        )
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
    const connection = this.connection
    let written = false
    let finalOutcome = outcome
    let finalDetail = detail
    if (reply !== undefined) {
      // On record (the ledger's answer journal) before codex can act on it.
      const open = connection.line.isOpen()
      if (open) connection.answering(this.view, outcome, source, decision)
      if (open && connection.line.write(SR.replyFrame(this.view.requestId, reply))) {
        written = true
      } else {
        // Nothing can be written on a dead line; the card still settles so nobody waits on it.
        finalOutcome = "connection-lost"
        finalDetail = detail
          ? `${detail}; the connection could not carry the answer`
          : "the connection could not carry the answer"
      }
    }
    const settledAt = connection.now()
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
    // It leaves every registry: its deadline, its parent's list (ours, they cannot throw), then
    // its span, the connection's open cards and the engine's. Whatever a step does (a tracer ending the span is the
    // embedder's code), the card leaves every registry and its settlement is published: a throw
    // here is reported, not propagated.
    connection.timer.cancel(this)
    unlinkParent(this)
    const spanState = this.spanState
    if (spanState !== undefined) {
      this.spanState = undefined
      guarded(() => endSpan(this, settlement, spanState), connection)
    }
    guarded(() => connection.onSettled(this), connection)
    connection.publish({ _tag: "CardSettled", settlement })
    const handler = this.handler
    this.handler = undefined
    // An interruption signal, sent now; nobody waits for the handler to end.
    if (handler) handler.unsafeInterruptAsFork(FiberId.none)
    return settlement
  }
}

/** The refusal of a known or malformed request as JSON, once per method (it never changes). */
const refusalTexts = new Map<string, string>()
const refusalText = (request: ServerRequests.DecodedRequest): string => {
  if (request._tag === "Unknown") return JSON.stringify(SR.refusalFor(request))
  let text = refusalTexts.get(request.method)
  if (text === undefined) {
    text = JSON.stringify(SR.refusalFor(request))
    refusalTexts.set(request.method, text)
  }
  return text
}

const guarded = (run: () => void, connection: ConnectionShared): void => {
  try {
    run()
  } catch (defect) {
    connection.fork(Effect.logError("a card's settlement step threw", Cause.die(defect)))
  }
}

/** What a handler's exit means for the card: its decision, no opinion, or a refusal. */
const settleFromHandler = (card: PendingCard, exit: Exit.Exit<DecisionNs.Decision | undefined, unknown>): void => {
  if (Exit.isSuccess(exit)) {
    if (exit.value !== undefined) card.decide(exit.value, HandlerSource)
    return
  }
  if (Exit.isInterrupted(exit) && card.settlement) return
  // A handler that fails or dies is a refusal, never a silent hang.
  card.refuse("refused", HandlerSource, `the handler failed: ${Cause.pretty(exit.cause).split("\n")[0]}`)
}
