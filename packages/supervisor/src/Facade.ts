/**
 * A promise-based facade for code that does not use Effect.
 *
 * `createSupervisor(config)` returns async methods and async iterables over the same engine. Scopes
 * still own everything: the supervisor lives in a ManagedRuntime (disposed by `close`), and each
 * started work item lives in its own Scope, closed when it ends or when `stop` is called.
 */
import type { ApprovalEvent, Approvals, Card } from "@warden/approvals"
import { Config as ApprovalsConfig } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import type { Transport } from "@warden/transport"
import { Cause, Effect, Either, Exit, Layer, ManagedRuntime, Scope, Stream } from "effect"
import type { CodexCommand } from "./CodexCommand.js"
import { transportLayer } from "./CodexCommand.js"
import * as Config from "./Config.js"
import type { WorkItemFailed } from "./Errors.js"
import * as SupervisorNs from "./Supervisor.js"
import type { WorkEvent, WorkItem, WorkResult } from "./WorkItem.js"

/**
 * A decision as the facade takes it, a `Decision` or its loose JSON form.
 *
 * A `Decision` value, one of the four words, or the loose JSON of a structured answer as
 * `Decision.fromJson` reads it (`{ answers }`, `{ permissions, scope }`, `{ action, content }`,
 * ...).
 */
export type DecisionInput =
  | Decision.Decision
  | "accept"
  | "acceptForSession"
  | "decline"
  | "cancel"
  | Record<string, unknown>

/**
 * A program that decides cards, for code without Effect, as a plain function (usually `async`).
 * It is called in its own fiber, never on the connection's read loop, so it may take its time
 * (the card's deadline still runs) and may throw: a throw, a rejection, a value that is not a
 * decision, or no answer before the card settles, are each a refusal of that card alone.
 * Return `undefined` for no opinion (a person, through `answer`, or the deadline decides).
 * `signal` aborts when the card settles without this handler (deadline, withdrawal, stop).
 */
export type CardHandler = (
  card: Card.CardView,
  signal: AbortSignal
) => Promise<DecisionInput | undefined> | DecisionInput | undefined

/**
 * Who answered "always" and for how long, as `WardenSupervisor.always` passes it to the
 * `remember` hook.
 */
export interface AlwaysOptions {
  /** Who answered (default `"facade"`): kept with the remembered rule. */
  readonly author?: string
  /** When the remembered rule stops matching (epoch milliseconds); default never. */
  readonly expiresAt?: number
  /** A note kept with the rule. */
  readonly note?: string
}

/**
 * Stores a remembered allow scoped to what `card` asked, for `WardenSupervisor.always`.
 *
 * Resolve with the stored rule's id; throw or reject when nothing can be remembered (the card
 * then stays open, unanswered). The hook decides the scope and where rules live: the ledger's
 * `Remembering.always` (from `@warden/ledger`) derives the narrowest scope (the exact argv of a
 * simple command, the deepest directory of the changed or asked paths, the MCP server and tool)
 * and stores it with the author, time, expiry and card. Give the connection cards the matching lookup
 * (`approvals.remembered`, e.g. `Remembering.lookup`) so later cards in that scope are accepted
 * with source `remembered:<id>`; the connection's cards consult it only after the configured rules said
 * nothing, so a deny rule always wins.
 */
export type RememberHook = (
  card: Card.CardView,
  options: { readonly author: string; readonly expiresAt?: number; readonly note?: string }
) => Promise<{ readonly ruleId: string }> | { readonly ruleId: string }

/**
 * The approvals part of a facade configuration, the Effect API's with a plain `CardHandler`, and
 * the optional `remember` hook behind `WardenSupervisor.always`.
 */
export interface FacadeApprovalsConfig extends Omit<Approvals.ApprovalsConfig, "handler"> {
  readonly handler?: CardHandler
  /** What "always" stores (see `RememberHook`); without it, `always` rejects. */
  readonly remember?: RememberHook
}

/**
 * What `WardenSupervisor.always` did.
 *
 * `Remembered`: the hook stored rule `ruleId`, then the card was answered `Accept` (`answer` says
 * how that went: `Settled`, or `AlreadySettled` when the card settled meanwhile). `NotRemembered`:
 * nothing was stored and the card was not answered (`reason` says why: no such open card, a card
 * that cannot be accepted, or the hook refused).
 */
export type AlwaysResult =
  | {
      readonly _tag: "Remembered"
      readonly cardId: string
      readonly ruleId: string
      readonly answer: Approvals.AnswerResult
    }
  | { readonly _tag: "NotRemembered"; readonly cardId: string; readonly reason: string }

/**
 * What `createSupervisor` takes, the supervisor's configuration plus how to start codex.
 *
 * The supervisor's settings (`concurrency`, `pool`, `stallTimeout`, `restart`, `connection`, ...),
 * approvals with a plain handler, and how to start codex (or any Transport layer).
 */
