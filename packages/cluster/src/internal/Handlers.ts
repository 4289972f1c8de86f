/**
 * The work item entity's handlers, built once per entity activation on a runner, over that
 * runner's one local `Supervisor`. Per-item state (the live handle, open cards, the event hub)
 * lives in the closure.
 *
 * - `Run` (persisted): a final stored item returns its stored result. Otherwise the runner takes
 *   the item (`ItemStore.claim`: raises its epoch, the fencing token) and drives it. An item last
 *   held by another incarnation is a move (`item.moved`, reason `shard-moved`): its open cards are
 *   settled `stranded` (once: the UPDATE only touches unsettled rows), then the thread is resumed
 *   with the remaining prompts. An item this incarnation was running and did not finish is a move
 *   too (reason `shard-lost`, from the runner to itself): the runner let go of the item's shard
 *   (its run interrupted, its open cards refused) and got it back, and the persisted `Run` came
 *   again. One it stopped itself because its hold on the shard ran out (`lease-lost`, below) is a
 *   move of its own as well.
 * - Fencing: every write for the item (thread, turns, cards, the end) is conditional on the epoch
 *   the runner took it at. One that changes nothing means another runner has taken the item: this
 *   one writes nothing more for it, stops driving it (its turn interrupted, its cards refused),
 *   publishes nothing more, and its `Run` never replies (it waits for the engine to close the
 *   entity: a persisted request interrupted by the entity's close gets no stored reply).
 * - The lease: the runner's own deadline for the item's shard (`ShardLease`). When it passes
 *   without a renewal, the runner stops the item before the engine could give the shard to
 *   another runner; if the lease is renewed (nobody took the shard), the item runs again here
 *   (`lease-lost`); if the shard went elsewhere, the engine closes the entity.
 * - `Answer`: a card of this process is settled in storage first, conditional on the card being
 *   open and the item held under this runner's epoch, and only then written to codex (through
 *   this supervisor's inbox); a card of another incarnation is never written to anyone:
 *   `AlreadySettled` from the stored settlement, else `UnknownCard`.
 *
 * @internal
 */
import { Entity } from "@effect/cluster"
import { EventPump, SecretMask } from "@warden/approvals"
import type { ApprovalEvent } from "@warden/approvals"
import { LedgerEvent } from "@warden/ledger"
import type { Decision } from "@warden/protocol"
import { Supervisor } from "@warden/supervisor"
import type { Errors, WorkItem } from "@warden/supervisor"
import { Cause, Deferred, Effect, Exit, Fiber, FiberId, Option, PubSub, Schema, Scope, Stream } from "effect"
import { WorkItemEntity } from "../WorkItemEntity.js"
import * as Wire from "../Wire.js"
import { ItemStore } from "./ItemStore.js"
import type { Fence, ItemRow } from "./ItemStore.js"
import { OwnershipChecks } from "./OwnershipChecks.js"
import { ShardLease } from "./ShardLease.js"
import * as ThreadState from "./ThreadState.js"
import * as CardView from "./CardView.js"
import { decodeResult, encodeResult, final, moveReason, outcomeOf, sourceOf, statusOf } from "./ItemRecord.js"
import { LedgerRecording, type LocalItem, LocalItems, RunnerInfo } from "./RunnerServices.js"

export { LedgerRecording, type LocalItem, LocalItems, RunnerInfo, type RunnerInfoShape } from "./RunnerServices.js"

