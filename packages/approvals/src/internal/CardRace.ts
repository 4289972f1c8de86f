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
 * (`ParentCards`). Only a handler runs in a fiber of its own (never on the read loop; interrupted
 * when its card settles), and only when what it returned has something left to run.
 * So 10,000 open cards cost memory, not fibers, and settling them all (a connection loss) is a
 * loop of synchronous steps with nothing left to interrupt (measured in bench/, issue 8).
 *
 * A card is one object (`LiveCard`) and its view: it is its own deadline entry and its own link in
 * its parent's list, and what every card of a desk shares (the line, the registries, the timer) is
 * one object per desk (`DeskShared`), so an open card allocates no closure, array or map of its
 * own (issue 14: heap per open card). A card gets a span only when someone can see it: with
 * telemetry (a turn's span to hang it under) or under a tracer other than Effect's built-in one.
 */
import type { Decision as DecisionNs, ServerRequests } from "@warden/protocol"
import { Decision, ServerRequests as SR } from "@warden/protocol"
import { Cause, Clock, Context, DefaultServices, Duration, Effect, Either, Exit, FiberId, Runtime, Scope, Tracer } from "effect"
import type { Fiber, Scheduler } from "effect"
import type { ApprovalEvent } from "../ApprovalEvent.js"
import type { CardContext, CardSummary as CardSummaryT, CardView, Outcome, Settlement, Source } from "../Card.js"
import { describeSource, outcomeOf } from "./Outcomes.js"
import type { DeadlineTimer } from "../DeadlineTimer.js"
import { Timed } from "../DeadlineTimer.js"
import * as CardSummary from "./CardSummary.js"

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

/**
 * What every card of one desk shares: one object per desk, so that a card holds one reference
 * instead of a closure per hook.
 */
export interface DeskShared {
  readonly line: Line
  /** Wall-clock time (epoch milliseconds): what cards show. */
  readonly now: () => number
  /** The desk's deadlines (a card is its own entry). */
  readonly timer: DeadlineTimer
  /** The card settled: leave the desk and the inbox. */
  readonly onSettled: (card: LiveCard) => void
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
 * It is never called on the connection's read loop: it is called after the loop's step (a task of
 * the loop's scheduler), after the rules and the safety filter, and what it returns runs in a fiber
 * of its own, interrupted when its card settles without it. An Effect that is already its own
 * result (`Effect.succeed(…)`, `Effect.fail(…)`) settles the card at once, without a fiber. With
 * telemetry (or an embedder's tracer) the call itself runs in that fiber, in the card's
 * `warden.card.handler` span. A Promise is accepted as well as an Effect. A failure, a defect, a synchronous throw, a rejection, or a return that is
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
    deadlineAt: number
  ) {
    this.id = id
    this.requestId = request.id
    this.method = request.method
    this.threadId = SR.threadIdFor(request)
    this.turnId = SR.turnIdFor(request)
    this.workItem = context.workItem
    this.#request = request
    this.#context = context
    this.#summarized = undefined
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

/** A card's span and the clock that ends it (only for cards that have one). */
interface SpanState {
  readonly span: Tracer.Span
  readonly clock: Clock.Clock
  /** Telemetry on: describe the settlement on the span, by a fiber of `fork`'s. */
  readonly fork: ((effect: Effect.Effect<void>) => void) | undefined
}

export class LiveCard extends Timed {
  readonly view: CardView
  private result: Settlement | undefined = undefined
  /** The handler's fiber while it is deciding. */
  private handler: Fiber.RuntimeFiber<unknown, unknown> | undefined = undefined
  private spanState: SpanState | undefined = undefined
  /** Its parent's list of open cards (see `parentCards`), and why closing that parent closes it. */
  parentGroup: ParentGroup | undefined = undefined
  parentPrev: LiveCard | undefined = undefined
  parentNext: LiveCard | undefined = undefined
  closeReason: CloseReason | undefined = undefined

  constructor(
    private readonly desk: DeskShared,
    readonly request: ServerRequests.DecodedRequest,
    context: CardContext,
    id: CardView["id"],
    /** How long it waits (the timeout's detail names it). */
    readonly deadline: Duration.Duration
  ) {
    super()
    const openedAt = desk.now()
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

  /** The card's span, ended (or described) when it settles. */
  attachSpan(span: Tracer.Span, clock: Clock.Clock, fork: ((effect: Effect.Effect<void>) => void) | undefined): void {
    this.spanState = { span, clock, fork }
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
      this.desk.fork(Effect.logError("settling a handler's decision threw", Cause.die(defect)))
      this.refuse("refused", HandlerSource, "the handler's decision could not be settled")
    }
  }

  /** The deadline passed (called by the desk's timer). */
  override onDeadline(): void {
    this.refuse("timeout", DeadlineSource, `no decision within ${Duration.format(this.deadline)}`)
  }

  /**
   * A decision from a rule, handler or person. Returns the settlement (this one, or the one that
   * had already won, in which case the decision is reported late and nothing is written).
   */
  decide(decision: DecisionNs.Decision, source: Source): Settlement {
    if (this.result) {
      this.desk.publish({
        _tag: "LateDecision",
        card: this.view,
        decision: Decision.describe(decision),
        source,
        outcome: this.result.outcome,
        at: this.desk.now()
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
    const desk = this.desk
    let written = false
    let finalOutcome = outcome
    let finalDetail = detail
    if (reply !== undefined) {
      if (desk.line.isOpen() && desk.line.write(SR.replyFrame(this.view.requestId, reply))) {
        written = true
      } else {
        // Nothing can be written on a dead line; the card still settles so nobody waits on it.
        finalOutcome = "connection-lost"
        finalDetail = detail ? `${detail}; the connection could not carry the answer` : "the connection could not carry the answer"
      }
    }
    const settledAt = desk.now()
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
    // its span, the desk and the inbox. Whatever a step does (a tracer ending the span is the
    // embedder's code), the card leaves every registry and its settlement is published: a throw
    // here is reported, not propagated.
    desk.timer.cancel(this)
    unlinkParent(this)
    const spanState = this.spanState
    if (spanState !== undefined) {
      this.spanState = undefined
      guarded(() => endSpan(this, settlement, spanState), desk)
    }
    guarded(() => desk.onSettled(this), desk)
    desk.publish({ _tag: "CardSettled", settlement })
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

const guarded = (run: () => void, desk: DeskShared): void => {
  try {
    run()
  } catch (defect) {
    desk.fork(Effect.logError("a card's settlement step threw", Cause.die(defect)))
  }
}

/** What a handler's exit means for the card: its decision, no opinion, or a refusal. */
const settleFromHandler = (card: LiveCard, exit: Exit.Exit<DecisionNs.Decision | undefined, unknown>): void => {
  if (Exit.isSuccess(exit)) {
    if (exit.value !== undefined) card.decide(exit.value, HandlerSource)
    return
  }
  if (Exit.isInterrupted(exit) && card.settlement) return
  // A handler that fails or dies is a refusal, never a silent hang.
  card.refuse("refused", HandlerSource, `the handler failed: ${Cause.pretty(exit.cause).split("\n")[0]}`)
}

// Card spans capture no call-site stack trace: it would always point here, and capturing it (an
// Error per span, formatted whenever a span ends failed or interrupted) was a measurable share of
// each card's cost (bench/, issue 8).
const spanOptions = (card: LiveCard) => ({ attributes: cardAttributes(card), captureStackTrace: false })

/** The cards of one parent scope that are still open, in a list through the cards themselves. */
export interface ParentGroup {
  head: LiveCard | undefined
}

const unlinkParent = (card: LiveCard): void => {
  const group = card.parentGroup
  if (group === undefined) return
  const prev = card.parentPrev
  const next = card.parentNext
  if (prev === undefined) group.head = next
  else prev.parentNext = next
  if (next !== undefined) next.parentPrev = prev
  card.parentGroup = undefined
  card.parentPrev = undefined
  card.parentNext = undefined
}

/**
 * A desk's registry of cards by parent scope: the first card under a parent adds ONE finalizer to
 * it, which settles that parent's open cards when it closes (the thread stopped, the supervisor
 * shuts down). A settled card leaves the registry at once.
 */
export interface ParentCards {
  /**
   * Register `card` under `parent` (closing it closes the card with `reason`). Synchronous for
   * every card but a parent's first, for which it returns the effect that adds the finalizer (run
   * it before anything else waits on the card: added to a scope already closed, it settles the
   * card at once).
   */
  readonly add: (parent: Scope.Scope, card: LiveCard, reason: CloseReason) => Effect.Effect<void> | undefined
}

export const parentCards = (): ParentCards => {
  const byParent = new WeakMap<Scope.Scope, ParentGroup>()
  return {
    add: (parent, card, reason) => {
      let group = byParent.get(parent)
      const first = group === undefined
      if (group === undefined) {
        group = { head: undefined }
        byParent.set(parent, group)
      }
      const mine = group
      card.closeReason = reason
      card.parentGroup = mine
      card.parentPrev = undefined
      card.parentNext = mine.head
      if (mine.head !== undefined) mine.head.parentPrev = card
      mine.head = card
      if (!first) return undefined
      // Added to a scope that is already closed, a finalizer runs at once: the card settles.
      return Scope.addFinalizer(parent, Effect.sync(() => {
        byParent.delete(parent) // a card opened under it later settles at once (see above)
        const open: Array<LiveCard> = []
        for (let c = mine.head; c !== undefined; c = c.parentNext) open.push(c)
        for (const c of open) c.close(c.closeReason ?? { _tag: "ThreadStopped" })
      }))
    }
  }
}

/** What runs a handler for a card: the job is the handler's effect; the card learns how it ended. */
export type RunHandler = (card: LiveCard, job: Effect.Effect<DecisionNs.Decision | undefined, unknown>) => void

/**
 * The handlers of the cards opened by one fiber (a desk's `handlerPool`): `call` calls a handler
 * after the caller's step, `run` runs an effect in a handler fiber.
 */
export interface HandlerRunner {
  /** Run the handler's effect in a fiber of the pool (woken or started after the caller's step). */
  readonly run: RunHandler
  /**
   * Call `handler` with the card's view after the caller's step (a task of the caller's
   * scheduler, as a fiber's start is: never on its stack). What it returns decides as if run in a fiber (`decisionOf`): an Effect that is
   * already its own result (`Effect.succeed(…)`, `Effect.fail(…)`, an `Exit`: nothing left to
   * run) settles the card right there, without a fiber; any other is run by `run`. A throw is a
   * defect of the handler (its card is refused).
   */
  readonly call: (card: LiveCard, handler: Handler) => void
}

/** How many handler fibers of a desk wait for the next card at most; more end when done. */
export const MaxIdleHandlerFibers = 8

/** A handler fiber: its card while it runs one, its wake-up while it waits for the next. */
interface Worker {
  fiber: Fiber.RuntimeFiber<void, never> | undefined
  card: LiveCard | undefined
  job: Effect.Effect<DecisionNs.Decision | undefined, unknown> | undefined
  wake: ((effect: Effect.Effect<void>) => void) | undefined
}

/**
 * The fibers that run a desk's handlers. A handler is called after the loop's step (`call`: a task
 * of the loop's scheduler, never on its stack); one that returns an Effect already settled
 * (`Effect.succeed`) decides its card right there, without a fiber (a fiber's wake-up and its
 * FiberRefs' reset were ~4–5 µs of a 30 µs round trip, issue 14, perf-rt). Everything else runs in a
 * fiber of its own, never the read loop's, started or woken after the loop's step: a root fiber from the
 * runtime of the fiber that opens the card (the read loop's: its services, clock and tracer), in
 * no scope, so that no scope's close waits for a handler (see `race`). A fiber whose handler has
 * returned waits for the desk's next card instead of ending (at most `MaxIdleHandlerFibers`
 * wait), its FiberRefs put back as they were before the handler ran: a card a handler decides at
 * once does not pay for a new fiber (~5 µs of its round trip, issue 14). A handler still running
 * when its card settles is interrupted, and its fiber with it (the next card gets a new one). The
 * waiting fibers are interrupted when `owner` closes (the connection's scope).
 */
export const handlerPool = (owner: { readonly fork: (effect: Effect.Effect<void>) => void }) => {
  let runtimeOf: unknown
  let runner: HandlerRunner | undefined
  let idle: Array<Worker> = []
  let closed = false
  let watching = false
  /** Handlers to call in the scheduler's next task (`HandlerRunner.call`), in the order their cards opened. */
  let calls: Array<QueuedCall> = []

  const retire = (workers: Array<Worker>) => {
    for (const w of workers) w.fiber?.unsafeInterruptAsFork(FiberId.none)
  }

  const start = (w: Worker, run: (effect: Effect.Effect<void>, options: { readonly immediate: false }) => Fiber.RuntimeFiber<void, never>): void => {
    const mine = idle
    const park = Effect.async<void>((resume) => {
      w.wake = resume
      mine.push(w)
      return Effect.sync(() => {
        w.wake = undefined
        const at = mine.indexOf(w)
        if (at >= 0) mine.splice(at, 1)
      })
    })
    const next: Effect.Effect<void> = Effect.suspend(() =>
      closed || mine !== idle || mine.length >= MaxIdleHandlerFibers ? Effect.void : Effect.zipRight(park, step)
    )
    const step: Effect.Effect<void> = Effect.flatMap(Effect.getFiberRefs, (saved) =>
      Effect.flatMap(Effect.exit(Effect.suspend(() => w.job!)), (exit) => {
        const card = w.card!
        w.card = undefined
        w.job = undefined
        card.handlerEnded(exit)
        // What the handler changed in the fiber's FiberRefs is not the next card's.
        // (All of them, also those it set for the first time: `setFiberRefs` would keep those.)
        return Effect.zipRight(Effect.updateFiberRefs(() => saved), next)
      }))
    const fiber = run(step, { immediate: false })
    w.fiber = fiber
    // However it ends (interrupted with its card, or from outside), a card it still ran learns it.
    fiber.addObserver((exit) => {
      const at = mine.indexOf(w)
      if (at >= 0) mine.splice(at, 1)
      const card = w.card
      w.card = undefined
      w.job = undefined
      if (card !== undefined && Exit.isFailure(exit)) card.handlerEnded(Exit.failCause(exit.cause))
    })
  }

  const callQueued = (): void => {
    const batch = calls
    calls = []
    for (const queued of batch) callOne(queued)
  }
  const callOne = ({ card, handler, run }: QueuedCall): void => {
    if (card.settlement || closed) return
    try {
      let job: Effect.Effect<DecisionNs.Decision | undefined, unknown>
      try {
        job = decisionOf(handler(card.view))
      } catch (defect) {
        job = Exit.die(defect) // as a throw inside the handler's fiber would end it
      }
      if (Exit.isExit(job)) card.handlerEnded(job as Exit.Exit<DecisionNs.Decision | undefined, unknown>)
      else run(card, Effect.interruptible(job))
    } catch (defect) {
      // Ours, and it does not throw; if it did, the card is refused rather than left to wait.
      card.handlerEnded(Exit.die(defect))
    }
  }

  /** A runner for handlers opened from `fiber` (its runtime is made once per calling fiber). */
  return (fiber: Fiber.RuntimeFiber<unknown, unknown>, runtime: () => Runtime.Runtime<never>): HandlerRunner => {
    if (runtimeOf !== fiber || runner === undefined) {
      retire(idle.splice(0)) // another caller's fibers: not this one's
      idle = []
      const fork = Runtime.runFork(runtime())
      runtimeOf = fiber
      runner = runnerOf((effect, options) => fork(effect, options), fiber.currentScheduler)
    }
    return runner
  }

  function runnerOf(
    runFork: (effect: Effect.Effect<void>, options: { readonly immediate: false }) => Fiber.RuntimeFiber<void, never>,
    /** The opener's scheduler: a call is a task of it, as a handler fiber's start or wake-up is. */
    scheduler: Scheduler.Scheduler
  ): HandlerRunner {
    const run: RunHandler = (card, job) => {
      if (card.settlement || closed) return
      if (!watching) {
        watching = true
        // When the owner closes, the waiting fibers end (the busy ones end after their card).
        owner.fork(Effect.onInterrupt(Effect.never, () =>
          Effect.sync(() => {
            closed = true
            retire(idle.splice(0))
          })))
      }
      const w = idle.pop()
      if (w !== undefined && w.wake !== undefined) {
        w.card = card
        w.job = job
        card.attachHandler(w.fiber!)
        const wake = w.wake
        w.wake = undefined
        wake(Effect.void) // resumes it after this step, on its own scheduler
        return
      }
      const fresh: Worker = { fiber: undefined, card, job, wake: undefined }
      start(fresh, runFork)
      card.attachHandler(fresh.fiber!)
    }
    const call = (card: LiveCard, handler: Handler): void => {
      if (card.settlement || closed) return
      if (calls.length === 0) scheduler.scheduleTask(callQueued, 0)
      calls.push({ card, handler, run })
    }
    return { run, call }
  }
}

/** A handler to call after the opener's step, and the runner for what it returns. */
interface QueuedCall {
  readonly card: LiveCard
  readonly handler: Handler
  readonly run: RunHandler
}

/** Effect's own tracer, whose spans nobody sees: cards make none under it (unless telemetry asks). */
const nativeTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/** Whether a span made by `fiber` can be seen by anyone (its tracer is not Effect's built-in one). */
export const tracesVisibly = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean =>
  Context.get(fiber.getFiberRef(DefaultServices.currentServices), Tracer.Tracer) !== nativeTracer

export interface RaceOptions {
  readonly handler: Handler | undefined
  readonly onParentClose: CloseReason
  /** The desk's cards by parent scope. */
  readonly parents: ParentCards
  /** Call the handler and run what it returns (the desk's `handlerPool`). */
  readonly handlers: HandlerRunner
  /** The card's span, when it has one (a child of its turn's with telemetry, else of the caller's). */
  readonly span: Tracer.Span | undefined
}

/**
 * Start the race for a card whose rules and filters did not already decide: the deadline (the
 * desk's timer), the closing of `parent` (the desk's parent registry) and, while it decides, the
 * handler.
 *
 * Nothing of the handler runs here (this is called from the connection's read loop): it is
 * called inside its own fiber, started after the loop's step, so a handler that throws, returns
 * something that is not an Effect or a Promise, dies, blocks, or never returns costs only its card
 * (refused, or settled by the deadline or the parent's close), never the loop.
 *
 * Returns an effect only for a parent's first card (its finalizer is added); otherwise everything
 * happens here, synchronously.
 */
export const race = (card: LiveCard, parent: Scope.Scope, timer: DeadlineTimer, options: RaceOptions): Effect.Effect<void> | undefined => {
  if (card.settlement) return undefined
  timer.schedule(card, card.deadline)
  const registered = options.parents.add(parent, card, options.onParentClose)
  if (registered === undefined) {
    startHandler(card, options)
    return undefined
  }
  return Effect.map(registered, () => startHandler(card, options))
}

const startHandler = (card: LiveCard, options: RaceOptions): void => {
  const handler = options.handler
  if (handler === undefined || card.settlement) return
  const span = options.span
  // No span to run it in: called after this step, and what it returns runs in a fiber only if
  // there is something left to run (`HandlerRunner.call`).
  if (span === undefined) return options.handlers.call(card, handler)
  const decided = Effect.suspend(() => decisionOf(handler(card.view)))
  // Not in `parent`, nor in any scope: closing a scope waits for its fibers, and a handler that
  // will not be interrupted (an uninterruptible region that never ends) would wedge the thread's
  // close. Its life is bounded by its card instead: whatever settles the card (a decision, the
  // deadline, the parent's close, the connection's end) interrupts it, and nobody waits. How it
  // ended decides (`LiveCard.handlerEnded`).
  options.handlers.run(card, Effect.interruptible(Effect.withSpan(decided, "warden.card.handler", { ...spanOptions(card), parent: span })))
}

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
 * Without a `parent` (telemetry off, under an embedder's tracer) the span is a child of the
 * caller's and only says the outcome, ended synchronously in the settlement. With one (the turn's
 * span, telemetry on) and `fork`, the settlement is described on it (source, decision, latency,
 * whether the answer was written, the card's kind and masked title: never the request itself) and
 * a log record is written in it, by a fiber of `fork`'s, off the read loop: building the masked
 * summary of a large patch and running the logger are not the loop's work. The span's end time is
 * the settlement's.
 */
export const startSpan = (
  card: LiveCard,
  parent: Tracer.AnySpan | undefined,
  fork?: (effect: Effect.Effect<void>) => void
): Effect.Effect<Tracer.Span> =>
  Effect.flatMap(Effect.clock, (clock) =>
    Effect.map(Effect.makeSpan("warden.card", parent === undefined ? spanOptions(card) : { ...spanOptions(card), parent }), (span) => {
      card.attachSpan(span, clock, parent === undefined ? undefined : fork)
      return span
    }))

/** The card settled: its span says so and ends (described by a fiber of `fork`'s with telemetry). */
const endSpan = (card: LiveCard, settlement: Settlement, state: SpanState): void => {
  const span = state.span
  span.attribute("warden.outcome", settlement.outcome)
  const endTime = state.clock.unsafeCurrentTimeNanos()
  if (state.fork === undefined) return span.end(endTime, Exit.void)
  state.fork(describeSettled(card, settlement, span, endTime))
}

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
