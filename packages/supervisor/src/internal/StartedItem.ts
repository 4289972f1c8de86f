/**
 * What `Supervisor.start` keeps for a work item besides its fiber: its events until somebody
 * reads them, its thread id once known, and the handle's effects. An item can idle for hours, so
 * what it holds is plain state; the handle's effects (`threadId`, `events`, `await`, `stop`, ...)
 * are made when they are asked for (getters), and the events' mailbox when somebody reads them.
 *
 * Scope and fibers: none of its own. The item's fiber lives in the scope of `start`'s caller
 * (closing it stops the item); the handle only joins or interrupts it.
 */
import { Deferred, Effect, Exit, Fiber, FiberId, Mailbox, Stream } from "effect"
import type { Duration } from "effect"
import type { WorkEvent, WorkResult } from "../WorkItem.js"
import type { WorkItemFailed } from "../Errors.js"
import type { WorkHandle } from "../Supervisor.js"
import * as ThreadRunner from "./ThreadRunner.js"

/**
 * `steer` or `interrupt` found no running turn.
 *
 * The thread does not exist yet, or no turn of the item runs right now (between turns, or after
 * the item ended).
 */
export class NoActiveTurn extends Error {
  readonly _tag = "NoActiveTurn"
  constructor() {
    super("the work item has no running turn to steer or interrupt")
  }
}

/**
 * How many of a work item's latest events are kept until its events are first read. A handle whose
 * events nobody reads (`await` only, the facade's usual use) must not keep every notification of
 * every turn for as long as the item runs.
 */
export const KEPT_UNTIL_READ = 500

/**
 * A work item's events: kept in order until the first reader (the latest `KEPT_UNTIL_READ` of
 * them), then a mailbox (one consumer) that gets every event from then on.
 */
export class ItemEvents {
  private kept: Array<WorkEvent> | undefined = []
  private mailbox: Mailbox.Mailbox<WorkEvent> | undefined = undefined
  private ended = false

  offer(event: WorkEvent): void {
    if (this.mailbox !== undefined) return void this.mailbox.unsafeOffer(event)
    const kept = this.kept!
    kept.push(event)
    // Trimmed when twice the bound: amortized constant work per event, at most 2x the bound held.
    if (kept.length >= 2 * KEPT_UNTIL_READ) this.kept = kept.slice(kept.length - KEPT_UNTIL_READ)
  }

  /** The item ended: a reader gets what was kept, then the end. */
  end(): void {
    this.ended = true
    this.mailbox?.unsafeDone(Exit.void)
  }

  /**
   * The events from the first one, ending when the item ends; a reader that comes after more than
   * `KEPT_UNTIL_READ` events starts with the latest `KEPT_UNTIL_READ`.
   */
  get stream(): Stream.Stream<WorkEvent> {
    return Stream.unwrap(
      Effect.map(Mailbox.make<WorkEvent>(), (made) => {
        if (this.mailbox === undefined) {
          const kept = this.kept!
          made.unsafeOfferAll(kept.length > KEPT_UNTIL_READ ? kept.slice(kept.length - KEPT_UNTIL_READ) : kept)
          if (this.ended) made.unsafeDone(Exit.void)
          this.mailbox = made
          this.kept = undefined
        }
        return Mailbox.toStream(this.mailbox)
      })
    )
  }
}

/** A work item's thread id: known once the thread is ready, or the item's failure if it ended before. */
export class ThreadIdLatch {
  private exit: Exit.Exit<string, WorkItemFailed> | undefined = undefined
  private waiting: Deferred.Deferred<string, WorkItemFailed> | undefined = undefined

  /** The first call decides. */
  done(exit: Exit.Exit<string, WorkItemFailed>): void {
    if (this.exit !== undefined) return
    this.exit = exit
    if (this.waiting !== undefined) Deferred.unsafeDone(this.waiting, exit)
  }

  get await(): Effect.Effect<string, WorkItemFailed> {
    return Effect.suspend(() => {
      if (this.exit !== undefined) return this.exit
      this.waiting ??= Deferred.unsafeMake<string, WorkItemFailed>(FiberId.none)
      return Deferred.await(this.waiting)
    })
  }
}

/**
 * `start`'s handle. Its effects are made when asked for (getters: an idle item holds no effect
 * of its own), so a handle is a few fields; destructuring it works as for a plain object.
 */
export class Handle implements WorkHandle {
  constructor(
    private readonly fiber: Fiber.RuntimeFiber<WorkResult, WorkItemFailed>,
    private readonly liveThread: ThreadRunner.LiveThread,
    private readonly itemEvents: ItemEvents,
    private readonly threadIdLatch: ThreadIdLatch,
    private readonly interruptTimeout: Duration.Duration
  ) {}
  get threadId() {
    return this.threadIdLatch.await
  }
  get events() {
    return this.itemEvents.stream
  }
  get steer() {
    return (text: string) =>
      Effect.flatMap(this.activeTurn, ({ server, threadId, turnId }) =>
        server
          .request("turn/steer", { threadId, expectedTurnId: turnId, input: [{ type: "text", text }] })
          .pipe(Effect.asVoid)
      )
  }
  get interrupt() {
    return Effect.flatMap(this.activeTurn, ({ server, threadId, turnId }) =>
      ThreadRunner.interruptTurn(server, threadId, turnId, this.interruptTimeout)
    )
  }
  get await() {
    return Fiber.join(this.fiber)
  }
  get stop() {
    return Effect.asVoid(Fiber.interrupt(this.fiber))
  }
  private get activeTurn() {
    return Effect.suspend(() => {
      const { server, threadId, turnId } = this.liveThread
      return server && threadId && turnId
        ? Effect.succeed({ server, threadId, turnId })
        : Effect.fail(new NoActiveTurn())
    })
  }
}
