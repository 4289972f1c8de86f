/**
 * The open-card registry of one connection (`Approvals.ConnectionCards`): its pending cards by
 * server request id, and how each is decided.
 *
 * `open` is called from the connection's read loop: it registers the card synchronously (so a
 * duplicate id is caught before the next frame is read), lets what can decide at once decide
 * (unknown or malformed requests, no thread, the rules, the safety filter, a remembered rule), and
 * otherwise lets the card wait (`awaitDecision`); it never waits for a decision. A second request
 * on an id that is still open is reported as `Duplicate`: one answer cannot settle two requests,
 * so the connection must go down.
 */
import type { JsonRpc, ServerRequests } from "@warden/protocol"
import { ServerRequests as SR } from "@warden/protocol"
import { Effect, Runtime } from "effect"
import type { Duration, Fiber, RuntimeFlags, Scope } from "effect"
import type {
  CloseReason,
  ConnectionCards,
  DecisionConfig,
  FiberOwner,
  Handler,
  Line,
  OpenOptions,
  OpenResult
} from "../Approvals.js"
import type { CardContext, CardView, Settlement } from "../Card.js"
import * as DeadlineTimer from "../DeadlineTimer.js"
import * as Deadlines from "../Deadlines.js"
import { handlerSpan, settledSpans, startSpan, tracesVisibly } from "./CardSpans.js"
import type { Engine } from "./Engine.js"
import type { HandlerRunner } from "./HandlerPool.js"
import { handlerPool } from "./HandlerPool.js"
import type { ParentCards } from "./ParentCards.js"
import { parentCards } from "./ParentCards.js"
import type { ConnectionShared } from "./PendingCard.js"
import { PendingCard } from "./PendingCard.js"
import { evaluate } from "./RuleEvaluation.js"
import * as SafetyFilter from "./SafetyFilter.js"

const NoContext: CardContext = {}

const asEffect = (result: OpenResult | Effect.Effect<OpenResult>): Effect.Effect<OpenResult> =>
  Effect.isEffect(result) ? result : Effect.succeed(result)
const ThreadStopped: CloseReason = { _tag: "ThreadStopped" }

/**
 * The open cards of a connection answering through `line`. Its deadline timer and the small
 * fibers its cards schedule live in `owner` (the connection's scope, so they end with it; the
 * engine's by default).
 */
