/**
 * The ledger's writer on a thread of its own (a `worker_threads` Worker started by
 * `WorkerWriter`): the same `Writer` and `Projection` as on the main thread, on a connection of its
 * own to the same SQLite file (WAL: the main thread's connection reads, and makes its few writes,
 * beside it), so the card summaries, masking and transactions of everything recorded run here and
 * not on the thread that reads codex's frames.
 *
 * The ops of a message are written as it is received (`Writer.offerAll`: their first slice, one
 * transaction, in the message's step) when nothing waits before them; what is left after it, and
 * whatever fails there, by the writer's fiber (waiting out a lock, op by op after a failure).
 *
 * Messages (`WorkerWriter.ToWorker`, `FromWorker`): ops in (`Wire`), in the order recorded; out,
 * after each slice the writer committed (or gave up), how many ops are done in all, the writer's
 * counters, the settlements committed (the answer journal's) and the runs whose end is committed;
 * each failure the writer reports; each line it logs (the main thread logs it); `Closed` once
 * everything it was given is written; `Fatal` when it could not start (the main thread then
 * writes on its own thread). Nothing here is public: the module only runs as the worker's entry.
 */
import { createRequire } from "node:module"
import { Cause, Deferred, Effect, Exit, Logger } from "effect"
import { isMainThread, parentPort, workerData } from "node:worker_threads"
import * as AnswerJournal from "./AnswerJournal.js"
import * as AuditFile from "./AuditFile.js"
import type * as Projection from "./Projection.js"
import * as Store from "./Store.js"
import * as Wire from "./Wire.js"
import * as WorkerSql from "./WorkerSql.js"
import type { FromWorker, ToWorker, WorkerInit } from "./WorkerWriter.js"
import * as Writer from "./Writer.js"

const post = (message: FromWorker) => parentPort!.postMessage(message)

/**
 * The SQLite driver the main thread's client uses (better-sqlite3, a native addon): beside this
 * file (the CLI's bundle: a dependency of the CLI), else where @effect/sql-sqlite-node finds it
 * (the built package, the sources).
 */
const driver = (): unknown => {
  const here = createRequire(import.meta.url)
  try {
    return here("better-sqlite3")
  } catch {
    return createRequire(here.resolve("@effect/sql-sqlite-node/SqliteClient"))("better-sqlite3")
  }
}

const messageText = (message: unknown): string =>
  Array.isArray(message) ? message.map((m) => (typeof m === "string" ? m : String(m))).join(" ") : String(message)

/** Its log lines go to the main thread's logger (already masked where they carry data). */
const logger = Logger.make(({ logLevel, message, cause }) => {
  post({
    _tag: "Log",
    level: logLevel.label,
    message: Cause.isEmpty(cause) ? messageText(message) : `${messageText(message)}\n${Cause.pretty(cause)}`
  })
})

