/**
 * Work items, what an embedder asks for (a prompt on a new or resumed thread, maybe follow-ups),
 * what it gets back (a result per turn and overall), and the events it can watch on the way.
 */
import type { WorktreeOptions, WorktreeSummary } from "./Worktree.js"

/**
 * A work item, a prompt to run on a new thread (or on `threadId`, resumed).
 *
 * Its `followUps` then run one after another on the same thread. Only `prompt` is required;
 * everything else is passed to `thread/start` (or `thread/resume`) and `turn/start`.
 */
export interface WorkItem {
  /** An id of the embedder's (the CLI uses the PROMPT index). */
  readonly id?: string | number
  /** The first turn's input text. */
  readonly prompt: string
  /** Further turns on the same thread, run one after another once the previous completed. */
  readonly followUps?: ReadonlyArray<string>
  /** Resume this thread instead of starting a new one. */
  readonly threadId?: string
  /**
   * When `threadId` names a thread codex never persisted (its `thread/resume` answers "no rollout
   * found", e.g. Warden died before the thread's first turn was written): `"fail"` (the default)
   * fails the item `resume-failed`; `"start"` starts a new thread instead and says so with a
   * `ThreadStartedFresh` event (the new thread knows nothing of the old one's turns). Any other
   * refusal of the resume still fails the item.
   */
  readonly ifThreadMissing?: "fail" | "start"
  /** The thread's working directory (default: the app-server's). */
  readonly cwd?: string
  /** The model (default: codex's configuration). */
  readonly model?: string
  /** e.g. "on-request" (default), "never", "untrusted", "on-failure". */
  readonly approvalPolicy?: string
  /** e.g. "workspace-write", "read-only", "danger-full-access". */
  readonly sandbox?: string
  /**
   * `config` overrides sent with thread/start (and thread/resume). Warden adds
   * `thread_unload_delay_secs: 0` unless this sets it: when the item ends, Warden unsubscribes from
   * its thread and codex unloads it at once, so another app-server process can resume it.
   */
  readonly config?: Readonly<Record<string, unknown>>
  /** Any further thread/start params (ephemeral, dynamicTools, ...), passed as given. */
  readonly threadParams?: Readonly<Record<string, unknown>>
  /**
   * Run in a git worktree of its own, on its own branch (see `Worktree`): `true` for the defaults.
   * The repository is the one holding `cwd`; not a repository fails the item `worktree-failed`.
   */
  readonly worktree?: boolean | WorktreeOptions
  /**
   * Budgets: `maxTokens` (the thread's total tokens, from `thread/tokenUsage/updated`) and
   * `maxTurnTime` (how long one turn may run). Reaching one asks, as a card of Warden's own ("item
   * 7 reached 200k tokens: continue for another 200k?", an elicitation from server `warden`),
   * decided like any card; anything but yes interrupts the turn and the item fails
   * `budget-exhausted`.
   */
  readonly budget?: {
    readonly maxTokens?: number
    readonly maxTurnTime?: import("effect").Duration.DurationInput
  }
}

/** A turn's status as the server reports it; open to statuses a later codex may add. */
export type TurnStatus = "completed" | "interrupted" | "failed" | "inProgress" | (string & {})

/** An error the server reported for a turn (`turn.error` or an `error` notification). */
export interface TurnError {
  readonly message: string
  readonly codexErrorInfo?: unknown
  readonly willRetry?: boolean
}

/** How one turn ended (its id, status, final agent message, completed items and errors). */
export interface TurnResult {
  readonly turnId: string
  readonly status: TurnStatus
  /** The last agentMessage completed in this turn. */
  readonly finalMessage: string | undefined
  /** Items completed in this turn, as the server sent them. */
  readonly items: ReadonlyArray<Record<string, unknown>>
  /** The turn's own error (`turn/completed`'s `turn.error`), when it failed. */
  readonly error: TurnError | undefined
  /** `error` notifications seen during the turn (including ones codex retried itself). */
  readonly errors: ReadonlyArray<TurnError>
}

