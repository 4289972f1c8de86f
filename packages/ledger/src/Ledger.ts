/**
 * The Ledger service: a durable record of runs, work items, threads, turns and every approval card
 * with its one settlement, plus remembered rules, on any `@effect/sql` client (SQLite by default).
 *
 * Scopes: the ledger's layer scope owns one writer fiber and the fibers that pump attached
 * supervisors' events into it. Recording is a synchronous enqueue (`Run.record`), never I/O, so
 * it is safe anywhere, the engine's read loop included. Closing the scope drains what the attached
 * supervisors published, ends the runs it began (`ended`), writes everything queued and waits for
 * it; only then is the database closed. A run whose process dies keeps `running` and its open
 * cards stay open: `markStranded` / `recover` settle them `stranded`, once.
 *
 * Build the ledger before the supervisors it records and close it after them (e.g.
 * `Layer.provideMerge(supervisorLayer, Ledger.layerSqlite(...))`, or the ledger's scope outside the
 * supervisor's): the refusals a supervisor's shutdown writes are published while it closes.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Reactivity from "@effect/experimental/Reactivity"
import type { ApprovalEvent } from "@warden/approvals"
import type { Supervisor } from "@warden/supervisor"
import { Context, Effect, ExecutionStrategy, FiberSet, Layer, Queue, Scope, Stream } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { randomBytes } from "node:crypto"
import type { LedgerEvent } from "./LedgerEvent.js"
import { isRecorded } from "./LedgerEvent.js"
import { describeCause, LedgerError } from "./internal/LedgerError.js"
import * as Migrations from "./Migrations.js"
import type * as Projection from "./internal/Projection.js"
import * as Queries from "./internal/Queries.js"
import type * as Records from "./internal/Records.js"
import type * as Remembered from "./Remembered.js"
import * as Store from "./internal/Store.js"
import * as Writer from "./internal/Writer.js"

export { LedgerError } from "./internal/LedgerError.js"
export type { LedgerWriteFailed, Stats } from "./internal/Writer.js"
export type {
  Accounting,
  CardFilter,
  CardRecord,
  LateDecisionRecord,
  Recovery,
  RunRecord,
  RunStatus,
  SettlementRecord,
  ThreadRecord,
  TurnRecord,
  UnfinishedItem,
  WorkItemRecord,
  WorkItemStatus
} from "./internal/Records.js"
export type { RuleListOptions } from "./internal/Queries.js"

/** What a run says about itself when it begins. */
export interface RunInfo {
  /** The run's id (default: a new one, time-ordered). */
  readonly id?: string
  /** A short label for listings (masked). */
  readonly label?: string
  /** Anything worth keeping about the run, e.g. the command's options (stored as masked JSON). */
  readonly info?: unknown
  /** The run this one recovers (`warden resume`). */
  readonly resumedFrom?: string
  /** Default: this process. */
  readonly pid?: number
  /** Default: this host. */
  readonly host?: string
}

/** What `attach` reads: a supervisor (`SupervisorShape` is one). */
export interface EventSource {
  readonly subscribe: Effect.Effect<Queue.Dequeue<Supervisor.SupervisorEvent>, never, Scope.Scope>
  readonly subscribeApprovals: Effect.Effect<Queue.Dequeue<ApprovalEvent.ApprovalEvent>, never, Scope.Scope>
}

/** One run being recorded. */
export interface Run {
  readonly id: string
  /**
   * Queue an event for writing: synchronous, never blocks, never fails, no I/O. A thread's
   * notifications are dropped at once (not recorded). Returns false when the event was dropped
   * (the ledger closed, or its queue is bounded and full), which is counted in `stats`.
   */
  readonly record: (event: LedgerEvent) => boolean
  /**
   * Record everything `source` publishes from now on (work, connections, finished items, cards,
   * settlements, late decisions) until the ledger closes. The subscriptions live in the ledger's
   * scope, so what a supervisor publishes while it shuts down (its refusals) is still recorded.
   */
  readonly attach: (source: EventSource) => Effect.Effect<void>
  /** Mark the run ended now (closing the ledger does it for runs still open). */
  readonly end: Effect.Effect<void>
}