const main = (init: WorkerInit) =>
  Effect.gen(function* () {
    const db = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const Database = driver() as new (filename: string) => WorkerSql.Connection & { close(): void }
        const db = new Database(init.filename)
        // As the main thread's connection (SqliteFile): never wait for a lock on the event loop
        // (a busy answer is waited for asynchronously, by the writer), WAL (set by the main
        // thread), synchronous = NORMAL.
        db.exec("PRAGMA busy_timeout = 0")
        db.exec("PRAGMA synchronous = NORMAL")
        return db
      }),
      (db) => Effect.sync(() => db.close())
    )
    const target = WorkerSql.target(db)
    const auditLines = init.audit === undefined ? undefined : yield* AuditFile.open(init.audit)
    let processed = 0
    /** Failures the writer reported and the main thread was not sent yet (sent before the next `Ack`). */
    let unsent: Array<Writer.LedgerWriteFailed> = []
    const postFailures = () => {
      const failures = unsent
      unsent = []
      for (const f of failures)
        post({ _tag: "Failure", reason: f.reason, events: f.events, kinds: f.kinds, detail: f.detail })
    }
    const options: { -readonly [K in keyof Writer.WriterOptions]: Writer.WriterOptions[K] } = {}
    if (init.options.maxBatch !== undefined) options.maxBatch = init.options.maxBatch
    if (init.options.sliceMs !== undefined) options.sliceMs = init.options.sliceMs
    // No capacity here: the main thread bounds what waits (WorkerWriter), here and on the way.
    if (init.options.lockTimeout !== undefined) options.lockTimeout = init.options.lockTimeout
    const writer: Writer.Writer = yield* Writer.make(
      target,
      options,
      (ops, written, auditFailed) => {
        processed += ops.length
        const committed: Array<readonly [string, string]> = []
        const ended: Array<string> = []
        if (init.journal)
          AnswerJournal.committedBy(ops, written, {
            committed: (runId, cardId) => committed.push([runId, cardId]),
            ended: (runId) => ended.push(runId)
          })
        auditLines?.(ops, auditFailed)
        // The failures it reported (all within a slice) go to the main thread's hub before the
        // slice is said done: whoever flushed sees them.
        postFailures()
        post({ _tag: "Ack", processed, stats: writer.stats(), committed, ended })
      },
      undefined,
      (failure) => void unsent.push(failure)
    )
    const views = Wire.makeViews()
    const closing = yield* Deferred.make<void>()
    parentPort!.on("message", (message: ToWorker) => {
      if (message._tag === "Ops") {
        const wire: Array<Wire.WireOp> = []
        for (const text of message.ops) {
          try {
            for (const op of JSON.parse(text) as ReadonlyArray<Wire.WireOp>) wire.push(op)
          } catch (error) {
            // Never: the main thread wrote it. Said, and the worker stops (the main thread takes over).
            throw new Error(`the records sent to the writer's thread could not be read: ${String(error)}`)
          }
        }
        const ops: Array<Projection.Op> = []
        for (const w of wire) {
          let op: Projection.Op
          try {
            op = Wire.fromWire(w, views)
          } catch (error) {
            // Counted on its run (a `Lost` op) and by the main thread (`outside`), logged, reported.
            const runId = w._tag === "RunStarted" ? w.run.runId : w.runId
            const failure = new Writer.LedgerWriteFailed({
              reason: "Failed",
              events: 1,
              kinds: [w._tag === "Event" ? w.event._tag : w._tag],
              detail: `the writer's thread could not read a record: ${Store.shown(error instanceof Error ? error.message : String(error), 300)}`
            })
            post({ _tag: "Log", level: "ERROR", message: failure.message })
            post({
              _tag: "Failure",
              reason: failure.reason,
              events: failure.events,
              kinds: failure.kinds,
              detail: failure.detail,
              outside: true
            })
            op = { _tag: "Lost", runId, count: 1 }
          }
          ops.push(op)
        }
        // Written at once when nothing waits before them (`Writer.offerAll`), else by the writer's fiber.
        const dropped = writer.offerAll(ops)
        if (dropped > 0) {
          processed += dropped
          post({ _tag: "Ack", processed, stats: writer.stats(), committed: [], ended: [] })
        }
      } else Deferred.unsafeDone(closing, Exit.void)
    })
    post({ _tag: "Ready" })
    yield* Deferred.await(closing)
    yield* writer.close
    postFailures()
    return writer.stats()
  })

if (!isMainThread && parentPort !== null) {
  const init = workerData as WorkerInit
  Effect.runPromiseExit(
    Effect.scoped(main(init)).pipe(
      // Nothing here is traced (the SQL client makes a span per statement: most of a statement's
      // cost on this thread, and no tracer would export them).
      Effect.withTracerEnabled(false),
      Effect.provide(Logger.replace(Logger.defaultLogger, logger))
    )
  ).then((exit) => {
    if (Exit.isSuccess(exit)) post({ _tag: "Closed", stats: exit.value })
    else post({ _tag: "Fatal", detail: Store.shown(Cause.pretty(exit.cause), 2_000) })
    parentPort!.close()
  })
}
