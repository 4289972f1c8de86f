/**
 * The `Ledger` service keeps a durable record of runs, work items, threads, turns and every
 * approval card with its one settlement, plus remembered rules, on any `@effect/sql` client
 * (SQLite by default).
 *
 * Scopes: the ledger's layer scope owns one writer fiber and what reads the attached sources: an
 * observer of a supervisor's events and of its engine's (they are recorded in the step that
 * publishes them), or, for a source without them, a pump per subscription. Recording is a
 * synchronous enqueue (`Run.record`), never I/O, so it is safe anywhere, the engine's read loop
 * included. Closing the scope records what the attached sources published, ends the runs it began
 * (`ended`), writes everything queued and waits for it; only then is the database closed. A run whose process dies keeps `running` and its open
 * cards stay open: `markStranded` / `recover` settle them `stranded`, once.
 *
 * Build the ledger before the supervisors it records and close it after them (e.g.
 * `Layer.provideMerge(supervisorLayer, Ledger.layerSqlite(...))`, or the ledger's scope outside the
 * supervisor's): the refusals a supervisor's shutdown writes are published while it closes.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { type ApprovalEvent, type Approvals, EventPump } from "@warden/approvals"
import { RunId } from "@warden/supervisor"
import type { Supervisor } from "@warden/supervisor"
import {
  Cause,
  Context,
  Duration,
  Effect,
  ExecutionStrategy,
  Exit,
  Layer,
  type Queue,
  Runtime,
  Scope,
  Stream
} from "effect"
import * as Os from "node:os"
import * as Path from "node:path"
import type { LedgerEvent } from "./LedgerEvent.js"
import { isRecorded } from "./LedgerEvent.js"
import * as AnswerJournal from "./internal/AnswerJournal.js"
import * as AuditFile from "./internal/AuditFile.js"
import * as Busy from "./internal/Busy.js"
import * as JournalFile from "./internal/JournalFile.js"
import { describeCause, LedgerError } from "./internal/LedgerError.js"
import * as Migrations from "./Migrations.js"
import type * as Projection from "./internal/Projection.js"
import * as Queries from "./internal/Queries.js"
import type * as Records from "./internal/Records.js"
import type * as Remembered from "./Remembered.js"
import * as SqliteFile from "./internal/SqliteFile.js"
import * as Store from "./internal/Store.js"
import * as WorkerScript from "./internal/WorkerScript.js"
import * as WorkerWriter from "./internal/WorkerWriter.js"
import * as Writer from "./internal/Writer.js"

export { LedgerError } from "./internal/LedgerError.js"
export type { LedgerWriteFailed, Stats } from "./internal/Writer.js"
export type {
  Accounting,
  CardFilter,
  CardPosition,
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
export type { Pruned, RuleListOptions } from "./internal/Queries.js"

/**
 * Whether a process with this pid runs on this host (EPERM: it does, as another user): how a run's
 * recorded `pid` is checked when its `host` is this one. A run of another host cannot be told
 * dead this way.
 */