export interface LedgerShape {
  /** Begin recording a run (its row is written with the next batch). */
  readonly beginRun: (info?: RunInfo) => Effect.Effect<Run>
  /**
   * Wait until everything recorded so far is written (or reported failed), including what the
   * attached sources published before the call.
   */
  readonly flush: Effect.Effect<Writer.Stats>
  readonly stats: Effect.Effect<Writer.Stats>
  /** Write failures from the moment of subscription (each is also logged). */
  readonly failures: Stream.Stream<Writer.LedgerWriteFailed>
  readonly subscribeFailures: Effect.Effect<Queue.Dequeue<Writer.LedgerWriteFailed>, never, Scope.Scope>

  // Audit
  readonly runs: (status?: Records.RunStatus) => Effect.Effect<ReadonlyArray<Records.RunRecord>, LedgerError>
  readonly workItems: (runId: string) => Effect.Effect<ReadonlyArray<Records.WorkItemRecord>, LedgerError>
  readonly threads: (runId: string) => Effect.Effect<ReadonlyArray<Records.ThreadRecord>, LedgerError>
  readonly turns: (runId: string) => Effect.Effect<ReadonlyArray<Records.TurnRecord>, LedgerError>
  /** Cards with their settlements, filtered, oldest first. */
  readonly cards: (filter?: Records.CardFilter) => Effect.Effect<ReadonlyArray<Records.CardRecord>, LedgerError>
  readonly lateDecisions: (filter?: { readonly runId?: string; readonly cardId?: string }) => Effect.Effect<ReadonlyArray<Records.LateDecisionRecord>, LedgerError>
  /** A run's cards counted by how they ended (every card: open, settled once, or stranded once). */
  readonly accounting: (runId: string) => Effect.Effect<Records.Accounting, LedgerError>

  // Recovery
  /** The work items a run did not finish, with their threads and remaining prompts. */
  readonly unfinishedItems: (runId: string) => Effect.Effect<ReadonlyArray<Records.UnfinishedItem>, LedgerError>
  /** A run's cards with no settlement. */
  readonly openCards: (runId: string) => Effect.Effect<ReadonlyArray<Records.CardRecord>, LedgerError>
  /**
   * Record every open card of a dead run `stranded` (never answered by anyone), and the run
   * `crashed`. Idempotent: a card is stranded once; a second call changes nothing and returns 0.
   * Refused (`LiveRun`) for a run this ledger is recording.
   */
  readonly markStranded: (runId: string) => Effect.Effect<number, LedgerError>
  /**
   * `markStranded`, and hand the dead run's unfinished work items to `intoRunId` (they become
   * `handed-over`), in one transaction: the items are returned to exactly one caller, once.
   */
  readonly recover: (deadRunId: string, intoRunId: string) => Effect.Effect<Records.Recovery, LedgerError>

  // Remembered decisions
  readonly remember: (input: Remembered.RememberInput) => Effect.Effect<Remembered.RememberedRule, LedgerError>
  /** The rules in force now (or, with `all`, every rule ever remembered, revoked and expired ones too). */
  readonly rememberedRules: (options?: Queries.RuleListOptions) => Effect.Effect<ReadonlyArray<Remembered.RememberedRule>, LedgerError>
  /** Revoke a rule (kept, with who revoked it and when); revoking it again changes nothing. */
  readonly revoke: (ruleId: string, by: string) => Effect.Effect<Remembered.RememberedRule, LedgerError>
}

export class Ledger extends Context.Tag("@warden/ledger/Ledger")<Ledger, LedgerShape>() {}

export interface LedgerOptions extends Writer.WriterOptions {}

const newRunId = (now: number): string => `r${now.toString(36).padStart(9, "0")}-${randomBytes(4).toString("hex")}`

/**
 * The ledger on the `SqlClient` in context, in the caller's scope: migrates the schema, then
 * starts the writer.
 */
