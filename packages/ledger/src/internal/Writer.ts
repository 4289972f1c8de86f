/**
 * The ledger's one writer: `offer` enqueues synchronously (never blocks, never fails, never does
 * I/O: it is safe on the engine's read loop), and a fiber in the ledger's scope writes what is
 * queued in batches, one transaction per slice of a batch.
 *
 * - The SQLite driver is synchronous: a transaction runs on the event loop. So the writer writes
 *   in slices (one transaction each, at most `maxBatch` ops or `sliceMs` of work) and lets the
 *   event loop and the other fibers run between slices (`setImmediate`).
 * - A transaction that finds the database locked by another process (`SQLITE_BUSY`,
 *   `SQLITE_LOCKED`: the connection has no busy timeout, so the driver never waits on the event
 *   loop) is run again after an asynchronous pause (5 ms doubling to 500 ms), for up to
 *   `lockTimeout` (default 5 minutes) from the first busy answer; closing waits the same way.
 *   Meanwhile what is recorded queues, and a warning says the writer waits (another when it
 *   writes again). Only past that bound are the records given up (lost, as below).
 * - A slice that fails otherwise is written again op by op, each in its own transaction, so one
 *   bad op costs itself only; an op that still fails is reported (`LedgerWriteFailed` on the
 *   failures hub and in the log) and counted. Lost records are counted on their run
 *   (`lost_events`) as soon as the database can be written again, and the writer goes on.
 *   Nothing here ever fails or blocks the code that offers.
 * - With a `capacity`, an op offered while that many wait is dropped and counted; the count is
 *   written to its run (`dropped_events`) with the next batch and logged, so a record with gaps
 *   says so. Without one (the default) nothing is dropped while the ledger is open.
 * - `close` ends the queue and waits for the fiber to write everything queued before it.
 * - `offerAll`, on a target that runs a transaction synchronously (the writer's own thread:
 *   `WorkerSql`), writes the first slice of what nothing waits before at once, in the offering
 *   step; the rest, and anything that fails there, goes to the fiber, which writes it by the rules
 *   above.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { SecretMask } from "@warden/approvals"
import { Cause, Chunk, Clock, Data, Deferred, Duration, Effect, Exit, Fiber, Mailbox, Option, PubSub } from "effect"
import type { Scope } from "effect"
import { performance } from "node:perf_hooks"
import * as Busy from "./Busy.js"
import * as Projection from "./Projection.js"
import { yieldToLoop } from "./Steps.js"

/**
 * A write the ledger could not make: reported, counted (on the run, as its `lostEvents`), and the
 * ledger goes on.
 */
export class LedgerWriteFailed extends Data.TaggedError("LedgerWriteFailed")<{
  /**
   * Why: `Locked` (another process held the database's lock longer than `lockTimeout`), or
   * `Failed` (the write itself failed: disk full, a broken file, a bug): those records are lost;
   * or `Audit`: the records are in the database, but the audit file (`LedgerOptions.audit`)
   * could not take their lines (counted in `Stats.auditFailed`, not in `failed`).
   */
  readonly reason: "Locked" | "Failed" | "Audit"
  /** How many recorded events (or run updates) were lost; for `Audit`, the card events whose lines are missing. */
  readonly events: number
  /** What they were, by kind (`CardSettled`, `ThreadReady`, ...); never their data. */
  readonly kinds: ReadonlyArray<string>
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    if (this.reason === "Audit")
      return `the audit file is missing ${this.events} line${this.events === 1 ? "" : "s"} (${this.kinds.join(", ")}): ${this.detail}`
    return `the ledger could not record ${this.events} event${this.events === 1 ? "" : "s"} (${this.kinds.join(", ")}): ${
      this.reason === "Locked" ? "the database stayed locked by another process: " : ""
    }${this.detail}`
  }
}

/** The ledger writer's counters since it started (`Ledger.stats`, `Ledger.flush`), counted in ops (events and run updates). */
export interface Stats {
  /** Ops accepted into the queue. */
  readonly recorded: number
  /** Ops written (committed). */
  readonly written: number
  /** Ops that could not be written (each reported, and counted on its run as `lostEvents`). */
  readonly failed: number
  /**
   * Card events written to the database whose line the audit file could not take (each write
   * reported, `LedgerWriteFailed` of reason `Audit`); 0 without an audit file.
   */
  readonly auditFailed: number
  /** Ops dropped: the queue was full (`capacity`) or the ledger had closed. */
  readonly dropped: number
  /** Ops waiting to be written. */
  readonly pending: number
  /** Transactions committed. */
  readonly batches: number
}

