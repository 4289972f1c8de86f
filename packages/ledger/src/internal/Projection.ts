/**
 * How each recorded event becomes rows: one function per event, a few portable statements each,
 * run by the writer inside a batch's transaction. Every text and JSON value passes through
 * `Store` (SecretMask) here; nothing else writes event data.
 *
 * The statements are data (`Statement`: a template's parts and its values), run by whoever holds
 * the connection: `execute` on an `SqlClient` (any dialect its template compiles to: SQLite,
 * PostgreSQL), or straight on a synchronous SQLite connection (`WorkerSql`, the writer's thread),
 * where a slice's statements run as plain code, one prepared statement per template.
 *
 * Exactness is the schema's: a card has one row (`ON CONFLICT DO NOTHING` on its key), a settlement
 * one row (the same; a card stranded by `markStranded` keeps `stranded`, and a settlement that
 * arrives after it is kept as a late decision), and a settlement also inserts its card, so no
 * settlement is ever without its card.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Audit } from "@warden/approvals"
import type { ApprovalEvent, Card as CardTypes } from "@warden/approvals"
import type { Supervisor, WorkItem } from "@warden/supervisor"
import { Cause, Duration, Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import * as CardFacts from "../CardFacts.js"
import type { ItemOrigin, LedgerEvent } from "../LedgerEvent.js"
import * as Store from "./Store.js"

/** What a run starts with (already masked by the caller of `runRow`). */
export interface RunStart {
  readonly runId: string
  readonly startedAt: number
  readonly label: string | null
  readonly info: string
  readonly pid: number | null
  readonly host: string | null
  readonly resumedFrom: string | null
}

/** One unit of work for the writer, in the order it was recorded. */
export type Op =
  | { readonly _tag: "RunStarted"; readonly run: RunStart }
  | { readonly _tag: "RunEnded"; readonly runId: string; readonly at: number; readonly status: string }
  | { readonly _tag: "Event"; readonly runId: string; readonly at: number; readonly event: LedgerEvent }
  | { readonly _tag: "Dropped"; readonly runId: string; readonly count: number }
  | { readonly _tag: "Lost"; readonly runId: string; readonly count: number }
  /** Answers of the run whose answer journal line could not be written (`AnswerJournal`). */
  | { readonly _tag: "Unjournaled"; readonly runId: string; readonly count: number }

/** A value bound to a statement's parameter. */
export type Value = string | number | null

/**
 * One statement: its SQL as a tagged template's parts (one array per place in the code, so a
 * connection prepares it once: `WorkerSql`) and its values; `followUp`, for a statement that
 * returns rows (`RETURNING`), the statements that follow from them (not `then`: a thenable).
 */
export interface Statement {
  readonly strings: TemplateStringsArray
  readonly values: ReadonlyArray<Value>
  readonly followUp?: (rows: ReadonlyArray<unknown>) => ReadonlyArray<Statement>
}

/** A statement, written as a tagged template. */
const sql = (strings: TemplateStringsArray, ...values: ReadonlyArray<Value>): Statement => ({ strings, values })

type Write = ReadonlyArray<Statement>

const none: Write = []

/** Run `statements` in order on an `SqlClient` (inside the caller's transaction). */
export const execute = (client: SqlClient.SqlClient, statements: Write): Effect.Effect<void, SqlError> =>
  Effect.forEach(
    statements,
    (s): Effect.Effect<void, SqlError> => {
      const run = client(s.strings, ...s.values)
      const followUp = s.followUp
      return followUp === undefined
        ? Effect.asVoid(run)
        : Effect.flatMap(run, (rows) => execute(client, followUp(rows)))
    },
    { discard: true }
  )

// ---------------------------------------------------------------------------------------------
// Runs

const runStarted = (r: RunStart): Write => [
  sql`INSERT INTO ledger_runs (run_id, started_at, status, label, info, pid, host, resumed_from)
    VALUES (${r.runId}, ${r.startedAt}, 'running', ${r.label}, ${r.info}, ${r.pid}, ${r.host}, ${r.resumedFrom})
    ON CONFLICT (run_id) DO NOTHING`
]

const runEnded = (runId: string, at: number, status: string): Write => [
  sql`UPDATE ledger_runs SET ended_at = ${at}, status = ${status} WHERE run_id = ${runId} AND status = 'running'`
]

const dropped = (runId: string, count: number): Write => [
  sql`UPDATE ledger_runs SET dropped_events = dropped_events + ${count} WHERE run_id = ${runId}`
]

