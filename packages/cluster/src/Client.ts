/**
 * A client of the fleet: submits work items, follows their events, answers their cards (the one
 * inbox), asks their status, stops them. It is a client-only cluster node: it reads the runners
 * from storage and routes to the runner that owns each item's shard, but never owns shards.
 */
import type { Sharding } from "@effect/cluster"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Decision } from "@warden/protocol"
import { Cause, Context, type Duration, Effect, Exit, Layer, Option, Schedule, Stream } from "effect"
import type { ShardingConfig } from "@effect/cluster"
import { shardingConfig } from "./Runner.js"
import { WorkItemEntity } from "./WorkItemEntity.js"
import type * as Wire from "./Wire.js"
import { ItemSpec } from "./Wire.js"

/** A cluster failure a client call can meet (the engine's `MailboxFull`, `AlreadyProcessingMessage`, `PersistenceError`). */
export type ClusterFailure = Effect.Effect.Error<
  ReturnType<ReturnType<Effect.Effect.Success<typeof WorkItemEntity.client>>["Status"]>
>

/** What a fleet client offers; every call goes to the runner that holds the item now. */
export interface ClusterClientShape {
  /**
   * Run a work item to its end (persisted: it survives the death of the runner running it, which
   * is how it moves). A second call with the same id returns the first one's stored result.
   */
  readonly run: (
    id: string,
    spec: Partial<ItemSpec> & { readonly prompt: string }
  ) => Effect.Effect<Wire.RunResult, ClusterFailure>
  /** The item's event lines: a snapshot, then live lines until it ends (one subscription; see `follow`). */
  readonly events: (id: string) => Stream.Stream<Wire.ItemEvent, ClusterFailure>
  /**
   * Every line of the item once (by incarnation and seq), across runners, until it ends: the
   * subscription is made again (after a second) whenever it fails or ends before the item did
   * (its runner died, or stopped and handed the item over), and when it has been silent for
   * `FOLLOW_IDLE` (it may sit on a runner that stopped driving the item, cut from the store, while
   * another runner drives it; the new subscription goes to whichever runner holds the item then,
   * and its replayed lines are passed on only if not seen). Snapshots are not passed on. When
   * the item ended on a runner it is no longer on, the activation reached tells its cards'
   * settlements and its end again from storage (`replayed: true`), so none is missed.
   */
  readonly follow: (id: string) => Stream.Stream<Wire.ItemEvent>
  /** Answer a card by its fleet-wide id, through the item's entity (never another process). */
  readonly answer: (
    itemId: string,
    cardId: string,
    decision: Decision.Decision
  ) => Effect.Effect<Wire.AnswerWire, ClusterFailure>
  /** Where the item stands. */
  readonly status: (id: string) => Effect.Effect<Wire.ItemStatus, ClusterFailure>
  /** Stop the item (idempotent). */
  readonly stop: (id: string) => Effect.Effect<void, ClusterFailure>
  /**
   * Add `text` to the item's running turn (codex's `turn/steer`), on the runner that drives it;
   * `ItemNotActive` when it has no running turn there.
   */
  readonly steer: (id: string, text: string) => Effect.Effect<void, ClusterFailure | Wire.ItemNotActive>
  /** Interrupt the item's running turn (codex's `turn/interrupt`: the turn ends `interrupted`); `ItemNotActive` when none runs. */
  readonly interrupt: (id: string) => Effect.Effect<void, ClusterFailure | Wire.ItemNotActive>
}

/** The `ClusterClient` service tag. */
export class ClusterClient extends Context.Tag("@warden/cluster/ClusterClient")<ClusterClient, ClusterClientShape>() {}

const finalStatuses = new Set(["completed", "failed", "stopped"])

