/**
 * The answer journal: what closes the gap between an answer reaching codex and its settlement
 * being committed (docs/ledger.md, "Durability").
 *
 * The writer commits a settlement after the event loop's turn that wrote the answer (the answer
 * goes first). A process killed in between would leave the card open in the ledger although codex
 * may have acted on the answer. So each answer is put here, one JSON line, in the synchronous
 * step that writes it, just before the write (`ApprovalsShape.observeAnswers`): stored into a
 * mapped file, or a `write(2)` where that cannot be had (`JournalFile`), no `fsync` either way, so
 * it survives the process dying as the WAL's commits do.
 * Recovery (`markStranded`, `markStrandedItem`, `recover`) reads the dead run's journal: a card
 * whose settlement was never committed is stranded with the decision that was being written and
 * says codex may have received it; it is never recorded as accepted (codex may not have).
 *
 * - One file per run, `<dir>/<run>.jsonl` (mode 0600, the directory 0700), opened on the run's
 *   first answer. A line holds the card's ids as the ledger stores them (`Store.id`), the source
 *   and the decision's name masked, never an answer's content (a form's values).
 * - The journal is only the gap's: once it has reached `CutAt` (1 MiB), at the next committed
 *   settlement it is replaced (a new file renamed over it) by the lines of the answers still waiting
 *   for theirs (the old file unmapped, its descriptor closed off this thread: freeing its blocks is the costly part),
 *   and a run's file is removed when the run's end is committed, or the run is recovered and every
 *   card it names has its settlement.
 * - It never fails or blocks the answer: a line that cannot be written is logged once per run,
 *   counted on its run (`unjournaled`: the ledger's `RunRecord.unjournaledAnswers`), and the
 *   answer is written all the same.
 */
import type { Approvals } from "@warden/approvals"
import { Card } from "@warden/approvals"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as JournalFile from "./JournalFile.js"
import type * as Projection from "./Projection.js"
import * as Store from "./Store.js"

/** One answer on record: everything masked. */
export interface Entry {
  readonly cardId: string
  readonly requestId: string
  readonly method: string
  readonly threadId: string | null
  readonly turnId: string | null
  /** The card's work item (`Store.itemKey`), null when it has none (as the writer stores it). */
  readonly itemKey: string | null
  /** How the card settles if codex takes the answer (`accepted`, `declined`, `refused`, ...). */
  readonly outcome: string
  /** `Card.describeSource` of who decided. */
  readonly source: string
  /** The decision's name, if it was a decision. */
  readonly decision: string | null
  readonly at: number
  readonly openedAt: number
  /** Infinite for a card without a deadline (its line says null: JSON has no infinity). */
  readonly deadlineAt: number
}

/**
 * What the journal learns from a slice the writer finished: each settlement committed (its answer
 * no longer waits) and each run's end committed. Only what was committed: an answer whose
 * settlement was given up stays on record. (On the writer's thread these are sent to the main
 * thread, whose journal it is.)
 */
export const committedBy = (
  ops: ReadonlyArray<Projection.Op>,
  written: (op: Projection.Op) => boolean,
  on: { readonly committed: (runId: string, cardId: string) => void; readonly ended: (runId: string) => void }
): void => {
  for (const op of ops) {
    if (!written(op)) continue
    if (op._tag === "Event" && op.event._tag === "Approval" && op.event.event._tag === "CardSettled")
      on.committed(op.runId, Store.id(op.event.event.settlement.card.id))
    else if (op._tag === "RunEnded") on.ended(op.runId)
  }
}

/** The journal's file for a run: its id when that is a plain file name, else a digest of it. */
export const fileOf = (dir: string, runId: string): string =>
  Path.join(
    dir,
    /^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$/.test(runId)
      ? `${runId}.jsonl`
      : `${createHash("sha256").update(runId).digest("hex")}.jsonl`
  )

const quote = (value: string): string => JSON.stringify(value)

/**
 * The JSON of a field whose value repeats from one answer to the next (a method, a thread, a turn,
 * an item, an outcome, a source, a decision): the last value's, kept. A comparison with the last
 * value costs less than a lookup among many (the line is built in the answer's step), and a value
 * that changes is quoted again: never more than `JSON.stringify` of it.
 */
class LastQuoted {
  private value: string | null = null
  private quoted = "null"
  of(value: string | null): string {
    if (value === this.value) return this.quoted
    this.value = value
    this.quoted = value === null ? "null" : JSON.stringify(value)
    return this.quoted
  }
}

/**
 * A number as JSON writes it (a non-finite one as null). A time in milliseconds (an integer of 10
 * to 15 digits, a heap number) is written as two small integers: about half of what `String` of
 * it costs (measured alone: 0.19 → 0.10 µs warm, 0.8 → 0.43 µs with the caches cold; the line
 * has three).
 */
export const jsonNumber = (value: number): string => {
  if (value >= 1e9 && value < 1e15 && Math.floor(value) === value) {
    const high = Math.floor(value / 1e6)
    const low = value - high * 1e6
    return `${high}${low >= 100_000 ? "" : low >= 10_000 ? "0" : low >= 1_000 ? "00" : low >= 100 ? "000" : low >= 10 ? "0000" : "00000"}${low}`
  }
  return Number.isFinite(value) ? String(value) : "null"
}

