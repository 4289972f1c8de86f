/**
 * The ledger's reads (audit, recovery) and its mutations outside the event stream (stranding,
 * hand-over, remembered rules). Portable SQL, as the writer's.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Card } from "@warden/approvals"
import { SecretMask } from "@warden/approvals"
import { Effect, Either } from "effect"
import { randomBytes } from "node:crypto"
import type * as CardFacts from "../CardFacts.js"
import type * as AnswerJournal from "./AnswerJournal.js"
import type { LedgerReaderShape } from "../LedgerReader.js"
import { LedgerError, sqlError } from "./LedgerError.js"
import type * as Records from "./Records.js"
import * as Remembered from "../Remembered.js"
import * as Store from "./Store.js"

type Sql = SqlClient.SqlClient
type Row = Record<string, unknown>

const num = (v: unknown): number | undefined =>
  typeof v === "number"
    ? v
    : typeof v === "bigint"
      ? Number(v)
      : typeof v === "string" && v !== "" && !Number.isNaN(Number(v))
        ? Number(v)
        : undefined
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined)
const strings = (v: unknown): ReadonlyArray<string> => {
  const parsed = Store.parse(v)
  return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === "string") : []
}
const record = (v: unknown): Readonly<Record<string, unknown>> => {
  const parsed = Store.parse(v)
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
    ? (parsed as Record<string, unknown>)
    : {}
}

// ---------------------------------------------------------------------------------------------
// Rows to records

const toRun = (r: Row): Records.RunRecord => ({
  runId: String(r["run_id"]),
  startedAt: num(r["started_at"]) ?? 0,
  endedAt: num(r["ended_at"]),
  status: String(r["status"]) as Records.RunStatus,
  label: str(r["label"]),
  info: Store.parse(r["info"]),
  pid: num(r["pid"]),
  host: str(r["host"]),
  resumedFrom: str(r["resumed_from"]),
  droppedEvents: num(r["dropped_events"]) ?? 0,
  lostEvents: num(r["lost_events"]) ?? 0,
  unjournaledAnswers: num(r["unjournaled_answers"]) ?? 0
})

const toItem = (r: Row): Records.WorkItemRecord => {
  const fromRun = str(r["from_run_id"])
  const fromItem = str(r["from_item_key"])
  return {
    runId: String(r["run_id"]),
    item: String(r["item_key"]),
    prompt: String(r["prompt"]),
    followUps: strings(r["follow_ups"]),
    options: record(r["options"]),
    promptsMasked: num(r["prompts_masked"]) === 1,
    status: String(r["status"]) as Records.WorkItemStatus,
    threadId: str(r["thread_id"]),
    turnsDone: num(r["turns_done"]) ?? 0,
    resumes: num(r["resumes"]) ?? 0,
    submittedAt: num(r["submitted_at"]) ?? 0,
    startedAt: num(r["started_at"]),
    finishedAt: num(r["finished_at"]),
    resultStatus: str(r["result_status"]),
    finalMessage: str(r["final_message"]),
    failureReason: str(r["failure_reason"]),
    failureDetail: str(r["failure_detail"]),
    from: fromRun !== undefined && fromItem !== undefined ? { runId: fromRun, item: fromItem } : undefined,
    handedTo: str(r["handed_to"]),
    worktree:
      str(r["worktree_branch"]) !== undefined && str(r["worktree_path"]) !== undefined
        ? { branch: str(r["worktree_branch"])!, path: str(r["worktree_path"])! }
        : undefined
  }
}

const toUnfinished = (r: Row): Records.UnfinishedItem => {
  const item = toItem(r)
  const prompts = [item.prompt, ...item.followUps]
  return {
    ...item,
    remainingPrompts: prompts.slice(Math.min(item.turnsDone, prompts.length)),
    generation: num(r["generation"])
  }
}

const toThread = (r: Row): Records.ThreadRecord => ({
  runId: String(r["run_id"]),
  threadId: String(r["thread_id"]),
  item: String(r["item_key"]),
  generation: num(r["generation"]) ?? 0,
  resumed: num(r["resumed"]) === 1,
  readyAt: num(r["ready_at"]) ?? 0,
  lostAt: num(r["lost_at"])
})

const toTurn = (r: Row): Records.TurnRecord => ({
  runId: String(r["run_id"]),
  threadId: String(r["thread_id"]),
  turnId: String(r["turn_id"]),
  item: String(r["item_key"]),
  prompt: String(r["prompt"]),
  status: String(r["status"]),
  startedAt: num(r["started_at"]) ?? 0,
  completedAt: num(r["completed_at"]),
  finalMessage: str(r["final_message"]),
  error: str(r["error"])
})

const toFacts = (v: unknown): CardFacts.CardFacts => {
  const parsed = Store.parse(v)
  return typeof parsed === "object" && parsed !== null && typeof (parsed as Row)["kind"] === "string"
    ? (parsed as CardFacts.CardFacts)
    : { kind: "other", complete: false, masked: false }
}

const toCard = (r: Row): Records.CardRecord => {
  const requestId = Store.parse(r["request_id"])
  const outcome = str(r["outcome"])
  return {
    runId: String(r["run_id"]),
    cardId: String(r["card_id"]),
    requestId: typeof requestId === "number" || typeof requestId === "string" ? requestId : String(r["request_id"]),
    method: String(r["method"]),
    threadId: str(r["thread_id"]),
    turnId: str(r["turn_id"]),
    workItem: str(r["item_key"]),
    kind: String(r["kind"]),
    title: String(r["title"]),
    summary: Store.parse(r["summary"]),
    facts: toFacts(r["facts"]),
    offers: strings(r["offers"]),
    openedAt: num(r["opened_at"]) ?? 0,
    deadlineAt: num(r["deadline_at"]) ?? 0,
    settlement:
      outcome === undefined
        ? undefined
        : {
            outcome: outcome as Card.Outcome | "stranded",
            source: String(r["source"]),
            sourceKind: String(r["source_kind"]),
            channel: str(r["channel"]),
            decision: str(r["decision"]),
            written: num(r["written"]) === 1,
            detail: str(r["detail"]),
            settledAt: num(r["settled_at"]) ?? 0,
            latencyMs: num(r["latency_ms"])
          }
  }
}

const toRule = (r: Row): Remembered.RememberedRule | undefined => {
  const kind = str(r["scope_kind"])
  const scope = ((): unknown => {
    switch (kind) {
      case "Command":
        return { _tag: "Command", argv: Store.parse(r["argv"]), exact: num(r["exact"]) === 1 }
      case "Path":
        return { _tag: "Path", root: r["path_root"], target: r["path_target"] }
      case "Mcp":
        return { _tag: "Mcp", server: r["mcp_server"], tool: r["mcp_tool"] }
      default:
        return undefined
    }
  })()
  // A row that no longer reads as a valid scope is not a rule (it never matches anything).
  const valid = Remembered.validateScope(scope)
  if (Either.isLeft(valid)) return undefined
  const fromRun = str(r["from_run_id"])
  const fromCard = str(r["from_card_id"])
  return {
    id: String(r["rule_id"]),
    scope: valid.right,
    author: String(r["author"]),
    createdAt: num(r["created_at"]) ?? 0,
    expiresAt: num(r["expires_at"]),
    from: fromRun !== undefined && fromCard !== undefined ? { runId: fromRun, cardId: fromCard } : undefined,
    note: str(r["note"]),
    revokedAt: num(r["revoked_at"]),
    revokedBy: str(r["revoked_by"])
  }
}

// ---------------------------------------------------------------------------------------------
// Reads

const CardColumns = (sql: Sql) =>
  sql`c.run_id, c.card_id, c.request_id, c.method, c.thread_id, c.turn_id, c.item_key, c.kind, c.title, c.summary, c.facts,
    c.offers, c.opened_at, c.deadline_at, s.outcome, s.source, s.source_kind, s.channel, s.decision, s.written, s.detail, s.settled_at, s.latency_ms`

const CardOrder = (sql: Sql) => sql`c.opened_at, c.run_id, length(c.card_id), c.card_id`
/** `CardOrder` backwards: the newest first. */
const NewestFirst = (sql: Sql) => sql`c.opened_at DESC, c.run_id DESC, length(c.card_id) DESC, c.card_id DESC`

