/**
 * The sharding timings the cluster tests give every node, runners and clients alike (`sharding`
 * of `Runner.layer` and `ClusterClient.layer`, or `--sharding key=value` flags): failover in
 * seconds, not the engine's 35 s. The cluster's tests, their runner fixture and the CLI's cluster
 * test use this one.
 */
export const shardingTimings = {
  shardLockExpiration: "10 seconds",
  shardLockRefreshInterval: "3 seconds",
  refreshAssignmentsInterval: "1 second",
  runnerHealthCheckInterval: "3 seconds",
  entityMessagePollInterval: "2 seconds",
  entityTerminationTimeout: "5 seconds"
} as const
