/**
 * The answer journal: what closes the gap between an answer reaching codex and its settlement
 * being committed (docs/ledger.md, "Durability").
 *
 * The writer commits a settlement after the event loop's turn that wrote the answer (the answer
 * goes first). A process killed in between would leave the card open in the ledger although codex
 * may have acted on the answer. So each answer is put here, one record, in the synchronous step
 * that writes it, just before the write (`ApprovalsShape.observeAnswers`): stored into a mapped
 * file, or a `write(2)` where that cannot be had (`JournalFile`), no `fsync` either way, so it
 * survives the process dying as the WAL's commits do.
 * Recovery (`markStranded`, `markStrandedItem`, `recover`) reads the dead run's journal: a card
 * whose settlement was never committed is stranded with the decision that was being written and
 * says codex may have received it; it is never recorded as accepted (codex may not have).
 *
 * - A card still unanswered at the end of the turn that opened it is put here too, by its opening
 *   (`opened`: the answer's record without an outcome, source or decision), so that a card open at
 *   a crash is on record even while the ledger's writer holds its opening (a saturated loop).
 * - One file per run, `<dir>/<run>.journal` (mode 0600, the directory 0700), opened on the run's
 *   first answer or opening. An answer's record holds the card's ids as the ledger stores them (`Store.id`),
 *   the source and the decision's name masked, never an answer's content (a form's values).
 * - Records, not text: an answer is a fixed 88 bytes (its numbers as they are, its texts by the
 *   number of a string the file defined before it, in a record of its own the first time); built
 *   in a scratch buffer and copied in, with no text made in the answer's step (a JSON line, built
 *   and encoded there, was most of what the ledger cost the round trip). Each record starts with
 *   "W" and its kind and ends with a check of its bytes and "JNL\n": the reader skips what a
 *   crash cut short, and zeros.
 * - The journal is only the gap's: once it has reached `CutAt` (1 MiB), at the next committed
 *   settlement it is replaced (a new file renamed over it) by the records of the answers still
 *   waiting for theirs (the old file unmapped, its descriptor closed off this thread: freeing its
 *   blocks is the costly part), and a run's file is removed when the run's end is committed, or the
 *   run is recovered and every card it names has its settlement.
 * - It never fails or blocks the answer: a record that cannot be written is logged once per run,
 *   counted on its run (`unjournaled`: the ledger's `RunRecord.unjournaledAnswers`), and the
 *   answer is written all the same.
 * - A journal an earlier version wrote (`<run>.jsonl`, one JSON line per answer) is still read at
 *   recovery, and removed with the run's.
 */
import type { Approvals } from "@warden/approvals"
import { Card } from "@warden/approvals"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
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
  /**
   * How the card settles if codex takes the answer (`accepted`, `declined`, `refused`, ...); null
   * for a card left open, unanswered, at the end of the turn that opened it (its opening's record).
   */
  readonly outcome: string | null
  /** `Card.describeSource` of who decided; null for an opening's record. */
  readonly source: string | null
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

/** A run's name in the journal's directory: its id when that is a plain file name, else a digest of it. */
const nameOf = (runId: string): string =>
  /^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$/.test(runId) ? runId : createHash("sha256").update(runId).digest("hex")

/** The journal's file for a run. */
export const fileOf = (dir: string, runId: string): string => Path.join(dir, `${nameOf(runId)}.journal`)

/** Where an earlier version journaled a run's answers, one JSON line each: read and removed, never written. */
export const linesFileOf = (dir: string, runId: string): string => Path.join(dir, `${nameOf(runId)}.jsonl`)

// ---------------------------------------------------------------------------------------------
// Records

/** A record's first byte ("W"); its second is its kind. */
const Magic = 0x57
/**
 * A string the file defines: `u32 id, u32 length`, then its UTF-16 units (padded to 4 bytes): any
 * JavaScript string as it is, a lone surrogate included (an id from codex may hold one; UTF-8
 * would have replaced it).
 */