export const runs = (sql: Sql, status?: Records.RunStatus) =>
  (status === undefined
    ? sql<Row>`SELECT * FROM ledger_runs ORDER BY started_at DESC, run_id DESC`
    : sql<Row>`SELECT * FROM ledger_runs WHERE status = ${status} ORDER BY started_at DESC, run_id DESC`
  ).pipe(
    Effect.map((rows) => rows.map(toRun)),
    Effect.mapError(sqlError("could not list runs"))
  )

export const workItems = (sql: Sql, runId: string) =>
  sql<Row>`SELECT * FROM ledger_work_items WHERE run_id = ${runId} ORDER BY submitted_at, length(item_key), item_key`.pipe(
    Effect.map((rows) => rows.map(toItem)),
    Effect.mapError(sqlError("could not list work items"))
  )

const unfinishedRows = (sql: Sql, runId: string) =>
  sql<Row>`SELECT w.*, t.generation FROM ledger_work_items w
    LEFT JOIN ledger_threads t ON t.run_id = w.run_id AND t.thread_id = w.thread_id
    WHERE w.run_id = ${runId} AND w.status IN ('pending', 'running')
    ORDER BY w.submitted_at, length(w.item_key), w.item_key`

export const unfinishedItems = (sql: Sql, runId: string) =>
  unfinishedRows(sql, runId).pipe(
    Effect.map((rows) => rows.map(toUnfinished)),
    Effect.mapError(sqlError("could not list unfinished work items"))
  )

