/**
 * Drives a Supervisor through a TranscriptReplay: one work item per thread the transcript started
 * (its turns as prompt + follow-ups), cards answered when the transcript's client answered them
 * (mode "transcript": with the transcript's decision where Warden has a word for it, else a
 * decline; mode "decline": a handler declines every card at once), interrupts and steers performed
 * through the work item's handle when the transcript's client sent them. When the replay is over
 * and the work items that end in the transcript have ended, the supervisor's scope is closed (as
 * the capturing client closed stdin) and everything that happened is returned for assertions.
 */
import type { ApprovalEvent } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import { TranscriptReplay } from "@warden/testkit"
import { Duration, Effect, Either, Exit, Fiber, Option, Queue, Scope, Stream, SubscriptionRef } from "effect"
import { Supervisor } from "../../../src/index.js"
import type { Errors, WorkItem } from "../../../src/index.js"

export type Mode = "transcript" | "decline"

export interface ItemOutcome {
  readonly thread: TranscriptReplay.ThreadPlan
  readonly threadId: string | undefined
  readonly exit: Exit.Exit<WorkItem.WorkResult, Errors.WorkItemFailed>
}

export interface HarnessStep {
  readonly cue: TranscriptReplay.Cue
  readonly did: string
}

export interface ReplayOutcome {
  readonly replay: TranscriptReplay.Replay
  readonly report: TranscriptReplay.Report
  readonly approvals: ReadonlyArray<ApprovalEvent.ApprovalEvent>
  readonly events: ReadonlyArray<Supervisor.SupervisorEvent>
  readonly items: ReadonlyArray<ItemOutcome>
  readonly steps: ReadonlyArray<HarnessStep>
  /** Cards still open just before the supervisor's scope was closed. */
  readonly openBeforeClose: number
  readonly stdinEndedAfterClose: boolean
}

export interface Options {
  readonly timeout?: Duration.DurationInput
  /** Runs before the harness answers a card (e.g. to check what is true while it is open). */
  readonly beforeAnswer?: (
    cue: Extract<TranscriptReplay.Cue, { _tag: "Answer" }>,
    context: {
      readonly supervisor: Supervisor.SupervisorShape
      readonly items: ReadonlyArray<{
        readonly threadId: string | undefined
        readonly exit: Effect.Effect<Exit.Exit<WorkItem.WorkResult, Errors.WorkItemFailed>>
      }>
    }
  ) => Effect.Effect<void>
}

const waitUntil = <A>(
  ref: SubscriptionRef.SubscriptionRef<ReadonlyArray<A>>,
  predicate: (all: ReadonlyArray<A>) => boolean
) => ref.changes.pipe(Stream.filter(predicate), Stream.take(1), Stream.runDrain)

/** Copy a subscription into a log; an event taken is always appended (interruption waits for the append). */
const pump = <A>(queue: Queue.Dequeue<A>, log: SubscriptionRef.SubscriptionRef<ReadonlyArray<A>>) =>
  Effect.forever(
    Effect.uninterruptibleMask((restore) =>
      restore(Queue.take(queue)).pipe(Effect.flatMap((a) => SubscriptionRef.update(log, (all) => [...all, a])))
    )
  )

const drain = <A>(queue: Queue.Dequeue<A>, log: SubscriptionRef.SubscriptionRef<ReadonlyArray<A>>) =>
  Effect.flatMap(Queue.takeAll(queue), (rest) => SubscriptionRef.update(log, (all) => [...all, ...rest]))

