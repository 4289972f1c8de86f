/**
 * What `Supervisor.start` keeps for a work item besides its fiber: its events until somebody
 * reads them, its thread id once known, and the handle's effects. An item can idle for hours, so
 * what it holds is plain state; the handle's effects (`threadId`, `events`, `await`, `stop`, ...)
 * are made when they are asked for (getters), and the events' mailbox when somebody reads them.
 */
import { Deferred, Effect, Exit, FiberId, Mailbox, Stream } from "effect"
import type { WorkEvent } from "../WorkItem.js"
import type { WorkItemFailed } from "../Errors.js"

/** A work item's events: kept in order until the first reader, then a mailbox (one consumer). */
export class ItemEvents {
  private kept: Array<WorkEvent> | undefined = []
  private mailbox: Mailbox.Mailbox<WorkEvent> | undefined = undefined
  private ended = false

  offer(event: WorkEvent): void {
    if (this.mailbox !== undefined) this.mailbox.unsafeOffer(event)
    else this.kept!.push(event)
  }

  /** The item ended: a reader gets what was kept, then the end. */
  end(): void {
    this.ended = true
    this.mailbox?.unsafeDone(Exit.void)
  }

  /** The events from the first one, ending when the item ends. */
  get stream(): Stream.Stream<WorkEvent> {
    return Stream.unwrap(
      Effect.map(Mailbox.make<WorkEvent>(), (made) => {
        if (this.mailbox === undefined) {
          made.unsafeOfferAll(this.kept!)
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