export const threads = (sql: Sql, runId: string) =>
  sql<Row>`SELECT * FROM ledger_threads WHERE run_id = ${runId} ORDER BY ready_at, thread_id`.pipe(
    Effect.map((rows) => rows.map(toThread)),
    Effect.mapError(sqlError("could not list threads"))
  )

export const turns = (sql: Sql, runId: string) =>
  sql<Row>`SELECT * FROM ledger_turns WHERE run_id = ${runId} ORDER BY started_at, thread_id, turn_id`.pipe(
    Effect.map((rows) => rows.map(toTurn)),
    Effect.mapError(sqlError("could not list turns"))
  )

export const DefaultLimit = 10_000

type Fragment = ReturnType<Sql["and"]>

/**
 * One filter builder for the audit queries: each condition is a fragment, or undefined when its
 * filter was not given; what is given is ANDed (nothing given: every row).
 */
const whereOf = (sql: Sql, conditions: ReadonlyArray<Fragment | undefined>): Fragment =>
  sql.and(conditions.filter((c): c is Fragment => c !== undefined))

/** `column = value`, or no condition when `value` is undefined. */
const equals = (sql: Sql, column: Fragment, value: string | number | undefined): Fragment | undefined =>
  value === undefined ? undefined : sql`${column} = ${value}`

/**
 * Cards listed before `p` in `CardOrder` (a row value: SQLite and PostgreSQL both compare them in
 * order); `opened_at <= ` first, so that the index on it bounds the scan. The id's length counted
 * as SQL's `length` counts it: in characters, not UTF-16 units.
 */
const before = (sql: Sql, p: Records.CardPosition): Fragment =>
  sql`c.opened_at <= ${p.openedAt} AND (c.opened_at, c.run_id, length(c.card_id), c.card_id) < (${p.openedAt}, ${p.runId}, ${Array.from(p.cardId).length}, ${p.cardId})`

/**
 * Why `filter` cannot be read, if it cannot: a number that is not finite (`NaN` compares false
 * with everything and would read no card, saying nothing), a position without its ids.
 */
const invalidFilter = (filter: Records.CardFilter): string | undefined => {
  for (const [name, value] of [
    ["from", filter.from],
    ["to", filter.to],
    ["limit", filter.limit],
    ["before.openedAt", filter.before?.openedAt]
  ] as const)
    if (value !== undefined && !Number.isFinite(value))
      return `the card filter's ${name} is not a finite number (${String(value)})`
  if (
    filter.before !== undefined &&
    (typeof filter.before.openedAt !== "number" ||
      typeof filter.before.runId !== "string" ||
      typeof filter.before.cardId !== "string")
  )
    return "the card filter's before needs the openedAt, runId and cardId of a card"
  return undefined
}

