/**
 * A thread as the server describes it (in `thread/start`, `thread/resume` results and the
 * `thread/started` notification) and its status.
 *
 * The id is the one thing a supervisor routes by, so it is strict: `thread.id` must be a non-empty
 * string or decoding fails (never guessed from `threadId` or elsewhere). The rest is informational:
 * missing fields become `null`, unknown fields are ignored.
 */
import { Schema } from "effect"
import * as OpenEnum from "./OpenEnum.js"

/**
 * The flags an active thread may carry in 0.171.0, what it is waiting on the client for.
 */
export const ThreadActiveFlags = ["waitingOnApproval", "waitingOnUserInput"] as const
/** One of the `ThreadActiveFlags`, or `"unknown"` for a flag added since. */
export type ThreadActiveFlag = OpenEnum.Open<(typeof ThreadActiveFlags)[number]>

/** The wire `status.type` values of 0.171.0. */
export const ThreadStatusTypes = ["idle", "active", "systemError", "notLoaded"] as const

/**
 * A thread's status as Warden holds it, tagged `Idle`, `Active`, `SystemError`, `NotLoaded` or `Unknown`.
 *
 * `Active` carries its flags; `Unknown` keeps a wire `type` this build does not know. This is the
 * decoded shape: read the wire with `ThreadStatusFromWire`.
 */
export const ThreadStatus = Schema.Union(
  Schema.TaggedStruct("Idle", {}),
  Schema.TaggedStruct("Active", { activeFlags: Schema.Array(Schema.Literal(...ThreadActiveFlags, "unknown")) }),
  Schema.TaggedStruct("SystemError", {}),
  Schema.TaggedStruct("NotLoaded", {}),
  Schema.TaggedStruct("Unknown", { type: Schema.String })
)
export type ThreadStatus = Schema.Schema.Type<typeof ThreadStatus>

const ThreadStatusWire = Schema.Struct({
  type: Schema.String,
  activeFlags: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] })
})

/**
 * The schema from a wire thread status to a `ThreadStatus`.
 *
 * `{type:"active", activeFlags:[...]}` on the wire, `{_tag:"Active", activeFlags}` decoded; an
 * unknown flag becomes `"unknown"`, an unknown `type` the `Unknown` status.
 */
export const ThreadStatusFromWire = Schema.transform(ThreadStatusWire, ThreadStatus, {
  strict: true,
  decode: (wire): ThreadStatus => {
    switch (wire.type) {
      case "idle":
        return { _tag: "Idle" }
      case "active":
        return { _tag: "Active", activeFlags: wire.activeFlags.map((flag) => OpenEnum.of(ThreadActiveFlags, flag)) }
      case "systemError":
        return { _tag: "SystemError" }
      case "notLoaded":
        return { _tag: "NotLoaded" }
      default:
        return { _tag: "Unknown", type: wire.type }
    }
  },
  encode: (status) => {
    switch (status._tag) {
      case "Idle":
        return { type: "idle", activeFlags: [] }
      case "Active":
        return { type: "active", activeFlags: status.activeFlags }
      case "SystemError":
        return { type: "systemError", activeFlags: [] }
      case "NotLoaded":
        return { type: "notLoaded", activeFlags: [] }
      case "Unknown":
        return { type: status.type, activeFlags: [] }
    }
  }
})

const nullable = <A, I>(schema: Schema.Schema<A, I>) =>
  Schema.optionalWith(Schema.NullOr(schema), { default: () => null })

/**
 * A thread as the server describes it, with a strict id and everything else informational.
 *
 * See the module comment; `parentThreadId` marks a thread codex spawned for a sub-agent.
 */
export const Thread = Schema.Struct({
  id: Schema.NonEmptyString,
  cwd: nullable(Schema.String),
  path: nullable(Schema.String),
  ephemeral: nullable(Schema.Boolean),
  model: nullable(Schema.String),
  modelProvider: nullable(Schema.String),
  cliVersion: nullable(Schema.String),
  /** Set on a thread codex spawned for a sub-agent: its events arrive under this thread's own id. */
  parentThreadId: nullable(Schema.String),
  status: nullable(ThreadStatusFromWire)
})
export type Thread = Schema.Schema.Type<typeof Thread>
