/**
 * The ledger's writer, run on a thread of its own (`WriterWorker`): what `Ledger.layerSqlite`
 * uses when the worker's script is there (a build: `WorkerScript.locate`). Same interface and
 * guarantees as `Writer` (never blocks or fails the code that offers; a write that fails is
 * reported on `failures`, logged and counted on its run; `flush` waits for everything offered
 * before it; `close` writes everything queued), with the work off the thread that reads codex:
 *
 * - `offer` keeps the op (no copy, nothing computed); the ops become JSON text (`Wire.toWire`:
 *   plain data) when they are handed to the worker, in one message at most every 250 ms: at the
 *   turn's end when the last message was 250 ms ago or more, else by a timer when the 250 ms are up;
 *   while the event loop is saturated, held until it has room again (up to 1 s or 4,096 ops).
 *   Not a message per turn: a message wakes the worker's thread, and a message per turn costs a
 *   busy loop more than the records it carries; not always a timer: its wake-up costs the main
 *   thread more than a trickle's records; not beside a saturated loop: on two vCPUs the thread
 *   slows it (`HandOverMs`).
 * - The worker writes with the same `Writer` on its own connection to the file, and says after
 *   each slice how many ops are done (written, or reported failed): `flush` waits for that count.
 *   The settlements it committed are passed to `committed` (the answer journal's lines).
 * - An op that cannot be copied to the worker (a value of the embedder's that is not data) is
 *   lost, reported and counted on its run, never silently.
 * - If the worker cannot start, or stops (a defect), the ledger goes on writing on this thread
 *   (`fallback`: the main-thread `Writer`), with everything the worker had not said was done: an
 *   error says so; a slice committed just before the worker stopped may be written twice (its
 *   rows are keyed, except a turn's count and a late decision).
 */
import type { PubSub } from "effect"
import { Deferred, Effect, ExecutionStrategy, Exit, FiberId, PubSub as PubSubNs, Runtime, Scope } from "effect"
import { Worker } from "node:worker_threads"
import * as Projection from "./Projection.js"
import * as Store from "./Store.js"
import * as Wire from "./Wire.js"
import * as Writer from "./Writer.js"
import * as WorkerScript from "./WorkerScript.js"

/** What the worker is started with (`workerData`). */
export interface WorkerInit {
  readonly filename: string
  readonly options: {
    readonly maxBatch?: number | undefined
    readonly sliceMs?: number | undefined
    readonly capacity?: number | undefined
    /** Milliseconds. */
    readonly lockTimeout?: number | undefined
  }
  readonly audit: string | undefined
  /** Whether the main thread keeps an answer journal (then `Ack` lists the committed settlements). */
  readonly journal: boolean
}

/** `Ops`: JSON arrays of `Wire.WireOp`, in the order offered. */
export type ToWorker = { readonly _tag: "Ops"; readonly ops: ReadonlyArray<string> } | { readonly _tag: "Close" }

/** Ops written as one JSON text, and how many. */
interface Batch {
  readonly text: string
  readonly count: number
}

export type FromWorker =
  | { readonly _tag: "Ready" }
  | {
      readonly _tag: "Ack"
      /** Ops done (written or given up) since it started, in all. */
      readonly processed: number
      readonly stats: Writer.Stats
      readonly committed: ReadonlyArray<readonly [string, string]>
      readonly ended: ReadonlyArray<string>
    }
  | {
      readonly _tag: "Failure"
      readonly reason: "Locked" | "Failed" | "Audit"
      readonly events: number
      readonly kinds: ReadonlyArray<string>
      readonly detail: string
      /** Lost outside the writer (a record the thread could not read): not in its `failed`. */
      readonly outside?: boolean
    }
  | { readonly _tag: "Log"; readonly level: string; readonly message: string }
  | { readonly _tag: "Closed"; readonly stats: Writer.Stats }
  | { readonly _tag: "Fatal"; readonly detail: string }

const zero: Writer.Stats = { recorded: 0, written: 0, failed: 0, auditFailed: 0, dropped: 0, pending: 0, batches: 0 }