export const cards = (sql: Sql, filter: Records.CardFilter = {}) => {
  const invalid = invalidFilter(filter)
  if (invalid !== undefined) return Effect.fail(new LedgerError({ reason: "Invalid", detail: invalid }))
  const where = whereOf(sql, [
    equals(sql, sql`c.run_id`, filter.runId),
    equals(sql, sql`c.item_key`, filter.item === undefined ? undefined : Store.itemKey(filter.item)),
    equals(sql, sql`c.method`, filter.method),
    filter.outcome === "open" ? sql`s.card_id IS NULL` : equals(sql, sql`s.outcome`, filter.outcome),
    filter.source === undefined
      ? undefined
      : equals(sql, filter.source.includes(":") ? sql`s.source` : sql`s.source_kind`, filter.source),
    filter.from !== undefined ? sql`c.opened_at >= ${filter.from}` : undefined,
    filter.to !== undefined ? sql`c.opened_at < ${filter.to}` : undefined,
    filter.before === undefined ? undefined : before(sql, filter.before)
  ])
  const limit = Math.max(0, Math.floor(filter.limit ?? DefaultLimit))
  const newest = filter.newest === true
  return sql<Row>`SELECT ${CardColumns(sql)} FROM ledger_cards c
    LEFT JOIN ledger_settlements s ON s.run_id = c.run_id AND s.card_id = c.card_id
    WHERE ${where} ORDER BY ${newest ? NewestFirst(sql) : CardOrder(sql)} LIMIT ${limit}`.pipe(
    // The newest, listed oldest first as every other read.
    Effect.map((rows) => (newest ? rows.map(toCard).reverse() : rows.map(toCard))),
    Effect.mapError(sqlError("could not list cards"))
  )
}

export const openCards = (sql: Sql, runId: string) => cards(sql, { runId, outcome: "open" })

export const lateDecisions = (sql: Sql, filter: { readonly runId?: string; readonly cardId?: string } = {}) => {
  const where = whereOf(sql, [equals(sql, sql`run_id`, filter.runId), equals(sql, sql`card_id`, filter.cardId)])
  return sql<Row>`SELECT * FROM ledger_late_decisions WHERE ${where} ORDER BY at, run_id, card_id`.pipe(
    Effect.map((rows) =>
      rows.map(
        (r): Records.LateDecisionRecord => ({
          runId: String(r["run_id"]),
          cardId: String(r["card_id"]),
          decision: String(r["decision"]),
          source: String(r["source"]),
          channel: str(r["channel"]),
          outcome: String(r["outcome"]),
          at: num(r["at"]) ?? 0
        })
      )
    ),
    Effect.mapError(sqlError("could not list late decisions"))
  )
}

export const accounting = (sql: Sql, runId: string) =>
  Effect.gen(function* () {
    const rows = yield* sql<Row>`SELECT s.outcome AS outcome, count(*) AS n FROM ledger_cards c
      LEFT JOIN ledger_settlements s ON s.run_id = c.run_id AND s.card_id = c.card_id
      WHERE c.run_id = ${runId} GROUP BY s.outcome`
    const late = yield* sql<Row>`SELECT count(*) AS n FROM ledger_late_decisions WHERE run_id = ${runId}`
    const byOutcome: Record<string, number> = {}
    let cardsCount = 0
    let open = 0
    for (const r of rows) {
      const n = num(r["n"]) ?? 0
      cardsCount += n
      const outcome = str(r["outcome"])
      if (outcome === undefined) open += n
      else byOutcome[outcome] = n
    }
    const stranded = byOutcome["stranded"] ?? 0
    return {
      cards: cardsCount,
      open,
      settled: cardsCount - open - stranded,
      stranded,
      byOutcome,
      lateDecisions: num(late[0]?.["n"]) ?? 0
    } satisfies Records.Accounting
  }).pipe(Effect.mapError(sqlError("could not count the run's cards")))

// ---------------------------------------------------------------------------------------------
// Recovery

/** Close the turns of a dead run still `inProgress` as `crashed` (they will never complete); how many. */
const crashTurns = (sql: Sql, runId: string, now: number): Effect.Effect<number, SqlError> =>
  Effect.gen(function* () {
    const open =
      yield* sql<Row>`SELECT count(*) AS n FROM ledger_turns WHERE run_id = ${runId} AND status = 'inProgress'`
    const count = num(open[0]?.["n"]) ?? 0
    if (count > 0) {
      yield* sql`UPDATE ledger_turns SET status = 'crashed', completed_at = COALESCE(completed_at, ${now}),
        error = COALESCE(error, 'in progress when its run died')
        WHERE run_id = ${runId} AND status = 'inProgress'`
    }
    return count
  })

/**
 * The answers the dead run's journal holds whose settlement was never committed
 * (`AnswerJournal`): each card is recorded (from the line, when its opening was not committed
 * either) and stranded with the decision that was being written; how many. Each once: a card with
 * a settlement keeps it.
 */
