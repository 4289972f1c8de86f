/**
 * A runner's own view of how long it may still act for the items of a shard: its lease.
 *
 * The engine keeps a shard's lock alive by refreshing it (every `min(shardLockRefreshInterval,
 * shardLockExpiration / 3)`); with table locks (`shardLockDisableAdvisory`, and SQLite) another
 * runner may take a lock whose `acquired_at` is older than `shardLockExpiration`. A runner that
 * stops refreshing (its process paused, its event loop stalled, its database unreachable) learns
 * that it lost the shard only at its next refresh, which may come after the new owner started
 * the same items. So the runner keeps a deadline of its own: each shard is held until
 * `shardLockExpiration - margin` after the *start* of the last acquire or refresh that returned
 * it (the database stamps the lock later than that start, so the local deadline always comes
 * first). Past it, the runner's items on the shard stop and their cards are refused, before
 * anyone else can own the shard.
 *
 * Time is measured twice, on the monotonic clock (a wall clock set back must not extend a lease)
 * and on the wall clock (the monotonic one may stand still while the machine sleeps), and the
 * larger elapsed time counts.
 *
 * @internal
 */
import { RunnerStorage } from "@effect/cluster"
import type { ShardId } from "@effect/cluster"
import { Context, Duration, Effect } from "effect"

/** What the entity's handlers ask of the lease. */
export interface ShardLeaseShape {
  /** Whether this runner may still act for the items of `shard` (its last confirmation is recent enough). */
  readonly holds: (shard: ShardId.ShardId) => boolean
  /** Milliseconds until `holds(shard)` turns false (0 when it is false, `Infinity` when it never does). */
  readonly remaining: (shard: ShardId.ShardId) => number
}

/** Without a lease (an in-memory runner, `TestRunner`): every shard is held, always. */
const unbounded: ShardLeaseShape = { holds: () => true, remaining: () => Number.POSITIVE_INFINITY }

/**
 * The lease of the runner's shards. A runner built by `Runner.layer` provides one fed by its
 * lock storage (`leasedStorage`); elsewhere the default holds every shard forever.
 */
export class ShardLease extends Context.Reference<ShardLease>()("@warden/cluster/ShardLease", {
  defaultValue: (): ShardLeaseShape => unbounded
}) {}

/** A lease that the runner's lock storage renews, and the handlers read. */
export interface LeaseBook extends ShardLeaseShape {
  /** `shards` were returned by an acquire or refresh that started at `at`. */
  readonly confirm: (shards: Iterable<ShardId.ShardId>, at: Instant) => void
  /** `shards` are no longer held (asked for in a refresh that did not return them, or released). */
  readonly drop: (shards: Iterable<ShardId.ShardId>) => void
  readonly dropAll: () => void
  /** How long a confirmation lasts: `shardLockExpiration - margin`. */
  readonly validFor: Duration.Duration
}

/** A moment on both clocks. */
export interface Instant {
  readonly mono: number
  readonly wall: number
}

export const now = (): Instant => ({ mono: performance.now(), wall: Date.now() })

const elapsedSince = (at: Instant, current: Instant) => Math.max(current.mono - at.mono, current.wall - at.wall)

/**
 * A lease book: each shard held for `expiration - margin` after the start of the last lock
 * operation that returned it. `margin` must be positive and below `expiration` (the caller
 * checks; see `Runner.layer`).
 */
export const makeBook = (options: {
  readonly expiration: Duration.DurationInput
  readonly margin: Duration.DurationInput
}): LeaseBook => {
  const validFor = Duration.subtract(Duration.decode(options.expiration), Duration.decode(options.margin))
  const validMs = Duration.toMillis(validFor)
  const confirmed = new Map<string, Instant>()
  const remaining = (shard: ShardId.ShardId) => {
    const at = confirmed.get(shard.toString())
    if (at === undefined) return 0
    return Math.max(0, validMs - elapsedSince(at, now()))
  }
  return {
    validFor,
    holds: (shard) => remaining(shard) > 0,
    remaining,
    confirm: (shards, at) => {
      for (const shard of shards) {
        const key = shard.toString()
        const before = confirmed.get(key)
        // Confirmations can only move a deadline later: a slow refresh that started earlier than
        // the last one must not shorten what the last one granted.
        if (before === undefined || elapsedSince(before, at) > 0) confirmed.set(key, at)
      }
    },
    drop: (shards) => {
      for (const shard of shards) confirmed.delete(shard.toString())
    },
    dropAll: () => confirmed.clear()
  }
}

/**
 * The engine's lock storage, with every lock operation reported to `book`: a shard an acquire or
 * refresh returns is confirmed as of the operation's start; a shard asked for in a refresh that
 * did not return it, or released, is dropped at once (before the release is sent). A failed or
 * timed-out operation confirms nothing, so the lease runs out by itself.
 */
export const leasedStorage = (
  storage: RunnerStorage.RunnerStorage["Type"],
  book: LeaseBook
): RunnerStorage.RunnerStorage["Type"] =>
  RunnerStorage.RunnerStorage.of({
    ...storage,
    acquire: (address, shardIds) =>
      Effect.suspend(() => {
        const at = now()
        return Effect.tap(storage.acquire(address, shardIds), (acquired) =>
          Effect.sync(() => book.confirm(acquired, at))
        )
      }),
    refresh: (address, shardIds) =>
      Effect.suspend(() => {
        const at = now()
        const asked = Array.from(shardIds)
        return Effect.tap(storage.refresh(address, asked), (held) =>
          Effect.sync(() => {
            const kept = new Set(held.map((shard) => shard.toString()))
            book.drop(asked.filter((shard) => !kept.has(shard.toString())))
            book.confirm(held, at)
          })
        )
      }),
    release: (address, shardId) =>
      Effect.suspend(() => {
        book.drop([shardId])
        return storage.release(address, shardId)
      }),
    releaseAll: (address) =>
      Effect.suspend(() => {
        book.dropAll()
        return storage.releaseAll(address)
      })
  })