/**
 * A call whose runner-side handler was interrupted under it (the item's entity closed there: its
 * shard moved, or the runner lost its lease and stopped the item) comes back to the caller as an
 * interruption the caller never asked for. Every call here is safe to send again (`Run` is
 * persisted and de-duplicated by the item id, the first answer to a card wins, `Status` reads,
 * `Stop` is idempotent), so it is sent again, now to whichever runner holds the item, once a
 * second for at most a minute; after that the interruption stands. The same for the engine's
 * `PersistenceError` (the store not reached in time: a connection not made within its timeout
 * on a busy machine, a moment's outage), which would otherwise end an item `cluster-error` that
 * runs on. An interruption of the caller's own fiber is not retried: it stops at the next step.
 */
const againWhenInterruptedThere = <A, E>(call: Effect.Effect<A, E>): Effect.Effect<A, E> => {
  const transient = (cause: Cause.Cause<E>) =>
    Cause.isInterruptedOnly(cause) ||
    Option.exists(
      Cause.failureOption(cause),
      (e) => typeof e === "object" && e !== null && (e as { readonly _tag?: unknown })._tag === "PersistenceError"
    )
  const attempt = Effect.exit(call).pipe(
    Effect.flatMap((exit) =>
      Exit.isFailure(exit) && transient(exit.cause)
        ? Effect.fail({ _tag: "InterruptedThere" as const, exit })
        : Effect.succeed(exit)
    )
  )
  return attempt.pipe(
    Effect.retry({ schedule: Schedule.spaced("1 second"), times: 60 }),
    Effect.catchAll((e) => Effect.succeed(e.exit)),
    Effect.flatten
  )
}

/**
 * How long `follow` lets a subscription stay silent before it subscribes again (a subscription
 * replays the activation's lines, so a quiet item costs one small request per interval).
 */
export const FOLLOW_IDLE: Duration.DurationInput = "30 seconds"

/** A client over the `Sharding` in context (a runner's, or a client-only node's). */
export const make: Effect.Effect<ClusterClientShape, never, Sharding.Sharding> = Effect.gen(function* () {
  const client = yield* WorkItemEntity.client
  return {
    run: (id, spec) => againWhenInterruptedThere(client(id).Run({ id, spec: new ItemSpec(spec) })),
    events: (id) => client(id).Events(),
    follow: (id) => {
      const seen = new Set<string>()
      let finished = false
      const pass = Stream.suspend(() => client(id).Events()).pipe(
        Stream.timeout(FOLLOW_IDLE),
        Stream.filter((e) => {
          if (e.seq < 0) {
            // A snapshot: an item that ended before this activation has no lines left to show.
            if (finalStatuses.has(String(e.line["status"]))) finished = true
            return false
          }
          const key = `${e.incarnation}/${e.seq}`
          if (seen.has(key)) return false
          seen.add(key)
          if (e.line["type"] === "item.finished") finished = true
          return true
        }),
        Stream.catchAllCause(() => Stream.empty)
      )
      const loop = (): Stream.Stream<Wire.ItemEvent> =>
        Stream.concat(
          pass,
          Stream.suspend(() =>
            finished ? Stream.empty : Stream.concat(Stream.drain(Stream.fromEffect(Effect.sleep("1 second"))), loop())
          )
        )
      return loop()
    },
    answer: (itemId, cardId, decision) =>
      againWhenInterruptedThere(client(itemId).Answer({ cardId, decision: decision as never })),
    status: (id) => againWhenInterruptedThere(client(id).Status()),
    stop: (id) => againWhenInterruptedThere(client(id).Stop()),
    steer: (id, text) => againWhenInterruptedThere(client(id).Steer({ text })),
    interrupt: (id) => againWhenInterruptedThere(client(id).Interrupt())
  }
})

/**
 * A client-only cluster node on the `SqlClient` provided (see `Storage.layer`): no listener, no
 * shards, the same routing as the runners.
 */
export const layer = (options: { readonly sharding?: Partial<ShardingConfig.ShardingConfig["Type"]> } = {}) =>
  Layer.effect(ClusterClient, make).pipe(
    Layer.provideMerge(
      NodeClusterSocket.layer({
        clientOnly: true,
        storage: "sql",
        shardingConfig: shardingConfig(Option.none(), options.sharding)
      })
    )
  ) satisfies Layer.Layer<ClusterClient | Sharding.Sharding, unknown, SqlClient.SqlClient>
