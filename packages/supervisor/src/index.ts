/**
 * `@warden/supervisor`: one `codex app-server` per slot, many work items (threads) on it, every
 * server request answered exactly once through `@warden/approvals`.
 *
 * - {@link Supervisor}: the service (`make`, `layer`; `run`, `start`, the inbox, events) for Effect programs.
 * - {@link createSupervisor} / {@link Facade}: the same supervisor behind Promises, for programs
 *   without Effect.
 * - {@link WorkItem}: what you submit and what you get back.
 * - {@link Config}: the supervisor's configuration, decoded once (`ConfigError`).
 * - {@link Errors}: the typed failures (`WorkItemFailed`, `ConnectionLost`, ...).
 * - {@link CodexCommand}: how the app-server child is launched.
 * - {@link Telemetry}: the `warden.*` metrics, span and attribute names, and the switch that turns
 *   them on (`@warden/observability` exports them over OTLP).
 * - {@link Worktree}: a git worktree per work item (`WorkItem.worktree`), its options and summary.
 * - {@link RunId}: run ids (`r` + start time + random), ordered by time, one format for every run.
 *
 * @packageDocumentation
 */
export * as CodexCommand from "./CodexCommand.js"
export * as Config from "./Config.js"
export * as Errors from "./Errors.js"
export * as Facade from "./Facade.js"
export { createSupervisor } from "./Facade.js"
export * as RunId from "./RunId.js"
export * as Supervisor from "./Supervisor.js"
export * as Telemetry from "./Telemetry.js"
export * as WorkItem from "./WorkItem.js"
export * as Worktree from "./Worktree.js"
