/**
 * Which runners' ledger runs are dead: what a live runner sweeps (`Runner.layer` with
 * `ledger: true`) so that a runner that died, or whose host was lost, has its ledger run recorded
 * `crashed` and its open cards `stranded` there, without waiting for it to come back.
 *
 * A runner's ledger run (`info.address`, its process's `host` and `pid`) is dead when one of these
 * holds, in this order:
 *
 * - `restarted`: a later runner run has the same address. Two live processes cannot listen on one
 *   address, so the earlier one is gone.
 * - `process-gone`: it ran on this host and its process no longer exists.
 * - `silent`: it started more than `deadAfter` ago, and its address has not refreshed its
 *   heartbeat in the engine's runners table (each lock refresh does) for `deadAfter`, or has no
 *   row there. This is the one rule that can be wrong: a runner cut from the store for longer
 *   than `deadAfter` looks dead. Such a runner lost its shards long before (`deadAfter` is far
 *   above the lock expiry), and once it reaches the store again it finds its own run recorded
 *   `crashed` and stops (`ownRunCrashed`): it never records into a run marked crashed for long.
 *
 * Pure: the sweep reads the runs and the heartbeats, this decides.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Ledger } from "@warden/ledger"
import { Deferred, Duration, Effect } from "effect"
import * as Os from "node:os"
import * as Storage from "../Storage.js"
import * as ItemStore from "./ItemStore.js"

type RunRecord = Ledger.RunRecord

/** One dead run and why. */
export interface DeadRun {
  readonly runId: string
  readonly address: string
  readonly why: "restarted" | "process-gone" | "silent"
}

/** A runner's address as its ledger run recorded it (`info.address`), or undefined for a run of another kind. */
export const addressOf = (run: RunRecord): string | undefined => {
  const info = run.info as { readonly address?: unknown } | null | undefined
  return typeof info === "object" && info !== null && typeof info.address === "string" ? info.address : undefined
}

/**
 * The dead runner runs among `runs` (the ledger's runs still `running`), never `self`.
 * `heartbeatAgeMs` is each address's heartbeat age as the database saw it (absent: no row);
 * `alive(pid)` says whether a process of this host runs.
 */
export const deadRuns = (options: {
  readonly runs: ReadonlyArray<RunRecord>
  readonly self: string
  readonly host: string
  readonly now: number
  readonly deadAfterMs: number
  readonly heartbeatAgeMs: ReadonlyMap<string, number>
  readonly alive: (pid: number) => boolean
}): ReadonlyArray<DeadRun> => {
  const runners = options.runs.flatMap((run) => {
    const address = addressOf(run)
    return address === undefined || run.status !== "running" ? [] : [{ run, address }]
  })
  const dead: Array<DeadRun> = []
  for (const { run, address } of runners) {
    if (run.runId === options.self) continue
    const restarted = runners.some(
      (other) => other.address === address && other.run.runId !== run.runId && other.run.startedAt > run.startedAt
    )
    if (restarted) {
      dead.push({ runId: run.runId, address, why: "restarted" })
      continue
    }
    if (run.host === options.host && run.pid !== undefined && !options.alive(run.pid)) {
      dead.push({ runId: run.runId, address, why: "process-gone" })
      continue
    }
    const age = options.heartbeatAgeMs.get(address)
    if (options.now - run.startedAt > options.deadAfterMs && (age === undefined || age > options.deadAfterMs))
      dead.push({ runId: run.runId, address, why: "silent" })
  }
  return dead
}

/**
 * Once: the dead runner runs recorded `crashed`, each with a warning naming why. Of a dead run's
 * cards still open in the ledger, those the fleet's table has open or `stranded` (or never got)
 * are recorded `stranded`; one the table has settled otherwise (the runner settled it there, then
 * died before its ledger writer wrote it) stays open in the ledger, which lost that settlement,
 * rather than be recorded as never answered. Returns a message instead when this runner's own run was recorded `crashed`
 * by another (it was cut from the store for longer than `deadAfter`): the runner should stop
 * rather than record into a run the record calls dead. A sweep that cannot read the store
 * changes nothing (the next one tries again).
 */