export const processAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** What a run says about itself when it begins. */
export interface RunInfo {
  /** The run's id (default: a new one, `RunId.make` of `@warden/supervisor`: ordered by time). */
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

/**
 * What `Run.attach` records, which a supervisor has (`SupervisorShape` is an `EventSource`): its
 * events and its engine's, observed as they are published when it gives `observe` and `approvals`,
 * else read from its two subscriptions.
 */
export interface EventSource {
  /**
   * Subscribe to the supervisor's events (work, connections, finished items) from now on: read
   * only when `observe` is missing.
   */
  readonly subscribe: Effect.Effect<Queue.Dequeue<Supervisor.SupervisorEvent>, never, Scope.Scope>
  /**
   * The same events as they are published (a supervisor has it): recorded in the step that
   * publishes them, no fiber woken per event (a thread's streaming notifications, which the
   * ledger does not record, are most of them). Without it, `subscribe` is read by a pump.
   */
  readonly observe?: (observer: (event: Supervisor.SupervisorEvent) => void) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Subscribe to the approvals engine's events (cards opened and settled, late decisions) from
   * now on: read only when `approvals` is missing (with it, every event of the engine is recorded).
   */
  readonly subscribeApprovals: Effect.Effect<Queue.Dequeue<ApprovalEvent.ApprovalEvent>, never, Scope.Scope>
  /**
   * The approvals engine: its events are recorded as they are published (`observeEvents`, no
   * fiber woken per event), and with an answer journal (`LedgerOptions.answerJournal`) each answer
   * is on record before codex can act on it (`observeAnswers`). A source without it is recorded
   * all the same, through `subscribeApprovals`, with no journal.
   */
  readonly approvals?: Pick<Approvals.ApprovalsShape, "observeAnswers" | "observeEvents">
}

/**
 * One run being recorded, as `LedgerShape.beginRun` returns it.
 *
 * Nothing a `Run` does fails: `record` reports a dropped event by returning false, and a write
 * that fails later is counted in `stats` and published on `failures`, never raised here.
 */
export interface Run {
  /** The run's id: `RunInfo.id` (cut to 512 characters), or a new time-ordered one. */
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
  /**
   * Mark the run `ended` now (closing the ledger does it for runs still open). Ending it again
   * changes nothing.
   */
  readonly end: Effect.Effect<void>
}

/**
 * What the `Ledger` service offers, in five parts.
 *
 * - Recording: `beginRun` (then `Run.record` and `Run.attach`), `flush`, `stats`, and the write
 *   failures (`failures`, `subscribeFailures`). None of these fails: a write that fails is
 *   reported there, counted and logged, and recording goes on.
 * - Audit: `runs`, `workItems`, `threads`, `turns`, `cards`, `lateDecisions`, `accounting`. They
 *   read what has been written (call `flush` first to include what was just recorded) and fail
 *   with `LedgerError` of reason `Sql` when the query fails.
 * - Recovery: `unfinishedItems`, `openCards`, `markStranded`, `recover`. All four fail with
 *   `LedgerError` of reason `Sql` when the query fails; the last two also with `LiveRun` for a run
 *   this ledger is recording.
 * - Retention: `prune` (`Sql`).
 * - Remembered rules: `remember` (`Invalid`, `Sql`), `rememberedRules` (`Sql`), `revoke`
 *   (`NotFound`, `Sql`).
 */
export interface LedgerShape {
  /**
   * Begin recording a run: its row (`running`) is written with the next batch, and the run is
   * ended when the ledger closes, unless `Run.end` ended it first. Never fails.
   *
   * @example
   * ```ts
   * import { Ledger, LedgerEvent } from "@warden/ledger"
   * import { Supervisor } from "@warden/supervisor"
   * import { Effect } from "effect"
   *
   * const program = Effect.gen(function*() {
   *   const ledger = yield* Ledger.Ledger
   *   const supervisor = yield* Supervisor.Supervisor
   *   const run = yield* ledger.beginRun({ label: "nightly", info: { argv: process.argv } })
   *   // Supervisor and approval events from now on, until the ledger closes.
   *   yield* run.attach(supervisor)
   *   const item = { id: 1, prompt: "fix the failing test", cwd: "/repo" }
   *   // No stream publishes a submission: record it before running the item.
   *   run.record(LedgerEvent.itemSubmitted(item))
   *   return yield* supervisor.run(item)
   * })
   * ```
   */
  readonly beginRun: (info?: RunInfo) => Effect.Effect<Run>
  /**
   * Wait until everything recorded so far is written (or reported failed), including what the
   * attached sources published before the call.
   */
  readonly flush: Effect.Effect<Writer.Stats>
  /** The writer's counters now (ops recorded, written, failed, dropped, pending; transactions). */
  readonly stats: Effect.Effect<Writer.Stats>
  /**
   * Write failures from the moment of subscription (each is also logged). A `LedgerWriteFailed`
   * names how many events were lost and their kinds, never their data.
   */
  readonly failures: Stream.Stream<Writer.LedgerWriteFailed>
  /** The same write failures as `failures`, as a queue subscribed in the caller's scope. */
  readonly subscribeFailures: Effect.Effect<Queue.Dequeue<Writer.LedgerWriteFailed>, never, Scope.Scope>

