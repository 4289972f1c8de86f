/**
 * What a runner process provides its item entities: who it is, its ledger run if it records one,
 * and what it keeps of each item across the item's activations on it.
 *
 * @internal
 */
import type { Ledger } from "@warden/ledger"
import { Context, type Deferred } from "effect"
import type * as Wire from "../Wire.js"

/** Who this runner process is: its run id (the incarnation of every item it runs) and address. */
export interface RunnerInfoShape {
  readonly runId: string
  readonly address: string
  /** This machine (`os.hostname()`) and the codex home its app-servers use: where threads live. */
  readonly host: string
  readonly codexHome: string
  /** Whether the items' thread state is kept in the store (`ThreadState`). */
  readonly threadState: boolean
}

export class RunnerInfo extends Context.Tag("@warden/cluster/RunnerInfo")<RunnerInfo, RunnerInfoShape>() {}

/**
 * The runner's ledger run, when the runner records one (`Runner.layer({ ledger: true })`): the
 * ledger and this process's run in it (run id = the runner's run id).
 */
export class LedgerRecording extends Context.Tag("@warden/cluster/LedgerRecording")<
  LedgerRecording,
  {
    readonly ledger: Ledger.LedgerShape
    readonly run: Ledger.Run
  }
>() {}

/** What a runner keeps of one item across the item's activations on it. */
export interface LocalItem {
  /** The run in progress: a `Run` delivered again while it runs joins it. */
  run: Deferred.Deferred<Wire.RunResult> | undefined
  /**
   * The seq of the item's next line from this runner. A shard lost and regained brings a new
   * activation of the item's entity on the same runner (same incarnation); its lines go on from
   * here, since consumers de-duplicate by incarnation and seq.
   */
  nextSeq: number
}

/**
 * This runner's items, by item id, shared by every activation of every item's entity (an entity
 * whose shard was released and regained, or rebuilt after a defect, is a new activation on the
 * same runner). An entry is made when a run of its item starts here and goes when the item
 * finishes here; one whose item was moved away and finished elsewhere stays (a number).
 */
export class LocalItems extends Context.Tag("@warden/cluster/LocalItems")<LocalItems, Map<string, LocalItem>>() {}