const strandAnswered = (
  sql: Sql,
  runId: string,
  now: number,
  answered: ReadonlyArray<AnswerJournal.Entry>
): Effect.Effect<number, SqlError> =>
  Effect.gen(function* () {
    let count = 0
    for (const a of answered) {
      const settled =
        yield* sql<Row>`SELECT 1 AS n FROM ledger_settlements WHERE run_id = ${runId} AND card_id = ${a.cardId}`
      if (settled.length > 0) continue
      // Left open and never answered (its opening's record): its row, made from the record when
      // the writer had not committed it, is stranded with every other open card after this.
      yield* sql`INSERT INTO ledger_cards
        (run_id, card_id, request_id, method, thread_id, turn_id, item_key, kind, title, summary, facts, offers, opened_at, deadline_at)
        VALUES (${runId}, ${a.cardId}, ${a.requestId}, ${a.method}, ${a.threadId}, ${a.turnId}, ${a.itemKey}, 'other',
          ${`${a.method} (its opening was not recorded; from the answer journal)`}, 'null', ${RecoveredFacts}, '[]', ${a.openedAt}, ${a.deadlineAt})
        ON CONFLICT (run_id, card_id) DO NOTHING`
      if (a.outcome === null) continue
      const detail = Store.shown(
        `open when its run died; its answer (${a.outcome}${a.decision === null ? "" : `, decision ${a.decision}`}, by ${a.source}) was being written to codex: codex may have received it`
      )
      yield* sql`INSERT INTO ledger_settlements (run_id, card_id, outcome, source, source_kind, decision, written, detail, settled_at, latency_ms)
        VALUES (${runId}, ${a.cardId}, 'stranded', 'stranded', 'stranded', ${a.decision}, 0, ${detail}, ${now}, NULL)
        ON CONFLICT (run_id, card_id) DO NOTHING`
      count++
    }
    return count
  })

/** The facts of a card recorded from the answer journal only: nothing known beyond its method. */
const RecoveredFacts = JSON.stringify({ kind: "other", complete: false, masked: false })

/**
 * Record every open card of `runId` `stranded` (each once: a settled card keeps its settlement),
 * or only those of `cards`, its turns still in progress `crashed`, and the run `crashed`. The
 * answers of `answered` (its answer journal) are stranded first, saying what was being written.
 */
const strandAll = (
  sql: Sql,
  runId: string,
  now: number,
  cards: ReadonlyArray<string> | undefined,
  answered: ReadonlyArray<AnswerJournal.Entry>
): Effect.Effect<{ readonly cards: number; readonly turns: number }, SqlError> =>
  Effect.gen(function* () {
    const turns = yield* crashTurns(sql, runId, now)
    const fromJournal = yield* strandAnswered(
      sql,
      runId,
      now,
      cards === undefined ? answered : answered.filter((a) => cards.includes(a.cardId))
    )
    const stranded = yield* strand(sql, runId, now, cards)
    return { cards: fromJournal + stranded, turns }
  })

/** Record every open card of `runId` (or of `cards` only) `stranded` (each once: a settled card keeps its settlement). */
const strand = (sql: Sql, runId: string, now: number, cards?: ReadonlyArray<string>): Effect.Effect<number, SqlError> =>
  Effect.gen(function* () {
    const only =
      cards === undefined ? sql`` : cards.length === 0 ? sql`AND 1 = 0` : sql`AND c.card_id IN ${sql.in(cards)}`
    const open = yield* sql<Row>`SELECT count(*) AS n FROM ledger_cards c WHERE c.run_id = ${runId} ${only}
      AND NOT EXISTS (SELECT 1 FROM ledger_settlements s WHERE s.run_id = c.run_id AND s.card_id = c.card_id)`
    const count = num(open[0]?.["n"]) ?? 0
    if (count > 0) {
      yield* sql`INSERT INTO ledger_settlements (run_id, card_id, outcome, source, source_kind, decision, written, detail, settled_at, latency_ms)
        SELECT c.run_id, c.card_id, 'stranded', 'stranded', 'stranded', NULL, 0, 'open when its run died; never answered', ${now}, NULL
        FROM ledger_cards c
        WHERE c.run_id = ${runId} ${only}
          AND NOT EXISTS (SELECT 1 FROM ledger_settlements s WHERE s.run_id = c.run_id AND s.card_id = c.card_id)
        ON CONFLICT (run_id, card_id) DO NOTHING`
    }
    yield* sql`UPDATE ledger_runs SET status = 'crashed', ended_at = COALESCE(ended_at, ${now}) WHERE run_id = ${runId} AND status = 'running'`
    return count
  })

