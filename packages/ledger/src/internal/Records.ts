/**
 * What the ledger's queries return: plain records, read back from the rows (every text in them was
 * masked on the way in).
 */
import type { Card } from "@warden/approvals"
import type * as CardFacts from "../CardFacts.js"
import type { ItemOrigin } from "../LedgerEvent.js"
import type * as Replay from "../Replay.js"

/** Where a run stands in the ledger (`RunRecord.status`). */
export type RunStatus =
  /** Being recorded, or its process died (no clean close was recorded). */
  | "running"
  /** Its ledger closed cleanly (or `Run.end`). */
  | "ended"
  /** Recovered after its process died (`markStranded`, `recover`). */
  | "crashed"

/** One run as the ledger recorded it (`Ledger.runs`); times are epoch milliseconds. */
export interface RunRecord {
  readonly runId: string
  readonly startedAt: number
  /** When it ended (cleanly, or was recovered as `crashed`). */
  readonly endedAt: number | undefined
  readonly status: RunStatus
  /** Its short label (masked). */
  readonly label: string | undefined
  /** What the embedder said about the run (masked JSON). */
  readonly info: unknown
  /** The process that recorded it. */
  readonly pid: number | undefined
  /** The host that process ran on. */
  readonly host: string | undefined
  /** The run it recovers, if any. */
  readonly resumedFrom: string | undefined
  /** Events dropped because the ledger's queue was full: when not 0, the record has gaps. */
  readonly droppedEvents: number
  /**
   * Events recorded but never written: the database stayed locked by another process longer than
   * `LedgerOptions.lockTimeout`, or the write failed. When not 0, the record has gaps.
   */
  readonly lostEvents: number
  /**
   * Answers written to codex whose line the answer journal could not write (its directory could
   * not be made, a full disk): each is recorded all the same, but had the process died before its
   * settlement was committed, recovery would have had no line to say codex may have received it.
   * When not 0, the run's record of what codex received has gaps; 0 for a ledger without a journal.
   */
  readonly unjournaledAnswers: number
}

/** Where a work item stands in the ledger (`WorkItemRecord.status`). */
export type WorkItemStatus =
  /** Submitted, no thread yet. */
  | "pending"
  /** Its thread is ready; not finished. */
  | "running"
  /** Ended with a result (its last turn's status is `resultStatus`). */
  | "finished"
  /** Ended with a failure (`failureReason`). */
  | "failed"
  /** Stopped (interrupted: Ctrl-C, `stop`). */
  | "stopped"
  /** Unfinished in a dead run, and handed to another run to resume (`handedTo`). */
  | "handed-over"
  /**
   * Unfinished in a dead run, and not handed over by `recover`: it cannot be run again as it was
   * asked (`failureReason`: `prompt-masked`, `options-masked`) or has nothing left to run
   * (`nothing-left`); `failureDetail` says why in words.
   */
  | "not-resumed"

/** One submitted work item as the ledger recorded it (`Ledger.workItems`); times are epoch milliseconds. */
export interface WorkItemRecord {
  readonly runId: string
  /** The work item's id as text. */
  readonly item: string
  /** Masked. */
  readonly prompt: string
  /** Its follow-up prompts (masked). */
  readonly followUps: ReadonlyArray<string>
  /** cwd, model, approvalPolicy, sandbox, config, threadParams, threadId, worktree, budget (`maxTokens`, `maxTurnTimeMs`): masked JSON. */
  readonly options: Readonly<Record<string, unknown>>
  /** Masking changed a prompt: resuming it would not send what was asked. */
  readonly promptsMasked: boolean
  readonly status: WorkItemStatus
  readonly threadId: string | undefined
  /** Turns that completed (whatever their status). */
  readonly turnsDone: number
  /** How many times its thread was resumed on a restarted app-server (from its result). */
  readonly resumes: number
  /** The git worktree it ran in (`WorkItem.worktree`), once it was made (masked). */
  readonly worktree: { readonly branch: string; readonly path: string } | undefined
  readonly submittedAt: number
  readonly startedAt: number | undefined
  readonly finishedAt: number | undefined
  readonly resultStatus: string | undefined
  readonly finalMessage: string | undefined
  readonly failureReason: string | undefined
  readonly failureDetail: string | undefined
  /** The dead run's item it continues (`LedgerEvent.itemSubmitted`'s `from`). */
  readonly from: ItemOrigin | undefined
  /** The run it was handed to by `recover` (status `handed-over`). */
  readonly handedTo: string | undefined
}

/** A work item a dead run did not finish. */
export interface UnfinishedItem extends WorkItemRecord {
  /** The prompts still to run: the turn that was running at the crash, then the rest. Empty: every turn completed. */
  readonly remainingPrompts: ReadonlyArray<string>
  /** How many times its thread moved to a new connection before the crash (0: never). */
  readonly generation: number | undefined
}

/** One thread as the ledger recorded it (`Ledger.threads`); times are epoch milliseconds. */
export interface ThreadRecord {
  readonly runId: string
  readonly threadId: string
  readonly item: string
  /** 0 on the connection it started (or was resumed) on; +1 each time it was resumed on a restarted app-server. */
  readonly generation: number
  /** The work item resumed an existing thread (rather than starting one). */
  readonly resumed: boolean
  readonly readyAt: number
  /** Its connection was lost at this time, and it was not resumed since. */
  readonly lostAt: number | undefined
}

