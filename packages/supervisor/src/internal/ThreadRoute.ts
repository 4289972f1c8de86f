/**
 * A thread's route on a connection: where the read loop hands the thread's notifications (a
 * synchronous call of the thread's runner, which does a turn's bookkeeping there, linear and
 * Warden's own, and keeps what comes between turns for the next one: the reader never waits on a
 * thread), the scope its cards live in, and what the read loop remembers for the thread's cards
 * (file changes announced by `item/started`, which the approval request itself does not carry).
 */
import type { Card } from "@warden/approvals"
import type { Scope, Tracer } from "effect"
import type { ConnectionLost } from "../Errors.js"

export type ThreadSignal =
  | { readonly _tag: "Notification"; readonly method: string; readonly params: unknown }
  | { readonly _tag: "ConnectionLost"; readonly error: ConnectionLost }

export interface ThreadRoute {
  /** Set when thread/start's response is read (before the next frame), or up front for resume. */
  threadId: string | undefined
  /**
   * The thread's signals, in order: called by the read loop (notifications) and by the
   * connection's end (once). It must not throw and must not run anything of the embedder's.
   */
  readonly receive: (signal: ThreadSignal) => void
  /** Parent scope of this thread's cards: closing it refuses them (thread stopped). */
  readonly cardScope: Scope.Scope
  readonly workItem: string | number | undefined
  /**
   * The file changes of the thread's fileChange items from `item/started` to `item/completed` (or
   * the turn's end), by item id: a card for one of them shows them. Made by the read loop on first use.
   */
  fileChanges?: Map<string, ReadonlyArray<Card.FileChange>> | undefined
  /**
   * Commands running now (commandExecution items started and not completed): the stall watchdog
   * waits for them. Made by the read loop on first use.
   */
  runningCommands?: Set<string> | undefined
  /**
   * The span this thread's cards are children of (the current turn's, else the thread's); set
   * only when telemetry is on (`Telemetry`), read by the read loop when a card opens.
   */
  traceParent?: Tracer.AnySpan | undefined
  /**
   * Set by the thread's scope when it closes: a route that is closed is never registered again (a
   * late thread/start response must not route a stopped item's thread).
   */
  closed?: boolean
  /** Number of frames routed here; the read loop bumps it (cheap activity clock for tests and stall checks). */
  routed: number
}