const lost = (runId: string, count: number): Write => [
  sql`UPDATE ledger_runs SET lost_events = lost_events + ${count} WHERE run_id = ${runId}`
]

const unjournaled = (runId: string, count: number): Write => [
  sql`UPDATE ledger_runs SET unjournaled_answers = unjournaled_answers + ${count} WHERE run_id = ${runId}`
]

// ---------------------------------------------------------------------------------------------
// Work items, threads, turns

/** A work item's `budget.maxTurnTime` as a Duration; undefined when it has none or it does not decode. */
export const maxTurnTimeOf = (item: WorkItem.WorkItem): Duration.Duration | undefined =>
  item.budget?.maxTurnTime === undefined
    ? undefined
    : Option.getOrUndefined(Duration.decodeUnknown(item.budget.maxTurnTime))

/** The options of a work item that are worth keeping (masked on the way in). */
const optionsOf = (item: WorkItem.WorkItem): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  if (item.threadId !== undefined) out["threadId"] = item.threadId
  if (item.cwd !== undefined) out["cwd"] = item.cwd
  if (item.model !== undefined) out["model"] = item.model
  if (item.approvalPolicy !== undefined) out["approvalPolicy"] = item.approvalPolicy
  if (item.sandbox !== undefined) out["sandbox"] = item.sandbox
  if (item.config !== undefined) out["config"] = item.config
  if (item.threadParams !== undefined) out["threadParams"] = item.threadParams
  if (item.worktree !== undefined && item.worktree !== false)
    out["worktree"] = item.worktree === true ? {} : { ...item.worktree }
  if (item.budget !== undefined) {
    const budget: Record<string, unknown> = {}
    if (item.budget.maxTokens !== undefined) budget["maxTokens"] = item.budget.maxTokens
    // As milliseconds: a Duration does not survive JSON. One that does not decode is not kept.
    const turnTime = maxTurnTimeOf(item)
    if (turnTime !== undefined) budget["maxTurnTimeMs"] = Duration.toMillis(turnTime)
    out["budget"] = budget
  }
  return out
}

const itemSubmitted = (runId: string, at: number, item: WorkItem.WorkItem, from: ItemOrigin | undefined): Write => {
  const prompts = [item.prompt, ...(item.followUps ?? [])]
  const masked = prompts.map(Store.text)
  const changed = masked.some((m, i) => m !== prompts[i])
  return [
    sql`INSERT INTO ledger_work_items
    (run_id, item_key, prompt, follow_ups, options, prompts_masked, status, thread_id, submitted_at, from_run_id, from_item_key)
    VALUES (${runId}, ${Store.itemKey(item.id)}, ${masked[0]!}, ${JSON.stringify(masked.slice(1))}, ${Store.json(optionsOf(item))},
      ${Store.bool(changed)}, 'pending', ${Store.optionalId(item.threadId)}, ${at}, ${Store.optionalId(from?.runId)}, ${Store.optionalId(from?.item)})
    ON CONFLICT (run_id, item_key) DO NOTHING`
  ]
}