  // Audit
  /** Every run (or those with this status), newest first. Fails with `LedgerError` (`Sql`). */
  readonly runs: (status?: Records.RunStatus) => Effect.Effect<ReadonlyArray<Records.RunRecord>, LedgerError>
  /** A run's work items, in the order they were submitted. Fails with `LedgerError` (`Sql`). */
  readonly workItems: (runId: string) => Effect.Effect<ReadonlyArray<Records.WorkItemRecord>, LedgerError>
  /** A run's threads, in the order they became ready. Fails with `LedgerError` (`Sql`). */
  readonly threads: (runId: string) => Effect.Effect<ReadonlyArray<Records.ThreadRecord>, LedgerError>
  /** A run's turns, in the order they started. Fails with `LedgerError` (`Sql`). */
  readonly turns: (runId: string) => Effect.Effect<ReadonlyArray<Records.TurnRecord>, LedgerError>
  /**
   * Cards with their settlements, filtered, oldest first (at most `filter.limit`, default 10 000).
   * Fails with `LedgerError`: `Invalid` when a number of the filter is not finite (`from`, `to`,
   * `limit`, `before.openedAt`) or `before` lacks one of its three fields, `Sql` when the query fails.
   */
  readonly cards: (filter?: Records.CardFilter) => Effect.Effect<ReadonlyArray<Records.CardRecord>, LedgerError>
  /**
   * Late decisions (an answer that came after its card had settled), of a run or a card, oldest
   * first. Fails with `LedgerError` (`Sql`).
   */
  readonly lateDecisions: (filter?: {
    readonly runId?: string
    readonly cardId?: string
  }) => Effect.Effect<ReadonlyArray<Records.LateDecisionRecord>, LedgerError>
  /**
   * A run's cards counted by how they ended (every card: open, settled once, or stranded once).
   * Fails with `LedgerError` (`Sql`).
   */
  readonly accounting: (runId: string) => Effect.Effect<Records.Accounting, LedgerError>

  // Recovery
  /**
   * The work items a run did not finish (`pending` or `running`), with their threads and
   * remaining prompts. Fails with `LedgerError` (`Sql`).
   */
  readonly unfinishedItems: (runId: string) => Effect.Effect<ReadonlyArray<Records.UnfinishedItem>, LedgerError>
  /** A run's cards with no settlement. Fails with `LedgerError` (`Sql`). */
  readonly openCards: (runId: string) => Effect.Effect<ReadonlyArray<Records.CardRecord>, LedgerError>
  /**
   * Record every open card of a dead run `stranded` (never answered by anyone), and the run
   * `crashed`, in one transaction; returns how many cards it stranded. Idempotent: a card is
   * stranded once; a second call changes nothing and returns 0 (so does an unknown run id).
   *
   * With `cards` (the run's own card ids), only those of its open cards are stranded, and the rest
   * stay open in a run recorded `crashed`: for a fleet, whose table may hold a settlement of a dead
   * runner's card that its ledger writer never wrote (then the card is not `stranded` here).
   *
   * With an answer journal (`LedgerOptions.answerJournal`), the cards it names whose settlement
   * was never committed are stranded first, with the answer that was being written (docs/ledger.md,
   * "Durability"); the journal is removed once every card it names has a settlement.
   *
   * Whether a run is dead is the caller's to decide (the run records its `pid` and `host`): the
   * ledger refuses only a run it is recording itself. Fails with `LedgerError`: `LiveRun` for a
   * run this ledger is recording, `Open` when the run's answer journal is there but cannot be read,
   * `Sql` when the transaction fails (nothing is changed then).
   */
  readonly markStranded: (runId: string, cards?: ReadonlyArray<string>) => Effect.Effect<number, LedgerError>
  /**
   * Record the open cards of one work item of a run `stranded`, as `markStranded` does for a whole
   * run, but leave the run's status alone: for a cluster, where an item moves to another runner
   * while the runner that opened its cards is dead (or gave the item up). Returns how many it
   * stranded; idempotent (a second call returns 0). With `cards` (the run's own card ids), only
   * those of the item's open cards: what the fleet's storage stranded, while the rest are left to
   * the run that opened them (a live runner's writer may not have recorded its own settlement yet).
   * Fails with `LedgerError`: `LiveRun` for a run this ledger is recording, `Open` when the run's
   * answer journal is there but cannot be read, `Sql` when the transaction fails.
   */
  readonly markStrandedItem: (
    runId: string,
    item: string | number,
    cards?: ReadonlyArray<string>
  ) => Effect.Effect<number, LedgerError>
  /**
   * Strand a dead run's open cards (as `markStranded`), close its turns still in progress as
   * `crashed`, and hand its unfinished work items to `intoRunId`, in one transaction. An item that
   * can run again (its prompts and options recorded unmasked, a turn left to run) becomes
   * `handed-over` and is returned in `items`; any other becomes `not-resumed` with its reason and
   * is returned in `notResumed`. Each is returned to exactly one caller, once (a second `recover`
   * returns none).
   *
   * Fails with `LedgerError`: `LiveRun` when `deadRunId` is a run this ledger is recording, `Open`
   * when its answer journal is there but cannot be read, `Sql` when the transaction fails (nothing
   * is changed then).
   */
  readonly recover: (deadRunId: string, intoRunId: string) => Effect.Effect<Records.Recovery, LedgerError>