const KindString = 0x53
/** An answer: `u32` × 10 (the references and flags below), then `f64` × 4 (the times, a numeric request id). */
const KindAnswer = 0x41
/** Every record ends with a check word of the bytes before it, then these four ("JNL\n"). */
const Tail = [0x4a, 0x4e, 0x4c, 0x0a] as const
/** An answer record's length. */
export const AnswerBytes = 88
/** The longest text a record holds, in UTF-16 units (a longer source or decision name is cut). */
const MaxText = 1_024
/** The longest record the reader takes. */
const MaxRecord = 16 + MaxText * 2 + 8 + 8
/** Answer flags: the card id is `c<n>` with `n` in the reference; the request id is the integer in its `f64`. */
const CardNumber = 1
const RequestNumber = 2
/** An opening's record: the card was left open, unanswered, at the end of the turn that opened it (no outcome, source or decision). */
const Opening = 4

/** The records are this machine's (as its files are): its byte order. */
const LittleEndian = Os.endianness() === "LE"

/** A record's check: FNV-1a over its 32-bit words before the check (its length in the seed). */
const checkOf = (word: (i: number) => number, words: number, length: number): number => {
  let h = (0x811c9dc5 ^ length) >>> 0
  for (let i = 0; i < words; i++) h = Math.imul(h ^ word(i), 0x01000193) >>> 0
  return h
}

/** `c<n>` (n ≥ 1, no leading zero, below 2^32): `n`; else undefined. */
const cardNumber = (cardId: string): number | undefined => {
  const length = cardId.length
  if (length < 2 || length > 10 || cardId.charCodeAt(0) !== 99 || cardId.charCodeAt(1) === 48) return undefined
  let n = 0
  for (let i = 1; i < length; i++) {
    const digit = cardId.charCodeAt(i) - 48
    if (digit < 0 || digit > 9) return undefined
    n = n * 10 + digit
  }
  return n <= 0xffffffff ? n : undefined
}

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
 * The last value a field held (as the card or answer holds it, before it is made into what the
 * ledger stores) and the number of the string it was stored as: a comparison instead of a
 * normalization and a lookup when it repeats.
 */
class LastRef {
  raw: unknown = Unset
  id = 0
}

/** No value yet: never equal to one. */
const Unset: unique symbol = Symbol("unset")

// What each field is stored as (`entryOf` and the record writer both): one definition each.
const identity = (value: string | null): string | null => value
/** A request id as stored (`Store.requestId`): an integer's JSON is its `String` (codex numbers its requests). */
const requestText = (id: string | number): string =>
  typeof id === "number" && Number.isSafeInteger(id) ? String(id) : Store.requestId(id)
const sourceText = (described: string): string => masked(described)
const decisionText = (decision: string | undefined): string | null => (decision === undefined ? null : masked(decision))
const itemText = (item: string | number | undefined): string | null => (item === undefined ? null : Store.itemKey(item))

/**
 * What writes one file's records: its strings, each defined once (numbered from 1), and a scratch
 * answer record, copied out by `sink`. The table is the file's: a replaced file has a writer of
 * its own.
 */
class RecordWriter {
  private readonly strings = new Map<string, number>()
  private next = 1
  private readonly scratch = new ArrayBuffer(AnswerBytes)
  private readonly u32 = new Uint32Array(this.scratch)
  private readonly f64 = new Float64Array(this.scratch)
  private readonly record = new Uint8Array(this.scratch)
  private readonly method = new LastRef()
  private readonly thread = new LastRef()
  private readonly turn = new LastRef()
  private readonly item = new LastRef()
  private readonly outcome = new LastRef()
  private readonly source = new LastRef()
  private readonly decision = new LastRef()
  private readonly card = new LastRef()
  private readonly request = new LastRef()
  /** The bytes written through this writer. */
  bytes = 0

