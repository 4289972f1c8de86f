/**
 * The answer journal: what closes the gap between an answer reaching codex and its settlement
 * being committed (docs/ledger.md, "Durability").
 *
 * The writer commits a settlement after the event loop's turn that wrote the answer (the answer
 * goes first). A process killed in between would leave the card open in the ledger although codex
 * may have acted on the answer. So each answer is appended here, one JSON line, in the synchronous
 * step that writes it, just before the write (`ApprovalsShape.observeAnswers`): a `write(2)` to a
 * file opened for appending, no `fsync`, so it survives the process dying as the WAL's commits do.
 * Recovery (`markStranded`, `markStrandedItem`, `recover`) reads the dead run's journal: a card
 * whose settlement was never committed is stranded with the decision that was being written and
 * says codex may have received it; it is never recorded as accepted (codex may not have).
 *
 * - One file per run, `<dir>/<run>.jsonl` (mode 0600, the directory 0700), opened on the run's
 *   first answer. Every value in a line is masked (`Store`), and a line holds a decision's name,
 *   never an answer's content (a form's values).
 * - The journal is only the gap's: once the writer has committed the settlements of every card the
 *   file names, it is cut back to nothing (when it holds 64 KiB or more), and a run's file is
 *   removed when the run ends cleanly or is recovered.
 * - It never fails or blocks the answer: a line that cannot be written is logged once per run,
 *   and the answer is written all the same.
 */
import type { Approvals } from "@warden/approvals"
import { Card } from "@warden/approvals"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Store from "./Store.js"

/** One answer on record: everything masked. */
export interface Entry {
  readonly cardId: string
  readonly requestId: string
  readonly method: string
  readonly threadId: string | null
  readonly turnId: string | null
  readonly itemKey: string
  /** How the card settles if codex takes the answer (`accepted`, `declined`, `refused`, ...). */
  readonly outcome: string
  /** `Card.describeSource` of who decided. */
  readonly source: string
  /** The decision's name, if it was a decision. */
  readonly decision: string | null
  readonly at: number
  readonly openedAt: number
  readonly deadlineAt: number
}

/** The journal's file for a run: its id when that is a plain file name, else a digest of it. */
export const fileOf = (dir: string, runId: string): string =>
  Path.join(
    dir,
    /^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$/.test(runId)
      ? `${runId}.jsonl`
      : `${createHash("sha256").update(runId).digest("hex")}.jsonl`
  )

/** Cut a run's file back to nothing once it holds this much and nothing in it waits. */
const CutAt = 64 * 1024

interface RunFile {
  fd: number | undefined
  size: number
  failed: boolean
  /** Cards answered whose settlement the writer has not committed yet. */
  readonly waiting: Set<string>
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

export const make = (dir: string, warn: (message: string) => void): AnswerJournal => {
  const runs = new Map<string, RunFile>()
  /** Runs whose end is committed: an answer recorded after it needs no journal (nothing recovers an ended run). */
  const endedRuns = new Set<string>()

  const runFile = (runId: string): RunFile => {
    let run = runs.get(runId)
    if (run === undefined) {
      run = { fd: undefined, size: 0, failed: false, waiting: new Set() }
      runs.set(runId, run)
    }
    return run
  }

  const fail = (run: RunFile, runId: string, error: unknown) => {
    if (run.failed) return
    run.failed = true
    warn(
      `the ledger's answer journal of run ${runId} cannot be written (${Store.shown(error instanceof Error ? error.message : String(error), 300)}): answers are still recorded by the ledger's writer, but one written just before a crash may be recorded as never answered`
    )
  }

  const append = (runId: string, answer: Approvals.Answering, now: number): void => {
    if (endedRuns.has(runId)) return
    const run = runFile(runId)
    const card = answer.card
    try {
      if (run.fd === undefined) {
        Fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
        run.fd = Fs.openSync(fileOf(dir, runId), "a", 0o600)
        run.size = Fs.fstatSync(run.fd).size
      }
      const entry: Entry = {
        cardId: Store.id(card.id),
        requestId: Store.requestId(card.requestId),
        method: Store.id(card.method),
        threadId: Store.optionalId(card.threadId),
        turnId: Store.optionalId(card.turnId),
        itemKey: Store.itemKey(card.workItem),
        outcome: answer.outcome,
        source: Store.id(Card.describeSource(answer.source)),
        decision: answer.decision === undefined ? null : Store.id(answer.decision),
        at: now,
        openedAt: card.openedAt,
        deadlineAt: card.deadlineAt
      }
      const line = `${JSON.stringify(entry)}\n`
      Fs.writeSync(run.fd, line)
      run.size += Buffer.byteLength(line)
      run.waiting.add(entry.cardId)
    } catch (error) {
      fail(run, runId, error)
    }
  }

  const committed = (runId: string, cardId: string): void => {
    const run = runs.get(runId)
    if (run === undefined || !run.waiting.delete(cardId)) return
    if (run.waiting.size === 0 && run.fd !== undefined && run.size >= CutAt) {
      try {
        Fs.ftruncateSync(run.fd, 0)
        run.size = 0
      } catch (error) {
        fail(run, runId, error)
      }
    }
  }

  const closeFile = (run: RunFile) => {
    if (run.fd === undefined) return
    try {
      Fs.closeSync(run.fd)
    } catch {
      // closing what we opened: nothing to do about a failure
    }
    run.fd = undefined
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

/**
 * The answers on record for a dead run (none when it has no file). A line the crash cut short, or
 * any line that does not parse, is skipped; the last line about a card wins.
 */
export const read = (dir: string, runId: string): ReadonlyArray<Entry> => {
  let text: string
  try {
    text = Fs.readFileSync(fileOf(dir, runId), "utf8")
  } catch {
    return []
  }
  const byCard = new Map<string, Entry>()
  for (const line of text.split("\n")) {
    if (line.length === 0) continue
    try {
      const entry = JSON.parse(line) as Entry
      if (typeof entry.cardId === "string" && typeof entry.outcome === "string") byCard.set(entry.cardId, entry)
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
