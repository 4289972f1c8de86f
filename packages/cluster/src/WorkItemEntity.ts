/**
 * A work item as an `@effect/cluster` entity: the entity id is the work item's id, and its RPCs
 * are the item's life. Only `Run` is persisted (de-duplicated by the item id): it is the durable
 * "this must run to completion" token, redelivered to the runner that takes over the item's shard
 * when its runner dies. The others are volatile and go to whichever runner holds the item now.
 */
import { ClusterSchema, Entity } from "@effect/cluster"
import { Rpc } from "@effect/rpc"
import { Schema } from "effect"
import { AnswerWire, DecisionWire, ItemEvent, ItemNotActive, ItemSpec, ItemStatus, RunResult } from "./Wire.js"

/** Run the item to its end (persisted; a second `Run` of the same id returns the stored result). */
export const Run = Rpc.make("Run", {
  payload: { id: Schema.String, spec: ItemSpec },
  success: RunResult,
  primaryKey: (p) => p.id
}).annotate(ClusterSchema.Persisted, true)

/** Add input to the item's running turn. */
export const Steer = Rpc.make("Steer", { payload: { text: Schema.String }, error: ItemNotActive })

/** Interrupt the item's running turn. */
export const Interrupt = Rpc.make("Interrupt", { error: ItemNotActive })

/** Stop the item (idempotent); a `Run` not yet running returns `Stopped`. */
export const Stop = Rpc.make("Stop")

/** Where the item stands. */
export const Status = Rpc.make("Status", { success: ItemStatus })

/** The item's event lines: a snapshot first, then live lines until the item ends. */
export const Events = Rpc.make("Events", { success: ItemEvent, stream: true })

/** Answer one of the item's cards by its fleet-wide id (see `Wire.globalCardId`). */
export const Answer = Rpc.make("Answer", {
  payload: { cardId: Schema.String, decision: DecisionWire },
  success: AnswerWire
})

/** The entity: type `WardenWorkItem`, one instance per work item id (at most 255 characters). */
export const WorkItemEntity = Entity.make("WardenWorkItem", [Run, Steer, Interrupt, Stop, Status, Events, Answer])