  /** Compare nothing with what was written before (entries were written as stored, answers come as they are). */
  forget(): void {
    for (const last of [
      this.method,
      this.thread,
      this.turn,
      this.item,
      this.outcome,
      this.source,
      this.decision,
      this.card,
      this.request
    ])
      last.raw = Unset
  }

  constructor(public sink: (record: Uint8Array) => void) {
    this.record[0] = Magic
    this.record[1] = KindAnswer
    this.u32[1] = AnswerBytes
    this.record.set(Tail, AnswerBytes - 4)
  }

  /**
   * The number of what `raw` is stored as (`stored(raw)`; 0 for null) in this file, its definition
   * written first when it is new.
   */
  private ref<A>(raw: A, last: LastRef, stored: (raw: A) => string | null): number {
    if (raw === last.raw) return last.id
    const value = stored(raw)
    const id = value === null ? 0 : (this.strings.get(value) ?? this.define(value))
    last.raw = raw
    last.id = id
    return id
  }

  private define(value: string): number {
    const id = this.next
    const units = Math.min(value.length, MaxText)
    const length = 16 + ((units * 2 + 3) & ~3) + 8
    const record = new Uint8Array(length)
    const view = new DataView(record.buffer)
    record[0] = Magic
    record[1] = KindString
    view.setUint32(4, length, LittleEndian)
    view.setUint32(8, id, LittleEndian)
    view.setUint32(12, units, LittleEndian)
    for (let i = 0; i < units; i++) view.setUint16(16 + i * 2, value.charCodeAt(i), LittleEndian)
    view.setUint32(
      length - 8,
      checkOf((i) => view.getUint32(i * 4, LittleEndian), (length - 8) / 4, length),
      LittleEndian
    )
    record.set(Tail, length - 4)
    this.sink(record)
    // Numbered once written: a definition that could not be written is never referred to.
    this.next++
    this.strings.set(value, id)
    this.bytes += length
    return id
  }

  /** Write an answer as it is being written to codex (its fields made into what the ledger stores only when they change). */
  answer(answer: Approvals.Answering, at: number, cardId: string): void {
    this.cardRecord(
      answer.card,
      cardId,
      this.ref(answer.outcome, this.outcome, identity),
      this.ref(Card.describeSource(answer.source), this.source, sourceText),
      this.ref(answer.decision, this.decision, decisionText),
      at,
      0
    )
  }

  /** Write the opening of a card left open at the end of its turn (no outcome, source or decision). */
  opening(card: Approvals.Answering["card"], cardId: string): void {
    this.cardRecord(card, cardId, 0, 0, 0, card.openedAt, Opening)
  }

  /** A card's record: its own fields as it holds them, the answer's (or 0s) as given. */
  private cardRecord(
    card: Approvals.Answering["card"],
    cardId: string,
    outcome: number,
    source: number,
    decision: number,
    at: number,
    kind: 0 | typeof Opening
  ): void {
    const requestId = card.requestId
    const requestNumber = typeof requestId === "number" && Number.isSafeInteger(requestId) ? requestId : undefined
    this.write(
      cardId,
      requestNumber,
      requestNumber !== undefined ? 0 : this.ref(requestId, this.request, requestText),
      this.ref(card.method, this.method, Store.id),
      this.ref(card.threadId, this.thread, Store.optionalId),
      this.ref(card.turnId, this.turn, Store.optionalId),
      this.ref(card.workItem, this.item, itemText),
      outcome,
      source,
      decision,
      at,
      card.openedAt,
      card.deadlineAt,
      kind
    )
  }

  /** Write an entry read back or kept (its fields already what the ledger stores). */
  entry(e: Entry): void {
    this.write(
      e.cardId,
      undefined,
      this.ref(e.requestId, this.request, identity),
      this.ref(e.method, this.method, identity),
      this.ref(e.threadId, this.thread, identity),
      this.ref(e.turnId, this.turn, identity),
      this.ref(e.itemKey, this.item, identity),
      this.ref(e.outcome, this.outcome, identity),
      this.ref(e.source, this.source, identity),
      this.ref(e.decision, this.decision, identity),
      e.at,
      e.openedAt,
      e.deadlineAt,
      e.outcome === null ? Opening : 0
    )
  }

