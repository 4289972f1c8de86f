/**
 * Work items: what an embedder asks for (a prompt on a new or resumed thread, maybe follow-ups),
 * what it gets back (a result per turn and overall), and the events it can watch on the way.
 */

export interface WorkItem {
  /** An id of the embedder's (the CLI uses the PROMPT index). */
  readonly id?: string | number
  readonly prompt: string
  /** Further turns on the same thread, run one after another once the previous completed. */
  readonly followUps?: ReadonlyArray<string>
  /** Resume this thread instead of starting a new one. */
  readonly threadId?: string
  readonly cwd?: string
  readonly model?: string
  /** e.g. "on-request" (default), "never", "untrusted", "on-failure". */
  readonly approvalPolicy?: string
  /** e.g. "workspace-write", "read-only", "danger-full-access". */
  readonly sandbox?: string
  /** `config` overrides sent with thread/start. */
  readonly config?: Readonly<Record<string, unknown>>
  /** Any further thread/start params (ephemeral, dynamicTools, ...), passed as given. */
  readonly threadParams?: Readonly<Record<string, unknown>>
}

export type TurnStatus = "completed" | "interrupted" | "failed" | "inProgress" | (string & {})

export interface TurnError {
  readonly message: string
  readonly codexErrorInfo?: unknown
  readonly willRetry?: boolean
}

export interface TurnResult {
  readonly turnId: string
  readonly status: TurnStatus
  /** The last agentMessage completed in this turn. */
  readonly finalMessage: string | undefined
  /** Items completed in this turn, as the server sent them. */
  readonly items: ReadonlyArray<Record<string, unknown>>
  readonly error: TurnError | undefined
  /** `error` notifications seen during the turn (including ones codex retried itself). */
  readonly errors: ReadonlyArray<TurnError>
}

export interface WorkResult {
  readonly id: string | number | undefined
  readonly threadId: string
  /** The status of the last turn. */
  readonly status: TurnStatus
  readonly finalMessage: string | undefined
  readonly items: ReadonlyArray<Record<string, unknown>>
  /** The latest `thread/tokenUsage/updated` token usage. */
  readonly usage: unknown
  readonly errors: ReadonlyArray<TurnError>
  readonly turns: ReadonlyArray<TurnResult>
  /** How many times the thread was resumed after an app-server restart. */
  readonly resumes: number
}

export type WorkEvent =
  | { readonly _tag: "ThreadReady"; readonly item: string | number | undefined; readonly threadId: string; readonly resumed: boolean }
  | { readonly _tag: "TurnStarted"; readonly item: string | number | undefined; readonly threadId: string; readonly turnId: string; readonly prompt: string }
  /** A notification for this thread, in the order the server sent it. */
  | {
    readonly _tag: "Notification"
    readonly item: string | number | undefined
    readonly threadId: string
    readonly turnId: string | undefined
    readonly method: string
    readonly params: unknown
  }
  | { readonly _tag: "TurnCompleted"; readonly item: string | number | undefined; readonly threadId: string; readonly turn: TurnResult }
  /** The app-server connection ended under this item; its open cards were settled as connection-lost. */
  | { readonly _tag: "ConnectionLost"; readonly item: string | number | undefined; readonly threadId: string | undefined; readonly detail: string }
  /** The thread was resumed on a restarted app-server; the interrupted turn is run again. */
  | { readonly _tag: "Resumed"; readonly item: string | number | undefined; readonly threadId: string; readonly attempt: number }
  | { readonly _tag: "Stalled"; readonly item: string | number | undefined; readonly threadId: string; readonly turnId: string }