/** A request id's JSON (`Store.requestId`) quoted: an integer's at once (digits need no escape). */
const quotedRequestId = (value: string | number): string =>
  typeof value === "number" && Number.isSafeInteger(value) ? `"${value}"` : quote(Store.requestId(value))

/** Masked sources and decision names: a handful of distinct values, each masked once. */
const maskedTexts = new Map<string, string>()
const masked = (value: string): string => {
  const known = maskedTexts.get(value)
  if (known !== undefined) return known
  const m = Store.text(value)
  if (maskedTexts.size < 256) maskedTexts.set(value, m)
  return m
}

/**
 * The journal's line of an answer: `JSON.stringify` of its `Entry` and a newline, written out by
 * hand (`JSON.stringify` of the object costs as much as the store, and this runs in the step that
 * answers codex). Every string goes through `JSON.stringify` (escaped), every number through
 * `jsonNumber`; the test holds it to `JSON.stringify` of the entry for any values.
 */
export const makeLine = (): ((answer: Approvals.Answering, now: number, cardId?: string) => string) => {
  const method = new LastQuoted()
  const thread = new LastQuoted()
  const turn = new LastQuoted()
  const item = new LastQuoted()
  const outcome = new LastQuoted()
  const source = new LastQuoted()
  const decision = new LastQuoted()
  return (answer, now, cardId = Store.id(answer.card.id)) => {
    const card = answer.card
    return `{"cardId":${quote(cardId)},"requestId":${quotedRequestId(card.requestId)},"method":${method.of(Store.id(card.method))},"threadId":${thread.of(Store.optionalId(card.threadId))},"turnId":${turn.of(Store.optionalId(card.turnId))},"itemKey":${item.of(card.workItem === undefined ? null : Store.itemKey(card.workItem))},"outcome":${outcome.of(answer.outcome)},"source":${source.of(masked(Card.describeSource(answer.source)))},"decision":${decision.of(answer.decision === undefined ? null : masked(answer.decision))},"at":${jsonNumber(now)},"openedAt":${jsonNumber(card.openedAt)},"deadlineAt":${jsonNumber(card.deadlineAt)}}\n`
  }
}

/**
 * Replace a run's file by the answers still waiting once it holds this much: ~3,000 answers of
 * ~330 bytes. Each replacement costs the read loop ~0.5 ms (a file written, renamed over the old
 * one, opened), ~1 ms with the old file's blocks freed (its close, now done off the thread): at
 * 64 KiB that was a replacement every ~200 answers, 5 µs an answer of the frame pipeline's read loop.
 * A dead run's file is read whole at recovery: a few MiB at most.
 */
export const CutAt = 1024 * 1024

interface RunFile {
  file: JournalFile.JournalFile | undefined
  size: number
  failed: boolean
  /** Cards answered whose settlement the writer has not committed yet, with their lines. */
  readonly waiting: Map<string, string>
  /** The bytes of those lines. */
  waitingBytes: number
}

export interface AnswerJournal {
  readonly dir: string
  /** Append an answer of `runId` (synchronous; never throws). */
  readonly append: (runId: string, answer: Approvals.Answering, now: number) => void
  /** The writer committed these cards' settlements (or gave them up): they no longer wait. */
  readonly committed: (runId: string, cardId: string) => void
  /**
   * The run's end is committed: its file is removed (a settlement the writer dropped or could not
   * write is counted on the run, `droppedEvents` / `lostEvents`).
   */
  readonly ended: (runId: string) => void
  /** Close every file (the ledger closes); the files of runs that did not end stay. */
  readonly close: () => void
}

/**
 * `native`: the mapped file's module (`JournalFile.loadNative()` by default; `undefined`: every
 * file appended with `write(2)`). `unjournaled`: told of each answer whose line could not be
 * written (in the answer's step: it must be quick and never throw).
 */
