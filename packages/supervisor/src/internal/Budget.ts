/**
 * Budgets: a work item's tokens and turn time, and the run's tokens, read from
 * `thread/tokenUsage/updated` and the turns' start and end. Reaching one asks a question of
 * Warden's own, as a card decided like any other (rules, the handler, a person, the deadline):
 * "continue for another N?". Yes raises the allowance by the budget; anything else (a decline, a
 * deadline, the item stopped) is no: the item's turn is interrupted and the item ends
 * `budget-exhausted`; for the run, no further work item is admitted.
 *
 * The question is an MCP elicitation from the reserved server name `warden` (a form with no field:
 * accept or decline), opened in a card registry of its own whose line is local: nothing of it is ever
 * written to codex. So rules decide it like any elicitation (`mcp: {server: "warden"}`), the
 * board, the stdin protocol and the facade show and answer it like any card, and its deadline
 * refuses it.
 *
 * Scope and fibers: `make` runs in the supervisor's scope and owns a FiberSet there, where each
 * question about the run's budget runs (closing the supervisor interrupts it, which refuses its
 * card). An item's budget (`forItem`, `watch`) lives in the item's scope: one fiber reading the
 * item's events, with a fiber per open question or turn clock (FiberHandles); closing the item's
 * scope interrupts them all, and an open question's card is refused with its scope.
 */
import type { Approvals } from "@warden/approvals"
import { ServerRequests } from "@warden/protocol"
import { Deferred, Duration, Effect, Fiber, FiberHandle, FiberId, FiberSet, Option, Queue } from "effect"
import type { Scope } from "effect"
import { WorkItemFailed } from "../Errors.js"
import type { WorkEvent, WorkItem } from "../WorkItem.js"
import * as ThreadRunner from "./ThreadRunner.js"

/** The reserved MCP server name of Warden's own questions. */
export const ServerName = "warden"

export interface Question {
  readonly workItem: string | number | undefined
  readonly threadId: string
  readonly turnId: string | undefined
  readonly message: string
}

export interface Asker {
  /** Ask, as a card; true when it was accepted. Interrupting the caller refuses the card. */
  readonly ask: (question: Question) => Effect.Effect<boolean>
}

/** Cards for Warden's own questions, on a local line (answers resolve the asker, never reach codex). */
export const asker = (approvals: Approvals.ApprovalsShape): Effect.Effect<Asker> =>
  Effect.sync(() => {
    const waiting = new Map<string, Deferred.Deferred<boolean>>()
    let counter = 0
    const connectionCards = approvals.cardsFor({
      write: (frame) => {
        const id = String(frame["id"])
        const deferred = waiting.get(id)
        if (deferred === undefined) return true
        waiting.delete(id)
        const result = frame["result"] as { readonly action?: unknown } | undefined
        Deferred.unsafeDone(deferred, Effect.succeed(result?.action === "accept"))
        return true
      },
      isOpen: () => true
    })
    const ask = (question: Question) =>
      Effect.scoped(
        Effect.gen(function* () {
          const id = `warden-${++counter}`
          const answered = yield* Deferred.make<boolean>()
          waiting.set(id, answered)
          yield* Effect.addFinalizer(() => Effect.sync(() => waiting.delete(id)))
          const request = ServerRequests.decode(id, "mcpServer/elicitation/request", {
            threadId: question.threadId,
            turnId: question.turnId ?? null,
            serverName: ServerName,
            mode: "form",
            message: question.message,
            requestedSchema: { type: "object", properties: {} },
            _meta: null
          })
          // Warden's own question: one that does not decode is a bug of Warden's. It is logged as
          // one, naming it, and counts as a refusal (the budget holds: deny is the default), never
          // as a defect, which the budget's watchers would drop (the item would run on unbounded).
          if (request._tag === "Malformed" || request._tag === "Unknown") {
            yield* Effect.logError(
              `warden bug: the budget question did not decode as an elicitation (${request._tag === "Malformed" ? request.detail : request.method}); continuing is refused`
            )
            return false
          }
          const scope = yield* Effect.scope
          yield* connectionCards.open(request, {
            parent: scope,
            context: question.workItem === undefined ? {} : { workItem: question.workItem },
            onParentClose: { _tag: "ThreadStopped" }
          })
          return yield* Deferred.await(answered)
        })
      )
    return { ask }
  })

/** An item's budget, decoded. */
export interface ItemBudget {
  readonly maxTokens: number | undefined
  readonly maxTurnTime: Duration.Duration | undefined
}

const compact = (n: number) => (n >= 10_000 ? `${Math.round(n / 1000)}k` : String(n))