export const make = (
  line: Line,
  engine: Engine,
  config: DecisionConfig,
  owner: FiberOwner = engine
): ConnectionCards => {
  const byRequestId = new Map<JsonRpc.RequestId, PendingCard>()
  // One fiber for every deadline of this connection, one finalizer per parent scope (`ParentCards`).
  const timer = DeadlineTimer.make({ nanos: engine.nanos, spawn: owner.spawn, fork: owner.fork })
  const parents = parentCards()
  const handlers = handlerPool(owner)
  // Telemetry on: the connection's settled cards' spans, described off the read loop.
  const settled = settledSpans(owner)
  // Each method's deadline, read from the configuration once.
  const deadlines = new Map<string, Duration.Duration>()
  const deadlineOf = (method: string): Duration.Duration => {
    let deadline = deadlines.get(method)
    if (deadline === undefined) {
      deadline = Deadlines.forMethod(config.deadlines, method)
      // Unknown methods are the peer's words: remember only the ones we know (a bounded set).
      if (SR.isServerRequestMethod(method)) deadlines.set(method, deadline)
    }
    return deadline
  }
  const shared: ConnectionShared = {
    line,
    now: engine.now,
    timer,
    onSettled: (c) => {
      if (byRequestId.get(c.view.requestId) === c) byRequestId.delete(c.view.requestId)
      engine.unregister(c)
    },
    publish: engine.publish,
    answering: engine.answering,
    fork: owner.fork
  }

  const settleNow = (card: PendingCard, settle: (card: PendingCard) => Settlement): OpenResult => ({
    _tag: "Settled",
    settlement: settle(card)
  })

  const open = (request: ServerRequests.DecodedRequest, options: OpenOptions): Effect.Effect<OpenResult> =>
    Effect.withFiberRuntime((fiber, status) => asEffect(openNow(request, options, fiber, status.runtimeFlags)))

  const openNow = (
    request: ServerRequests.DecodedRequest,
    options: OpenOptions,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    runtimeFlags: RuntimeFlags.RuntimeFlags
  ): OpenResult | Effect.Effect<OpenResult> => {
    const existing = byRequestId.get(request.id)
    if (existing) {
      return { _tag: "Duplicate", requestId: request.id, open: existing.view }
    }
    // The masked summary is built on first read of the view's `summary` or `title` (an inbox,
    // the audit, a UI, a handler that looks): a card a rule or a quick handler settles with
    // nobody watching never pays for it.
    const context = options.context ?? NoContext
    const card = new PendingCard(shared, request, context, engine.nextCardId(), deadlineOf(request.method))
    byRequestId.set(request.id, card)
    engine.register(card)
    engine.publish({ _tag: "CardOpened", card: card.view })

    const traceParent = options.traceParent
    const hasSpan = traceParent !== undefined && startSpan(card, traceParent, fiber, settled.describe)
    return decide(card, request, options, context, fiber, runtimeFlags, hasSpan)
  }

  const decide = (
    card: PendingCard,
    request: ServerRequests.DecodedRequest,
    options: OpenOptions,
    context: CardContext,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    runtimeFlags: RuntimeFlags.RuntimeFlags,
    /** Whether the card has a span (`startSpan`). */
    hasSpan: boolean
  ): OpenResult | Effect.Effect<OpenResult> => {
    // Decision sources, in order: what cannot be shown, then rules, then handler/person vs deadline.
    if (request._tag === "Unknown") {
      return settleNow(card, (c) => c.refuse("refused", { _tag: "UnknownMethod" }, `unknown method ${request.method}`))
    }
    if (request._tag === "Malformed") {
      return settleNow(card, (c) =>
        c.refuse("refused", { _tag: "Malformed", detail: "params did not decode" }, request.detail)
      )
    }
    const parent = options.parent
    if (parent === undefined) {
      return settleNow(card, (c) =>
        c.refuse("refused", { _tag: "NoThread" }, "the request names no thread this supervisor runs")
      )
    }
    if (config.rules) {
      const verdict = evaluate(config.rules, request, context)
      if (verdict._tag === "Deny") {
        return settleNow(card, (c) => c.decide({ _tag: "Decline" }, { _tag: "Rule", ruleId: verdict.ruleId }))
      }
      if (verdict._tag === "Allow") {
        return settleNow(card, (c) => c.decide({ _tag: "Accept" }, { _tag: "Rule", ruleId: verdict.ruleId }))
      }
    }
    const safety = SafetyFilter.check(request, config.safety)
    if (safety._tag === "Unsafe") {
      return settleNow(card, (c) => c.refuse("refused", { _tag: "SafetyFilter", reason: safety.reason }, safety.reason))
    }
    if (config.remembered !== undefined) {
      let hit: { readonly ruleId: string } | undefined
      try {
        hit = config.remembered(request, context)
      } catch {
        hit = undefined // a broken lookup never accepts
      }
      if (hit !== undefined && typeof hit.ruleId === "string") {
        const ruleId = hit.ruleId
        return settleNow(card, (c) => c.decide({ _tag: "Accept" }, { _tag: "Remembered", ruleId }))
      }
    }
    // It waits: for the handler, a person, its deadline or its thread's close. Without telemetry
    // it gets a span only under a tracer someone can see (an embedder's), a child of the caller's.
    if (!hasSpan && tracesVisibly(fiber)) {
      return waitFor(card, parent, options, fiber, runtimeFlags, startSpan(card, undefined, fiber))
    }
    return waitFor(card, parent, options, fiber, runtimeFlags, hasSpan)
  }

  // Not a closure made per card: under esbuild's `keepNames` (the bundled `warden run`, tsx) every
  // named inner function made costs a `defineProperty` of its name, ~0.5 µs.
  const waitFor = (
    card: PendingCard,
    parent: Scope.Scope,
    options: OpenOptions,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    runtimeFlags: RuntimeFlags.RuntimeFlags,
    hasSpan: boolean
  ): OpenResult | Effect.Effect<OpenResult> => {
    const registered = awaitDecision(card, parent, timer, {
      handler: config.handler,
      onParentClose: options.onParentClose ?? ThreadStopped,
      parents,
      handlers: handlers(fiber, () =>
        Runtime.make({ context: fiber.currentContext, fiberRefs: fiber.getFiberRefs(), runtimeFlags })
      ),
      hasSpan
    })
    // Settled only if the card was already (the parent scope had closed).
    return registered === undefined ? resultOf(card) : Effect.map(registered, () => resultOf(card))
  }

  const resultOf = (card: PendingCard): OpenResult =>
    card.settlement ? { _tag: "Settled", settlement: card.settlement } : { _tag: "Opened", card: card.view }

  const withdraw = (requestId: JsonRpc.RequestId) => {
    const card = byRequestId.get(requestId)
    return card ? card.close({ _tag: "Withdrawn" }) : undefined
  }

  const closeWhere = (predicate: (card: CardView) => boolean, reason: CloseReason) =>
    Array.from(byRequestId.values())
      .filter((c) => predicate(c.view))
      .map((c) => c.close(reason))

  const connectionLost = (detail: string) =>
    Array.from(byRequestId.values()).map((c) => c.close({ _tag: "ConnectionLost", detail }))

  return {
    open,
    openNow,
    withdraw,
    closeWhere,
    connectionLost,
    openCards: () => Array.from(byRequestId.values(), (c) => c.view),
    size: () => byRequestId.size,
    describeSettled: settled.flush
  }
}

