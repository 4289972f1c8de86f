/**
 * A promise-based facade for code that does not use Effect: `createSupervisor(config)` returns
 * async methods and async iterables over the same engine. Scopes still own everything: the
 * supervisor lives in a ManagedRuntime (disposed by `close`), and each started work item lives in
 * its own Scope, closed when it ends or when `stop` is called.
 */
import type { ApprovalEvent, Approvals, Card } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import type { Transport } from "@warden/transport"
import { Cause, Effect, Either, Exit, Layer, ManagedRuntime, Scope, Stream } from "effect"
import type { CodexCommand } from "./CodexCommand.js"
import { transportLayer } from "./CodexCommand.js"
import * as Config from "./Config.js"
import type { WorkItemFailed } from "./Errors.js"
import * as SupervisorNs from "./Supervisor.js"
import type { WorkEvent, WorkItem, WorkResult } from "./WorkItem.js"

export type DecisionInput = Decision.Decision | "accept" | "acceptForSession" | "decline" | "cancel" | Record<string, unknown>

/**
 * A program that decides cards, for code without Effect: a plain function, usually `async`.
 * It is called in its own fiber, never on the connection's read loop, so it may take its time
 * (the card's deadline still runs) and may throw: a throw, a rejection, a value that is not a
 * decision, or no answer before the card settles, are each a refusal of that card alone.
 * Return `undefined` for no opinion (a person, through `answer`, or the deadline decides).
 * `signal` aborts when the card settles without this handler (deadline, withdrawal, stop).
 */
export type CardHandler = (card: Card.CardView, signal: AbortSignal) => Promise<DecisionInput | undefined> | DecisionInput | undefined

export interface FacadeApprovalsConfig extends Omit<Approvals.ApprovalsConfig, "handler"> {
  readonly handler?: CardHandler
}

export interface FacadeConfig extends Omit<SupervisorNs.SupervisorConfig, "approvals"> {
  readonly approvals?: FacadeApprovalsConfig
  /** How to start `codex app-server` (ignored when `transport` is given). */
  readonly codex?: CodexCommand
  /** Advanced: any Transport layer (e.g. the in-memory one in tests). */
  readonly transport?: Layer.Layer<Transport.Transport>
}

/** The facade's plain handler as the engine's Effect handler. */
export const effectHandler = (handler: CardHandler): Approvals.Handler => (card) =>
  Effect.tryPromise({
    try: async (signal) => {
      const input = await handler(card, signal)
      return input === undefined ? undefined : toDecision(input)
    },
    catch: (error) => error
  })

export interface WorkHandle {
  readonly threadId: Promise<string>
  /** This item's events, in order; ends when the item ends. Iterate once. */
  readonly events: AsyncIterable<WorkEvent>
  readonly steer: (text: string) => Promise<void>
  readonly interrupt: () => Promise<void>
  /** Resolves with the result; rejects with a WorkItemFailed. */
  readonly result: Promise<WorkResult>
  /** Stop the item: its turn is interrupted best-effort and its open cards are refused. */
  readonly stop: () => Promise<void>
}

export interface WardenSupervisor {
  readonly run: (item: WorkItem) => Promise<WorkResult>
  readonly start: (item: WorkItem) => Promise<WorkHandle>
  readonly openCards: () => Promise<ReadonlyArray<Card.CardView>>
  /** The open cards now, then every change. */
  readonly cards: () => AsyncIterable<Approvals.InboxUpdate>
  readonly answer: (cardId: string, decision: DecisionInput) => Promise<Approvals.AnswerResult>
  readonly events: () => AsyncIterable<SupervisorNs.SupervisorEvent>
  readonly approvalEvents: () => AsyncIterable<ApprovalEvent.ApprovalEvent>
  /** Stop everything: open cards are refused, work items end, the child is stopped. */
  readonly close: () => Promise<void>
}