/** The total tokens a `thread/tokenUsage/updated` reports, or undefined. */
export const totalTokensOf = (params: unknown): number | undefined => {
  const usage = (params as { tokenUsage?: { total?: { totalTokens?: unknown } } } | null | undefined)?.tokenUsage
  const total = usage?.total?.totalTokens
  return typeof total === "number" && Number.isFinite(total) ? total : undefined
}

/**
 * Watch one work item's budget, in the item's scope, from its events (`events`, offered by the
 * item's emitter). When a budget is reached and continuing is refused, `exhaust` is told why and
 * the running turn is interrupted (`interrupt`).
 */
export const watch = (options: {
  readonly item: string | number | undefined
  readonly label: string
  readonly budget: ItemBudget
  readonly events: Queue.Dequeue<WorkEvent>
  readonly asker: Asker
  readonly exhaust: (detail: string) => void
  readonly interrupt: Effect.Effect<void>
}): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { asker: questions, budget, events, item, label } = options
    const turnClock = yield* FiberHandle.make()
    const tokenQuestion = yield* FiberHandle.make()
    let allowance = budget.maxTokens
    let latest = 0
    let threadId: string | undefined
    let turnId: string | undefined
    let done = false

    const refuse = (detail: string) =>
      Effect.suspend(() => {
        if (done) return Effect.void
        done = true
        options.exhaust(detail)
        return options.interrupt
      })

    const askTokens = (): Effect.Effect<void> =>
      Effect.gen(function* () {
        const step = budget.maxTokens!
        const yes = yield* questions.ask({
          workItem: item,
          threadId: threadId ?? "unknown",
          turnId,
          message: `${label} reached ${compact(latest)} tokens (budget ${compact(allowance!)}): continue for another ${compact(step)}?`
        })
        if (!yes) return yield* refuse(`reached ${latest} tokens (budget ${allowance}); continuing was not allowed`)
        allowance = allowance! + step
        if (latest >= allowance) yield* askTokens()
      })

    const clock = (turn: string, limit: Duration.Duration): Effect.Effect<void> =>
      Effect.gen(function* () {
        let allowed = limit
        while (true) {
          yield* Effect.sleep(allowed)
          const yes = yield* questions.ask({
            workItem: item,
            threadId: threadId ?? "unknown",
            turnId: turn,
            message: `${label}'s turn has run ${Duration.format(allowed)} (budget ${Duration.format(limit)} per turn): continue for another ${Duration.format(limit)}?`
          })
          if (!yes)
            return yield* refuse(
              `a turn ran ${Duration.format(allowed)} (budget ${Duration.format(limit)}); continuing was not allowed`
            )
          allowed = Duration.sum(allowed, limit)
        }
      })

    const loop = Effect.gen(function* () {
      while (true) {
        const event = yield* Queue.take(events)
        switch (event._tag) {
          case "ThreadReady":
            threadId = event.threadId
            break
          case "TurnStarted":
            threadId = event.threadId
            turnId = event.turnId
            if (budget.maxTurnTime !== undefined && !done)
              yield* FiberHandle.run(turnClock, clock(event.turnId, budget.maxTurnTime))
            break
          case "TurnCompleted":
            turnId = undefined
            yield* FiberHandle.clear(turnClock)
            break
          case "Notification": {
            if (event.method !== "thread/tokenUsage/updated") break
            const total = totalTokensOf(event.params)
            if (total === undefined) break
            latest = total
            if (allowance !== undefined && total >= allowance && !done) {
              yield* FiberHandle.run(tokenQuestion, askTokens(), { onlyIfMissing: true })
            }
            break
          }
          default:
            break
        }
      }
    })
    const fiber = yield* Effect.forkScoped(Effect.interruptible(loop))
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
  })

/** An item without a budget is never exhausted (one function for all of them). */
const neverExhausted = (): string | undefined => undefined

/** The supervisor's budgets: the run's gate and each item's watch. */
export interface Budgets {
  /** Admission's second gate: waits while the run's budget question is open; fails once it was refused. */
  readonly gate: Effect.Effect<void, WorkItemFailed>
  /**
   * The item's budget watch (when it has a budget) and its share of the run's tokens, in the
   * item's scope: the emitter the item's runner uses, and what exhausted it (once a budget
   * question was refused). A budget that is not a positive count fails the item `start-failed`.
   */
  readonly forItem: (
    item: WorkItem,
    liveThread: ThreadRunner.LiveThread,
    emit: (event: WorkEvent) => void
  ) => Effect.Effect<
    { readonly emit: (event: WorkEvent) => void; readonly exhausted: () => string | undefined },
    WorkItemFailed,
    Scope.Scope
  >
}