export const make = Effect.gen(function* () {
  const address = yield* Entity.CurrentAddress
  const itemId = address.entityId
  const shard = address.shardId
  const info = yield* RunnerInfo
  const store = yield* ItemStore
  const localItems = yield* LocalItems
  const lease = yield* ShardLease
  const checks = yield* OwnershipChecks
  const entityScope = yield* Scope.Scope
  const recording = Option.getOrUndefined(yield* Effect.serviceOption(LedgerRecording))
  const supervisor = yield* Supervisor.Supervisor
  const hub = yield* PubSub.unbounded<Wire.ItemEvent>()
  const holder = { incarnation: info.runId, runner: info.address, host: info.host, codexHome: info.codexHome }
  // Kept in `localItems` from the start of a run here until the item finishes here (an activation
  // that only answers `Status` or `Events` of an ended item leaves nothing behind).
  const local: LocalItem = localItems.get(itemId) ?? { run: undefined, nextSeq: 0 }
  /** The seq of this activation's first line: `history[i]` has seq `firstSeq + i`. */
  const firstSeq = local.nextSeq
  let handle: Supervisor.WorkHandle | undefined
  let running = false
  let stopRequested = false
  let threadId: string | undefined
  /** The item's completed turns, as stored (`turns_done`), and where its rollout is in this runner's codex home. */
  let turnsDone = 0
  /** The item's prompts, its first and its follow-ups. */
  let promptCount = 0
  let rolloutPath: string | undefined
  /** Set when a moved item's thread could not come along and its first turn starts afresh: why. */
  let freshThread: string | undefined
  /** The epoch this activation took the item at (every write carries it), once it has. */
  let fence: Fence | undefined
  /** A write conditional on `fence` changed nothing: another runner holds the item now. */
  let lost = false
  /** The lease on the item's shard ran out while this activation drove it: it stopped the item. */
  let leaseRanOut = false
  /** This incarnation's open cards of the item: global id → line. */
  const openCards = new Map<string, Record<string, unknown>>()

  /** Whether this activation may act for the item now: it took it, still holds it, and its lease on the shard holds. */
  const drives = () => fence !== undefined && (!checks.enabled || (!lost && !leaseRanOut && lease.holds(shard)))

  /** Every line of this activation, replayed to each new subscriber (a re-sent `Events` misses nothing). */
  const history: Array<Wire.ItemEvent> = []
  const publish = (line: Record<string, unknown>) => {
    // A runner that lost the item says nothing more about it: what it would say is not what storage holds.
    if (lost) return
    const event = new Wire.ItemEvent({
      seq: local.nextSeq++,
      incarnation: info.runId,
      runner: info.address,
      line: { ...line, item: itemId }
    })
    history.push(event)
    hub.unsafeOffer(event)
  }

  /**
   * Ended when this activation stops driving the item (it lost it, or its lease ran out): the
   * live subscriptions open then end, so that their followers (`ClusterClient.follow`) subscribe
   * again and reach the runner that holds the item now. Without it a follower stayed on a runner
   * cut off from the store, which says nothing more about the item, and never saw the new owner's
   * lines (the stranded card's settlement among them). A new one is made for later subscriptions.
   */
  let subscriptionsEnd = Deferred.unsafeMake<void>(FiberId.none)
  const endSubscriptions = () => {
    Deferred.unsafeDone(subscriptionsEnd, Exit.void)
    subscriptionsEnd = Deferred.unsafeMake<void>(FiberId.none)
  }

  /** Stop the item's run here (its turn interrupted, its open cards refused), in the background. */
  const stopDriving = Effect.suspend(() => {
    endSubscriptions()
    return handle === undefined ? Effect.void : Effect.asVoid(Effect.forkIn(handle.stop, entityScope))
  })

  /** A conditional write changed nothing: another runner took the item. */
  const markLost = (what: string) =>
    Effect.suspend(() => {
      if (!checks.enabled || lost) return Effect.void
      lost = true
      return Effect.logWarning(
        `item ${itemId}: ${what} changed nothing: another runner holds the item (epoch above ${fence?.epoch ?? 0}); this runner writes nothing more for it and stops driving it`
      ).pipe(Effect.zipRight(stopDriving))
    })

  /** The lease on the item's shard ran out: stop driving the item before another runner can own the shard. */
  const onLeaseRanOut = Effect.suspend(() => {
    if (!checks.enabled || leaseRanOut || lost || fence === undefined) return Effect.void
    leaseRanOut = true
    return Effect.logWarning(
      `item ${itemId}: this runner's hold on shard ${shard.toString()} was last confirmed too long ago; it stops the item before the shard can go to another runner`
    ).pipe(Effect.zipRight(stopDriving))
  })

  /** Wakes when the lease would run out; stops the item if it was not renewed meanwhile. */
  const watchLease = Effect.gen(function* () {
    while (true) {
      const left = lease.remaining(shard)
      if (left <= 0) return yield* onLeaseRanOut
      if (!Number.isFinite(left)) return yield* Effect.never
      yield* Effect.sleep(left)
    }
  })

  /** Until the lease on the item's shard holds (the engine closes the entity meanwhile if the shard went elsewhere). */
  const awaitLease: Effect.Effect<void> = Effect.suspend(() =>
    lease.holds(shard) ? Effect.void : Effect.zipRight(Effect.sleep("200 millis"), awaitLease)
  )

  /**
   * This activation lost the item (or never got it): it never replies. The engine closes the
   * entity once its shard is released here (a persisted `Run` interrupted by that gets no stored
   * reply), and the item's reply comes from the runner that holds it.
   */
  const parkLost = (what: string) => Effect.zipRight(markLost(what), Effect.never)

  // Approval events of this item: written to storage first, then published (so what a client saw is stored).
  const onApproval = (event: ApprovalEvent.ApprovalEvent) =>
    Effect.gen(function* () {
      if (event._tag === "CardOpened") {
        if (event.card.workItem !== itemId || fence === undefined || lost) return
        const id = Wire.globalCardId(info.runId, event.card.id)
        const view = CardView.encode(event.card, id, itemId)
        if (!(yield* store.cardOpened({ id, itemId, method: event.card.method, view }, fence)))
          return yield* markLost(`recording card ${id}`)
        const line = {
          type: "card.opened",
          card: id,
          method: event.card.method,
          title: SecretMask.maskText(event.card.title),
          threadId: event.card.threadId ?? null,
          turnId: event.card.turnId ?? null,
          runner: info.address
        }
        openCards.set(id, line)
        publish(line)
      } else if (event._tag === "CardSettled") {
        const card = event.settlement.card
        if (card.workItem !== itemId) return
        const id = Wire.globalCardId(info.runId, card.id)
        openCards.delete(id)
        if (fence === undefined || lost) return
        const outcome = event.settlement.outcome
        const source = sourceOf(event.settlement.source)
        const settled = yield* store.settleCard(id, outcome, source, fence)
        if (settled._tag === "Lost") return yield* markLost(`settling card ${id}`)
        if (settled._tag === "Already" && settled.row.outcome !== outcome) {
          // A person's decision recorded before it was written (`Answer`), but the card's own race
          // settled it otherwise meanwhile: the row is put right. Anything else (stranded by the
          // runner that took the item) means the item is no longer this runner's.
          const ours =
            settled.row.settledBy === fence.incarnation &&
            settled.row.settledEpoch === fence.epoch &&
            settled.row.source === "person"
          if (!ours || !(yield* store.correctCard(id, { from: settled.row.outcome!, to: outcome, source }, fence))) {
            return yield* markLost(`settling card ${id} (stored ${settled.row.outcome})`)
          }
        }
        publish({ type: "card.settled", card: id, outcome, source, latencyMs: event.settlement.latencyMs })
      }
    }).pipe(Effect.uninterruptible)

  /**
   * Keep the thread's state as of the turn that just completed (`ThreadState`), under the item's
   * epoch; false when the item is held under another epoch. A state that cannot be taken is said
   * (`thread.unsaved`) and logged, and the item goes on: only a move to another host needs it.
   */
  const keepThreadState = (thread: string, turnId: string): Effect.Effect<boolean> =>
    ThreadState.capture({ codexHome: info.codexHome, threadId: thread, turnId, path: rolloutPath }).pipe(
      Effect.flatMap((snapshot) => {
        rolloutPath = snapshot.path
        return fence === undefined
          ? Effect.succeed(false)
          : store.saveThreadState(itemId, { ...snapshot, turns: turnsDone }, fence)
      }),
      Effect.catchAll((error) =>
        Effect.as(
          Effect.zipRight(
            Effect.logWarning(`item ${itemId}: its thread state was not kept: ${SecretMask.maskText(error.detail)}`),
            Effect.sync(() =>
              publish({ type: "thread.unsaved", reason: error.reason, detail: SecretMask.maskText(error.detail) })
            )
          ),
          true
        )
      )
    )

  /**
   * Bring the thread of an item that moved from another host (or codex home) into this runner's
   * codex home from its kept state. Undefined once it is there; otherwise why it cannot be.
   */
  const restoreThread = (before: ItemRow & { readonly threadId: string }): Effect.Effect<string | undefined> =>
    Effect.gen(function* () {
      const where = `thread ${before.threadId} lives in the codex home ${before.codexHome} of runner ${before.runner} on host ${before.host}`
      if (!info.threadState) return `${where}; this runner keeps no thread state (threadState off) and cannot resume it`
      const state = yield* store.threadState(itemId)
      if ((state === undefined || state.threadId !== before.threadId) && before.turnsDone === 0) {
        // No turn of it completed: nothing is lost by starting its first turn again in a new
        // thread (as a resume would run the unfinished turn again), and it is said.
        freshThread = `thread ${before.threadId} of runner ${before.runner} (host ${before.host}, codex home ${before.codexHome}) had no completed turn and no kept state; its first turn runs again in a new thread here`
        return undefined
      }
      if (state === undefined || state.threadId !== before.threadId) {
        return `${where}; its state was never kept in the fleet's store (no turn of it completed with thread state kept), so this runner (host ${info.host}, codex home ${info.codexHome}) cannot resume it`
      }
      if (state.turns !== before.turnsDone) {
        return `${where}; the state kept in the fleet's store covers ${state.turns} of its ${before.turnsDone} completed turns, so resuming it here would lose turns`
      }
      const restored = yield* Effect.either(ThreadState.restore(info.codexHome, state))
      if (restored._tag === "Left")
        return `${where}; its kept state could not be restored here: ${restored.left.detail}`
      rolloutPath = state.path
      publish({
        type: "thread.restored",
        threadId: before.threadId,
        from: before.host,
        turns: state.turns,
        bytes: state.bytes
      })
      return undefined
    })

  const onWork = (event: WorkItem.WorkEvent) =>
    Effect.gen(function* () {
      if (lost || fence === undefined) return
      switch (event._tag) {
        case "ThreadReady":
          threadId = event.threadId
          if (!(yield* store.setThread(itemId, event.threadId, fence))) return yield* markLost("recording its thread")
          publish({ type: event.resumed ? "thread.resumed" : "thread.ready", threadId: event.threadId })
          return
        case "ThreadStartedFresh":
          publish({
            type: "thread.fresh",
            missingThreadId: event.missingThreadId,
            detail: SecretMask.maskText(event.detail)
          })
          return
        case "TurnStarted":
          publish({ type: "turn.started", threadId: event.threadId, turnId: event.turnId })
          return
        case "TurnCompleted":
          if (event.turn.status === "completed") {
            if (!(yield* store.turnDone(itemId, fence))) return yield* markLost("recording a turn done")
            turnsDone += 1
            // Kept while a turn is left to run (after the last one the item ends: nothing to resume).
            if (
              info.threadState &&
              turnsDone < promptCount &&
              !(yield* keepThreadState(event.threadId, event.turn.turnId))
            ) {
              return yield* markLost("keeping its thread state")
            }
          }
          publish({
            type: "turn.completed",
            threadId: event.threadId,
            turnId: event.turn.turnId,
            status: event.turn.status
          })
          return
        case "Resumed":
          publish({ type: "thread.resumed", threadId: event.threadId, attempt: event.attempt })
          return
        case "ConnectionLost":
          publish({ type: "connection.lost", detail: SecretMask.maskText(event.detail) })
          return
        default:
          return
      }
    }).pipe(Effect.uninterruptible)

  /** The item's end, recorded if this activation still holds it; otherwise it never replies. */
  const finish = (result: Wire.RunResult) =>
    Effect.gen(function* () {
      if (
        fence === undefined ||
        lost ||
        !(yield* store.finish(itemId, statusOf(result), encodeResult(result), fence))
      ) {
        return yield* parkLost("recording its end")
      }
      publish({ type: "item.finished", status: statusOf(result), result: Schema.encodeSync(Wire.RunResult)(result) })
      // Nothing more is published for a finished item: a later activation may start its lines at 0.
      if (localItems.get(itemId) === local) localItems.delete(itemId)
      return result
    })

  /**
   * Take the item and run it to its end. `restart` is set when this activation runs it again
   * itself (its lease ran out and was renewed): the item must still be held under the epoch it
   * had, or someone else took it meanwhile.
   */
  const run = (spec: Wire.ItemSpec, restart?: Wire.MoveReason): Effect.Effect<Wire.RunResult> =>
    Effect.gen(function* () {
      const before = yield* store.get(itemId)
      if (restart === undefined && before !== undefined && final(before.status) && before.result !== null) {
        const stored = decodeResult(before.result)
        if (Option.isSome(stored)) return stored.value
      }
      if (restart !== undefined && (before === undefined || before.epoch !== fence?.epoch))
        return yield* parkLost("taking the item again")
      // Taken only while the lease holds: the engine delivered the `Run` after acquiring the shard,
      // and a runner paused since then must not take the item from whoever owns the shard now.
      yield* awaitLease
      const reason = restart ?? moveReason(before, info.runId)
      const claimed = yield* store.claim(itemId, holder, { before, reason })
      if (claimed === undefined) return yield* parkLost("taking the item")
      fence = { incarnation: info.runId, epoch: claimed.epoch }
      leaseRanOut = false
      const moves = claimed.moves
      if (before !== undefined && reason !== undefined) {
        // Open cards of earlier epochs (a runner that died with them open, or whose writes were
        // cut off): stranded, once. Cards settled by the runs before were recorded then.
        const stranded = yield* store.strand(itemId, fence)
        // What the earlier runs settled themselves (refused while shutting down, or while their
        // shard was let go of) may never have reached a subscriber: told again, marked replayed.
        for (const card of yield* store.cards({ itemId })) {
          if (card.outcome !== null && !stranded.includes(card.id)) {
            publish({ type: "card.settled", card: card.id, outcome: card.outcome, source: card.source, replayed: true })
          }
        }
        for (const card of stranded) publish({ type: "card.settled", card, outcome: "stranded", source: "stranded" })
        // The audit trail says the same: the cards stranded here, stranded once in the ledger runs of
        // the incarnations that opened them. Only those: a card the earlier runner settled itself
        // (refused while letting the item go) is recorded by that runner's own ledger writer, which
        // may not have written it yet; stranding it here would make the two records disagree.
        if (recording !== undefined) {
          const byRun = new Map<string, Array<string>>()
          for (const id of stranded) {
            const parsed = Wire.parseCardId(id)
            if (parsed === undefined || parsed.runId === info.runId) continue
            byRun.set(parsed.runId, [...(byRun.get(parsed.runId) ?? []), parsed.cardId])
          }
          for (const [runId, cards] of byRun) {
            yield* recording.ledger
              .markStrandedItem(runId, itemId, cards)
              .pipe(Effect.catchAll((e) => Effect.logWarning(`ledger: ${SecretMask.maskText(e.message)}`)))
          }
        }
        publish({ type: "item.moved", from: before.runner, to: info.address, reason, stranded, epoch: fence.epoch })
        // The thread lives in the codex home of the runner that ran it: on another host (or in
        // another codex home) it is resumed from the state kept in the store, or the item fails
        // saying why (starting a fresh thread would hide the loss of its turns).
        const elsewhere =
          before.threadId !== null &&
          before.host !== null &&
          (before.host !== info.host || before.codexHome !== info.codexHome)
        if (elsewhere) {
          const unreachable = yield* restoreThread({ ...before, threadId: before.threadId! })
          if (unreachable !== undefined) {
            return yield* finish(
              new Wire.Failed({
                reason: "thread-unreachable",
                detail: SecretMask.maskText(unreachable),
                threadId: before.threadId
              })
            )
          }
        }
      }
      if (before?.status === "stop-requested" || stopRequested) {
        return yield* finish(new Wire.Stopped({ threadId: before?.threadId ?? null }))
      }
      publish({ type: "item.placed", runner: info.address, incarnation: info.runId, epoch: fence.epoch })
      const doneBefore = before?.turnsDone ?? 0
      turnsDone = doneBefore
      promptCount = 1 + (spec.followUps?.length ?? 0)
      const prompts = [spec.prompt, ...(spec.followUps ?? [])].slice(doneBefore)
      threadId = freshThread === undefined ? (before?.threadId ?? undefined) : undefined
      if (freshThread !== undefined) {
        publish({
          type: "thread.fresh",
          missingThreadId: before?.threadId ?? null,
          detail: SecretMask.maskText(freshThread)
        })
        freshThread = undefined
      }
      if (prompts.length === 0 && threadId !== undefined) {
        return yield* finish(
          new Wire.Completed({ threadId, status: "completed", finalMessage: null, turns: doneBefore, moves })
        )
      }
      const work: WorkItem.WorkItem = {
        id: itemId,
        prompt: prompts[0] ?? spec.prompt,
        followUps: prompts.slice(1),
        ...(threadId !== undefined ? { threadId, ifThreadMissing: "start" as const } : {}),
        ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
        ...(spec.model !== undefined ? { model: spec.model } : {}),
        ...(spec.approvalPolicy !== undefined ? { approvalPolicy: spec.approvalPolicy } : {}),
        ...(spec.sandbox !== undefined ? { sandbox: spec.sandbox } : {})
      }
      recording?.run.record(LedgerEvent.itemSubmitted(work))
      const exit = yield* Effect.scoped(
        Effect.gen(function* () {
          // Whatever ends the item (its end, a stop, this runner shutting down), the approval
          // events already published for it are handled before the scope closes (`settle`: a
          // reader stopped by an interrupt could lose the event it had just been handed, such
          // as the refusal that settled a card as the item stopped).
          const approvals = yield* EventPump.make(yield* supervisor.subscribeApprovals, onApproval)
          const drain = approvals.settle
          const exit = yield* Effect.scoped(
            Effect.gen(function* () {
              running = true
              const h = yield* supervisor.start(work)
              handle = h
              yield* Effect.forkScoped(watchLease)
              const events = yield* Stream.runForEach(h.events, onWork).pipe(Effect.forkScoped)
              const exit = yield* Effect.exit(h.await)
              yield* Fiber.join(events)
              return exit
            })
          ).pipe(
            Effect.ensuring(
              Effect.sync(() => {
                running = false
                handle = undefined
              })
            ),
            Effect.onInterrupt(() => drain)
          )
          yield* drain
          return exit
        })
      )
      if (lost) return yield* parkLost("driving the item")
      if (leaseRanOut) {
        // Stopped because the lease ran out. If it is renewed (nobody took the shard), the item
        // runs again here, a move of its own; if the shard went elsewhere, the engine closes
        // this entity while it waits.
        yield* awaitLease
        return yield* run(spec, "lease-lost")
      }
      const result: Wire.RunResult = Exit.match(exit, {
        onSuccess: (r) =>
          new Wire.Completed({
            threadId: r.threadId,
            status: r.status,
            finalMessage: r.finalMessage === undefined ? null : SecretMask.maskText(r.finalMessage),
            turns: doneBefore + r.turns.length,
            moves
          }),
        onFailure: (cause) => {
          if (stopRequested) return new Wire.Stopped({ threadId: threadId ?? null })
          const failure = Cause.failureOption(cause)
          if (Option.isSome(failure)) {
            const e: Errors.WorkItemFailed = failure.value
            return new Wire.Failed({
              reason: e.reason,
              detail: SecretMask.maskText(e.detail),
              threadId: e.threadId ?? threadId ?? null
            })
          }
          return new Wire.Failed({
            reason: "defect",
            detail: SecretMask.maskText(Cause.pretty(cause)),
            threadId: threadId ?? null
          })
        }
      })
      return yield* finish(result)
    })

  /**
   * One run per activation: a `Run` delivered again while the first runs (the engine may deliver a
   * persisted request again, e.g. after its shard was re-acquired) joins the first instead of
   * resuming the thread a second time. A run that did not succeed (interrupted) lets the next
   * delivery start afresh, also one that joined it while it was stopping.
   */
  const runOnce = (spec: Wire.ItemSpec): Effect.Effect<Wire.RunResult> =>
    Effect.suspend(() => {
      const running = local.run
      if (running !== undefined) {
        publish({ type: "item.redelivered" })
        // A run cut off while stopping (its shard let go of, then taken back before it had
        // stopped) ends without a result: this delivery runs the item, it does not take the cut.
        return Deferred.await(running).pipe(
          Effect.catchAllCause(() =>
            Effect.suspend(() => {
              if (local.run === running) local.run = undefined
              return runOnce(spec)
            })
          )
        )
      }
      const done = Deferred.unsafeMake<Wire.RunResult>(FiberId.none)
      local.run = done
      localItems.set(itemId, local)
      return run(spec).pipe(
        Effect.onExit((exit) =>
          Effect.suspend(() => {
            if (local.run === done) local.run = undefined
            return Deferred.done(done, exit)
          })
        )
      )
    })

  const notActive = (detail: string) => new Wire.ItemNotActive({ itemId, detail })

  /**
   * An item that ended before this activation (on this runner or another, which may have given
   * up the shard since): its cards' settlements and its end, told again from storage, marked
   * `replayed`, so that a follower that reaches this activation only (`ClusterClient.follow`
   * after a move) still learns how every card and the item ended (a card stranded by the runner
   * that finished the item among them). Published once per activation (cached).
   */
  const replayEnd = yield* Effect.cached(
    Effect.gen(function* () {
      for (const card of yield* store.cards({ itemId }))
        if (card.outcome !== null)
          publish({ type: "card.settled", card: card.id, outcome: card.outcome, source: card.source, replayed: true })
      const row = yield* store.get(itemId)
      const stored = row?.result === null || row?.result === undefined ? Option.none() : decodeResult(row.result)
      if (row !== undefined && Option.isSome(stored))
        publish({
          type: "item.finished",
          status: row.status,
          result: Schema.encodeSync(Wire.RunResult)(stored.value),
          replayed: true
        })
    })
  )

  const liveStatus = Effect.gen(function* () {
    const row = yield* store.get(itemId)
    return new Wire.ItemStatus({
      status: running ? "running" : (row?.status ?? "unknown"),
      runner: running ? info.address : (row?.runner ?? null),
      incarnation: running ? info.runId : (row?.incarnation ?? null),
      threadId: threadId ?? row?.threadId ?? null,
      turnsDone: row?.turnsDone ?? 0,
      openCards: [...openCards.keys()]
    })
  })

  /** What a stored card says to a decision that decides nothing: its settlement, else no card. */
  const fromStorage = (cardId: string) =>
    Effect.map(
      store.card(cardId),
      (row): Wire.AnswerWire =>
        row !== undefined && row.itemId === itemId && row.outcome !== null
          ? new Wire.AlreadySettled({ outcome: row.outcome })
          : new Wire.UnknownCard({ cardId })
    )

  /**
   * A decision for a card this process opened. Storage first: the settlement is written only if
   * the card is open there and the item is held under this activation's epoch; only then does the
   * decision go to codex, in the same step as a last check of the lease. A card stranded by the
   * runner that took the item is therefore never accepted here.
   */
  const answerLocal = (cardId: string, localId: string, decision: Decision.Decision) =>
    Effect.gen(function* () {
      const row = yield* store.card(cardId)
      if (row === undefined || row.itemId !== itemId) return new Wire.UnknownCard({ cardId })
      if (row.outcome !== null) {
        // Settled under a later epoch than this activation's (stranded by the runner that took
        // the item): the item is no longer this runner's.
        if (fence !== undefined && row.settledEpoch !== null && row.settledEpoch > fence.epoch)
          yield* markLost(`card ${cardId}, settled under epoch ${row.settledEpoch},`)
        return new Wire.AlreadySettled({ outcome: row.outcome })
      }
      const open = (yield* supervisor.inbox.open).some((card) => card.id === localId)
      if (!open) {
        // Settled here already (its row is being written) or never opened by this supervisor:
        // the inbox writes nothing for it and says which.
        const result = yield* supervisor.inbox.answer(localId, decision)
        return result._tag === "UnknownCard"
          ? new Wire.UnknownCard({ cardId })
          : new Wire.AlreadySettled({ outcome: result.settlement.outcome })
      }
      if (!drives()) {
        if (fence !== undefined && !lost && !lease.holds(shard)) yield* onLeaseRanOut
        return yield* fromStorage(cardId)
      }
      const reserved = yield* store.settleCard(cardId, outcomeOf(decision), "person", fence!)
      if (reserved._tag === "Already") return new Wire.AlreadySettled({ outcome: reserved.row.outcome! })
      if (reserved._tag === "Lost") {
        yield* markLost(`settling card ${cardId}`)
        return yield* fromStorage(cardId)
      }
      // Recorded: now to codex, unless the lease ran out during the write (then the item's stop
      // refuses the card, and the row is put right from that settlement).
      const result = yield* Effect.suspend(() =>
        drives() ? Effect.asSome(supervisor.inbox.answer(localId, decision)) : Effect.succeedNone
      )
      if (Option.isNone(result)) {
        yield* onLeaseRanOut
        return new Wire.UnknownCard({ cardId })
      }
      switch (result.value._tag) {
        case "Settled":
          return new Wire.Settled({ outcome: result.value.settlement.outcome })
        case "AlreadySettled":
          return new Wire.AlreadySettled({ outcome: result.value.settlement.outcome })
        case "UnknownCard":
          return new Wire.UnknownCard({ cardId })
      }
    })

  return WorkItemEntity.of({
    Run: (request) => runOnce(request.payload.spec),
    Steer: (request) =>
      handle === undefined || !drives()
        ? Effect.fail(notActive("not running on this runner"))
        : handle
            .steer(request.payload.text)
            .pipe(Effect.mapError((e) => notActive(e._tag === "NoActiveTurn" ? "no running turn" : e.message))),
    Interrupt: () =>
      handle === undefined
        ? Effect.fail(notActive("not running on this runner"))
        : handle.interrupt.pipe(Effect.mapError(() => notActive("no running turn"))),
    Stop: () =>
      Effect.gen(function* () {
        stopRequested = true
        if (handle !== undefined) return yield* handle.stop
        const row = yield* store.get(itemId)
        if (row !== undefined && !final(row.status)) yield* store.requestStop(itemId)
      }),
    Status: () => liveStatus,
    Events: () =>
      Stream.unwrapScoped(
        Effect.gen(function* () {
          const subscription = yield* PubSub.subscribe(hub)
          const status = yield* liveStatus
          const snapshot = new Wire.ItemEvent({
            seq: -1,
            incarnation: info.runId,
            runner: info.address,
            line: {
              type: "item.snapshot",
              item: itemId,
              status: status.status,
              threadId: status.threadId,
              openCards: [...openCards.values()]
            }
          })
          if (!running && final(status.status)) {
            // Ended, and not by this activation: how it ended, told again from storage (once).
            if (history.length === 0) yield* replayEnd
            return Stream.make(snapshot, ...history.slice())
          }
          const past = history.slice()
          if (past.some((e) => e.line["type"] === "item.finished")) return Stream.make(snapshot, ...past)
          // An activation that lost the item says nothing more: what it had said, and the end.
          if (lost) return Stream.make(snapshot, ...past)
          return Stream.concat(
            Stream.make(snapshot, ...past),
            Stream.fromQueue(subscription).pipe(
              Stream.filter((e) => e.seq >= firstSeq + past.length),
              Stream.takeUntil((e) => e.line["type"] === "item.finished"),
              Stream.interruptWhen(Deferred.await(subscriptionsEnd))
            )
          )
        })
      ),
    Answer: (request) =>
      Effect.gen(function* () {
        const { cardId } = request.payload
        const parsed = Wire.parseCardId(cardId)
        if (parsed === undefined) return new Wire.UnknownCard({ cardId })
        if (parsed.runId === info.runId)
          return yield* answerLocal(cardId, parsed.cardId, request.payload.decision as Decision.Decision)
        // A card of another incarnation: nothing is written anywhere.
        return yield* fromStorage(cardId)
      })
  })
})