/**
 * What a work item that ran to the end returns.
 *
 * The thread, the last turn's status, the last final agent message, every completed item and error
 * of every turn, the latest token usage, and how many times the thread was resumed after an
 * app-server restart. A turn that does not complete
 * ends the item there (its follow-ups are not run): an `interrupted` or `failed` last turn is a
 * result, not a failure.
 */
export interface WorkResult {
  /** The work item's `id`, as given. */
  readonly id: string | number | undefined
  readonly threadId: string
  /** The status of the last turn. */
  readonly status: TurnStatus
  /** The final agent message of the last turn that had one. */
  readonly finalMessage: string | undefined
  /** Items completed in every turn, in order. */
  readonly items: ReadonlyArray<Record<string, unknown>>
  /** The latest `thread/tokenUsage/updated` token usage. */
  readonly usage: unknown
  /** The `error` notifications of every turn. */
  readonly errors: ReadonlyArray<TurnError>
  /** Every turn's result, in order. */
  readonly turns: ReadonlyArray<TurnResult>
  /** How many times the thread was resumed after an app-server restart. */
  readonly resumes: number
  /** The item's worktree, when it ran in one (`WorkItem.worktree`): its branch, whether it changed, kept. */
  readonly worktree?: WorktreeSummary
}

/**
 * What happens to a work item, in order.
 *
 * Its thread is ready, turns start and complete, every notification of its thread, and a
 * connection loss, resume or stall. Each carries the item's `id`.
 */
export type WorkEvent =
  /** The item's worktree is checked out at `path` on `branch` (`reused`: one a crashed run left); the thread runs there. */
  | {
      readonly _tag: "WorktreeReady"
      readonly item: string | number | undefined
      readonly path: string
      readonly branch: string
      readonly base: string
      readonly reused: boolean
    }
  /** The item ended and its worktree was finished: committed, then kept or removed (`worktree`). */
  | {
      readonly _tag: "WorktreeFinished"
      readonly item: string | number | undefined
      readonly worktree: WorktreeSummary
    }
  /** The thread exists (`resumed`: by `thread/resume`, given `threadId` or after a restart). */
  | {
      readonly _tag: "ThreadReady"
      readonly item: string | number | undefined
      readonly threadId: string
      readonly resumed: boolean
    }
  /**
   * `threadId` named a thread codex never persisted and the item asked for `ifThreadMissing:
   * "start"`: a new thread is being started instead (`ThreadReady` follows with its id).
   */
  | {
      readonly _tag: "ThreadStartedFresh"
      readonly item: string | number | undefined
      readonly missingThreadId: string
      readonly detail: string
    }
  /** `turn/start` was answered: the turn runs with `prompt`. */
  | {
      readonly _tag: "TurnStarted"
      readonly item: string | number | undefined
      readonly threadId: string
      readonly turnId: string
      readonly prompt: string
    }
  /** A notification for this thread, in the order the server sent it. */
  | {
      readonly _tag: "Notification"
      readonly item: string | number | undefined
      readonly threadId: string
      readonly turnId: string | undefined
      readonly method: string
      readonly params: unknown
    }
  /** `turn/completed` was read: the turn's result. */
  | {
      readonly _tag: "TurnCompleted"
      readonly item: string | number | undefined
      readonly threadId: string
      readonly turn: TurnResult
    }
  /** The app-server connection ended under this item; its open cards were settled as connection-lost. */
  | {
      readonly _tag: "ConnectionLost"
      readonly item: string | number | undefined
      readonly threadId: string | undefined
      readonly detail: string
    }
  /** The thread was resumed on a restarted app-server; the interrupted turn is run again. */
  | {
      readonly _tag: "Resumed"
      readonly item: string | number | undefined
      readonly threadId: string
      readonly attempt: number
    }
  /**
   * No event for `stallTimeout` while no card was open and no command ran: the turn is
   * interrupted and the item fails `stalled`.
   */
  | {
      readonly _tag: "Stalled"
      readonly item: string | number | undefined
      readonly threadId: string
      readonly turnId: string
    }