export const sweepOnce = (options: {
  readonly ledger: Ledger.LedgerShape
  readonly store: ItemStore.ItemStoreShape
  readonly self: string
  readonly deadAfter: Duration.Duration
}): Effect.Effect<
  | {
      readonly _tag: "Swept"
      readonly marked: ReadonlyArray<DeadRun & { readonly stranded: number; readonly settledInTable: number }>
    }
  | {
      readonly _tag: "OwnRunCrashed"
      readonly message: string
    },
  never,
  SqlClient.SqlClient
> =>
  Effect.gen(function* () {
    const runs = yield* options.ledger.runs("running")
    if (!runs.some((r) => r.runId === options.self)) {
      const crashed = yield* options.ledger.runs("crashed")
      if (crashed.some((r) => r.runId === options.self))
        return {
          _tag: "OwnRunCrashed" as const,
          message: `runner run ${options.self} was recorded crashed by another runner: this runner was away from the store for longer than deadAfter (${Duration.format(options.deadAfter)}); it stops, to be started again as a new run`
        }
    }
    const heartbeats = yield* Storage.runnerHeartbeats
    const dead = deadRuns({
      runs,
      self: options.self,
      host: Os.hostname(),
      now: Date.now(),
      deadAfterMs: Duration.toMillis(options.deadAfter),
      heartbeatAgeMs: new Map(heartbeats.map((h) => [h.address, h.ageSeconds * 1000])),
      alive: Ledger.processAlive
    })
    const marked: Array<DeadRun & { readonly stranded: number; readonly settledInTable: number }> = []
    for (const d of dead) {
      const open = yield* options.ledger.openCards(d.runId)
      const strand: Array<string> = []
      for (const card of open) {
        const row = yield* options.store.card(`${d.runId}:${card.cardId}`)
        if (row === undefined || row.outcome === null || row.outcome === "stranded") strand.push(card.cardId)
      }
      const stranded = yield* options.ledger.markStranded(d.runId, strand)
      const settledInTable = open.length - strand.length
      marked.push({ ...d, stranded, settledInTable })
      yield* Effect.logWarning(
        `runner ${d.address}: its ledger run ${d.runId} is recorded crashed (${d.why}); ${stranded} open card(s) recorded stranded${settledInTable > 0 ? `, ${settledInTable} left open (settled in the fleet's table; the ledger lost it)` : ""}`
      )
    }
    return { _tag: "Swept" as const, marked }
  }).pipe(
    Effect.catchAll((e) =>
      Effect.as(Effect.logDebug(`dead runner sweep: the store could not be read (${String(e)})`), {
        _tag: "Swept" as const,
        marked: []
      })
    )
  )

/**
 * `sweepOnce` now and then every `min(deadAfter / 4, 30 s)`, until this runner's own run is found
 * recorded `crashed`: then `crashed` is completed with why, and the sweep ends.
 */
export const sweep = (options: {
  readonly ledger: Ledger.LedgerShape
  readonly self: string
  readonly deadAfter: Duration.Duration
  readonly crashed: Deferred.Deferred<string>
}): Effect.Effect<void, never, SqlClient.SqlClient> => {
  const interval = Duration.min(Duration.unsafeDivide(options.deadAfter, 4), Duration.seconds(30))
  return Effect.flatMap(ItemStore.make, (store) => {
    const loop: Effect.Effect<void, never, SqlClient.SqlClient> = Effect.flatMap(
      sweepOnce({ ...options, store }),
      (outcome) =>
        outcome._tag === "OwnRunCrashed"
          ? Deferred.succeed(options.crashed, outcome.message)
          : Effect.zipRight(
              Effect.sleep(interval),
              Effect.suspend(() => loop)
            )
    )
    return Effect.asVoid(loop)
  })
}