  /** The answer record, its texts by number (`requestNumber`: an integer request id, kept as one). */
  private write(
    cardId: string,
    requestNumber: number | undefined,
    request: number,
    method: number,
    thread: number,
    turn: number,
    item: number,
    outcome: number,
    source: number,
    decision: number,
    at: number,
    openedAt: number,
    deadlineAt: number,
    kind: 0 | typeof Opening
  ): void {
    const u32 = this.u32
    const f64 = this.f64
    let flags: number = kind
    const n = cardNumber(cardId)
    if (n !== undefined) {
      flags |= CardNumber
      u32[2] = n
    } else u32[2] = this.ref(cardId, this.card, identity)
    if (requestNumber !== undefined) {
      flags |= RequestNumber
      u32[3] = 0
      f64[9] = requestNumber
    } else {
      u32[3] = request
      f64[9] = 0
    }
    u32[4] = method
    u32[5] = thread
    u32[6] = turn
    u32[7] = item
    u32[8] = outcome
    u32[9] = source
    u32[10] = decision
    u32[11] = flags
    f64[6] = at
    f64[7] = openedAt
    f64[8] = deadlineAt
    // `checkOf` over the scratch's words, inline (the answer's step: no closure per word).
    let h = (0x811c9dc5 ^ AnswerBytes) >>> 0
    for (let i = 0; i < 20; i++) h = Math.imul(h ^ u32[i]!, 0x01000193) >>> 0
    u32[20] = h
    this.sink(this.record)
    this.bytes += AnswerBytes
  }
}

/** The entries of a journal file's bytes (a card's last answer wins); what is not a whole record of ours is skipped. */
export const entriesOf = (bytes: Uint8Array): ReadonlyArray<Entry> => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const size = bytes.length
  const strings = new Map<number, string>()
  const byCard = new Map<string, Entry>()
  const word = (at: number) => view.getUint32(at, LittleEndian)
  /** A whole record of ours at `at`: its length, else 0. */
  const recordAt = (at: number): number => {
    if (at + 24 > size || bytes[at] !== Magic || bytes[at + 2] !== 0 || bytes[at + 3] !== 0) return 0
    const kind = bytes[at + 1]
    const length = word(at + 4)
    if (kind === KindAnswer ? length !== AnswerBytes : kind !== KindString || length < 24 || length > MaxRecord)
      return 0
    if (length % 4 !== 0 || at + length > size) return 0
    for (let i = 0; i < 4; i++) if (bytes[at + length - 4 + i] !== Tail[i]) return 0
    const check = checkOf((i) => word(at + i * 4), (length - 8) / 4, length)
    return check === word(at + length - 8) ? length : 0
  }
  let at = 0
  while (at < size) {
    const length = recordAt(at)
    // Zeros, the newline that ended a record cut short, what a crash left: one byte on.
    if (length === 0) {
      at++
      continue
    }
    if (bytes[at + 1] === KindString) {
      const units = word(at + 12)
      if (16 + units * 2 <= length - 8) {
        let text = ""
        for (let i = 0; i < units; i++) text += String.fromCharCode(view.getUint16(at + 16 + i * 2, LittleEndian))
        strings.set(word(at + 8), text)
      }
    } else {
      const flags = word(at + 44)
      const text = (offset: number): string | null | undefined => {
        const id = word(at + offset)
        return id === 0 ? null : strings.get(id)
      }
      const cardId = (flags & CardNumber) !== 0 ? `c${word(at + 8)}` : text(8)
      const requestId = (flags & RequestNumber) !== 0 ? String(view.getFloat64(at + 72, LittleEndian)) : text(12)
      const method = text(16)
      const threadId = text(20)
      const turnId = text(24)
      const itemKey = text(28)
      const outcome = text(32)
      const source = text(36)
      const decision = text(40)
      // An opening's record has no outcome, source or decision; an answer's has the first two.
      const answerWhole =
        (flags & Opening) !== 0
          ? outcome === null && source === null && decision === null
          : typeof outcome === "string" && typeof source === "string" && decision !== undefined
      // A reference to a string this file never defined: not ours whole, skipped.
      if (
        typeof cardId === "string" &&
        typeof requestId === "string" &&
        typeof method === "string" &&
        threadId !== undefined &&
        turnId !== undefined &&
        itemKey !== undefined &&
        answerWhole
      )
        byCard.set(cardId, {
          cardId,
          requestId,
          method,
          threadId,
          turnId,
          itemKey,
          outcome: outcome ?? null,
          source: source ?? null,
          decision: decision ?? null,
          at: view.getFloat64(at + 48, LittleEndian),
          openedAt: view.getFloat64(at + 56, LittleEndian),
          deadlineAt: view.getFloat64(at + 64, LittleEndian)
        })
    }
    at += length
  }
  return Array.from(byCard.values())
}