const workEvent = (runId: string, at: number, event: WorkItem.WorkEvent): Write => {
  const item = Store.itemKey(event.item)
  switch (event._tag) {
    case "ThreadReady": {
      const thread = Store.id(event.threadId)
      return [
        sql`INSERT INTO ledger_threads (run_id, thread_id, item_key, generation, resumed, ready_at)
          VALUES (${runId}, ${thread}, ${item}, 0, ${Store.bool(event.resumed)}, ${at})
          ON CONFLICT (run_id, thread_id) DO NOTHING`,
        sql`UPDATE ledger_work_items SET status = 'running', thread_id = ${thread}, started_at = COALESCE(started_at, ${at})
          WHERE run_id = ${runId} AND item_key = ${item} AND status IN ('pending', 'running')`
      ]
    }
    case "TurnStarted":
      return [
        sql`INSERT INTO ledger_turns (run_id, thread_id, turn_id, item_key, prompt, status, started_at)
        VALUES (${runId}, ${Store.id(event.threadId)}, ${Store.id(event.turnId)}, ${item}, ${Store.text(event.prompt)}, 'inProgress', ${at})
        ON CONFLICT (run_id, thread_id, turn_id) DO NOTHING`
      ]
    case "TurnCompleted": {
      const t = event.turn
      const error = t.error !== undefined ? Store.shown(t.error.message) : null
      return [
        sql`INSERT INTO ledger_turns (run_id, thread_id, turn_id, item_key, prompt, status, started_at, completed_at, final_message, error)
          VALUES (${runId}, ${Store.id(event.threadId)}, ${Store.id(t.turnId)}, ${item}, '', ${Store.id(t.status)}, ${at}, ${at},
            ${Store.optionalShown(t.finalMessage)}, ${error})
          ON CONFLICT (run_id, thread_id, turn_id) DO UPDATE SET status = excluded.status, completed_at = excluded.completed_at,
            final_message = excluded.final_message, error = excluded.error`,
        sql`UPDATE ledger_work_items SET turns_done = turns_done + 1 WHERE run_id = ${runId} AND item_key = ${item}`
      ]
    }
    case "ConnectionLost": {
      if (event.threadId === undefined) return none
      const thread = Store.id(event.threadId)
      return [
        sql`UPDATE ledger_threads SET lost_at = ${at} WHERE run_id = ${runId} AND thread_id = ${thread}`,
        sql`UPDATE ledger_turns SET status = 'connection-lost', completed_at = ${at}
          WHERE run_id = ${runId} AND thread_id = ${thread} AND status = 'inProgress'`
      ]
    }
    case "Resumed": {
      const thread = Store.id(event.threadId)
      return [
        sql`UPDATE ledger_threads SET generation = ${event.attempt}, lost_at = NULL WHERE run_id = ${runId} AND thread_id = ${thread}`,
        sql`UPDATE ledger_work_items SET resumes = ${event.attempt} WHERE run_id = ${runId} AND item_key = ${item}`
      ]
    }
    case "WorktreeReady": // where it works, for warden resume to take it up again
      return [
        sql`UPDATE ledger_work_items SET worktree_branch = ${Store.text(event.branch)}, worktree_path = ${Store.text(event.path)}
        WHERE run_id = ${runId} AND item_key = ${item}`
      ]
    case "Notification":
    case "Stalled":
    case "ThreadStartedFresh": // the ThreadReady that follows records the new thread
    case "WorktreeFinished": // not recorded: the branch and its worktree are in git
      return none
  }
}

const itemFinished = (
  runId: string,
  at: number,
  event: Extract<Supervisor.SupervisorEvent, { _tag: "ItemFinished" }>
): Write => {
  const item = Store.itemKey(event.item)
  const exit = event.exit
  if (exit._tag === "Success") {
    const r = exit.value
    return [
      sql`UPDATE ledger_work_items SET status = 'finished', finished_at = ${at}, result_status = ${Store.id(r.status)},
      final_message = ${Store.optionalShown(r.finalMessage)}, thread_id = ${Store.id(r.threadId)}, resumes = ${r.resumes}
      WHERE run_id = ${runId} AND item_key = ${item} AND status IN ('pending', 'running')`
    ]
  }
  const stopped = Cause.isInterruptedOnly(exit.cause)
  const failure = Option.getOrUndefined(Cause.failureOption(exit.cause))
  const reason = stopped ? "stopped" : failure !== undefined ? failure.reason : "defect"
  const detail = stopped
    ? null
    : failure !== undefined
      ? Store.shown(failure.detail)
      : Store.shown(Cause.pretty(exit.cause))
  return [
    sql`UPDATE ledger_work_items SET status = ${stopped ? "stopped" : "failed"}, finished_at = ${at},
    failure_reason = ${reason}, failure_detail = ${detail}, thread_id = COALESCE(thread_id, ${Store.optionalId(failure?.threadId)})
    WHERE run_id = ${runId} AND item_key = ${item} AND status IN ('pending', 'running')`
  ]
}

const supervisorEvent = (runId: string, at: number, event: Supervisor.SupervisorEvent): Write => {
  switch (event._tag) {
    case "Work":
      return workEvent(runId, at, event.event)
    case "ItemFinished":
      return itemFinished(runId, at, event)
    case "ConnectionReady":
      return [
        sql`INSERT INTO ledger_connections (run_id, connection, slot, ready_at)
        VALUES (${runId}, ${event.connection}, ${event.slot}, ${at}) ON CONFLICT (run_id, connection) DO NOTHING`
      ]
    case "ConnectionLost":
      return [
        sql`INSERT INTO ledger_connections (run_id, connection, slot, lost_at, end_reason, message)
        VALUES (${runId}, ${event.connection}, ${event.slot}, ${at}, ${Store.id(event.reason._tag)}, ${Store.shown(event.message)})
        ON CONFLICT (run_id, connection) DO UPDATE SET lost_at = excluded.lost_at, end_reason = excluded.end_reason, message = excluded.message`
      ]
    default:
      return none
  }
}