export const make = (options: LedgerOptions = {}): Effect.Effect<LedgerShape, LedgerError, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* Migrations.run.pipe(
      Effect.mapError((cause) => new LedgerError({ reason: "Migration", detail: `could not bring the schema up to date: ${describeCause(cause)}`, cause }))
    )
    const clock = yield* Effect.clock
    const now = () => clock.unsafeCurrentTimeMillis()
    const scope = yield* Effect.scope
    // Attached supervisors' subscriptions and pumps: closed after the finalizer below drained them.
    const subscriptions = yield* Scope.fork(scope, ExecutionStrategy.sequential)
    const pumps = yield* FiberSet.make<void>()
    const writer = yield* Writer.make(sql, options)
    const live = new Set<string>()

    const offer = (op: Projection.Op) => writer.offer(op)

    /** One attached queue and how its events are recorded. */
    interface Feed {
      readonly take: Effect.Effect<void>
      readonly drain: Effect.Effect<void>
    }
    const feeds: Array<Feed> = []
    const feed = <A>(queue: Queue.Dequeue<A>, record: (a: A) => void): Feed => ({
      // Taken and recorded in one uninterruptible step: an interrupt lands only while waiting, so a
      // chunk taken is always recorded (and in order).
      take: Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(restore(Queue.takeBetween(queue, 1, 4096)), (chunk) =>
          Effect.sync(() => {
            for (const a of chunk) record(a)
          }))
      ),
      drain: Effect.flatMap(Queue.takeAll(queue), (chunk) =>
        Effect.sync(() => {
          for (const a of chunk) record(a)
        }))
    })
    const startPump = (f: Feed) => FiberSet.run(pumps, Effect.forever(f.take))
    // Attaching, flushing and closing take turns: each stops the pumps, or starts them, whole.
    const lock = yield* Effect.makeSemaphore(1)
    /**
     * Everything the attached sources published so far is recorded, in order: the pumps are
     * stopped (each records the chunk it holds first), then what is left in their queues is drained.
     */
    const quiesce = Effect.gen(function*() {
      yield* FiberSet.clear(pumps)
      for (const f of feeds) yield* f.drain
    })

    const endRun = (runId: string, status: "ended") =>
      Effect.sync(() => {
        if (!live.delete(runId)) return
        offer({ _tag: "RunEnded", runId, at: now(), status })
      })

    const beginRun = (info: RunInfo = {}): Effect.Effect<Run> =>
      Effect.sync(() => {
        const startedAt = now()
        const runId = Store.id(info.id ?? newRunId(startedAt))
        live.add(runId)
        offer({
          _tag: "RunStarted",
          run: {
            runId,
            startedAt,
            label: Store.optionalShown(info.label, 200),
            info: Store.json(info.info ?? {}),
            pid: info.pid ?? process.pid,
            host: Store.optionalId(info.host ?? Os.hostname()),
            resumedFrom: Store.optionalId(info.resumedFrom)
          }
        })
        const record = (event: LedgerEvent): boolean => isRecorded(event) ? offer({ _tag: "Event", runId, at: now(), event }) : true
        const attach = (source: EventSource): Effect.Effect<void> =>
          lock.withPermits(1)(Effect.gen(function*() {
            const supervisorEvents = yield* Scope.extend(source.subscribe, subscriptions)
            const approvalEvents = yield* Scope.extend(source.subscribeApprovals, subscriptions)
            const added = [
              feed(supervisorEvents, (event: Supervisor.SupervisorEvent) => record({ _tag: "Supervisor", event })),
              feed(approvalEvents, (event: ApprovalEvent.ApprovalEvent) => record({ _tag: "Approval", event }))
            ]
            for (const f of added) {
              feeds.push(f)
              yield* startPump(f)
            }
          }))
        return { id: runId, record, attach, end: endRun(runId, "ended") }
      })

    // Closing: stop the pumps, record what the attached sources published meanwhile, end the runs
    // still open, then let the writer write everything queued. Runs before the subscriptions'
    // scope, the pumps' set and the writer's fiber are closed (they were made before it).
    yield* Effect.addFinalizer(() =>
      lock.withPermits(1)(Effect.gen(function*() {
        yield* quiesce
        for (const runId of Array.from(live)) yield* endRun(runId, "ended")
        yield* writer.close
      }))
    )

    /** Record what the attached sources published so far, restart their pumps, wait for the writer. */
    const flush = Effect.zipRight(
      lock.withPermits(1)(Effect.zipRight(quiesce, Effect.forEach(feeds, startPump, { discard: true }))),
      writer.flush
    )

    const guardDead = (runId: string) =>
      live.has(runId)
        ? Effect.fail(new LedgerError({ reason: "LiveRun", detail: `run ${runId} is being recorded by this ledger; its open cards are not stranded` }))
        : Effect.void

    return {
      beginRun,
      flush,
      stats: Effect.sync(writer.stats),
      failures: Stream.fromPubSub(writer.failures),
      subscribeFailures: writer.failures.subscribe,
      runs: (status) => Queries.runs(sql, status),
      workItems: (runId) => Queries.workItems(sql, runId),
      threads: (runId) => Queries.threads(sql, runId),
      turns: (runId) => Queries.turns(sql, runId),
      cards: (filter) => Queries.cards(sql, filter),
      lateDecisions: (filter) => Queries.lateDecisions(sql, filter),
      accounting: (runId) => Queries.accounting(sql, runId),
      unfinishedItems: (runId) => Queries.unfinishedItems(sql, runId),
      openCards: (runId) => Queries.openCards(sql, runId),
      markStranded: (runId) => Effect.zipRight(guardDead(runId), Effect.suspend(() => Queries.markStranded(sql, runId, now()))),
      recover: (deadRunId, intoRunId) => Effect.zipRight(guardDead(deadRunId), Effect.suspend(() => Queries.recover(sql, deadRunId, intoRunId, now()))),
      remember: (input) => Effect.suspend(() => Queries.remember(sql, input, now())),
      rememberedRules: (options) => Effect.suspend(() => Queries.rememberedRules(sql, now(), options)),
      revoke: (ruleId, by) => Effect.suspend(() => Queries.revoke(sql, ruleId, by, now()))
    } satisfies LedgerShape
  })