export const runReplay = (
  transcript: TranscriptReplay.Transcript,
  mode: Mode,
  options: Options = {}
): Effect.Effect<ReplayOutcome, Error, Scope.Scope> =>
  Effect.gen(function* () {
    const replay = yield* TranscriptReplay.make(transcript)
    const plan = replay.plan
    const testScope = yield* Effect.scope
    const supervisorScope = yield* Scope.make()
    const supervisor = yield* Supervisor.make({
      restart: { policy: "resume", backoff: "5 millis", maxAttempts: 3 },
      interruptTimeout: "2 seconds",
      connection: { requestTimeout: "5 seconds" },
      approvals: mode === "decline" ? { handler: () => Effect.succeed(Decision.Decline) } : {}
    }).pipe(Effect.provide(replay.layer), Scope.extend(supervisorScope))

    // Subscriptions outlive the supervisor's scope, so what its closing settles is seen too.
    const approvalQueue = yield* supervisor.subscribeApprovals
    const eventQueue = yield* supervisor.subscribe
    const approvals = yield* SubscriptionRef.make<ReadonlyArray<ApprovalEvent.ApprovalEvent>>([])
    const events = yield* SubscriptionRef.make<ReadonlyArray<Supervisor.SupervisorEvent>>([])
    const pumps = yield* Effect.all([pump(approvalQueue, approvals), pump(eventQueue, events)], {
      concurrency: 2
    }).pipe(Effect.fork)

    const steps: Array<HarnessStep> = []
    const started: Array<{
      readonly thread: TranscriptReplay.ThreadPlan
      readonly handle: Supervisor.WorkHandle
      readonly waiter: Fiber.RuntimeFiber<Exit.Exit<WorkItem.WorkResult, Errors.WorkItemFailed>>
      threadId: string | undefined
    }> = []

    // Cues, in script order: performed through the supervisor's public API only.
    const cueLoop = Effect.forever(
      Effect.gen(function* () {
        const { cue, seq } = yield* Queue.take(replay.cues)
        const step = (did: string) => steps.push({ cue, did })
        switch (cue._tag) {
          case "Answer": {
            yield* waitUntil(approvals, (all) =>
              all.some((e) => e._tag === "CardOpened" && e.card.requestId === cue.requestId)
            )
            const all = yield* SubscriptionRef.get(approvals)
            const opened = [...all].reverse().find((e) => e._tag === "CardOpened" && e.card.requestId === cue.requestId)
            const cardId = opened?._tag === "CardOpened" ? opened.card.id : ""
            if (options.beforeAnswer) {
              yield* options.beforeAnswer(cue, {
                supervisor,
                items: started.map((s) => ({ threadId: s.threadId, exit: Fiber.join(s.waiter) }))
              })
            }
            const decision = mode === "transcript" ? (cue.decision ?? Decision.Decline) : Decision.Decline
            const answered = yield* supervisor.inbox.answer(cardId, decision)
            if (answered._tag === "UnknownCard") {
              step("no such card")
              yield* replay.pass(seq)
              break
            }
            step(
              `${answered._tag === "Settled" ? "answered" : "already settled"}: ${answered.settlement.outcome} by ${answered.settlement.source._tag}`
            )
            if (!answered.settlement.written) yield* replay.pass(seq)
            break
          }
          case "Interrupt":
          case "Steer": {
            const target = started.find((s) => s.threadId === cue.threadId)
            if (target === undefined) {
              step("no work item runs this thread")
              yield* replay.pass(seq)
              break
            }
            // The replay has sent the turn/start response: wait until the work item knows its turn.
            yield* waitUntil(events, (all) =>
              all.some((e) => e._tag === "Work" && e.event._tag === "TurnStarted" && e.event.turnId === cue.turnId)
            )
            const result = yield* Effect.either(
              cue._tag === "Interrupt" ? target.handle.interrupt : target.handle.steer(cue.text)
            )
            if (Either.isLeft(result) && result.left._tag === "NoActiveTurn") {
              step("no active turn")
              yield* replay.pass(seq)
            } else {
              step(
                Either.isLeft(result)
                  ? `${cue._tag.toLowerCase()} failed: ${result.left.message}`
                  : cue._tag.toLowerCase()
              )
            }
            break
          }
        }
      })
    )
    yield* cueLoop.pipe(Effect.forkIn(supervisorScope))

    const body = Effect.gen(function* () {
      // One work item per thread, started in transcript order (the replay hands out thread ids in that order).
      for (const [index, thread] of plan.threads.entries()) {
        const [first, ...rest] = thread.turns
        const cwd = thread.startParams["cwd"]
        const item: WorkItem.WorkItem = {
          id: index,
          prompt: first?.prompt ?? "",
          followUps: rest.map((t) => t.prompt),
          ...(typeof cwd === "string" ? { cwd } : {})
        }
        const handle = yield* supervisor.start(item).pipe(Scope.extend(supervisorScope))
        // In the test's scope: it must outlive the (timed) body and see the supervisor's close.
        const waiter = yield* Effect.forkIn(Effect.exit(handle.await), testScope)
        const entry = { thread, handle, waiter, threadId: undefined as string | undefined }
        started.push(entry)
        entry.threadId = Option.getOrUndefined(Either.getRight(yield* Effect.either(handle.threadId)))
      }
      yield* replay.done
      for (const s of started) {
        if (s.thread.endsNormally) yield* Fiber.await(s.waiter)
      }
      // Every server request of the transcript became a card before we stop (opened, maybe settled).
      yield* waitUntil(approvals, (all) =>
        plan.serverRequests.every((r) => all.some((e) => e._tag === "CardOpened" && e.card.requestId === r.id))
      )
    })
    const timeout = Duration.decode(options.timeout ?? "10 seconds")
    yield* body.pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () =>
          new Error(
            `${transcript.name} (${mode}) did not finish within ${Duration.format(timeout)}: ${replay.describe()}`
          )
      })
    )

    const openBeforeClose = (yield* supervisor.inbox.open).length
    yield* Scope.close(supervisorScope, Exit.void)
    const items: Array<ItemOutcome> = []
    for (const s of started) items.push({ thread: s.thread, threadId: s.threadId, exit: yield* Fiber.join(s.waiter) })
    yield* Fiber.interrupt(pumps)
    yield* drain(approvalQueue, approvals)
    yield* drain(eventQueue, events)
    return {
      replay,
      report: replay.report(),
      approvals: yield* SubscriptionRef.get(approvals),
      events: yield* SubscriptionRef.get(events),
      items,
      steps,
      openBeforeClose,
      stdinEndedAfterClose: replay.memory.peer.stdinEnded()
    }
  })