/** A card's own fields of its entry, as the ledger stores them. */
const cardFields = (card: Approvals.Answering["card"], cardId: string) => ({
  cardId,
  requestId: requestText(card.requestId),
  method: Store.id(card.method),
  threadId: Store.optionalId(card.threadId),
  turnId: Store.optionalId(card.turnId),
  itemKey: itemText(card.workItem),
  openedAt: card.openedAt,
  deadlineAt: card.deadlineAt
})

/** The opening of a card left open as the journal keeps it: its entry (no outcome, source or decision). */
export const openingEntryOf = (card: Approvals.Answering["card"], cardId = Store.id(card.id)): Entry => ({
  ...cardFields(card, cardId),
  outcome: null,
  source: null,
  decision: null,
  at: card.openedAt
})

/** An answer as the journal keeps it: its entry, everything masked. */
export const entryOf = (answer: Approvals.Answering, now: number, cardId = Store.id(answer.card.id)): Entry => ({
  ...cardFields(answer.card, cardId),
  outcome: answer.outcome,
  source: sourceText(Card.describeSource(answer.source)),
  decision: decisionText(answer.decision),
  at: now
})

/** The bytes of a file holding `entries`, and the writer that wrote them (its strings are the file's). */
const journalBytes = (entries: Iterable<Entry>): { readonly bytes: Uint8Array; readonly writer: RecordWriter } => {
  const parts: Array<Uint8Array> = []
  const writer = new RecordWriter((record) => parts.push(record.slice()))
  for (const e of entries) writer.entry(e)
  return { bytes: Buffer.concat(parts), writer }
}

/** The bytes `entries` are journaled as, in a file of their own (for tests and tools). */
export const encode = (entries: Iterable<Entry>): Uint8Array => journalBytes(entries).bytes

/**
 * Replace a run's file by the answers still waiting once it holds this much: ~12,000 answers of
 * 88 bytes (and the strings they name). Each replacement costs the read loop ~0.5 ms (a file written, renamed over the old
 * one, opened), ~1 ms with the old file's blocks freed (its close, now done off the thread): at
 * 64 KiB that was a replacement every ~200 answers, 5 µs an answer of the frame pipeline's read loop.
 * A dead run's file is read whole at recovery: a few MiB at most.
 */
export const CutAt = 1024 * 1024

/**
 * A card whose settlement is not committed yet: its answer as it came, or its opening when it was
 * left open (an entry is made of it only if its file is replaced).
 */
type Waiting =
  | { readonly answer: Approvals.Answering; readonly at: number }
  | { readonly answer: undefined; readonly card: Approvals.Answering["card"] }

const entryOfWaiting = (w: Waiting): Entry =>
  w.answer !== undefined ? entryOf(w.answer, w.at) : openingEntryOf(w.card)