/** Reject with the typed failure itself (a WorkItemFailed), not a FiberFailure wrapper. */
const settle = <A, E>(exit: Exit.Exit<A, E>): Promise<A> =>
  Exit.isSuccess(exit) ? Promise.resolve(exit.value) : Promise.reject(Cause.squash(exit.cause))

export const toDecision = (input: DecisionInput): Decision.Decision => {
  if (typeof input === "object" && input !== null && "_tag" in input && typeof input["_tag"] === "string") return input as Decision.Decision
  const decoded = Decision.fromJson(input)
  if (decoded === undefined) throw new TypeError(`not a decision: ${JSON.stringify(input)}`)
  return decoded
}

/**
 * Start a supervisor. The configuration is checked first: a bad value (a duration such as
 * `"5m"` that `Duration.decode` does not read, a count below 1, a misspelt key, a handler that is
 * not a function, bad rules) rejects with a `ConfigError` naming every field at fault, and
 * nothing is started.
 */
export const createSupervisor = async (config: FacadeConfig = {}): Promise<WardenSupervisor> => {
  const transport = config.transport ?? transportLayer(config.codex)
  const { codex: _codex, transport: _transport, ...engineInput } = config
  // Checked before anything starts, with the embedder's own handler (a function, or not).
  const checked = Config.decode(engineInput)
  if (Either.isLeft(checked)) throw checked.left
  const { approvals, ...rest } = engineInput
  const { handler, ...approvalsRest } = approvals ?? {}
  const engineConfig: SupervisorNs.SupervisorConfig = {
    ...rest,
    ...(approvals !== undefined
      ? { approvals: { ...approvalsRest, ...(handler !== undefined ? { handler: effectHandler(handler) } : {}) } }
      : {})
  }
  const runtime = ManagedRuntime.make(SupervisorNs.layer(engineConfig).pipe(Layer.provide(transport)))
  const supervisor = await runtime.runPromiseExit(SupervisorNs.Supervisor).then(settle)
  const run = <A, E>(effect: Effect.Effect<A, E>) => runtime.runPromiseExit(effect).then(settle)
  const rt = await runtime.runtime()

  /** Scopes of started items still running: `close` closes them before the supervisor. */
  const itemScopes = new Set<Scope.CloseableScope>()
  const closeItem = (scope: Scope.CloseableScope) =>
    Effect.suspend(() => (itemScopes.delete(scope) ? Scope.close(scope, Exit.void) : Effect.void))

  const start = async (item: WorkItem): Promise<WorkHandle> => {
    const scope = await runtime.runPromise(Scope.make())
    itemScopes.add(scope)
    const handle = await runtime.runPromise(Scope.extend(supervisor.start(item), scope))
    const result = run(handle.await as Effect.Effect<WorkResult, WorkItemFailed>)
    // The item's scope closes when it ends, whatever the outcome (unless `close` did it first).
    void result.then(() => undefined, () => undefined).then(() =>
      itemScopes.has(scope) ? runtime.runPromise(closeItem(scope)) : undefined
    ).catch(() => undefined)
    return {
      threadId: run(handle.threadId),
      events: Stream.toAsyncIterableRuntime(handle.events, rt),
      steer: (text) => run(handle.steer(text)),
      interrupt: () => run(handle.interrupt),
      result,
      stop: () => run(handle.stop)
    }
  }

  return {
    run: (item) => run(supervisor.run(item)),
    start,
    openCards: () => run(supervisor.inbox.open),
    cards: () => Stream.toAsyncIterableRuntime(supervisor.inbox.updates, rt),
    answer: (cardId, decision) => Promise.resolve().then(() => run(supervisor.inbox.answer(cardId, toDecision(decision)))),
    events: () => Stream.toAsyncIterableRuntime(supervisor.events, rt),
    approvalEvents: () => Stream.toAsyncIterableRuntime(supervisor.approvals.events, rt),
    close: async () => {
      await runtime.runPromise(Effect.forEach(Array.from(itemScopes), closeItem, { discard: true })).catch(() => undefined)
      await runtime.dispose()
    }
  }
}