  // Retention
  /**
   * Delete what settled before `before` (epoch ms), in one transaction: the cards of runs no longer
   * `running` whose settlement is older (with their settlements and late decisions), then the runs
   * that ended before it and hold no card any more (with their work items, threads, turns and
   * connections). Open cards, runs still `running` and remembered rules are kept. Returns how many
   * cards and runs were deleted. Fails with `LedgerError` (`Sql`; nothing is deleted then).
   */
  readonly prune: (before: number) => Effect.Effect<Queries.Pruned, LedgerError>

  // Remembered decisions
  /**
   * Store a remembered allow rule and return it, with its new id and the ledger clock's time.
   *
   * Fails with `LedgerError`: `Invalid` when the scope does not decode (a root of `/`, a relative
   * or dotted root, no words, too many or too long words, an unknown key) or holds a value
   * `SecretMask` would mask, when the author is empty or longer than 200 characters, or when
   * `expiresAt` is not after now; `Sql` when the insert fails. The note is stored masked.
   *
   * @example
   * ```ts
   * import { Ledger } from "@warden/ledger"
   * import { Effect } from "effect"
   *
   * const always = Effect.gen(function*() {
   *   const ledger = yield* Ledger.Ledger
   *   const rule = yield* ledger.remember({
   *     scope: { _tag: "Command", argv: ["git", "status"], exact: true },
   *     author: "alice",
   *     from: { runId: "r1", cardId: "c3" },
   *     expiresAt: Date.now() + 30 * 24 * 60 * 60 * 1000
   *   })
   *   const inForce = yield* ledger.rememberedRules() // includes `rule`
   *   const revoked = yield* ledger.revoke(rule.id, "bob") // kept, with revokedBy "bob"
   *   return { inForce, revoked }
   * }).pipe(
   *   // A scope too wide or holding a secret is refused, never stored.
   *   Effect.catchIf((e) => e.reason === "Invalid", (e) => Effect.logWarning(`not remembered: ${e.detail}`))
   * )
   * ```
   */
  readonly remember: (input: Remembered.RememberInput) => Effect.Effect<Remembered.RememberedRule, LedgerError>
  /**
   * The rules in force now, oldest first (or, with `all`, every rule ever remembered, revoked and
   * expired ones too). Fails with `LedgerError` (`Sql`).
   */
  readonly rememberedRules: (
    options?: Queries.RuleListOptions
  ) => Effect.Effect<ReadonlyArray<Remembered.RememberedRule>, LedgerError>
  /**
   * Revoke a rule and return it, kept with who revoked it and when; revoking it again changes
   * nothing (the first revocation stands). Fails with `LedgerError`: `NotFound` when no rule has
   * this id, `Sql` when the update fails. See `remember` for an example.
   */
  readonly revoke: (ruleId: string, by: string) => Effect.Effect<Remembered.RememberedRule, LedgerError>
}

/**
 * The `Ledger` service's tag, provided by `layerSqlite` or `layer`.
 *
 * Build the ledger before the supervisors it records and close it after them (see the module
 * comment), e.g. `Layer.provideMerge(supervisorLayer, Ledger.layerSqlite({ filename }))`.
 */
export class Ledger extends Context.Tag("@warden/ledger/Ledger")<Ledger, LedgerShape>() {}

/**
 * How the ledger's writer writes, all optional.
 *
 * `maxBatch` ops per transaction at most (default 1000), `sliceMs` milliseconds of work per
 * transaction at most (default 4), `capacity` ops waiting at most (default unbounded; beyond
 * it events are dropped and counted, and the run's `droppedEvents` says so), and `lockTimeout`:
 * how long a write (and opening: the migrations) waits while another process holds the
 * database's lock, retrying asynchronously, before it gives up (default 5 minutes; the records
 * given up are counted on their run, `lostEvents`, and reported on `failures`).
 */
export interface LedgerOptions extends Writer.WriterOptions {
  /**
   * Also append every card event recorded (opened, settled, late decision) to this file as one
   * JSON line (`Audit.record` of `@warden/approvals`, the same record the card's and settlement's
   * columns are taken from), once the writer has written it. The file is created if missing and
   * closed after the last write; building the ledger fails with `LedgerError` (`Open`) when it
   * cannot be opened for appending. A line that cannot be written is logged and lost.
   */
  readonly audit?: string
  /**
   * The directory of the answer journal (`layerSqlite`: `<filename>.answers` unless given; none
   * for `make` and `layer` unless given). Each answer written to codex is appended there, in the
   * step that writes it, before the writer commits its settlement; recovery (`markStranded`,
   * `markStrandedItem`, `recover`) strands a dead run's answered cards whose settlement was never
   * committed with the decision that was being written (docs/ledger.md, "Durability").
   * `false`: no journal (a crash between an answer and its commit leaves that card open, then
   * stranded as never answered).
   */
  readonly answerJournal?: string | false
  /**
   * With the writer on its own thread (`layerSqlite` in a build): how long records may wait to be
   * handed to it while the event loop is saturated (default 1 second; and 4,096 records at most).
   * They are handed over every 250 ms at most otherwise. Held, the writer's thread works after a
   * burst instead of beside it (on two vCPUs it slowed the read loop by 10-20 %), at a cost: a
   * process killed meanwhile loses the records not yet committed, answers and open cards excepted
   * (the answer journal has them), so up to this long of them instead of 250 ms (docs/ledger.md,
   * "Durability").
   * `0`: never held longer than the 250 ms.
   */
  readonly holdWhileSaturated?: Duration.DurationInput
}

/**
 * Build the ledger on the `SqlClient` in context, in the caller's scope.
 *
 * It brings the schema up to date (`Migrations.run`), then starts the writer; closing the scope
 * drains the attached sources, ends the runs still open and writes everything queued. Fails with
 * `LedgerError` of reason `Migration` when the schema cannot be brought up to date. Most embedders
 * want `layerSqlite` (or `layer`) instead.
 */
export const make = (
  options: LedgerOptions = {}
): Effect.Effect<LedgerShape, LedgerError, SqlClient.SqlClient | Scope.Scope> => makeLedger(options, undefined)

/** The ledger, its writer on a thread of its own when `onThread` names the file and the worker's script. */
const makeLedger = (
  options: LedgerOptions,
  onThread: { readonly filename: string; readonly script: string } | undefined
): Effect.Effect<LedgerShape, LedgerError, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const lockTimeout = options.lockTimeout ?? Busy.DefaultTimeout
    /** A write another process may find locked: tried again asynchronously (`lockTimeout`). */
    const writing = <A>(effect: Effect.Effect<A, LedgerError>) => Busy.retry(effect, lockTimeout)
    yield* Migrations.run({ timeout: lockTimeout }).pipe(
      Effect.mapError(
        (cause) =>
          new LedgerError({
            reason: "Migration",
            detail: `could not bring the schema up to date: ${describeCause(cause)}`,
            cause
          })
      )
    )
    const clock = yield* Effect.clock
    const now = () => clock.unsafeCurrentTimeMillis()
    const scope = yield* Effect.scope
    // Attached supervisors' subscriptions and pumps: closed after the finalizer below drained them.
    const subscriptions = yield* Scope.fork(scope, ExecutionStrategy.sequential)
    const auditLines = options.audit === undefined ? undefined : yield* AuditFile.open(options.audit)
    const journalDir =
      options.answerJournal === undefined || options.answerJournal === false
        ? undefined
        : Path.resolve(options.answerJournal)
    const runtime = yield* Effect.runtime<never>()
    const journal =
      journalDir === undefined
        ? undefined
        : yield* Effect.acquireRelease(
            Effect.sync(() =>
              AnswerJournal.make(journalDir, (message) => Runtime.runFork(runtime)(Effect.logWarning(message)), {
                // Counted on the run (`RunRecord.unjournaledAnswers`), through the writer as any record.
                unjournaled: (runId) => void offer({ _tag: "Unjournaled", runId, count: 1 }),
                // The writer on its thread ends each turn in which something was recorded (a
                // card's opening is): the journal's openings go then, with no turn's end of its own.
                turnEnds: onThread === undefined ? "own" : "driven"
              })
            ),
            (j) => Effect.sync(j.close)
          )
    /** What follows a written slice: the audit file's lines, and the journal's committed answers. */
    const afterSlice: Writer.AfterSlice | undefined =
      journal === undefined
        ? auditLines === undefined
          ? undefined
          : (ops, _written, auditFailed) => auditLines(ops, auditFailed)
        : (ops, written, auditFailed) => {
            AnswerJournal.committedBy(ops, written, journal)
            auditLines?.(ops, auditFailed)
          }
    const writer =
      onThread === undefined
        ? yield* Writer.make(Writer.clientTarget(sql), options, afterSlice)
        : yield* WorkerWriter.make({
            script: onThread.script,
            init: {
              filename: onThread.filename,
              options: {
                maxBatch: options.maxBatch,
                sliceMs: options.sliceMs,
                capacity: options.capacity,
                lockTimeout: Duration.toMillis(Duration.decode(lockTimeout))
              },
              audit: options.audit === undefined ? undefined : Path.resolve(options.audit),
              journal: journal !== undefined
            },
            turnEnded: journal === undefined ? undefined : journal.turnEnded,
            holdMs:
              options.holdWhileSaturated === undefined
                ? undefined
                : Duration.toMillis(Duration.decode(options.holdWhileSaturated)),
            committed: (runId, cardId) => journal?.committed(runId, cardId),
            ended: (runId) => journal?.ended(runId),
            fallback: (failures) => Writer.make(Writer.clientTarget(sql), options, afterSlice, failures)
          })
    const live = new Set<string>()