/** One turn as the ledger recorded it (`Ledger.turns`); texts are masked, times epoch milliseconds. */
export interface TurnRecord {
  readonly runId: string
  readonly threadId: string
  readonly turnId: string
  readonly item: string
  readonly prompt: string
  /** `inProgress`, `completed`, `interrupted`, `failed`, `connection-lost`, or `crashed` (in progress when its run died: set when the run is stranded or recovered). */
  readonly status: string
  readonly startedAt: number
  readonly completedAt: number | undefined
  readonly finalMessage: string | undefined
  readonly error: string | undefined
}

/** How a card settled, as the ledger recorded it (once, or `stranded` by recovery). */
export interface SettlementRecord extends Replay.RecordedSettlement {
  /** Where a person's decision came from (`terminal`, `stdin`, `web`, `link`); undefined otherwise. */
  readonly channel: string | undefined
  /** An answer (a decision or a refusal) was written back to the app-server. */
  readonly written: boolean
  /** Why a decision was refused or nothing was written, if it was (masked). */
  readonly detail: string | undefined
  /** When it settled (epoch ms). */
  readonly settledAt: number
  /** From opening to settling, in milliseconds (undefined when stranded). */
  readonly latencyMs: number | undefined
}

/** One approval card with its settlement, as the ledger recorded it (`Ledger.cards`); replay reads it as it is. */
export interface CardRecord extends Replay.RecordedCard {
  /** The server's request id, as it was (number or string). */
  readonly requestId: string | number
  readonly kind: string
  /** The card's masked summary (`Card.CardSummary`), as JSON. */
  readonly summary: unknown
  readonly facts: CardFacts.CardFacts
  readonly offers: ReadonlyArray<string>
  readonly openedAt: number
  readonly deadlineAt: number
  /** Undefined: the card is open (or its run died before it settled and it is not yet stranded). */
  readonly settlement: SettlementRecord | undefined
}

/** A decision that came after its card had settled, kept apart from the settlement (`Ledger.lateDecisions`). */
export interface LateDecisionRecord {
  readonly runId: string
  readonly cardId: string
  readonly decision: string
  readonly source: string
  /** Where a person's late decision came from, if said. */
  readonly channel: string | undefined
  /** The outcome that had already won. */
  readonly outcome: string
  readonly at: number
}

/** Which cards: every field narrows; none given is every card. */
export interface CardFilter {
  readonly runId?: string
  readonly item?: string | number
  /** An outcome, `stranded`, or `open` (no settlement). */
  readonly outcome?: Card.Outcome | "stranded" | "open"
  /** A whole source (`rule:no-rm`, `person`, `remembered:m1`) or a source kind (`rule`, `remembered`). */
  readonly source?: string
  readonly method?: string
  /** Opened at or after (epoch ms). */
  readonly from?: number
  /** Opened before (epoch ms). */
  readonly to?: number
  /** At most this many (default 10 000), oldest first. */
  readonly limit?: number
  /**
   * Take the newest `limit` cards instead of the oldest (still listed oldest first): what a reader
   * of the latest decisions wants once the ledger holds more than `limit`.
   */
  readonly newest?: boolean
  /**
   * Only the cards listed before this one (the order every read lists cards in: opened, then run,
   * then card id): with `newest`, the next page back of a read in pages, from the oldest card of
   * the page before (`{ openedAt, runId, cardId }` of a `CardRecord`).
   */
  readonly before?: CardPosition
}

/** Where a card stands in the order cards are listed (`CardFilter.before`): a `CardRecord`'s own fields. */
export interface CardPosition {
  readonly openedAt: number
  readonly runId: string
  readonly cardId: string
}

/** A run's cards counted: every card is open, settled once, or stranded once. */
export interface Accounting {
  readonly cards: number
  readonly open: number
  readonly settled: number
  readonly stranded: number
  readonly byOutcome: Readonly<Record<string, number>>
  readonly lateDecisions: number
}

/** Why `recover` did not hand an unfinished item over (`WorkItemRecord.failureReason` of a `not-resumed` item). */
export type NotResumedReason =
  /** A prompt or follow-up was stored masked (it held a secret): it would not send what was asked. */
  | "prompt-masked"
  /** Its `config` or thread params were stored masked: they cannot be given again as they were. */
  | "options-masked"
  /** Every turn had completed; only the item's end was not recorded. */
  | "nothing-left"

/** An unfinished item `recover` did not hand over, now `not-resumed`, and why. */
export interface NotResumedItem extends UnfinishedItem {
  readonly reason: NotResumedReason
  /** Why, in words. */
  readonly detail: string
}

/** What `Ledger.recover` did to a dead run: the cards it stranded, the items it handed over and those it did not. */
export interface Recovery {
  /** Cards of the dead run recorded `stranded` by this call. */
  readonly stranded: number
  /** Turns of the dead run still `inProgress`, now `crashed`. */
  readonly crashedTurns: number
  /** Its unfinished work items that can run again, now `handed-over` to the recovering run. */
  readonly items: ReadonlyArray<UnfinishedItem>
  /** Its unfinished work items that cannot (or need not) run again, now `not-resumed` with their reason. */
  readonly notResumed: ReadonlyArray<NotResumedItem>
}