/** How many of these cards of a run have their settlement. */
export const settledCards = (sql: Sql, runId: string, cards: ReadonlyArray<string>) =>
  cards.length === 0
    ? Effect.succeed(0)
    : Effect.map(
        sql<Row>`SELECT count(*) AS n FROM ledger_settlements WHERE run_id = ${runId} AND card_id IN ${sql.in(cards)}`,
        (rows) => num(rows[0]?.["n"]) ?? 0
      )

export const markStranded = (
  sql: Sql,
  runId: string,
  now: number,
  cards: ReadonlyArray<string> | undefined,
  answered: ReadonlyArray<AnswerJournal.Entry> = []
) =>
  sql
    .withTransaction(Effect.map(strandAll(sql, runId, now, cards, answered), (s) => s.cards))
    .pipe(Effect.mapError(sqlError(`could not strand the open cards of run ${runId}`)))

/**
 * Record the open cards of one work item of `runId` `stranded` (each once), without touching the
 * run's status: its process may be alive and have handed the item over (a cluster's shard moved).
 */
export const markStrandedItem = (
  sql: Sql,
  runId: string,
  itemKey: string,
  now: number,
  cards: ReadonlyArray<string> | undefined,
  answered: ReadonlyArray<AnswerJournal.Entry> = []
) =>
  cards !== undefined && cards.length === 0
    ? Effect.succeed(0)
    : sql
        .withTransaction(
          Effect.gen(function* () {
            const fromJournal = yield* strandAnswered(
              sql,
              runId,
              now,
              answered.filter((a) => a.itemKey === itemKey && (cards === undefined || cards.includes(a.cardId)))
            )
            const only = cards === undefined ? sql`` : sql`AND c.card_id IN ${sql.in(cards)}`
            const open =
              yield* sql<Row>`SELECT count(*) AS n FROM ledger_cards c WHERE c.run_id = ${runId} AND c.item_key = ${itemKey} ${only}
        AND NOT EXISTS (SELECT 1 FROM ledger_settlements s WHERE s.run_id = c.run_id AND s.card_id = c.card_id)`
            const count = num(open[0]?.["n"]) ?? 0
            if (count > 0) {
              yield* sql`INSERT INTO ledger_settlements (run_id, card_id, outcome, source, source_kind, decision, written, detail, settled_at, latency_ms)
          SELECT c.run_id, c.card_id, 'stranded', 'stranded', 'stranded', NULL, 0, 'open when its runner died or gave the item up; never answered', ${now}, NULL
          FROM ledger_cards c
          WHERE c.run_id = ${runId} AND c.item_key = ${itemKey} ${only}
            AND NOT EXISTS (SELECT 1 FROM ledger_settlements s WHERE s.run_id = c.run_id AND s.card_id = c.card_id)
          ON CONFLICT (run_id, card_id) DO NOTHING`
            }
            return fromJournal + count
          })
        )
        .pipe(Effect.mapError(sqlError(`could not strand the open cards of item ${itemKey} of run ${runId}`)))

/** Whether a stored value had something masked in it (it cannot be sent again as given). */
const holdsMask = (value: unknown): boolean =>
  value !== undefined && (JSON.stringify(value) ?? "").includes(SecretMask.Mask)

/** Why an unfinished item cannot (or need not) run again, or undefined when it can. */
const whyNotResumed = (
  item: Records.UnfinishedItem
): { readonly reason: Records.NotResumedReason; readonly detail: string } | undefined => {
  if (item.remainingPrompts.length === 0)
    return { reason: "nothing-left", detail: "every turn had completed; nothing to run again" }
  if (item.promptsMasked) {
    return {
      reason: "prompt-masked",
      detail: "its prompt held a secret and was stored masked, so it cannot be sent again as asked"
    }
  }
  if (holdsMask(item.options["config"]) || holdsMask(item.options["threadParams"])) {
    return {
      reason: "options-masked",
      detail: "its config or thread params held a secret and were stored masked, so they cannot be given again"
    }
  }
  return undefined
}