    const offer = (op: Projection.Op) => writer.offer(op)

    /** The attached subscriptions' pumps (`EventPump`: none ever loses an event it was handed). */
    const pumps: Array<EventPump.EventPump> = []
    // Attaching, flushing and closing take turns.
    const lock = yield* Effect.makeSemaphore(1)
    /** Everything the attached sources published so far is recorded. */
    const settle = Effect.forEach(pumps, (p) => p.settle, { discard: true })

    /**
     * Record what a source publishes: as it is published when it can be observed (no fiber woken
     * per event: most of what recording a card cost the read loop), else through its subscription,
     * read by a pump (`EventPump`: nothing it was handed is lost). Both live in `subscriptions`.
     */
    const follow = <A>(
      observe: ((observer: (value: A) => void) => Effect.Effect<void, never, Scope.Scope>) | undefined,
      subscribe: Effect.Effect<Queue.Dequeue<A>, never, Scope.Scope>,
      onEvent: (value: A) => void
    ): Effect.Effect<void> =>
      observe !== undefined
        ? Scope.extend(observe(onEvent), subscriptions)
        : Effect.flatMap(Scope.extend(subscribe, subscriptions), (queue) =>
            Effect.map(
              Scope.extend(
                EventPump.make(queue, (value: A) => Effect.sync(() => onEvent(value))),
                subscriptions
              ),
              (pump) => {
                pumps.push(pump)
              }
            )
          )