// ---------------------------------------------------------------------------------------------
// Cards

/** The kind of a source, as audit filters name it: the part of `describeSource` before `:`. */
export const sourceKind = (described: string): string => {
  const colon = described.indexOf(":")
  return colon < 0 ? described : described.slice(0, colon)
}

/** A card's row values, masked. */
interface CardRow {
  readonly kind: string
  readonly title: string
  readonly summary: string
  readonly facts: string
  readonly offers: string
}

/**
 * Rows already worked out, by card view: a card's opening and its settlement carry the same view,
 * and its summary, facts and masking (most of a card's cost) are worked out once.
 */
const cardRows = new WeakMap<CardTypes.CardView, CardRow>()

const cardRow = (card: CardTypes.CardView): CardRow => {
  const cached = cardRows.get(card)
  if (cached !== undefined) return cached
  let kind: string = "other"
  let summary: unknown = null
  try {
    summary = card.summary
    kind = card.summary.kind
  } catch {
    // a summary that cannot be read is stored as none (CardSummary never throws; a view might)
  }
  const row: CardRow = {
    kind: Store.id(kind),
    // The audit record's summary: the same masked, cut title the JSONL trail shows.
    title: Audit.summaryOf(card),
    summary: Store.json(summary),
    facts: Store.json(CardFacts.fromView(card)),
    offers: Store.json(card.offers)
  }
  cardRows.set(card, row)
  return row
}

/**
 * What one transaction has written so far that a later op of it may skip: the cards whose row it
 * inserted (by run), and the database it writes to (`committed`'s key). Made anew for each try of
 * a transaction (`transaction(database)`), so what a rolled back try wrote is never taken as there.
 * Its ops' statements are made as the transaction reaches them (`apply`), each op's after the
 * previous op's have run.
 */
export interface Transaction {
  readonly database: object
  readonly cards: Map<CardTypes.CardView, string>
}

/** A transaction's record, empty: one per try of a transaction on `database` (its writer's connection). */
export const transaction = (database: object): Transaction => ({ database, cards: new Map() })

const insertCard = (runId: string, card: CardTypes.CardView, tx: Transaction): Write => {
  const row = cardRow(card)
  tx.cards.set(card, runId)
  return [
    sql`INSERT INTO ledger_cards
      (run_id, card_id, request_id, method, thread_id, turn_id, item_key, kind, title, summary, facts, offers, opened_at, deadline_at)
      VALUES (${runId}, ${Store.id(card.id)}, ${Store.requestId(card.requestId)}, ${Store.id(card.method)}, ${Store.optionalId(card.threadId)},
        ${Store.optionalId(card.turnId)}, ${card.workItem === undefined ? null : Store.itemKey(card.workItem)}, ${row.kind},
        ${row.title}, ${row.summary}, ${row.facts}, ${row.offers}, ${card.openedAt}, ${card.deadlineAt})
      ON CONFLICT (run_id, card_id) DO NOTHING`
  ]
}

/**
 * The audit record of an approval event (`Audit.record`: masked by `SecretMask`), worked out once
 * per event: the ledger's audit file (`LedgerOptions.audit`) writes it as its line. The
 * settlement and late-decision columns are `Audit.decisionOf`, the same fields of the same record
 * worked out alone (most ledgers have no audit file), so the two cannot disagree.
 */
const auditRecords = new WeakMap<ApprovalEvent.ApprovalEvent, Audit.AuditRecord>()

export const auditRecord = (event: ApprovalEvent.ApprovalEvent): Audit.AuditRecord => {
  const cached = auditRecords.get(event)
  if (cached !== undefined) return cached
  const r = Audit.record(event)
  auditRecords.set(event, r)
  return r
}

/**
 * Cards whose row is committed, by the database (its writer's connection: `Transaction.database`)
 * and the run it is in (`committed`, told by the writer after each transaction): a settlement of
 * one does not insert its card again (a statement of four per card). Two ledgers in one process
 * never take one's rows for the other's.
 */
const cardsCommitted = new WeakMap<CardTypes.CardView, WeakMap<object, string>>()

/** The writer committed these ops to `database` (`written` says which): their cards' rows are there. */
export const committed = (database: object, ops: ReadonlyArray<Op>, written: (op: Op) => boolean): void => {
  for (const op of ops) {
    if (op._tag === "Event" && op.event._tag === "Approval" && op.event.event._tag === "CardOpened" && written(op)) {
      const card = op.event.event.card
      let byDatabase = cardsCommitted.get(card)
      if (byDatabase === undefined) {
        byDatabase = new WeakMap()
        cardsCommitted.set(card, byDatabase)
      }
      byDatabase.set(database, op.runId)
    }
  }
}