interface RunFile {
  file: JournalFile.JournalFile | undefined
  /** What writes the open file's records (its strings are that file's). */
  writer: RecordWriter | undefined
  failed: boolean
  /** Cards answered, or left open, whose settlement the writer has not committed yet. */
  readonly waiting: Map<string, Waiting>
}

export interface AnswerJournal {
  readonly dir: string
  /** Append an answer of `runId` (synchronous; never throws). */
  readonly append: (runId: string, answer: Approvals.Answering, now: number) => void
  /**
   * A card of `runId` was opened (synchronous, in the step that opened it; never throws): at the
   * end of that turn of the event loop, if it was not answered meanwhile, its opening is appended
   * (a card answered in its own turn needs none: its answer's record holds what the opening's
   * would). So a card left open is on record whatever the ledger's writer has committed.
   */
  readonly opened: (runId: string, card: Approvals.Answering["card"]) => void
  /**
   * The end of a turn of the event loop: the openings of the cards still unanswered are appended.
   * Called by the journal itself (a `setImmediate` after an opening) unless it was made with
   * `turnEnds: "driven"`, whose caller calls this at the end of every turn in which it was told
   * of an opening (the ledger's writer, which has a turn's end of its own there already).
   */
  readonly turnEnded: () => void
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
 * file appended with `write(2)`). `unjournaled`: told of each answer whose record could not be
 * written (in the answer's step: it must be quick and never throw).
 */
export const make = (
  dir: string,
  warn: (message: string) => void,
  options?: {
    readonly native?: JournalFile.Native | undefined
    readonly unjournaled?: ((runId: string) => void) | undefined
    /** `driven`: `turnEnded` is called by the caller at each turn's end (see there). */
    readonly turnEnds?: "own" | "driven" | undefined
  }
): AnswerJournal => {
  const ownTurnEnds = options?.turnEnds !== "driven"
  const native = options !== undefined && "native" in options ? options.native : JournalFile.loadNative()
  if (options === undefined || !("native" in options)) {
    const unused = JournalFile.namedButNotLoaded()
    if (unused !== undefined) warn(unused)
  }
  const runs = new Map<string, RunFile>()
  /** Runs whose end is committed: an answer recorded after it needs no journal (nothing recovers an ended run). */
  const endedRuns = new Set<string>()

  const runFile = (runId: string): RunFile => {
    let run = runs.get(runId)
    if (run === undefined) {
      run = { file: undefined, writer: undefined, failed: false, waiting: new Map() }
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

  /** The run's file's writer, the file opened (and its directory made) on first use. */
  const writerOf = (run: RunFile, runId: string): RecordWriter => {
    if (run.writer !== undefined) return run.writer
    Fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    const file = JournalFile.open(fileOf(dir, runId), native)
    run.file = file
    const writer = new RecordWriter((record) => file.append(record))
    run.writer = writer
    return writer
  }

  /** Cards opened in this turn of the event loop and not answered yet, with their runs. */
  const openedInTurn = new Map<Approvals.Answering["card"], string>()

  let endOfTurnScheduled = false

  /** The turn's end: the openings of the cards still unanswered. */
  const endOfTurn = () => {
    endOfTurnScheduled = false
    if (openedInTurn.size === 0) return
    for (const [card, runId] of openedInTurn) {
      if (endedRuns.has(runId)) continue
      const run = runFile(runId)
      try {
        const cardId = Store.id(card.id)
        // Answered already (its answer came by another way than `append` in the turn): kept.
        if (run.waiting.get(cardId)?.answer !== undefined) continue
        writerOf(run, runId).opening(card, cardId)
        run.waiting.set(cardId, { answer: undefined, card })
      } catch (error) {
        // The writer still records the card; it is only not in the journal (said once per run).
        fail(run, runId, error)
      }
    }
    openedInTurn.clear()
  }

  const opened = (runId: string, card: Approvals.Answering["card"]): void => {
    openedInTurn.set(card, runId)
    if (ownTurnEnds && !endOfTurnScheduled) {
      endOfTurnScheduled = true
      setImmediate(endOfTurn)
    }
  }

  const append = (runId: string, answer: Approvals.Answering, now: number): void => {
    if (openedInTurn.size > 0) openedInTurn.delete(answer.card)
    if (endedRuns.has(runId)) return
    const run = runFile(runId)
    try {
      const writer = writerOf(run, runId)
      const cardId = Store.id(answer.card.id)
      writer.answer(answer, now, cardId)
      run.waiting.set(cardId, { answer, at: now })
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
    if (run === undefined || !run.waiting.delete(cardId)) return
    // Replaced once it is large and mostly answers already committed (never quadratic).
    const size = run.writer?.bytes ?? 0
    if (run.file === undefined || size < CutAt || run.waiting.size * AnswerBytes * 2 > size) return
    // Replaced, never cut in place: a crash at any point leaves the old file or the new one whole.
    const path = fileOf(dir, runId)
    const next = `${path}.${process.pid}.next`
    try {
      const kept = journalBytes(Array.from(run.waiting.values(), entryOfWaiting))
      Fs.writeFileSync(next, kept.bytes, { mode: 0o600 })
      Fs.renameSync(next, path)
      // The old file's descriptor goes; the next append opens the new file if this cannot.
      const old = run.file
      run.file = undefined
      run.writer = undefined
      // The replaced file's mapping goes now and its last descriptor on libuv's pool: that close
      // frees its blocks (with `discard`, a trim), ~0.2 ms here. Its records are in the new file already.
      old.closeOffThread()
      const file = JournalFile.open(path, native)
      run.file = file
      // Its strings are those the new file defines.
      kept.writer.forget()
      kept.writer.sink = (record) => file.append(record)
      run.writer = kept.writer
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
    run.writer = undefined
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

  return { dir, append, opened, turnEnded: endOfTurn, committed, ended, close }
}

/** A line as an earlier version's journal wrote it (anything else: not its, or cut short by the crash). */
const isLineEntry = (u: unknown): u is Entry => {
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

/** The entries of an earlier version's journal text (one JSON line each). */
const lineEntriesOf = (text: string): ReadonlyArray<Entry> => {
  const entries: Array<Entry> = []
  for (const line of JournalFile.contentOf(text).split("\n")) {
    if (line.length === 0) continue
    try {
      const entry: unknown = JSON.parse(line)
      if (isLineEntry(entry))
        entries.push(entry.deadlineAt === null ? { ...entry, deadlineAt: Number.POSITIVE_INFINITY } : entry)
    } catch {
      // cut short by the crash
    }
  }
  return entries
}

/** A file's bytes; undefined when it is not there (any other failure throws). */
const bytesOf = (file: string): Buffer | undefined => {
  try {
    return Fs.readFileSync(file)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw error
  }
}

/**
 * The answers on record for a dead run: none when it has no file; throws when a file is there but
 * cannot be read (the caller changes nothing then). What is not a whole record of ours (the crash
 * cut it short) is skipped; the last answer about a card wins. An earlier version's journal of
 * the run (JSON lines) is read first.
 */
export const read = (dir: string, runId: string): ReadonlyArray<Entry> => {
  const lines = bytesOf(linesFileOf(dir, runId))
  const records = bytesOf(fileOf(dir, runId))
  const byCard = new Map<string, Entry>()
  if (lines !== undefined) for (const e of lineEntriesOf(lines.toString("utf8"))) byCard.set(e.cardId, e)
  if (records !== undefined) for (const e of entriesOf(records)) byCard.set(e.cardId, e)
  return Array.from(byCard.values())
}

/** The dead run's journal is no longer needed (its answers are in the ledger now). */
export const remove = (dir: string, runId: string): void => {
  Fs.rmSync(fileOf(dir, runId), { force: true })
  Fs.rmSync(linesFileOf(dir, runId), { force: true })
}
