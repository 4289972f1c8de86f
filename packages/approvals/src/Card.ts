/**
 * A card is one open server request that wants a decision. These are the data types every other
 * module of the package speaks (the view inboxes and handlers see, how a card settled, who
 * decided); how cards wait and settle is internal to the package.
 */
import type { Decision, JsonRpc, ServerRequests } from "@warden/protocol"
import * as Outcomes from "./internal/Outcomes.js"
import * as PendingCard from "./internal/PendingCard.js"
import type { PortableCard } from "./internal/PendingCard.js"

/** A card's id, unique within one approvals engine (`c1`, `c2`, ...); not the server's request id. */
export type CardId = string

/** A file change as the preceding `fileChange` item described it (the approval params carry none). */
export interface FileChange {
  readonly path: string
  readonly kind: string
  readonly diff?: string
}

/**
 * Changes a fileChange item lists at most (`Card.fileChangesOf`); the rest are replaced by one
 * entry of kind `OmittedChanges`. Large enough for a real refactor, small enough to check quickly.
 */
export { MaxFileChanges } from "./internal/FileChanges.js"

/**
 * The `kind` of the entry that stands for the changes not listed (its path says how many, and is
 * not a path). Rules read it as unknown changes: no path allow matches, every path deny does.
 */
export { OmittedChanges } from "./internal/FileChanges.js"

/** Context the supervisor knows about a request that the request itself does not carry. */
export interface CardContext {
  /** The changes of the fileChange item this approval is about (from its `item/started`). */
  readonly fileChanges?: ReadonlyArray<FileChange>
  /** The work item this card belongs to (the CLI's PROMPT index, or an embedder's id). */
  readonly workItem?: string | number
}

/** What a person needs to decide, with secret-looking values masked. Never holds raw secrets. */
export type CardSummary =
  | {
      readonly kind: "command"
      readonly command: string
      readonly argv: ReadonlyArray<string> | undefined
      readonly cwd: string | undefined
      readonly reason: string | undefined
    }
  | {
      readonly kind: "fileChange"
      readonly changes: ReadonlyArray<FileChange>
      readonly reason: string | undefined
      readonly grantRoot: string | undefined
    }
  | {
      readonly kind: "permissions"
      readonly permissions: unknown
      readonly cwd: string
      readonly reason: string | undefined
    }
  | {
      readonly kind: "mcpToolCall"
      readonly server: string
      readonly tool: string | undefined
      readonly inputs: Readonly<Record<string, unknown>>
      readonly message: string
    }
  | {
      readonly kind: "elicitation"
      readonly server: string
      readonly message: string
      readonly mode: string
      readonly fields: ReadonlyArray<FormField>
      readonly url: string | undefined
    }
  | { readonly kind: "userInput"; readonly questions: ReadonlyArray<ServerRequests.UserInputQuestion> }
  | {
      readonly kind: "dynamicTool"
      readonly tool: string
      readonly namespace: string | undefined
      readonly arguments: unknown
    }
  | { readonly kind: "other"; readonly method: string }

/** One field of an MCP elicitation form, as a card shows it (titles and choices masked). */
export interface FormField {
  /** The property name the answer's `content` uses. */
  readonly name: string
  readonly title: string | undefined
  /** The JSON Schema type (`string`, `number`, `boolean`, ...), when given. */
  readonly type: string | undefined
  /** The allowed values, for an enumerated field. */
  readonly choices: ReadonlyArray<string> | undefined
  readonly required: boolean
}

/** The public view of an open card, what inboxes, UIs and handlers see. */
export interface CardView {
  readonly id: CardId
  readonly requestId: JsonRpc.RequestId
  readonly method: string
  readonly threadId: string | undefined
  readonly turnId: string | undefined
  readonly workItem: string | number | undefined
  readonly summary: CardSummary
  /** One line for boards and logs (masked). */
  readonly title: string
  /** The decisions this request offers (Decline is always among them). */
  readonly offers: ReadonlyArray<Decision.DecisionTag>
  readonly openedAt: number
  /** Epoch ms at which the card refuses by itself. */
  readonly deadlineAt: number
}

/**
 * How a card settled, as the audit trail and inboxes say it.
 *
 * - `accepted`, `declined`, `cancelled`: a decision (rule, handler or person) was written; an
 *   acceptance whose answer says exactly what the refusal says counts as `declined`;
 * - `refused`: the method's refusal was written because no usable decision came (unknown method,
 *   malformed params, no thread of ours, the safety filter, a handler that failed, a decision the
 *   method cannot express, the thread stopped or the turn ended);
 * - `timeout`: the deadline passed; the refusal was written;
 * - `withdrawn`: the server resolved the request itself; nothing was written;
 * - `connection-lost`: the connection ended, or could not carry the answer; nothing was written;
 * - `shutdown`: the engine closed; the refusal was written if the line was alive.
 */