    const endRun = (runId: string, status: "ended") =>
      Effect.sync(() => {
        if (!live.delete(runId)) return
        offer({ _tag: "RunEnded", runId, at: now(), status })
      })

    const beginRun = (info: RunInfo = {}): Effect.Effect<Run> =>
      Effect.sync(() => {
        const startedAt = now()
        const runId = Store.id(info.id ?? RunId.make(startedAt))
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
        const record = (event: LedgerEvent): boolean =>
          isRecorded(event) ? offer({ _tag: "Event", runId, at: now(), event }) : true
        const attach = (source: EventSource): Effect.Effect<void> =>
          lock.withPermits(1)(
            Effect.gen(function* () {
              // The journal first: an answer is on record before the events that follow it.
              if (journal !== undefined && source.approvals !== undefined)
                yield* Scope.extend(
                  source.approvals.observeAnswers((answer) => journal.append(runId, answer, now())),
                  subscriptions
                )
              yield* follow(source.observe, source.subscribe, (event) => {
                // A thread's streaming notifications (most events) are not recorded: dropped
                // before anything is made for them.
                if (event._tag === "Work" && event.event._tag === "Notification") return
                record({ _tag: "Supervisor", event })
              })
              // A card left open at the end of the turn that opened it goes to the journal too
              // (only where events are observed as they are published: before the card's answer).
              const journalOpenings = journal !== undefined && source.approvals !== undefined ? journal : undefined
              yield* follow(source.approvals?.observeEvents, source.subscribeApprovals, (event) => {
                if (journalOpenings !== undefined && event._tag === "CardOpened")
                  journalOpenings.opened(runId, event.card)
                record({ _tag: "Approval", event })
              })
            })
          )
        return { id: runId, record, attach, end: endRun(runId, "ended") }
      })