/**
 * The budgets of one supervisor, in its scope: Warden's own questions in cards of `approvals`,
 * the run's token budget (`runBudget`, none when empty), and each item's. A refused item budget
 * interrupts the item's turn within `interruptTimeout`.
 */
export const make = (
  approvals: Approvals.ApprovalsShape,
  options: {
    readonly runBudget: Option.Option<{ readonly maxTokens: number }>
    readonly interruptTimeout: Duration.Duration
  }
): Effect.Effect<Budgets, never, Scope.Scope> =>
  Effect.gen(function* () {
    const questions = yield* asker(approvals)
    const forkInSupervisor = yield* FiberSet.makeRuntime<never>()
    const runMax = Option.getOrUndefined(options.runBudget)?.maxTokens
    let runAllowance = runMax ?? Infinity
    let runTotal = 0
    /** While a question about the run's budget is open: its answer (true: admit on). */
    let runQuestion: Deferred.Deferred<boolean> | undefined
    let runClosed = false
    const runBudgetExhausted = () =>
      new WorkItemFailed({
        reason: "budget-exhausted",
        detail: `the run reached its token budget (${runAllowance}) and continuing was not allowed: no further work item is admitted`,
        threadId: undefined
      })
    const askRunBudget = (where: { readonly threadId: string; readonly turnId: string | undefined }) => {
      if (runMax === undefined || runClosed || runQuestion !== undefined || runTotal < runAllowance) return
      const question = Deferred.unsafeMake<boolean>(FiberId.none)
      runQuestion = question
      forkInSupervisor(
        Effect.gen(function* () {
          const yes = yield* questions.ask({
            workItem: undefined,
            threadId: where.threadId,
            turnId: where.turnId,
            message: `the run reached ${runTotal} tokens (budget ${runAllowance}): continue for another ${runMax}?`
          })
          if (yes) runAllowance += runMax
          else runClosed = true
          runQuestion = undefined
          yield* Deferred.succeed(question, yes)
          if (yes) askRunBudget(where)
        })
      )
    }
    const gate = Effect.suspend(() => {
      if (runClosed) return Effect.fail(runBudgetExhausted())
      if (runQuestion === undefined) return Effect.void
      return Effect.flatMap(Deferred.await(runQuestion), (yes) =>
        yes ? Effect.void : Effect.fail(runBudgetExhausted())
      )
    })

    const forItem = (item: WorkItem, liveThread: ThreadRunner.LiveThread, emit: (event: WorkEvent) => void) =>
      Effect.gen(function* () {
        const budget = item.budget
        const own = budget !== undefined && (budget.maxTokens !== undefined || budget.maxTurnTime !== undefined)
        if (!own && runMax === undefined) return { emit, exhausted: neverExhausted }
        let exhausted: string | undefined
        let events: Queue.Queue<WorkEvent> | undefined
        if (own) {
          const decoded = yield* Effect.try({
            try: (): ItemBudget => {
              const maxTokens = budget.maxTokens
              if (maxTokens !== undefined && !(Number.isSafeInteger(maxTokens) && maxTokens > 0))
                throw new Error(`budget.maxTokens must be a positive integer, got ${String(maxTokens)}`)
              return {
                maxTokens,
                maxTurnTime: budget.maxTurnTime === undefined ? undefined : Duration.decode(budget.maxTurnTime)
              }
            },
            catch: (e) =>
              new WorkItemFailed({
                reason: "start-failed",
                detail: e instanceof Error ? e.message : String(e),
                threadId: item.threadId
              })
          })
          const queue = yield* Effect.acquireRelease(Queue.unbounded<WorkEvent>(), Queue.shutdown)
          events = queue
          yield* watch({
            item: item.id,
            label: `item ${String(item.id ?? "")}`.trim(),
            budget: decoded,
            events: queue,
            asker: questions,
            exhaust: (detail) => {
              exhausted = detail
            },
            interrupt: Effect.suspend(() =>
              liveThread.server && liveThread.threadId && liveThread.turnId
                ? ThreadRunner.interruptTurn(
                    liveThread.server,
                    liveThread.threadId,
                    liveThread.turnId,
                    options.interruptTimeout
                  )
                : Effect.void
            )
          })
        }
        let counted = 0
        const wrapped = (event: WorkEvent) => {
          events?.unsafeOffer(event)
          if (runMax !== undefined && event._tag === "Notification" && event.method === "thread/tokenUsage/updated") {
            const total = totalTokensOf(event.params)
            if (total !== undefined && total > counted) {
              runTotal += total - counted
              counted = total
              askRunBudget({ threadId: event.threadId, turnId: event.turnId })
            }
          }
          emit(event)
        }
        return { emit: wrapped, exhausted: () => exhausted }
      })

    return { gate, forItem }
  })