export interface WriterOptions {
  /** Ops in one transaction at most (default 1000). */
  readonly maxBatch?: number
  /**
   * How long one transaction may hold the event loop, in milliseconds (default 4): the SQLite
   * driver is synchronous, so the writer writes in slices this long and lets the event loop and
   * the other fibers run between them (`setImmediate`).
   */
  readonly sliceMs?: number
  /** Ops waiting at most; more are dropped and counted (default: unbounded). */
  readonly capacity?: number
  /**
   * How long a write waits while another process holds the database's lock, retrying with an
   * asynchronous backoff (the event loop is never blocked), before its records are given up and
   * counted lost (default 5 minutes; closing the ledger waits the same way).
   */
  readonly lockTimeout?: Duration.DurationInput
}

/**
 * Where the writer writes: one transaction at a time. `clientTarget` runs each op's statements as
 * effects on an `SqlClient` (any dialect); `WorkerSql.target` runs a whole transaction as plain
 * code on a synchronous SQLite connection (the writer's thread). The object is also the key of
 * what it committed (`Projection.committed`).
 */
export interface Target {
  /**
   * One transaction: the ops from `from` on, in order, each taken while `take()` says so (asked
   * before each, while ops are left), their statements made as it reaches them
   * (`Projection.apply`); committed, or rolled back (nothing of it kept) when it fails.
   */
  readonly transaction: (
    ops: ReadonlyArray<Projection.Op>,
    from: number,
    take: () => boolean
  ) => Effect.Effect<void, SqlError>
  /**
   * The same transaction run now, in the caller's step: undefined once committed, else why it
   * failed (rolled back). Only a target on a synchronous connection has it (`WorkerSql`): then
   * `Writer.offerAll` may write at once (see there).
   */
  readonly runNow?: (ops: ReadonlyArray<Projection.Op>, from: number, take: () => boolean) => SqlError | undefined
}

/** A target on an `SqlClient`: each op's statements run as effects, inside the client's transaction. */
export const clientTarget = (client: SqlClient.SqlClient): Target => {
  const target: Target = {
    transaction: (ops, from, take) =>
      Effect.suspend(() => {
        const tx = Projection.transaction(target)
        let at = from
        const step: Effect.Effect<void, SqlError> = Effect.suspend(() => {
          if (at >= ops.length || !take()) return Effect.void
          return Effect.zipRight(Projection.execute(client, Projection.apply(ops[at++]!, tx)), step)
        })
        return client.withTransaction(step)
      })
  }
  return target
}

export interface Writer {
  readonly offer: (op: Projection.Op) => boolean
  /**
   * Offer `ops`, in order, as `offer` would each; how many were dropped. When the target runs a
   * transaction synchronously (`Target.runNow`: the writer's thread) and nothing is before them
   * (nothing queued, the fiber waiting for ops, the database not found locked, no count to write,
   * no `capacity`), their first slice (`maxBatch`, `sliceMs`) is written at once, in this step,
   * and followed by `afterSlice` as the fiber's slices are: on a thread that does nothing else,
   * the fiber's steps around a slice (its wake-up, its turns of the event loop) cost more than the
   * slice's own work when records trickle in (a few at a time: one slice). What is left after it
   * (a large batch) is queued for the fiber, slice by slice with a turn of the loop between, as
   * before. A slice that fails is not tried again here: its ops are queued too, and the fiber
   * writes them as any it takes (waiting out a lock, op by op after another failure, reporting
   * what it gives up).
   */
  readonly offerAll: (ops: ReadonlyArray<Projection.Op>) => number
  /** Resolves once every op offered before it is written (or failed, reported). */
  readonly flush: Effect.Effect<Stats>
  readonly stats: () => Stats
  readonly failures: PubSub.PubSub<LedgerWriteFailed>
  /** No more ops; write what is queued; wait for it. */
  readonly close: Effect.Effect<void>
}

const detailOf = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  const raw =
    error instanceof Error
      ? `${error.message}${(error as { cause?: unknown }).cause instanceof Error ? `: ${((error as { cause?: Error }).cause as Error).message}` : ""}`
      : String(error)
  return SecretMask.maskShown(raw, 500)
}

/** Offers each op in turn (`Writer.offerAll` where no transaction can run at once): how many were dropped. */
export const offerEach = (offer: (op: Projection.Op) => boolean, ops: ReadonlyArray<Projection.Op>): number => {
  let dropped = 0
  for (const op of ops) if (!offer(op)) dropped++
  return dropped
}

/**
 * What follows a written slice (`make`'s `afterSlice`): `written` tells which ops were committed;
 * `auditFailed` takes what the audit file could not write (counted and reported by the writer).
 */