export const recover = (
  sql: Sql,
  deadRunId: string,
  intoRunId: string,
  now: number,
  answered: ReadonlyArray<AnswerJournal.Entry> = []
) =>
  sql
    .withTransaction(
      Effect.gen(function* () {
        const { cards: stranded, turns: crashedTurns } = yield* strandAll(sql, deadRunId, now, undefined, answered)
        const rows = yield* unfinishedRows(sql, deadRunId)
        const items: Array<Records.UnfinishedItem> = []
        const notResumed: Array<Records.NotResumedItem> = []
        for (const item of rows.map(toUnfinished)) {
          const why = whyNotResumed(item)
          if (why === undefined) {
            yield* sql`UPDATE ledger_work_items SET status = 'handed-over', handed_to = ${intoRunId}
            WHERE run_id = ${deadRunId} AND item_key = ${item.item} AND status IN ('pending', 'running')`
            items.push({ ...item, status: "handed-over", handedTo: intoRunId })
          } else {
            yield* sql`UPDATE ledger_work_items SET status = 'not-resumed', failure_reason = ${why.reason}, failure_detail = ${why.detail},
            finished_at = COALESCE(finished_at, ${now})
            WHERE run_id = ${deadRunId} AND item_key = ${item.item} AND status IN ('pending', 'running')`
            notResumed.push({
              ...item,
              status: "not-resumed",
              failureReason: why.reason,
              failureDetail: why.detail,
              finishedAt: item.finishedAt ?? now,
              ...why
            })
          }
        }
        return { stranded, crashedTurns, items, notResumed } satisfies Records.Recovery
      })
    )
    .pipe(Effect.mapError(sqlError(`could not recover run ${deadRunId}`)))

// ---------------------------------------------------------------------------------------------
// Retention

/** What `prune` removed. */
export interface Pruned {
  /** Cards settled before the cut (with their settlements and late decisions). */
  readonly cards: number
  /** Runs ended before the cut that held no card any more (with their items, threads, turns, connections). */
  readonly runs: number
}

/**
 * Delete, in one transaction, the cards of runs no longer `running` that settled before `before`
 * (their settlements and late decisions with them), then the runs that ended before it and hold no
 * card any more (their work items, threads, turns and connections with them). Open cards, runs
 * still `running` (a dead one is resumed first) and remembered rules are kept.
 */
export const prune = (sql: Sql, before: number) =>
  sql
    .withTransaction(
      Effect.gen(function* () {
        const prunable = sql`SELECT 1 FROM ledger_settlements s, ledger_runs r
        WHERE r.run_id = s.run_id AND r.status <> 'running' AND s.settled_at < ${before}`
        const counted = yield* sql<Row>`SELECT count(*) AS n FROM ledger_cards c
        WHERE EXISTS (${prunable} AND s.run_id = c.run_id AND s.card_id = c.card_id)`
        yield* sql`DELETE FROM ledger_late_decisions
        WHERE EXISTS (${prunable} AND s.run_id = ledger_late_decisions.run_id AND s.card_id = ledger_late_decisions.card_id)`
        yield* sql`DELETE FROM ledger_cards
        WHERE EXISTS (${prunable} AND s.run_id = ledger_cards.run_id AND s.card_id = ledger_cards.card_id)`
        yield* sql`DELETE FROM ledger_settlements
        WHERE EXISTS (SELECT 1 FROM ledger_runs r WHERE r.run_id = ledger_settlements.run_id AND r.status <> 'running')
          AND settled_at < ${before}`
        const emptyRuns = sql`SELECT r.run_id FROM ledger_runs r WHERE r.status <> 'running' AND r.ended_at < ${before}
        AND NOT EXISTS (SELECT 1 FROM ledger_cards c WHERE c.run_id = r.run_id)`
        const runs = yield* sql<Row>`SELECT count(*) AS n FROM (${emptyRuns}) e`
        for (const table of [
          "ledger_work_items",
          "ledger_threads",
          "ledger_turns",
          "ledger_connections",
          "ledger_late_decisions"
        ] as const) {
          yield* sql`DELETE FROM ${sql(table)} WHERE run_id IN (${emptyRuns})`
        }
        yield* sql`DELETE FROM ledger_runs WHERE run_id IN (${emptyRuns})`
        return { cards: num(counted[0]?.["n"]) ?? 0, runs: num(runs[0]?.["n"]) ?? 0 } satisfies Pruned
      })
    )
    .pipe(Effect.mapError(sqlError("could not prune the ledger")))

// ---------------------------------------------------------------------------------------------
// Remembered rules

let ruleCounter = 0

/** `m` + creation time + a counter (ids sort in creation order within a process) + randomness. */
const ruleId = (now: number): string =>
  `m${now.toString(36).padStart(9, "0")}${(ruleCounter++ % 1_296).toString(36).padStart(2, "0")}${randomBytes(3).toString("hex")}`