/**
 * The card's row, inserted unless it is there already (committed before, or inserted by this
 * transaction's earlier ops).
 */
const cardOf = (runId: string, card: CardTypes.CardView, tx: Transaction): Write =>
  cardsCommitted.get(card)?.get(tx.database) === runId || tx.cards.get(card) === runId
    ? none
    : insertCard(runId, card, tx)

const insertSettlement = (runId: string, s: CardTypes.Settlement, r: Audit.DecisionFields, tx: Transaction): Write => {
  const source = r.source ?? ""
  const cardId = Store.id(s.card.id)
  const settlement: Statement = {
    ...sql`INSERT INTO ledger_settlements (run_id, card_id, outcome, source, source_kind, channel, decision, written, detail, settled_at, latency_ms)
      VALUES (${runId}, ${cardId}, ${s.outcome}, ${source}, ${sourceKind(source)}, ${r.channel}, ${r.decision},
        ${Store.bool(s.written)}, ${r.detail}, ${s.settledAt}, ${s.latencyMs})
      ON CONFLICT (run_id, card_id) DO NOTHING
      RETURNING card_id`,
    followUp: (inserted) =>
      inserted.length > 0
        ? none
        : // The card has its one settlement already. One recorded `stranded` (its run was taken
          // for dead while it was not) keeps it; what really happened is kept as a late
          // decision, never lost. (A settlement recorded twice otherwise: nothing more.)
          [
            sql`INSERT INTO ledger_late_decisions (late_id, run_id, card_id, decision, source, channel, outcome, at)
            SELECT ${randomUUID()}, ${runId}, ${cardId}, ${r.decision ?? s.outcome}, ${source}, ${r.channel}, 'stranded', ${s.settledAt}
            FROM ledger_settlements
            WHERE run_id = ${runId} AND card_id = ${cardId} AND outcome = 'stranded'`
          ]
  }
  return [...cardOf(runId, s.card, tx), settlement]
}

const approvalEvent = (runId: string, event: ApprovalEvent.ApprovalEvent, tx: Transaction): Write => {
  switch (event._tag) {
    case "CardOpened":
      return cardOf(runId, event.card, tx)
    case "CardSettled":
      return insertSettlement(runId, event.settlement, Audit.decisionOf(event), tx)
    case "LateDecision": {
      const r = Audit.decisionOf(event)
      return [
        ...cardOf(runId, event.card, tx),
        sql`INSERT INTO ledger_late_decisions (late_id, run_id, card_id, decision, source, channel, outcome, at)
          VALUES (${randomUUID()}, ${runId}, ${Store.id(event.card.id)}, ${r.decision ?? ""},
            ${r.source ?? ""}, ${r.channel}, ${event.outcome}, ${event.at})`
      ]
    }
  }
}

// ---------------------------------------------------------------------------------------------

/**
 * The statements of one op, in the transaction `tx` (`transaction()`, one per try), whose earlier
 * ops' rows it need not write again: made when the transaction reaches the op (after the earlier
 * ops' statements ran), to be run before the next op's are made.
 */
export const apply = (op: Op, tx: Transaction): Write => {
  switch (op._tag) {
    case "RunStarted":
      return runStarted(op.run)
    case "RunEnded":
      return runEnded(op.runId, op.at, op.status)
    case "Dropped":
      return dropped(op.runId, op.count)
    case "Lost":
      return lost(op.runId, op.count)
    case "Unjournaled":
      return unjournaled(op.runId, op.count)
    case "Event": {
      const e = op.event
      switch (e._tag) {
        case "ItemSubmitted":
          return itemSubmitted(op.runId, op.at, e.item, e.from)
        case "Supervisor":
          return supervisorEvent(op.runId, op.at, e.event)
        case "Approval":
          return approvalEvent(op.runId, e.event, tx)
      }
    }
  }
}

/** What an op is, in a word (for reports of failed writes; never its data). */
export const describe = (op: Op): string => {
  if (op._tag !== "Event") return op._tag
  const e = op.event
  switch (e._tag) {
    case "ItemSubmitted":
      return "ItemSubmitted"
    case "Supervisor":
      return e.event._tag === "Work" ? e.event.event._tag : e.event._tag
    case "Approval":
      return e.event._tag
  }
}