export interface FacadeConfig extends Omit<SupervisorNs.SupervisorConfig, "approvals"> {
  readonly approvals?: FacadeApprovalsConfig
  /** How to start `codex app-server` (ignored when `transport` is given). */
  readonly codex?: CodexCommand
  /** Advanced: any Transport layer (e.g. the in-memory one in tests). */
  readonly transport?: Layer.Layer<Transport.Transport>
}

/** The facade's plain handler as the engine's Effect handler. */
export const effectHandler =
  (handler: CardHandler): Approvals.Handler =>
  (card) =>
    Effect.tryPromise({
      try: async (signal) => {
        const input = await handler(card, signal)
        return input === undefined ? undefined : toDecision(input)
      },
      catch: (error) => error
    })

/**
 * A started work item, as Promises.
 *
 * Its thread id, its events, steering and interrupting its running turn, its result, and `stop`.
 * The item lives until it ends, `stop` is called, or the supervisor is closed.
 */
export interface WorkHandle {
  /** Resolves once the thread exists; rejects with a `WorkItemFailed` if the item fails before. */
  readonly threadId: Promise<string>
  /**
   * This item's events, in order, from its first; ends when the item ends. Iterate once. Until
   * iteration starts only the item's latest 500 events are kept (a handle nobody iterates keeps no
   * more than that); an iteration that starts later begins with those.
   */
  readonly events: AsyncIterable<WorkEvent>
  /** Add input to the running turn (`turn/steer`); rejects with `NoActiveTurn` or a request error. */
  readonly steer: (text: string) => Promise<void>
  /** Interrupt the running turn (it completes as interrupted); rejects with `NoActiveTurn` when none runs. */
  readonly interrupt: () => Promise<void>
  /** Resolves with the result; rejects with a WorkItemFailed. */
  readonly result: Promise<WorkResult>
  /** Stop the item: its turn is interrupted best-effort and its open cards are refused. */
  readonly stop: () => Promise<void>
}

/**
 * A running supervisor behind Promises and async iterables, from `createSupervisor`. Call `close`
 * when done: until then its app-server children keep running.
 */
export interface WardenSupervisor {
  /** Run a work item to its result; rejects with a `WorkItemFailed` (`reason` says why). */
  readonly run: (item: WorkItem) => Promise<WorkResult>
  /** Start a work item and return its handle at once (it waits for admission in the background). */
  readonly start: (item: WorkItem) => Promise<WorkHandle>
  /** The cards open now. */
  readonly openCards: () => Promise<ReadonlyArray<Card.CardView>>
  /** The open cards now, then every change. */
  readonly cards: () => AsyncIterable<Approvals.InboxUpdate>
  /**
   * Answer a card as a person: `Settled`, `AlreadySettled` (with the outcome that won) or
   * `UnknownCard`. Rejects with a `TypeError` when `decision` is not a decision.
   */
  readonly answer: (cardId: string, decision: DecisionInput) => Promise<Approvals.AnswerResult>
  /**
   * Answer every open card of a group at once (`CardGroup.groupOf(card)`: cards asking the same
   * thing), each in its own method's vocabulary, written once; cards not offering the decision stay
   * open (`notOffered`). Rejects with a `TypeError` when `decision` is not a decision.
   */
  readonly answerGroup: (group: string, decision: DecisionInput) => Promise<Approvals.GroupAnswer>
  /**
   * Answer an open card "always" as a person: the `approvals.remember` hook stores an allow scoped
   * to what the card asked, then the card is accepted. When the hook refuses (or the card is not
   * open, or cannot be accepted) nothing is answered: `NotRemembered`. Rejects with a `TypeError`
   * when the configuration has no `remember` hook.
   */
  readonly always: (cardId: string, options?: AlwaysOptions) => Promise<AlwaysResult>
  /** Supervisor events (connections, work, finished items) from the moment iteration starts. */
  readonly events: () => AsyncIterable<SupervisorNs.SupervisorEvent>
  /** Card events (opened, settled, late decisions) from the moment iteration starts. */
  readonly approvalEvents: () => AsyncIterable<ApprovalEvent.ApprovalEvent>
  /** Stop everything: open cards are refused, work items end, the child is stopped. */
  readonly close: () => Promise<void>
}

/** Reject with the typed failure itself (a WorkItemFailed), not a FiberFailure wrapper. */
const settle = <A, E>(exit: Exit.Exit<A, E>): Promise<A> =>
  Exit.isSuccess(exit) ? Promise.resolve(exit.value) : Promise.reject(Cause.squash(exit.cause))

/**
 * The `Decision` a `DecisionInput` stands for.
 *
 * A value with a string `_tag` is taken as a `Decision` as it is; anything else is read with
 * `Decision.fromJson`. Throws a `TypeError` naming
 * the input when it is not a decision.
 */
export const toDecision = (input: DecisionInput): Decision.Decision => {
  if (typeof input === "object" && input !== null && "_tag" in input && typeof input["_tag"] === "string")
    return input as Decision.Decision
  const decoded = Decision.fromJson(input)
  if (decoded === undefined) throw new TypeError(`not a decision: ${JSON.stringify(input)}`)
  return decoded
}