export const remember = (sql: Sql, input: Remembered.RememberInput, now: number) =>
  Effect.gen(function* () {
    const scope = Remembered.validateScope(input.scope)
    if (Either.isLeft(scope)) return yield* new LedgerError({ reason: "Invalid", detail: scope.left })
    const author = input.author.trim()
    if (author.length === 0 || author.length > 200)
      return yield* new LedgerError({
        reason: "Invalid",
        detail: "a remembered rule needs an author (1 to 200 characters)"
      })
    if (input.expiresAt !== undefined && !(Number.isFinite(input.expiresAt) && input.expiresAt > now)) {
      return yield* new LedgerError({
        reason: "Invalid",
        detail: "expiresAt must be a time after now (epoch milliseconds)"
      })
    }
    const s = scope.right
    const rule: Remembered.RememberedRule = {
      id: ruleId(now),
      scope: s,
      author: Store.text(author),
      createdAt: now,
      expiresAt: input.expiresAt,
      from: input.from,
      note: input.note !== undefined ? Store.shown(input.note, 1_000) : undefined,
      revokedAt: undefined,
      revokedBy: undefined
    }
    yield* sql`INSERT INTO ledger_remembered_rules
      (rule_id, scope_kind, argv, exact, path_root, path_target, mcp_server, mcp_tool, author, created_at, expires_at, from_run_id, from_card_id, note)
      VALUES (${rule.id}, ${s._tag}, ${s._tag === "Command" ? Store.json(s.argv) : null}, ${s._tag === "Command" ? Store.bool(s.exact) : null},
        ${s._tag === "Path" ? Store.text(s.root) : null}, ${s._tag === "Path" ? s.target : null},
        ${s._tag === "Mcp" ? Store.text(s.server) : null}, ${s._tag === "Mcp" ? Store.text(s.tool) : null},
        ${rule.author}, ${now}, ${rule.expiresAt ?? null}, ${Store.optionalId(rule.from?.runId)}, ${Store.optionalId(rule.from?.cardId)},
        ${rule.note ?? null})`.pipe(Effect.mapError(sqlError("could not store the remembered rule")))
    return rule
  })

/** Which remembered rules `Ledger.rememberedRules` lists (by default, those in force now). */
export interface RuleListOptions {
  /** Also revoked and expired rules (default: only the rules in force at `at`). */
  readonly all?: boolean
  /** The time "in force" is judged at (default: now). */
  readonly at?: number
}

export const rememberedRules = (sql: Sql, now: number, options: RuleListOptions = {}) =>
  sql<Row>`SELECT * FROM ledger_remembered_rules ORDER BY created_at, rule_id`.pipe(
    Effect.map((rows) => {
      const rules = rows.map(toRule).filter((r): r is Remembered.RememberedRule => r !== undefined)
      return options.all === true ? rules : rules.filter((r) => Remembered.isActive(r, options.at ?? now))
    }),
    Effect.mapError(sqlError("could not list remembered rules"))
  )

export const revoke = (sql: Sql, ruleId: string, by: string, now: number) =>
  Effect.gen(function* () {
    yield* sql`UPDATE ledger_remembered_rules SET revoked_at = ${now}, revoked_by = ${Store.text(by)}
      WHERE rule_id = ${ruleId} AND revoked_at IS NULL`
    const rows = yield* sql<Row>`SELECT * FROM ledger_remembered_rules WHERE rule_id = ${ruleId}`
    const rule = rows[0] !== undefined ? toRule(rows[0]) : undefined
    if (rule === undefined)
      return yield* new LedgerError({ reason: "NotFound", detail: `no remembered rule ${ruleId}` })
    return rule
  }).pipe(Effect.catchTag("SqlError", (e) => Effect.fail(sqlError("could not revoke the remembered rule")(e))))

/** The ledger's reads, one list for the ledger that writes (`Ledger.make`) and the one that only reads (`LedgerReader.make`). */
export const reads = (sql: SqlClient.SqlClient, now: () => number): LedgerReaderShape => ({
  runs: (status) => runs(sql, status),
  workItems: (runId) => workItems(sql, runId),
  threads: (runId) => threads(sql, runId),
  turns: (runId) => turns(sql, runId),
  cards: (filter) => cards(sql, filter),
  lateDecisions: (filter) => lateDecisions(sql, filter),
  accounting: (runId) => accounting(sql, runId),
  unfinishedItems: (runId) => unfinishedItems(sql, runId),
  openCards: (runId) => openCards(sql, runId),
  rememberedRules: (options) => Effect.suspend(() => rememberedRules(sql, now(), options))
})