export type AfterSlice = (
  ops: ReadonlyArray<Projection.Op>,
  written: (op: Projection.Op) => boolean,
  auditFailed: (failure: LedgerWriteFailed) => void
) => void

/** The writer, its fiber forked in the caller's scope (the ledger's). */
export const make = (
  target: Target,
  options: WriterOptions = {},
  /**
   * Called with each slice's ops once they are written (or reported failed), in order, in the
   * writer's step (synchronous; it reports its own failures); `written` tells which were committed
   * (an op given up, locked out or failing, was not).
   */
  afterSlice?: AfterSlice,
  /** Where its failures are published (a new hub unless given). */
  failuresHub?: PubSub.PubSub<LedgerWriteFailed>,
  /** Told each failure as it is reported (before the slice's `afterSlice` returns), besides the hub. */
  reported?: (failure: LedgerWriteFailed) => void
): Effect.Effect<Writer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const maxBatch = Math.max(1, options.maxBatch ?? 1000)
    const sliceMs = Math.max(0, options.sliceMs ?? 4)
    const capacity = options.capacity
    const lockTimeout = Duration.decode(options.lockTimeout ?? Busy.DefaultTimeout)
    const lockTimeoutMs = Duration.toMillis(lockTimeout)
    const mailbox = yield* Mailbox.make<Projection.Op>()
    const failures = failuresHub ?? (yield* PubSub.unbounded<LedgerWriteFailed>())
    let recorded = 0
    let processed = 0
    let written = 0
    let failed = 0
    let auditFailed = 0
    let droppedTotal = 0
    let batches = 0
    let open = true
    /** Drops not yet written to their runs. */
    const droppedByRun = new Map<string, number>()
    /** Lost records not yet counted on their runs, and the runs whose own row was lost. */
    const lostByRun = new Map<string, number>()
    const lostStarts = new Map<string, Projection.Op>()
    /** Since when the database has answered busy without a write going through (undefined: it has not). */
    let lockedSince: number | undefined
    const waiters: Array<{ readonly target: number; readonly done: Deferred.Deferred<void> }> = []

    const stats = (): Stats => ({
      recorded,
      written,
      failed,
      auditFailed,
      dropped: droppedTotal,
      pending: recorded - processed,
      batches
    })

    const runOf = (op: Projection.Op) => (op._tag === "RunStarted" ? op.run.runId : op.runId)

    /** Drops not yet said in the log. */
    let droppedUnsaid = 0

    const drop = (op: Projection.Op) => {
      droppedTotal++
      droppedUnsaid++
      droppedByRun.set(runOf(op), (droppedByRun.get(runOf(op)) ?? 0) + 1)
    }

    const offer = (op: Projection.Op): boolean => {
      if (!open || (capacity !== undefined && recorded - processed >= capacity) || !mailbox.unsafeOffer(op)) {
        drop(op)
        return false
      }
      recorded++
      return true
    }

    /** Every op, in one transaction. */
    const all = () => true

    /** Ops given up (reported): `afterSlice` is told they were not written. */
    const given = new WeakSet<Projection.Op>()
    const isWritten = (op: Projection.Op) => !given.has(op)

    const report = (ops: ReadonlyArray<Projection.Op>, cause: Cause.Cause<unknown>) => {
      for (const op of ops) {
        given.add(op)
        lostByRun.set(runOf(op), (lostByRun.get(runOf(op)) ?? 0) + 1)
        if (op._tag === "RunStarted") lostStarts.set(op.run.runId, op)
      }
      const error = new LedgerWriteFailed({
        reason: Busy.isBusy(cause) ? "Locked" : "Failed",
        events: ops.length,
        kinds: [...new Set(ops.map(Projection.describe))].slice(0, 8),
        detail: detailOf(cause),
        cause: Cause.squash(cause)
      })
      failed += ops.length
      reported?.(error)
      failures.unsafeOffer(error)
      return Effect.logError(error.message)
    }

    /** Lines the audit file could not take (their records are written): counted, reported, logged by the file. */
    const reportAudit = (failure: LedgerWriteFailed) => {
      auditFailed += failure.events
      reported?.(failure)
      failures.unsafeOffer(failure)
    }

    /**
     * Run a transaction until it goes through, fails otherwise, or the database has been locked
     * for `lockTimeout` (counted from the first busy answer of this lock, across transactions: once
     * it is past, each transaction has one try until one goes through). Never blocks the event loop.
     */
    const persist = <A>(transaction: Effect.Effect<A, SqlError>): Effect.Effect<Exit.Exit<A, SqlError>> =>
      Effect.gen(function* () {
        for (let attempt = 0; ; attempt++) {
          const exit = yield* Effect.exit(transaction)
          const now = yield* Clock.currentTimeMillis
          if (Exit.isSuccess(exit)) {
            if (lockedSince !== undefined) {
              yield* Effect.logWarning(
                `the ledger's database can be written again (it was locked for ${Duration.format(Duration.millis(now - lockedSince))})`
              )
              lockedSince = undefined
            }
            return exit
          }
          if (!Busy.isBusy(exit.cause)) return exit
          if (lockedSince === undefined) {
            lockedSince = now
            yield* Effect.logWarning(
              `the ledger's database is locked by another process (${detailOf(exit.cause)}): waiting up to ${Duration.format(lockTimeout)} to write, records are kept meanwhile`
            )
          }
          const left = lockedSince + lockTimeoutMs - now
          if (left <= 0) return exit
          yield* Effect.sleep(Duration.millis(Math.min(left, Busy.delayMs(attempt))))
        }
      })

    /** Each op in a transaction of its own: a bad op costs only itself (reported). */
    const writeOneByOne = (ops: ReadonlyArray<Projection.Op>): Effect.Effect<void> =>
      Effect.forEach(
        ops,
        (op) =>
          persist(target.transaction([op], 0, all)).pipe(
            Effect.flatMap((one) => {
              if (Exit.isSuccess(one)) {
                written++
                batches++
                return Effect.void
              }
              return report([op], one.cause)
            })
          ),
        { discard: true }
      )

    /**
     * A slice's count: `take` says whether the transaction takes one more op (at most `maxBatch`,
     * and none past the first once `sliceMs` are spent since `start`), `taken` how many it took.
     */
    const slicing = () => {
      const slice = {
        taken: 0,
        started: 0,
        start: () => {
          slice.started = performance.now()
          slice.taken = 0
        },
        take: () => {
          if (slice.taken >= maxBatch || (slice.taken > 0 && performance.now() - slice.started >= sliceMs)) return false
          slice.taken++
          return true
        }
      }
      return slice
    }

    /**
     * One transaction: the ops from `from` on, until `maxBatch` of them or `sliceMs` spent. How
     * many it took; if the transaction failed, those ops are written one by one instead.
     */
    const writeSlice = (ops: ReadonlyArray<Projection.Op>, from: number): Effect.Effect<number> =>
      Effect.suspend(() => {
        const slice = slicing()
        // Each try starts the slice again (a locked database is tried again, whole).
        const transaction = Effect.suspend(() => {
          slice.start()
          return target.transaction(ops, from, slice.take)
        })
        return persist(transaction).pipe(
          Effect.flatMap((exit) => {
            if (Exit.isSuccess(exit)) {
              written += slice.taken
              batches++
              return Effect.succeed(slice.taken)
            }
            if (Busy.isBusy(exit.cause)) {
              // Given up: a whole batch at once (not op by op: the lock holds for all of them).
              const lost = ops.slice(from, from + Math.max(slice.taken, Math.min(maxBatch, ops.length - from)))
              return Effect.as(report(lost, exit.cause), lost.length)
            }
            const bad = ops.slice(from, from + slice.taken)
            return Effect.as(bad.length === 1 ? report(bad, exit.cause) : writeOneByOne(bad), bad.length)
          })
        )
      })

    const settleWaiters = () => {
      for (let i = waiters.length - 1; i >= 0; i--) {
        const w = waiters[i]!
        if (w.target <= processed) {
          waiters.splice(i, 1)
          Deferred.unsafeDone(w.done, Exit.void)
        }
      }
    }

    const sum = (counts: ReadonlyMap<string, number>) => Array.from(counts.values()).reduce((a, b) => a + b, 0)
    const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`

    /**
     * The drops and losses counted since the last time, written to their runs in one transaction
     * (a run whose own row was lost is inserted again first). When it cannot be written (the
     * database still locked), the counts are kept for the next time.
     */
    const writeCounts: Effect.Effect<void> = Effect.suspend(() => {
      if (droppedByRun.size === 0 && lostByRun.size === 0) return Effect.void
      const drops = new Map(droppedByRun)
      const losses = new Map(lostByRun)
      const starts = new Map(lostStarts)
      droppedByRun.clear()
      lostByRun.clear()
      lostStarts.clear()
      const ops: Array<Projection.Op> = [
        ...starts.values(),
        ...Array.from(drops, ([runId, count]): Projection.Op => ({ _tag: "Dropped", runId, count })),
        ...Array.from(losses, ([runId, count]): Projection.Op => ({ _tag: "Lost", runId, count }))
      ]
      const unsaid = droppedUnsaid
      droppedUnsaid = 0
      const warn =
        unsaid > 0
          ? Effect.logWarning(`the ledger dropped ${plural(unsaid, "event")}: its queue was full`)
          : Effect.void
      return Effect.zipRight(
        warn,
        Effect.flatMap(persist(target.transaction(ops, 0, all)), (exit) => {
          if (Exit.isSuccess(exit)) return Effect.void
          for (const [runId, n] of drops) droppedByRun.set(runId, (droppedByRun.get(runId) ?? 0) + n)
          for (const [runId, n] of losses) lostByRun.set(runId, (lostByRun.get(runId) ?? 0) + n)
          for (const [runId, op] of starts) lostStarts.set(runId, op)
          return Effect.logError(
            `the ledger could not yet count ${plural(sum(losses), "lost record")} and ${plural(sum(drops), "dropped record")} on their runs: ${detailOf(exit.cause)}`
          )
        })
      )
    })

    /** A slice is done (written, or given up and reported): what follows it. */
    const sliceDone = (slice: ReadonlyArray<Projection.Op>) => {
      Projection.committed(target, slice, isWritten)
      afterSlice?.(slice, isWritten, reportAudit)
      processed += slice.length
      settleWaiters()
    }

    /** The fiber holds ops it took and has not finished with (from its `takeAll` until its next). */
    let busy = false

    const offerAll = (ops: ReadonlyArray<Projection.Op>): number => {
      const runNow = target.runNow
      if (
        runNow === undefined ||
        busy ||
        !open ||
        capacity !== undefined ||
        lockedSince !== undefined ||
        droppedByRun.size > 0 ||
        lostByRun.size > 0 ||
        Option.getOrElse(mailbox.unsafeSize(), () => 0) > 0
      ) {
        return offerEach(offer, ops)
      }
      recorded += ops.length
      const slice = slicing()
      slice.start()
      if (runNow(ops, 0, slice.take) !== undefined) {
        // Rolled back: the fiber writes them as it writes what it takes.
        for (const op of ops) mailbox.unsafeOffer(op)
        return 0
      }
      const taken = slice.taken
      written += taken
      batches++
      sliceDone(taken === ops.length ? ops : ops.slice(0, taken))
      // One slice here: what is left (a large message) is the fiber's, a turn of the loop between slices.
      for (let at = taken; at < ops.length; at++) mailbox.unsafeOffer(ops[at]!)
      return 0
    }

    const loop = Effect.gen(function* () {
      while (true) {
        // Woken by an offer, the writer first lets the event loop finish what it was doing: the
        // engine's work that recorded the op (an answer being written to codex, the next frames
        // of the chunk being read) comes before the ledger's transaction, and whatever else is
        // recorded meanwhile joins this batch.
        busy = false
        const [first, ended] = yield* mailbox.takeAll
        busy = true
        let chunk = first
        let done = ended
        if (!done) {
          yield* yieldToLoop
          const waiting = mailbox.unsafeSize()
          if (Option.isNone(waiting) || waiting.value > 0) {
            const [more, endedSince] = yield* mailbox.takeAll
            chunk = Chunk.appendAll(chunk, more)
            done = endedSince
          }
        }
        const ops = Chunk.toReadonlyArray(chunk)
        for (let i = 0; i < ops.length; ) {
          const n = yield* writeSlice(ops, i)
          sliceDone(n === ops.length ? ops : ops.slice(i, i + n))
          i += n
          yield* yieldToLoop
        }
        yield* writeCounts
        if (done) return
      }
    })

    const fiber = yield* loop.pipe(
      // However it ends, nobody waits on a flush forever.
      Effect.onExit(() =>
        Effect.sync(() => {
          open = false
          for (const w of waiters.splice(0)) Deferred.unsafeDone(w.done, Exit.void)
        })
      ),
      Effect.tapErrorCause((cause) =>
        Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError("the ledger's writer died", cause)
      ),
      Effect.interruptible,
      Effect.forkScoped
    )

    const flush: Effect.Effect<Stats> = Effect.suspend(() => {
      if (recorded <= processed || !open) return Effect.sync(stats)
      const done = Deferred.unsafeMake<void>(fiber.id())
      waiters.push({ target: recorded, done })
      return Effect.zipRight(Deferred.await(done), Effect.sync(stats))
    })

    const close = Effect.suspend(() => {
      if (!open) return Effect.asVoid(Fiber.await(fiber))
      open = false
      mailbox.unsafeDone(Exit.void)
      return Effect.asVoid(Fiber.await(fiber))
    })

    return { offer, offerAll, flush, stats, failures, close }
  })