/**
 * Start a supervisor. The configuration is checked first: a bad value (a duration such as
 * `"5m"` that `Duration.decode` does not read, a count below 1, a misspelt key, a handler that is
 * not a function, bad rules) rejects with a `ConfigError` naming every field at fault, and
 * nothing is started.
 *
 * It resolves once the supervisor runs (its app-servers start in the background: a codex that
 * cannot be started shows as `ConnectionFailed` events, and work items then fail with
 * `WorkItemFailed` once the restarts are used up). Without `transport`, `codex` says how to start
 * `codex app-server` (default: `codex` on PATH).
 *
 * @example
 * ```ts
 * import { createSupervisor } from "@warden/supervisor"
 *
 * const warden = await createSupervisor({
 *   codex: { command: "codex", config: ['model="gpt-5"'] },
 *   concurrency: 2,
 *   approvals: {
 *     deadlines: { default: "2 minutes" },
 *     rules: { rules: [{ id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } }] },
 *     // Runs in its own fiber; a throw or rejection refuses the card; undefined leaves it to answer().
 *     handler: async (card) => (card.summary.kind === "command" && card.summary.argv?.[0] === "ls" ? "accept" : undefined)
 *   }
 * })
 * try {
 *   void (async () => {
 *     for await (const update of warden.cards()) {
 *       if (update._tag === "Opened") await warden.answer(update.card.id, "decline")
 *     }
 *   })()
 *   const result = await warden.run({ prompt: "say hello", cwd: "/path/to/repo" })
 *   console.log(result.status, result.finalMessage)
 * } finally {
 *   await warden.close() // refuses open cards, stops every child
 * }
 * ```
 */
export const createSupervisor = async (config: FacadeConfig = {}): Promise<WardenSupervisor> => {
  const transport = config.transport ?? transportLayer(config.codex)
  const { codex: _codex, transport: _transport, ...facadeInput } = config
  // The facade's own hook is not the engine's: checked here, then left out of the engine's config.
  const { remember, ...approvalsInput } = facadeInput.approvals ?? {}
  const engineInput = facadeInput.approvals !== undefined ? { ...facadeInput, approvals: approvalsInput } : facadeInput
  // Checked before anything starts, with the embedder's own handler (a function, or not).
  const checked = Config.decode(engineInput)
  const rememberIssue =
    remember !== undefined && typeof remember !== "function" ? ["approvals.remember: expected a function"] : []
  if (Either.isLeft(checked))
    throw rememberIssue.length > 0
      ? new ApprovalsConfig.ConfigError({ issues: [...checked.left.issues, ...rememberIssue] })
      : checked.left
  if (rememberIssue.length > 0) throw new ApprovalsConfig.ConfigError({ issues: rememberIssue })
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
    void result
      .then(
        () => undefined,
        () => undefined
      )
      .then(() => (itemScopes.has(scope) ? runtime.runPromise(closeItem(scope)) : undefined))
      .catch(() => undefined)
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
    answer: (cardId, decision) =>
      Promise.resolve().then(() => run(supervisor.inbox.answer(cardId, toDecision(decision)))),
    answerGroup: (group, decision) =>
      Promise.resolve().then(() => run(supervisor.inbox.answerGroup(group, toDecision(decision)))),
    always: async (cardId, options = {}) => {
      if (remember === undefined)
        throw new TypeError('"always" needs a remember hook (approvals.remember, e.g. the ledger\'s Remembering)')
      const notRemembered = (reason: string): AlwaysResult => ({ _tag: "NotRemembered", cardId, reason })
      const card = (await run(supervisor.approvals.openCards)).find((c) => c.id === cardId)
      if (card === undefined) return notRemembered(`no open card ${cardId}`)
      if (!card.offers.includes("Accept")) return notRemembered(`card ${cardId} cannot be accepted`)
      let ruleId: unknown
      try {
        ruleId = (
          await remember(card, {
            author: options.author ?? "facade",
            ...(options.expiresAt !== undefined ? { expiresAt: options.expiresAt } : {}),
            ...(options.note !== undefined ? { note: options.note } : {})
          })
        )?.ruleId
      } catch (error) {
        return notRemembered(error instanceof Error ? error.message : String(error))
      }
      if (typeof ruleId !== "string") return notRemembered("the remember hook returned no ruleId")
      return { _tag: "Remembered", cardId, ruleId, answer: await run(supervisor.inbox.answer(cardId, Decision.Accept)) }
    },
    events: () => Stream.toAsyncIterableRuntime(supervisor.events, rt),
    approvalEvents: () => Stream.toAsyncIterableRuntime(supervisor.approvals.events, rt),
    close: async () => {
      await runtime
        .runPromise(Effect.forEach(Array.from(itemScopes), closeItem, { discard: true }))
        .catch(() => undefined)
      await runtime.dispose()
    }
  }
}
