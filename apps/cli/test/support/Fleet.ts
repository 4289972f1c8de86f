/**
 * What the CLI's fleet tests (`warden runner`, `warden submit` on PostgreSQL) share: the test
 * sharding timings as `--sharding` flags, the shard count a runner last reported, and a bounded
 * wait on state spread over several processes' output.
 */
import { shardingTimings } from "@warden/test-support/ShardingTimings"
import { type Duration, Effect, Schedule } from "effect"
import type * as CliProcess from "./CliProcess.js"

/** `--sharding KEY=VALUE` for each of the tests' sharding timings (runners and submitters must agree). */
export const shardingFlags: ReadonlyArray<string> = Object.entries(shardingTimings).flatMap(([key, value]) => [
  "--sharding",
  `${key}=${value}`
])

/** The number of shards `cli` (a `warden runner`) last said it holds (`runner.shards` lines), 0 before any. */
export const lastShards = (cli: CliProcess.Cli): number => {
  const lines = cli.json().filter((l) => l.type === "runner.shards")
  return lines.length === 0 ? 0 : Number(lines[lines.length - 1]!.count)
}

/**
 * Bounded wait on state spread over several processes' output (no single event to wait on):
 * `condition` polled every 250 ms; past `timeout`, fails naming `what`, with `context()` after it.
 */
export const until = (
  what: string,
  condition: () => boolean,
  timeout: Duration.DurationInput = "180 seconds",
  context: () => string = () => ""
) =>
  Effect.suspend(() => (condition() ? Effect.void : Effect.fail(what))).pipe(
    Effect.retry(Schedule.spaced("250 millis")),
    Effect.timeoutFail({ duration: timeout, onTimeout: () => new Error(`timed out waiting for ${what}\n${context()}`) })
  )
