/**
 * A desk: the open cards of one connection, by server request id.
 *
 * `open` is called from the connection's read loop: it registers the card synchronously (so a
 * duplicate id is caught before the next frame is read) and forks the card's race; it never
 * waits for a decision. A second request on an id that is still open is reported as
 * `Duplicate`: one answer cannot settle two requests, so the connection must go down.
 */
import type { JsonRpc, ServerRequests } from "@warden/protocol"
import { ServerRequests as SR } from "@warden/protocol"
import { Effect } from "effect"
import type { Duration, Fiber, Scope, Tracer } from "effect"
import type { CardContext, CardView, Settlement } from "../Card.js"
import type { CloseReason, DeskShared, Handler, Line } from "./CardRace.js"
import { handlerPool, LiveCard, parentCards, race, startSpan, tracesVisibly } from "./CardRace.js"
import * as DeadlineTimer from "../DeadlineTimer.js"
import * as Deadlines from "../Deadlines.js"
import type { FiberOwner, Hub } from "./Hub.js"
import type * as Policy from "../Policy.js"
import { evaluate } from "./RuleEvaluation.js"
import { Runtime } from "effect"
import type { RuntimeFlags } from "effect"
import * as SafetyFilter from "./SafetyFilter.js"

/**
 * What `desk.open` did with a server request.
 *
 * It opened a card that now waits for a decision, settled it at once, or refused to open it
 * because its id is already open (`Duplicate`).
 */
export type OpenResult =
  | { readonly _tag: "Opened"; readonly card: CardView }
  /** Decided at once (rule, filter, malformed, unknown method, no thread, a handler that answered at once). */
  | { readonly _tag: "Settled"; readonly settlement: Settlement }
  /** The id is already open: a protocol error for the connection. Nothing was written. */
  | { readonly _tag: "Duplicate"; readonly requestId: JsonRpc.RequestId; readonly open: CardView }

/** Where a card opened by `desk.open` belongs (its thread's scope), and what it shows beyond the request. */
export interface OpenOptions {
  /** The thread's scope; undefined when the request names no thread we know (refused at once). */
  readonly parent: Scope.Scope | undefined
  readonly context?: CardContext
  /** What closing `parent` means for the card (default: the thread was stopped). */
  readonly onParentClose?: CloseReason
  /**
   * The span the card's span is a child of (its turn's), given when telemetry is on: then every
   * card gets a span (also those a rule settles at once), describing how it settled. Without it,
   * only a card that waits for a decision has a span, a child of the caller's.
   */
  readonly traceParent?: Tracer.AnySpan
}

/**
 * The open cards of one connection, by server request id.
 *
 * The supervisor opens a card per server request and settles them when the server withdraws them,
 * a thread or turn ends, or the connection is lost. Made by `ApprovalsShape.desk`; no operation
 * fails.
 */
export interface Desk {
  /**
   * Open a card for a decoded server request, from the read loop: registers it synchronously, then
   * lets rules, the safety filter, the handler, a person and the deadline decide. Never waits for a
   * decision.
   */
  readonly open: (request: ServerRequests.DecodedRequest, options: OpenOptions) => Effect.Effect<OpenResult>
  /**
   * `open` for a caller in the middle of a fiber's synchronous step (the connection's read loop):
   * the same card, opened the same way, where `fiber` (with its `runtimeFlags`) is the fiber
   * running the caller, as `open` would have found it. Returns the result, or the effect to run
   * for it when something must wait (a thread's first card adds its finalizer, a card's span is
   * made): the read loop pays for no effect per card otherwise.
   */
  readonly openNow: (
    request: ServerRequests.DecodedRequest,
    options: OpenOptions,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    runtimeFlags: RuntimeFlags.RuntimeFlags
  ) => OpenResult | Effect.Effect<OpenResult>
  /** `serverRequest/resolved`: the server moved on; settle as withdrawn, write nothing. */
  readonly withdraw: (requestId: JsonRpc.RequestId) => Settlement | undefined
  /** Settle every open card that matches (thread stop, turn end, shutdown): refuse if the line is alive. */
  readonly closeWhere: (predicate: (card: CardView) => boolean, reason: CloseReason) => ReadonlyArray<Settlement>
  /** The connection ended: settle every card at once, write nothing. */
  readonly connectionLost: (detail: string) => ReadonlyArray<Settlement>
  /** The cards of this desk still open. */
  readonly openCards: () => ReadonlyArray<CardView>
  /** How many cards of this desk are open. */
  readonly size: () => number
}

/** How a desk decides (card deadlines, policy rules, the handler, the safety filter's bounds), all optional. */
export interface DeskConfig {
  /** How long a card waits before it refuses by itself (default 15 minutes; per method configurable). */
  readonly deadlines?: Deadlines.DeadlineConfig
  /** Allow/deny rules, consulted before anyone else (deny rules win). */
  readonly rules?: Policy.Rules
  /** A program that decides what no rule decided, raced against a person and the deadline. */
  readonly handler?: Handler
  /**
   * Remembered allows ("always", e.g. from `@warden/ledger`'s `Remembered`): a synchronous lookup
   * consulted only when no configured rule matched (so a deny rule always wins) and the safety
   * filter let the request through, before the handler and the person. It runs on the read loop:
   * keep it a lookup. Returning a rule id accepts the card with source `remembered:<id>`; a lookup
   * that throws counts as no match (the card waits for the handler, a person or its deadline).
   */
  readonly remembered?: (request: ServerRequests.DecodedRequest, context: CardContext) => { readonly ruleId: string } | undefined
  /** Bounds of what forms and questions may hold to be shown to a person (default 8 questions, 32 choices). */
  readonly safety?: SafetyFilter.Limits
}