/** What a pending card waits with besides its deadline and its parent (`awaitDecision`). */
interface AwaitOptions {
  readonly handler: Handler | undefined
  readonly onParentClose: CloseReason
  /** The connection's cards by parent scope. */
  readonly parents: ParentCards
  /** Call the handler and run what it returns (the connection's `handlerPool`). */
  readonly handlers: HandlerRunner
  /** Whether the card has a span (a child of its turn's with telemetry, else of the caller's): its handler's is a child of it. */
  readonly hasSpan: boolean
}

/**
 * Let a card whose rules and filters did not already decide wait for its settlement: its deadline
 * (the connection's timer), the closing of `parent` (the connection's parent registry) and, while
 * it decides, the handler; a person may answer meanwhile (`Approvals.answer`), and whichever comes
 * first settles it.
 *
 * Nothing of the handler runs here (this is called from the connection's read loop): it is
 * called inside its own fiber, started after the loop's step, so a handler that throws, returns
 * something that is not an Effect or a Promise, dies, blocks, or never returns costs only its card
 * (refused, or settled by the deadline or the parent's close), never the loop.
 *
 * Returns an effect only for a parent's first card (its finalizer is added); otherwise everything
 * happens here, synchronously.
 */
const awaitDecision = (
  card: PendingCard,
  parent: Scope.Scope,
  timer: DeadlineTimer.DeadlineTimer,
  options: AwaitOptions
): Effect.Effect<void> | undefined => {
  if (card.settlement) return undefined
  timer.schedule(card, card.deadline)
  const registered = options.parents.add(parent, card, options.onParentClose)
  if (registered === undefined) {
    startHandler(card, options)
    return undefined
  }
  return Effect.map(registered, () => startHandler(card, options))
}

const startHandler = (card: PendingCard, options: AwaitOptions): void => {
  const handler = options.handler
  if (handler === undefined || card.settlement) return
  // Called after this step, and what it returns runs in a fiber only if there is something left
  // to run (`HandlerRunner.call`), in its span when the card has one. Not in `parent`, nor in any
  // scope: closing a scope waits for its fibers, and a handler that will not be interrupted (an
  // uninterruptible region that never ends) would wedge the thread's close. Its life is bounded
  // by its card instead: whatever settles the card (a decision, the deadline, the parent's close,
  // the connection's end) interrupts it, and nobody waits. How it ended decides
  // (`PendingCard.handlerEnded`).
  options.handlers.call(card, handler, options.hasSpan ? handlerSpan(card) : undefined)
}