export const make = (
  dir: string,
  warn: (message: string) => void,
  options?: {
    readonly native?: JournalFile.Native | undefined
    readonly unjournaled?: ((runId: string) => void) | undefined
  }
): AnswerJournal => {
  const native = options !== undefined && "native" in options ? options.native : JournalFile.loadNative()
  if (options === undefined || !("native" in options)) {
    const unused = JournalFile.namedButNotLoaded()
    if (unused !== undefined) warn(unused)
  }
  const runs = new Map<string, RunFile>()
  const lineOf = makeLine()
  /** Runs whose end is committed: an answer recorded after it needs no journal (nothing recovers an ended run). */
  const endedRuns = new Set<string>()

  const runFile = (runId: string): RunFile => {
    let run = runs.get(runId)
    if (run === undefined) {
      run = { file: undefined, size: 0, failed: false, waiting: new Map(), waitingBytes: 0 }
      runs.set(runId, run)
    }
    return run
  }

  const fail = (run: RunFile, runId: string, error: unknown) => {
    if (run.failed) return
    run.failed = true
    warn(
      `the ledger's answer journal of run ${runId} cannot be written (${Store.shown(error instanceof Error ? error.message : String(error), 300)}): answers are still recorded by the ledger's writer, but one written just before a crash may be recorded as never answered (each is counted on the run: unjournaledAnswers)`
    )
  }

  const append = (runId: string, answer: Approvals.Answering, now: number): void => {
    if (endedRuns.has(runId)) return
    const run = runFile(runId)
    const card = answer.card
    try {
      if (run.file === undefined) {
        Fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
        run.file = JournalFile.open(fileOf(dir, runId), native)
      }
      const cardId = Store.id(card.id)
      const line = lineOf(answer, now, cardId)
      run.file.append(line)
      // Sizes in UTF-16 units (bytes for ASCII): only the threshold of the replacement reads them.
      const bytes = line.length
      run.size += bytes
      const before = run.waiting.get(cardId)
      if (before !== undefined) run.waitingBytes -= before.length
      run.waiting.set(cardId, line)
      run.waitingBytes += bytes
    } catch (error) {
      fail(run, runId, error)
      try {
        options?.unjournaled?.(runId)
      } catch {
        // never the answer's concern
      }
    }
  }

  const committed = (runId: string, cardId: string): void => {
    const run = runs.get(runId)
    const line = run?.waiting.get(cardId)
    if (run === undefined || line === undefined) return
    run.waiting.delete(cardId)
    run.waitingBytes -= line.length
    // Replaced once it is large and mostly answers already committed (never quadratic).
    if (run.file === undefined || run.size < CutAt || run.waitingBytes * 2 > run.size) return
    // Replaced, never cut in place: a crash at any point leaves the old file or the new one whole.
    const file = fileOf(dir, runId)
    const next = `${file}.${process.pid}.next`
    try {
      const kept = Array.from(run.waiting.values()).join("")
      Fs.writeFileSync(next, kept, { mode: 0o600 })
      Fs.renameSync(next, file)
      // The old file's descriptor goes; the next append opens the new file if this cannot.
      const old = run.file
      run.file = undefined
      run.size = run.waitingBytes
      // The replaced file's mapping goes now and its last descriptor on libuv's pool: that close
      // frees its blocks (with `discard`, a trim), ~0.2 ms here. Its lines are in the new file already.
      old.closeOffThread()
      run.file = JournalFile.open(file, native)
    } catch (error) {
      fail(run, runId, error)
    }
  }

  const closeFile = (run: RunFile) => {
    if (run.file === undefined) return
    try {
      run.file.close()
    } catch {
      // closing what we opened: nothing to do about a failure
    }
    run.file = undefined
  }

  const ended = (runId: string): void => {
    endedRuns.add(runId)
    const run = runs.get(runId)
    if (run === undefined) return
    closeFile(run)
    runs.delete(runId)
    try {
      Fs.rmSync(fileOf(dir, runId), { force: true })
    } catch (error) {
      fail(run, runId, error)
    }
  }

  const close = (): void => {
    for (const run of runs.values()) closeFile(run)
    runs.clear()
  }

  return { dir, append, committed, ended, close }
}

/** A line as the journal writes it (anything else: not ours, or cut short by the crash). */
const isEntry = (u: unknown): u is Entry => {
  if (typeof u !== "object" || u === null) return false
  const e = u as Record<string, unknown>
  const text = (k: string) => typeof e[k] === "string"
  const textOrNull = (k: string) => typeof e[k] === "string" || e[k] === null
  const number = (k: string) => typeof e[k] === "number" && Number.isFinite(e[k])
  return (
    text("cardId") &&
    text("requestId") &&
    text("method") &&
    textOrNull("threadId") &&
    textOrNull("turnId") &&
    textOrNull("itemKey") &&
    text("outcome") &&
    text("source") &&
    textOrNull("decision") &&
    number("at") &&
    number("openedAt") &&
    // A card without a deadline has an infinite one, which JSON writes as null.
    (number("deadlineAt") || e["deadlineAt"] === null)
  )
}

/**
 * The answers on record for a dead run: none when it has no file; throws when the file is there
 * but cannot be read (the caller changes nothing then). A line that is not one of ours (the crash
 * cut it short) is skipped; the last line about a card wins.
 */
export const read = (dir: string, runId: string): ReadonlyArray<Entry> => {
  let text: string
  try {
    text = JournalFile.contentOf(Fs.readFileSync(fileOf(dir, runId), "utf8"))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return []
    throw error
  }
  const byCard = new Map<string, Entry>()
  for (const line of text.split("\n")) {
    if (line.length === 0) continue
    try {
      const entry: unknown = JSON.parse(line)
      if (isEntry(entry))
        byCard.set(entry.cardId, entry.deadlineAt === null ? { ...entry, deadlineAt: Number.POSITIVE_INFINITY } : entry)
    } catch {
      // cut short by the crash
    }
  }
  return Array.from(byCard.values())
}

/** The dead run's journal is no longer needed (its answers are in the ledger now). */
export const remove = (dir: string, runId: string): void => {
  Fs.rmSync(fileOf(dir, runId), { force: true })
}
