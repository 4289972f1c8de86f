/**
 * How an item's run and its cards are written down in the cluster's storage: its stored result,
 * the outcome and source a settlement is stored with, and why a `Run` is a move.
 *
 * @internal
 */
import { Decision } from "@warden/protocol"
import { Schema } from "effect"
import * as Wire from "../Wire.js"
import type { ItemRow } from "./ItemStore.js"

export const final = (status: string) => status === "completed" || status === "failed" || status === "stopped"

export const encodeResult = Schema.encodeSync(Schema.parseJson(Wire.RunResult))
export const decodeResult = Schema.decodeUnknownOption(Schema.parseJson(Wire.RunResult))

export const statusOf = (result: Wire.RunResult) =>
  result._tag === "Completed" ? "completed" : result._tag === "Failed" ? "failed" : "stopped"

/**
 * The outcome a person's decision settles a card with, as the approvals engine words it (its card
 * race may still word it otherwise: an acceptance that says what the refusal says is `declined`,
 * a decision the method cannot express `refused`; the stored row is then put right).
 */
export const outcomeOf = (decision: Decision.Decision): string => {
  switch (decision._tag) {
    case "Decline":
      return "declined"
    case "Cancel":
      return "cancelled"
    case "Elicitation":
      return decision.action === "accept" ? "accepted" : decision.action === "decline" ? "declined" : "cancelled"
    case "ApplyNetworkPolicyAmendment":
      return decision.action === "allow" ? "accepted" : "declined"
    default:
      return Decision.isAcceptance(decision) ? "accepted" : "declined"
  }
}

/** A settlement's source as stored: `person`, else the engine's tag (`Deadline`, `ThreadStopped`, `Rule`, ...). */
export const sourceOf = (source: { readonly _tag: string }) => (source._tag === "Person" ? "person" : source._tag)

/**
 * Why a `Run` reaching this incarnation is a move, if it is: the item was last held by another
 * incarnation (`shard-moved`: its runner died, stopped, or gave the shard up to this one), or this
 * incarnation was running it and did not finish (`shard-lost`: the runner let go of the item's
 * shard, e.g. a shard lock refresh slower than the engine allows, which stopped the run, and took
 * the shard back). A `Run` delivered again while the item runs here joins the run (`runOnce`)
 * and never gets this far.
 */
export const moveReason = (before: ItemRow | undefined, runId: string): Wire.MoveReason | undefined => {
  if (before === undefined || before.incarnation === null) return undefined
  if (before.incarnation !== runId) return "shard-moved"
  return before.status === "running" ? "shard-lost" : undefined
}