/**
 * When offered ops are handed over (one message for all of them). Each message wakes the worker's
 * thread, which on this 2-vCPU machine costs the sender ~50 µs whatever it carries (measured on
 * the frame pipeline: a message a millisecond cost more than the records in it), and each becomes
 * a transaction there, whose commit and round of bookkeeping (the slice's acknowledgement, the
 * journal's committed answers) cost the same for one record as for fifty, and a thread woken after
 * a sleep runs its code slower (its caches cold): a fleet of 100 through the CLI, whose records
 * trickle in, spent ~40 % less of the thread's CPU (140-220 → 90-120 ms a run) with 50 ms than with
 * 10 ms, and ~30 % less again with 250 ms (120-160 → 70-120 ms; the same trace replayed into a
 * fresh thread with its messages 250 ms apart: 148 ms in 57 messages, 83 in 15, 59 in 4; issue 31's
 * thirteenth pass). After a quiet spell of `HandOverMs` the turn's ops go at the
 * turn's end: a timer's wake-up costs the main thread ~185 µs of CPU on this VM (a trickle of
 * records, one turn every few hundred ms, paid one a hand-over).
 *
 * **While the event loop is saturated** (it idled less than `1 - Saturated` of the last
 * `HandOverMs`: a burst of frames, cards answered back to back), ops are held, up to `HoldMs`
 * after the oldest was offered or `HoldOps` of them, and handed over when the loop has room
 * again: the writer's thread then works after the burst instead of beside it, where on two vCPUs
 * it slowed the read loop by 10-20 % (issue 31's twelfth pass, docs/performance.md), and the ops
 * are written as text once for the whole hold (`EncodeOps` at a time, so that what waits as
 * objects stays bounded) instead of at each turn's end (~1.5 µs of each round trip).
 *
 * Nothing waits on it: `flush` and `close` hand over at once, an answer is on record before codex
 * gets it by the answer journal, not by the writer, and a process killed meanwhile loses the
 * records not yet committed but its answers and open cards: at most those of the last `HandOverMs`, or of the
 * last `HoldMs` while the loop was saturated (`warden resume` takes the run up as after any crash:
 * docs/ledger.md, "Durability").
 */
export const HandOverMs = 250
/** While the loop is saturated: how long the oldest op waits at most, and how many ops may wait. */
const HoldMs = 1000
const HoldOps = 4096
/** Waiting ops are written as text when this many are kept as objects (at the turn's end). */
const EncodeOps = 512
/** The event loop's utilization (`performance.eventLoopUtilization`) from which it is saturated. */
const Saturated = 0.9

const runOf = (op: Projection.Op) => (op._tag === "RunStarted" ? op.run.runId : op.runId)

export interface Params {
  readonly script: string
  readonly init: WorkerInit
  /** Milliseconds ops may be held while the event loop is saturated (default `HoldMs`). */
  readonly holdMs?: number | undefined
  /**
   * Called at the end of every turn of the event loop in which an op was offered (before its ops
   * are looked at): the answer journal's openings (`AnswerJournal`, `turnEnds: "driven"`).
   */
  readonly turnEnded?: (() => void) | undefined
  /** The worker committed a card's settlement (the answer journal's `committed`). */
  readonly committed: (runId: string, cardId: string) => void
  /** The worker committed a run's end. */
  readonly ended: (runId: string) => void
  /** The main-thread writer, if the worker cannot go on (publishing to the same hub). */
  readonly fallback: (
    failures: PubSub.PubSub<Writer.LedgerWriteFailed>
  ) => Effect.Effect<Writer.Writer, never, Scope.Scope>
}