    // Closing: stop the pumps, record what the attached sources published meanwhile, end the runs
    // still open, then let the writer write everything queued. Runs before the subscriptions'
    // scope, the pumps' set and the writer's fiber are closed (they were made before it).
    yield* Effect.addFinalizer(() =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          yield* settle
          // The subscriptions shut down: each pump records the chunk it holds, if any, and ends.
          yield* Scope.close(subscriptions, Exit.void)
          for (const runId of Array.from(live)) yield* endRun(runId, "ended")
          yield* writer.close
        })
      )
    )

    /** Record what the attached sources published so far, then wait for the writer. */
    const flush = Effect.zipRight(lock.withPermits(1)(settle), writer.flush)

    /**
     * A dead run's answers on record (`AnswerJournal`), for its recovery. Fails (`Open`) when its
     * journal is there but cannot be read: nothing is recovered without it.
     */
    const answered = (runId: string): Effect.Effect<ReadonlyArray<AnswerJournal.Entry>, LedgerError> =>
      journalDir === undefined
        ? Effect.succeed([])
        : Effect.try({
            try: () => AnswerJournal.read(journalDir, runId),
            catch: (cause) =>
              new LedgerError({
                reason: "Open",
                detail: `the answer journal of run ${runId} cannot be read (nothing was changed): ${describeCause(cause)}`,
                cause
              })
          })
    /**
     * After a recovery: the dead run's journal is removed once every card it names has its
     * settlement in the ledger (a fleet's sweep strands only some of them at a time).
     */
    const journalDone = (runId: string) =>
      journalDir === undefined
        ? Effect.void
        : Effect.gen(function* () {
            const entries = AnswerJournal.read(journalDir, runId)
            if (entries.length > 0) {
              const settled = yield* Queries.settledCards(
                sql,
                runId,
                entries.map((e) => e.cardId)
              )
              if (settled < entries.length) return
            }
            AnswerJournal.remove(journalDir, runId)
          }).pipe(
            Effect.catchAllCause((cause) =>
              Effect.logWarning(
                `the answer journal of recovered run ${runId} could not be removed: ${describeCause(Cause.squash(cause))}`
              )
            )
          )

    const guardDead = (runId: string) =>
      live.has(runId)
        ? Effect.fail(
            new LedgerError({
              reason: "LiveRun",
              detail: `run ${runId} is being recorded by this ledger; its open cards are not stranded`
            })
          )
        : Effect.void

    return {
      beginRun,
      flush,
      stats: Effect.sync(writer.stats),
      failures: Stream.fromPubSub(writer.failures),
      subscribeFailures: writer.failures.subscribe,
      ...Queries.reads(sql, now),
      markStranded: (runId, cards) =>
        Effect.zipRight(
          guardDead(runId),
          Effect.flatMap(answered(runId), (entries) =>
            writing(Effect.suspend(() => Queries.markStranded(sql, runId, now(), cards, entries)))
          ).pipe(Effect.tap(() => journalDone(runId)))
        ),
      markStrandedItem: (runId, item, cards) =>
        Effect.zipRight(
          guardDead(runId),
          Effect.flatMap(answered(runId), (entries) =>
            writing(
              Effect.suspend(() => Queries.markStrandedItem(sql, runId, Store.itemKey(item), now(), cards, entries))
            )
          ).pipe(Effect.tap(() => journalDone(runId)))
        ),
      recover: (deadRunId, intoRunId) =>
        Effect.zipRight(
          guardDead(deadRunId),
          Effect.flatMap(answered(deadRunId), (entries) =>
            writing(Effect.suspend(() => Queries.recover(sql, deadRunId, intoRunId, now(), entries)))
          ).pipe(Effect.tap(() => journalDone(deadRunId)))
        ),
      prune: (before) => writing(Effect.suspend(() => Queries.prune(sql, before))),
      remember: (input) => writing(Effect.suspend(() => Queries.remember(sql, input, now()))),
      revoke: (ruleId, by) => writing(Effect.suspend(() => Queries.revoke(sql, ruleId, by, now())))
    } satisfies LedgerShape
  })

/**
 * The ledger on the `SqlClient` the layer is given (SQLite, or later Postgres).
 *
 * It sets no pragmas (only `layerSqlite` does). Building it fails with `LedgerError` of reason
 * `Migration` when the schema cannot be brought up to date.
 */