const NoContext: CardContext = {}

const asEffect = (result: OpenResult | Effect.Effect<OpenResult>): Effect.Effect<OpenResult> =>
  Effect.isEffect(result) ? result : Effect.succeed(result)
const ThreadStopped: CloseReason = { _tag: "ThreadStopped" }

/**
 * A desk answering through `line`. Its deadline timer and the small fibers its cards schedule
 * live in `owner` (the connection's scope, so they end with it; the hub's by default).
 */
export const make = (line: Line, hub: Hub, config: DeskConfig, owner: FiberOwner = hub): Desk => {
  const byRequestId = new Map<JsonRpc.RequestId, LiveCard>()
  // One fiber for every deadline of this desk, one finalizer per parent scope: see CardRace.
  const timer = DeadlineTimer.make({ nanos: hub.nanos, spawn: owner.spawn, fork: owner.fork })
  const parents = parentCards()
  const handlers = handlerPool(owner)
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
  const shared: DeskShared = {
    line,
    now: hub.now,
    timer,
    onSettled: (c) => {
      if (byRequestId.get(c.view.requestId) === c) byRequestId.delete(c.view.requestId)
      hub.unregister(c)
    },
    publish: hub.publish,
    fork: owner.fork
  }

  const settleNow = (card: LiveCard, settle: (card: LiveCard) => Settlement): OpenResult => ({
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
    const card = new LiveCard(shared, request, context, hub.nextCardId(), deadlineOf(request.method))
    byRequestId.set(request.id, card)
    hub.register(card)
    hub.publish({ _tag: "CardOpened", card: card.view })

    const traceParent = options.traceParent
    if (traceParent !== undefined) {
      return Effect.flatMap(startSpan(card, traceParent, owner.fork), (span) => asEffect(decide(card, request, options, context, fiber, runtimeFlags, span)))
    }
    return decide(card, request, options, context, fiber, runtimeFlags, undefined)
  }

  const decide = (
    card: LiveCard,
    request: ServerRequests.DecodedRequest,
    options: OpenOptions,
    context: CardContext,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    runtimeFlags: RuntimeFlags.RuntimeFlags,
    span: Tracer.Span | undefined
  ): OpenResult | Effect.Effect<OpenResult> => {
    // Decision sources, in order: what cannot be shown, then rules, then handler/person vs deadline.
    if (request._tag === "Unknown") {
      return settleNow(card, (c) => c.refuse("refused", { _tag: "UnknownMethod" }, `unknown method ${request.method}`))
    }
    if (request._tag === "Malformed") {
      return settleNow(card, (c) => c.refuse("refused", { _tag: "Malformed", detail: "params did not decode" }, request.detail))
    }
    const parent = options.parent
    if (parent === undefined) {
      return settleNow(card, (c) => c.refuse("refused", { _tag: "NoThread" }, "the request names no thread this supervisor runs"))
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
    if (span === undefined && tracesVisibly(fiber)) {
      return Effect.flatMap(startSpan(card, undefined), (cardSpan) => asEffect(raceWith(card, parent, options, fiber, runtimeFlags, cardSpan)))
    }
    return raceWith(card, parent, options, fiber, runtimeFlags, span)
  }

  // Not a closure made per card: under esbuild's `keepNames` (the bundled `warden run`, tsx) every
  // named inner function made costs a `defineProperty` of its name, ~0.5 µs (issue 14, fourth pass).
  const raceWith = (
    card: LiveCard,
    parent: Scope.Scope,
    options: OpenOptions,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    runtimeFlags: RuntimeFlags.RuntimeFlags,
    cardSpan: Tracer.Span | undefined
  ): OpenResult | Effect.Effect<OpenResult> => {
    const registered = race(card, parent, timer, {
      handler: config.handler,
      onParentClose: options.onParentClose ?? ThreadStopped,
      parents,
      handlers: handlers(fiber, () => Runtime.make({ context: fiber.currentContext, fiberRefs: fiber.getFiberRefs(), runtimeFlags })),
      span: cardSpan
    })
    // Settled only if the card was already (the parent scope had closed).
    return registered === undefined ? resultOf(card) : Effect.map(registered, () => resultOf(card))
  }

  const resultOf = (card: LiveCard): OpenResult =>
    card.settlement ? { _tag: "Settled", settlement: card.settlement } : { _tag: "Opened", card: card.view }

  const withdraw = (requestId: JsonRpc.RequestId) => {
    const card = byRequestId.get(requestId)
    return card ? card.close({ _tag: "Withdrawn" }) : undefined
  }

  const closeWhere = (predicate: (card: CardView) => boolean, reason: CloseReason) =>
    Array.from(byRequestId.values()).filter((c) => predicate(c.view)).map((c) => c.close(reason))

  const connectionLost = (detail: string) =>
    Array.from(byRequestId.values()).map((c) => c.close({ _tag: "ConnectionLost", detail }))

  return {
    open,
    openNow,
    withdraw,
    closeWhere,
    connectionLost,
    openCards: () => Array.from(byRequestId.values(), (c) => c.view),
    size: () => byRequestId.size
  }
}
