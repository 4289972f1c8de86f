/**
 * Budgets: a work item's tokens and turn time, and the run's tokens, read from
 * `thread/tokenUsage/updated` and the turns' start and end. Reaching one asks a question of
 * Warden's own, as a card decided like any other (rules, the handler, a person, the deadline):
 * "continue for another N?". Yes raises the allowance by the budget; anything else (a decline, a
 * deadline, the item stopped) is no: the item's turn is interrupted and the item ends
 * `budget-exhausted`; for the run, no further work item is admitted.
 *
 * The question is an MCP elicitation from the reserved server name `warden` (a form with no field:
 * accept or decline), opened on a desk of its own whose line is local: nothing of it is ever
 * written to codex. So rules decide it like any elicitation (`mcp: {server: "warden"}`), the
 * board, the stdin protocol and the facade show and answer it like any card, and its deadline
 * refuses it.
 */
import type { Approvals } from "@warden/approvals"
import { ServerRequests } from "@warden/protocol"
import { Deferred, Duration, Effect, Fiber, FiberHandle, Queue } from "effect"
import type { Scope } from "effect"
import type { WorkEvent } from "../WorkItem.js"

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

/** A desk for Warden's own questions, on a local line (answers resolve the asker, never reach codex). */
export const asker = (approvals: Approvals.ApprovalsShape): Effect.Effect<Asker> =>
  Effect.sync(() => {
    const waiting = new Map<string, Deferred.Deferred<boolean>>()
    let counter = 0
    const desk = approvals.desk({
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
        Effect.gen(function*() {
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
            yield* Effect.logError(`warden bug: the budget question did not decode as an elicitation (${request._tag === "Malformed" ? request.detail : request.method}); continuing is refused`)
            return false
          }
          const scope = yield* Effect.scope
          yield* desk.open(request, {
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
  Effect.gen(function*() {
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
      Effect.gen(function*() {
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
      Effect.gen(function*() {
        let allowed = limit
        while (true) {
          yield* Effect.sleep(allowed)
          const yes = yield* questions.ask({
            workItem: item,
            threadId: threadId ?? "unknown",
            turnId: turn,
            message: `${label}'s turn has run ${Duration.format(allowed)} (budget ${Duration.format(limit)} per turn): continue for another ${Duration.format(limit)}?`
          })
          if (!yes) return yield* refuse(`a turn ran ${Duration.format(allowed)} (budget ${Duration.format(limit)}); continuing was not allowed`)
          allowed = Duration.sum(allowed, limit)
        }
      })

    const loop = Effect.gen(function*() {
      while (true) {
        const event = yield* Queue.take(events)
        switch (event._tag) {
          case "ThreadReady":
            threadId = event.threadId
            break
          case "TurnStarted":
            threadId = event.threadId
            turnId = event.turnId
            if (budget.maxTurnTime !== undefined && !done) yield* FiberHandle.run(turnClock, clock(event.turnId, budget.maxTurnTime))
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