export const make = (params: Params): Effect.Effect<Writer.Writer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const scope = yield* Effect.scope
    const failures = yield* PubSubNs.unbounded<Writer.LedgerWriteFailed>()
    const fork = Runtime.runFork(runtime)

    const holdMs = params.holdMs ?? HoldMs
    let open = true
    let closing = false
    /** Ops accepted (by the worker's path and the fallback's). */
    let offered = 0
    /** Ops dropped here: offered after closing, or while `capacity` waited. */
    let droppedHere = 0
    /** Drops not yet sent to be counted on their runs (`Dropped` ops), and not yet said in the log. */
    const droppedByRun = new Map<string, number>()
    let droppedUnsaid = 0
    const capacity = params.init.options.capacity
    /** The worker's count of ops done, and its counters. */
    let acked = 0
    let workerStats = zero
    /** Ops offered and not yet written as text (at a hand-over, or once `EncodeOps` wait). */
    let buffer: Array<Projection.Op> = []
    /** Ops as text, not yet handed over (see `HandOverMs`). */
    let encoded: Array<Batch> = []
    let encodedOps = 0
    /**
     * What was handed over and not yet done, as the text sent (from `head`; the first `skip` ops of
     * the first are done): kept for the main thread to take over. Text, not the ops: one flat
     * string per turn instead of the records' objects (a card's request and context), which the
     * engine no longer needs once the card settled.
     */
    let sentBatches: Array<Batch> = []
    let head = 0
    let skip = 0
    /** `Dropped` ops added here (counted on their runs by the worker): done, but never offered. */
    let internal = 0
    /** Records lost on the way (not readable, not encodable): reported, counted on their runs, and in `failed`. */
    let lostHere = 0
    let timer: ReturnType<typeof setTimeout> | undefined
    /** When ops were last handed over (`performance.now()`). */
    let handedOverAt = Number.NEGATIVE_INFINITY
    /** When the oldest op waiting (offered, not handed over) was offered. */
    let heldSince = Number.POSITIVE_INFINITY
    /** The event loop's counters when the window being judged began (the timer was set, or the last hand-over). */
    let window = performance.eventLoopUtilization()
    let fallback: Writer.Writer | undefined
    const waiters: Array<{ readonly target: number; readonly done: Deferred.Deferred<void> }> = []
    const closed = Deferred.unsafeMake<void>(FiberId.none)
    const sent: Wire.Sent = new WeakMap()
    /** The worker said it wrote everything and stopped. */
    let workerClosed = false

    // Where the main-thread writer would live: a scope of its own that closes after the ledger's
    // closing (which may be what finds the thread gone, and then needs that writer to finish).
    const fallbackScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
    /** Why the thread failed (its `error`), said when it has exited. */
    let failedWith: string | undefined
    let startFailure: string | undefined
    let worker: Worker | undefined
    try {
      // Its stdout is not the process's (`warden run --json` keeps stdout for its JSON lines); it
      // prints nothing there (its logs come as messages). Its stderr is the process's.
      const cache = WorkerScript.cacheOf(params.script)
      worker =
        cache === undefined
          ? new Worker(params.script, { workerData: params.init, stdout: true })
          : new Worker(WorkerScript.Loader, {
              eval: true,
              argv: [params.script, cache],
              workerData: params.init,
              stdout: true
            })
      worker.stdout.resume()
      worker.unref()
    } catch (error) {
      startFailure = error instanceof Error ? error.message : String(error)
    }

    /** Keep the process alive while someone waits for the worker. */
    const holdOpen = () => {
      // Someone waits, or records handed over are not written yet: the process does not end
      // under the thread's feet (as the main-thread writer's next slice would keep it alive).
      if (waiters.length > 0 || closing || acked < offered + internal) worker?.ref()
      else worker?.unref()
    }

    const report = (failure: Writer.LedgerWriteFailed) => {
      failures.unsafeOffer(failure)
      fork(Effect.logError(failure.message))
    }

    /** The ops offered so far (and the drops to count) as text, added to what waits to be handed over. */
    const encodeBuffered = () => {
      // Drops are counted on their runs (`dropped_events`) by the worker, as the writer does.
      for (const [runId, count] of droppedByRun) {
        buffer.push({ _tag: "Dropped", runId, count })
        internal++
      }
      droppedByRun.clear()
      if (droppedUnsaid > 0) {
        fork(
          Effect.logWarning(
            `the ledger dropped ${droppedUnsaid} event${droppedUnsaid === 1 ? "" : "s"}: its queue was full`
          )
        )
        droppedUnsaid = 0
      }
      if (buffer.length === 0) return
      const ops = buffer
      buffer = []
      encoded.push({ text: encode(ops), count: ops.length })
      encodedOps += ops.length
    }

    /** Ops waiting here (as objects or as text), not handed over. */
    const waiting = () => buffer.length + encodedOps + droppedByRun.size

    /** The loop idled less than `1 - Saturated` of the time since `window` began. */
    const saturated = (): boolean => performance.eventLoopUtilization(window).utilization >= Saturated

    /**
     * The turn's end (nothing of this in the step that recorded them): after a quiet spell the
     * turn's ops are handed over at once (records that trickle in cost no timer's wake-up); else
     * the timer (`look`) decides when the `HandOverMs` are up. Ops are written as text only when
     * `EncodeOps` of them wait as objects.
     */
    let turnEndScheduled = false
    const endOfTurn = () => {
      turnEndScheduled = false
      params.turnEnded?.()
      if (worker === undefined) return
      if (buffer.length >= EncodeOps) encodeBuffered()
      const n = waiting()
      if (n >= HoldOps) return handOver()
      if (n === 0 || timer !== undefined) return
      const since = performance.now() - handedOverAt
      if (since < HandOverMs) hold(HandOverMs - since)
      else if (holdMs > 0 && saturated()) hold(HandOverMs)
      else handOver()
    }

    /**
     * Look again in `ms`, judging the loop from now: by what it did while the ops waited, not by
     * an idle spell before they came.
     */
    const hold = (ms: number) => {
      window = performance.eventLoopUtilization()
      timer = setTimeout(look, ms)
    }

    /**
     * The timer: hand over, unless the loop was saturated since the timer was set and the ops may
     * wait longer.
     */
    const look = () => {
      timer = undefined
      if (worker === undefined || waiting() === 0) return
      if (holdMs > 0 && saturated() && waiting() < HoldOps && performance.now() - heldSince < holdMs) hold(HandOverMs)
      else handOver()
    }

    /** Everything waiting, in one message (the turn's end, the timer, `flush`, `close`). */
    const handOver = () => {
      if (timer !== undefined) {
        clearTimeout(timer)
        timer = undefined
      }
      if (worker === undefined) return
      // Not `endOfTurn`: its decision would arm a timer (or hand over) beside this message.
      encodeBuffered()
      if (encoded.length === 0) return
      const batches = encoded
      encoded = []
      encodedOps = 0
      for (const b of batches) sentBatches.push(b)
      worker.postMessage({ _tag: "Ops", ops: batches.map((b) => b.text) } satisfies ToWorker)
      handedOverAt = performance.now()
      heldSince = Number.POSITIVE_INFINITY
      window = performance.eventLoopUtilization()
      holdOpen()
    }

    /** An op that cannot cross: reported, counted here (`failed`), and a `Lost` op for its run instead. */
    const lostOnTheWay = (op: Projection.Op, error: unknown): Wire.WireOp => {
      lostHere++
      report(
        new Writer.LedgerWriteFailed({
          reason: "Failed",
          events: 1,
          kinds: [Projection.describe(op)],
          detail: `it could not be handed to the ledger's writer thread: ${Store.shown(error instanceof Error ? error.message : String(error), 300)}`
        })
      )
      return { _tag: "Lost", runId: runOf(op), count: 1 }
    }

    /**
     * The ops as one JSON text: a string crosses to the worker as one copy, where the structured
     * clone of the same objects cost ~10 times as much on this thread (measured on the frame
     * pipeline's cards). Everything in a wire op is JSON's (what is not, `Wire` made so); an op
     * that still cannot be written (a BigInt of the embedder's) is lost, reported and counted on
     * its run, never silently.
     */
    const encode = (ops: ReadonlyArray<Projection.Op>): string => {
      // An embedder's card view may throw when read (`Card.portable` reads its summary).
      const wire = ops.map((op) => {
        try {
          return Wire.toWire(op, sent)
        } catch (error) {
          return lostOnTheWay(op, error)
        }
      })
      try {
        return JSON.stringify(wire)
      } catch {
        const kept = wire.map((w, i) => {
          try {
            JSON.stringify(w)
            return w
          } catch (error) {
            return lostOnTheWay(ops[i]!, error)
          }
        })
        return JSON.stringify(kept)
      }
    }

    const settleWaiters = () => {
      for (let i = waiters.length - 1; i >= 0; i--) {
        const w = waiters[i]!
        if (w.target <= acked) {
          waiters.splice(i, 1)
          Deferred.unsafeDone(w.done, Exit.void)
        }
      }
      holdOpen()
    }

    /** The worker cannot go on: the main thread writes what it had not done, and everything after. */
    const takeOver = (why: string) => {
      if (fallback !== undefined) return
      const stopped = worker
      worker = undefined
      stopped?.removeAllListeners()
      void stopped?.terminate()
      if (timer !== undefined) clearTimeout(timer)
      timer = undefined
      // What the worker had not done: the batches it was sent (read back), then what was not sent.
      const views = Wire.makeViews()
      const left: Array<Projection.Op> = []
      let unreadable = 0
      const notDone = [...sentBatches.slice(head), ...encoded]
      for (let i = 0; i < notDone.length; i++) {
        const wire = JSON.parse(notDone[i]!.text) as ReadonlyArray<Wire.WireOp>
        for (let k = i === 0 ? skip : 0; k < wire.length; k++) {
          const w = wire[k]!
          try {
            left.push(Wire.fromWire(w, views))
          } catch {
            // A settlement sent by its card's id, whose opening the worker had written: it cannot
            // be read back here. Lost: counted on its run, and in `failed`.
            unreadable++
            lostHere++
            left.push({ _tag: "Lost", runId: w._tag === "RunStarted" ? w.run.runId : w.runId, count: 1 })
          }
        }
      }
      left.push(...buffer)
      for (const [runId, count] of droppedByRun) left.push({ _tag: "Dropped", runId, count })
      droppedByRun.clear()
      sentBatches = []
      encoded = []
      encodedOps = 0
      buffer = []
      head = 0
      skip = 0
      const writer = Runtime.runSync(runtime)(Scope.extend(params.fallback(failures), fallbackScope))
      fallback = writer
      for (const op of left) writer.offer(op)
      if (unreadable > 0)
        report(
          new Writer.LedgerWriteFailed({
            reason: "Failed",
            events: unreadable,
            kinds: ["CardSettled"],
            detail:
              "the ledger's writer thread stopped before writing them, and they cannot be read back on the main thread"
          })
        )
      fork(
        Effect.logError(
          `the ledger's writer thread stopped (${Store.shown(why, 500)}): the ledger writes on the main thread from now on, starting with the ${left.length} record${left.length === 1 ? "" : "s"} the thread had not written (one written just before it stopped may be recorded twice)`
        )
      )
      for (const w of waiters.splice(0)) fork(Effect.zipRight(writer.flush, Deferred.done(w.done, Exit.void)))
      if (closing) fork(Effect.zipRight(writer.close, Deferred.done(closed, Exit.void)))
    }

    const onMessage = (message: FromWorker) => {
      switch (message._tag) {
        case "Ready":
          return
        case "Ack": {
          let done = message.processed - acked
          acked = message.processed
          while (done > 0 && head < sentBatches.length) {
            const left = sentBatches[head]!.count - skip
            if (done >= left) {
              done -= left
              head++
              skip = 0
            } else {
              skip += done
              done = 0
            }
          }
          if (head > 64 && head * 2 > sentBatches.length) {
            sentBatches = sentBatches.slice(head)
            head = 0
          }
          workerStats = message.stats
          for (const [runId, cardId] of message.committed) params.committed(runId, cardId)
          for (const runId of message.ended) params.ended(runId)
          settleWaiters()
          return
        }
        case "Failure":
          // The worker logged it already (its log comes as a message): only published here.
          if (message.outside === true) lostHere += message.events
          failures.unsafeOffer(
            new Writer.LedgerWriteFailed({
              reason: message.reason,
              events: message.events,
              kinds: message.kinds,
              detail: message.detail
            })
          )
          return
        case "Log": {
          const log =
            message.level === "ERROR" || message.level === "FATAL"
              ? Effect.logError(message.message)
              : message.level === "WARN"
                ? Effect.logWarning(message.message)
                : message.level === "INFO"
                  ? Effect.logInfo(message.message)
                  : Effect.logDebug(message.message)
          fork(log)
          return
        }
        case "Closed":
          workerClosed = true
          workerStats = message.stats
          acked = Math.max(acked, message.stats.written + message.stats.failed + message.stats.dropped)
          Deferred.unsafeDone(closed, Exit.void)
          settleWaiters()
          return
        case "Fatal":
          takeOver(`it could not start: ${message.detail}`)
          return
      }
    }
    if (worker !== undefined) {
      worker.on("message", onMessage)
      // Taken over at its exit, not at its error: messages it sent before failing (acks, failures)
      // come on another port than the error, and are all delivered before `exit`.
      worker.on("error", (error) => {
        failedWith ??= error instanceof Error ? error.message : String(error)
      })
      worker.on("exit", (code) => {
        if (!workerClosed && fallback === undefined)
          takeOver(
            failedWith !== undefined ? `${failedWith}; it exited with code ${code}` : `it exited with code ${code}`
          )
      })
    } else takeOver(`it could not be started: ${startFailure ?? "no reason given"}`)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        if (timer !== undefined) clearTimeout(timer)
        const w = worker
        worker = undefined
        w?.removeAllListeners()
        void w?.terminate()
      })
    )

    const scheduleTurnEnd = () => {
      if (heldSince === Number.POSITIVE_INFINITY) heldSince = performance.now()
      if (turnEndScheduled) return
      turnEndScheduled = true
      setImmediate(endOfTurn)
    }

    const offer = (op: Projection.Op): boolean => {
      if (!open) {
        droppedHere++
        return false
      }
      if (fallback !== undefined) {
        // Its turn's end still comes (`turnEnded`); nothing of the thread's work in it.
        scheduleTurnEnd()
        const taken = fallback.offer(op)
        if (taken) offered++
        return taken
      }
      // The bound is on what waits anywhere: here, in the message, in the worker's queue.
      if (capacity !== undefined && offered + internal - acked >= capacity) {
        droppedHere++
        droppedUnsaid++
        droppedByRun.set(runOf(op), (droppedByRun.get(runOf(op)) ?? 0) + 1)
        scheduleTurnEnd()
        return false
      }
      offered++
      buffer.push(op)
      scheduleTurnEnd()
      return true
    }

    const stats = (): Writer.Stats => {
      const f = fallback?.stats() ?? zero
      return {
        recorded: offered,
        // The `Dropped` ops added here are the worker's to write, not records.
        written: Math.max(0, workerStats.written - internal) + f.written,
        failed: workerStats.failed + f.failed + lostHere,
        auditFailed: workerStats.auditFailed + f.auditFailed,
        dropped: droppedHere + workerStats.dropped + f.dropped,
        pending: fallback !== undefined ? f.pending : Math.max(0, offered + internal - acked),
        batches: workerStats.batches + f.batches
      }
    }

    const flush: Effect.Effect<Writer.Stats> = Effect.suspend(() => {
      if (fallback !== undefined) return Effect.map(fallback.flush, stats)
      handOver()
      if (acked >= offered + internal) return Effect.sync(stats)
      const done = Deferred.unsafeMake<void>(FiberId.none)
      waiters.push({ target: offered + internal, done })
      holdOpen()
      return Effect.zipRight(Deferred.await(done), Effect.sync(stats))
    })

    const close: Effect.Effect<void> = Effect.suspend(() => {
      if (!closing) {
        closing = true
        open = false
        if (fallback !== undefined) fork(Effect.zipRight(fallback.close, Deferred.done(closed, Exit.void)))
        else if (worker !== undefined) {
          handOver()
          holdOpen()
          worker.postMessage({ _tag: "Close" } satisfies ToWorker)
        }
      }
      return Deferred.await(closed)
    })

    const offerAll = (ops: ReadonlyArray<Projection.Op>): number => Writer.offerEach(offer, ops)

    return { offer, offerAll, flush, stats, failures, close }
  })