export const layer = (options: LedgerOptions = {}): Layer.Layer<Ledger, LedgerError, SqlClient.SqlClient> =>
  Layer.scoped(Ledger, make(options))

/** Where `layerSqlite` keeps the ledger, and how its writer writes (`LedgerOptions`). */
export interface SqliteOptions extends LedgerOptions {
  /** The database file; its directory is made if missing (mode 0700), the file is made mode 0600. */
  readonly filename: string
}

/**
 * The ledger in a SQLite file (WAL journal, `synchronous = NORMAL`).
 *
 * The file and its directory are created if missing (the file mode 0600, the directory 0700), it
 * is checked (`PRAGMA quick_check`), and its schema is brought up to date (under the write lock:
 * several processes may open a new file at once). A committed write survives the process dying
 * (SIGKILL, OOM); a power cut may lose the last commits, never the file's consistency. The
 * connection has no busy timeout: while another process holds the lock, opening and writing wait
 * asynchronously (up to `lockTimeout`), never on the event loop.
 *
 * Its writer runs on a thread of its own when its worker script is there (a build of Warden:
 * `dist/internal/WriterWorker.js`, or `ledger-writer.cjs` beside the CLI's bundle; the environment
 * variable `WARDEN_LEDGER_WORKER` names another script, or `off`): the thread that reads codex
 * only hands it each turn's records as text. If the thread cannot start or stops, the writer goes
 * on on the main thread, and an error is logged. From the TypeScript sources it runs on the main
 * thread, as `make` and `layer` always do.
 *
 * Building it fails with `LedgerError`: `Open` when the directory or the file cannot be created
 * (a path under `/proc`, a directory where the file should be, a file where a directory should
 * be), or the file cannot be opened (no permission, not a SQLite database), `Corrupt` when the
 * file is damaged, `Migration` when its schema cannot be brought up to date (or stayed locked).
 *
 * @example
 * ```ts
 * import { Ledger } from "@warden/ledger"
 * import { CodexCommand, Supervisor } from "@warden/supervisor"
 * import { Effect, Layer } from "effect"
 *
 * // The ledger is built first and closed last: it records what the supervisor settles while it stops.
 * const WardenLive = Layer.provideMerge(
 *   Supervisor.layer({ restart: { policy: "resume" } }).pipe(Layer.provide(CodexCommand.transportLayer({ command: "codex" }))),
 *   Ledger.layerSqlite({ filename: "/var/lib/warden/ledger.db" })
 * )
 *
 * const program = Effect.gen(function*() {
 *   const ledger = yield* Ledger.Ledger
 *   const run = yield* ledger.beginRun({ label: "nightly" })
 *   yield* run.attach(yield* Supervisor.Supervisor)
 * })
 *
 * Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(WardenLive))) // fails with LedgerError | ConfigError
 * ```
 */
export const layerSqlite = (options: SqliteOptions): Layer.Layer<Ledger, LedgerError> =>
  Layer.scoped(
    Ledger,
    Effect.gen(function* () {
      const filename = Path.resolve(options.filename)
      const client = yield* SqliteFile.open(filename, options.lockTimeout ?? Busy.DefaultTimeout)
      const script = WorkerScript.locate()
      return yield* makeLedger(
        { ...options, answerJournal: options.answerJournal ?? `${filename}.answers` },
        script === undefined ? undefined : { filename, script }
      ).pipe(Effect.provideService(SqlClient.SqlClient, client))
    })
  )

/** How an answer journal writes its records, and why (`answerJournalMode`). */
export type AnswerJournalMode = JournalFile.Mode

/**
 * How the answer journal of the ledger that `layerSqlite(options)` would open writes its records on
 * this machine (docs/ledger.md, "Durability"): `mapped` when the journal's native module loads and
 * its directory (`<filename>.answers`, or the one `answerJournal` names) is on ext4, xfs or tmpfs;
 * `write(2)` otherwise, with the reason (the same records, the same guarantee, a few microseconds
 * more per answer). `undefined` when the journal is off (`answerJournal: false`). It opens and
 * creates nothing; a file whose allocation or mapping fails when the ledger opens it is still
 * appended to instead. What `warden doctor` reports.
 */
export const answerJournalMode = (
  options: Pick<SqliteOptions, "filename" | "answerJournal">
): AnswerJournalMode | undefined =>
  options.answerJournal === false
    ? undefined
    : JournalFile.modeFor(options.answerJournal ?? `${Path.resolve(options.filename)}.answers`)