export type Outcome =
  | "accepted"
  | "declined"
  | "cancelled"
  | "refused"
  | "timeout"
  | "withdrawn"
  | "connection-lost"
  | "shutdown"

/** Who decided. Every settled card records one. */
export type Source =
  | { readonly _tag: "Rule"; readonly ruleId: string }
  /** An allow a person asked to remember ("always"), found by the `remembered` lookup (`Approvals.DecisionConfig`). */
  | { readonly _tag: "Remembered"; readonly ruleId: string }
  | { readonly _tag: "Handler" }
  /**
   * A person (or a program through the inbox); `channel` says where the answer came from when the
   * inbox was told (`terminal`, `stdin`, `web`, `link`, or an embedder's word).
   */
  | { readonly _tag: "Person"; readonly channel?: string }
  | { readonly _tag: "SafetyFilter"; readonly reason: string }
  | { readonly _tag: "Malformed"; readonly detail: string }
  | { readonly _tag: "UnknownMethod" }
  | { readonly _tag: "NoThread" }
  | { readonly _tag: "Deadline" }
  | { readonly _tag: "Withdrawn" }
  | { readonly _tag: "ConnectionLost"; readonly detail: string }
  | { readonly _tag: "ThreadStopped" }
  | { readonly _tag: "TurnEnded" }
  | { readonly _tag: "Shutdown" }

/**
 * The source as one word for logs and the audit trail.
 *
 * One of `rule:<id>`, `remembered:<id>`, `handler`, `person`,
 * `safety-filter`, `malformed`, `unknown-method`, `no-thread`, `deadline`, `withdrawn`,
 * `connection-lost`, `thread-stopped`, `turn-ended`, `shutdown`.
 */
export const describeSource: (source: Source) => string = Outcomes.describeSource

/** How a card ended. */
export interface Settlement {
  readonly card: CardView
  readonly outcome: Outcome
  readonly source: Source
  /** The decision that won, if a decision won (described; never a raw secret). */
  readonly decision: string | undefined
  /** The answer that was written, if one was. */
  readonly reply: ServerRequests.Reply | undefined
  readonly written: boolean
  /** Why a decision was refused or nothing was written, if it was. Key names, never values. */
  readonly detail: string | undefined
  readonly settledAt: number
  readonly latencyMs: number
}

/**
 * The file changes of a `fileChange` thread item (`item/started`), as a card shows them and rules
 * read them.
 *
 * Every path of the patch up to `Card.MaxFileChanges`, then one entry saying how many were left out
 * (so a rule or a person never decides on part of a patch without knowing it). Pass the result as
 * `CardContext.fileChanges` when the approval request arrives.
 *
 * @example
 * ```ts
 * const changes = Card.fileChangesOf(notification.params.item)
 * ```
 */
export { fileChangesOf } from "./internal/FileChanges.js"

/**
 * A card's view as plain data that can cross to another thread (`postMessage`'s structured clone)
 * or process: what the view was made from (the request and its context), so the summary and its
 * masking are worked out where the copy is read (`fromPortable`), not where the card opened;
 * a summary the view had already made (something read it) travels with it (`summarized`) and is
 * not made again. A view Warden did not make (an embedder's) travels with its summary and title.
 */
export type { PortableCard } from "./internal/PendingCard.js"

/**
 * A view's portable copy (see `PortableCard`): cheap, nothing is computed or copied here (a
 * summary already made is shared, not copied).
 *
 * @example
 * ```ts
 * worker.postMessage(Card.portable(event.card))
 * ```
 */
export const portable: (view: CardView) => PortableCard = PendingCard.portableCard

/**
 * The view back from its portable copy: the same fields, its summary and title the ones carried
 * (`summarized`), else made (and masked) on first read, as the original's were.
 *
 * @example
 * ```ts
 * const view = Card.fromPortable(message.card)
 * ```
 */
export const fromPortable: (card: PortableCard) => CardView = PendingCard.cardFromPortable

/**
 * The paths a permissions request asks for, one `access path` string each (`read /repo`,
 * `write /repo/src`, `deny /repo/.git/hooks`), as a card shows them and a remembered rule scopes
 * them; undefined when the request asks for no file-system access it can read.
 */
export { permissionsAsked } from "./internal/PermissionsAsked.js"