/** The ledger on the `SqlClient` the layer is given (SQLite, or later Postgres). */
export const layer = (options: LedgerOptions = {}): Layer.Layer<Ledger, LedgerError, SqlClient.SqlClient> => Layer.scoped(Ledger, make(options))

export interface SqliteOptions extends LedgerOptions {
  /** The database file; its directory is made if missing (mode 0700), the file is made mode 0600. */
  readonly filename: string
}

/**
 * The ledger in a SQLite file (WAL journal). A file that cannot be opened or is not a ledger
 * fails with `LedgerError` (`Open`, `Migration`).
 */
export const layerSqlite = (options: SqliteOptions): Layer.Layer<Ledger, LedgerError> =>
  Layer.scoped(
    Ledger,
    Effect.gen(function*() {
      const filename = Path.resolve(options.filename)
      yield* Effect.try({
        try: () => {
          Fs.mkdirSync(Path.dirname(filename), { recursive: true, mode: 0o700 })
          // Made here, private to its owner: SQLite gives the -wal and -shm files the same mode.
          Fs.closeSync(Fs.openSync(filename, "a", 0o600))
        },
        catch: (cause) => new LedgerError({ reason: "Open", detail: `cannot create ${filename}: ${describeCause(cause)}`, cause })
      })
      const client = yield* SqliteClient.make({ filename }).pipe(
        Effect.provide(Reactivity.layer),
        // better-sqlite3 throws while opening (not a database, no permission): a failure, not a defect.
        Effect.catchAllDefect((cause) => new LedgerError({ reason: "Open", detail: `cannot open ${filename}: ${describeCause(cause)}`, cause }))
      )
      // WAL with synchronous=NORMAL: a commit survives the process dying (SIGKILL, OOM) without an
      // fsync per transaction; a power cut may lose the last commits, never the file's consistency.
      yield* client`PRAGMA synchronous = NORMAL`.pipe(
        Effect.mapError((cause) => new LedgerError({ reason: "Open", detail: `cannot open ${filename}: ${describeCause(cause)}`, cause }))
      )
      return yield* make(options).pipe(Effect.provideService(SqlClient.SqlClient, client))
    })
  )
