/** The sharding timings the cluster tests give every node (runners and clients alike): failover in seconds, not the engine's 35 s. */
export const tuning = {
  shardLockExpiration: "10 seconds",
  shardLockRefreshInterval: "3 seconds",
  refreshAssignmentsInterval: "1 second",
  runnerHealthCheckInterval: "3 seconds",
  entityMessagePollInterval: "2 seconds",
  entityTerminationTimeout: "5 seconds"
} as const
