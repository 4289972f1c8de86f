/**
 * The client requests the supervisor sends, with Effect Schemas for their params and results, and
 * a typed table so `request("thread/start", params)` yields the decoded result type.
 *
 * Results decode leniently where the server only adds keys (unknown keys are ignored, shown-only
 * enums tolerate new values) and strictly where a wrong guess would be silent: the thread id is
 * read from `result.thread.id` only (never `result.threadId`), the turn id from `result.turn.id`,
 * the steer's from `result.turnId`; each must be a non-empty string.
 *
 * Params are encoded through the same schemas, so only the keys typed here are sent.
 */
import { Data, Effect, Either, ParseResult, Schema } from "effect"
import * as OpenEnum from "./OpenEnum.js"
import { Thread } from "./Thread.js"
import { TurnStatus } from "./Turn.js"

// ---------------------------------------------------------------------------------------------
// Shared shapes

/**
 * Who the client is, sent as `clientInfo` in `initialize`.
 *
 * `name` must be a valid HTTP header value; `title` is optional.
 */
export const ClientInfo = Schema.Struct({
  /** Must be a valid HTTP header value. */
  name: Schema.String,
  title: Schema.optional(Schema.String),
  version: Schema.String
})

/**
 * The capabilities a client asks for in `initialize`, all optional.
 */
export const InitializeCapabilities = Schema.Struct({
  /** Needed for `dynamicTools` and other experimental methods/fields. */
  experimentalApi: Schema.optional(Schema.Boolean),
  /** Opt into `attestation/generate` requests. */
  requestAttestation: Schema.optional(Schema.Boolean),
  /** Exact notification methods the server should not send on this connection. */
  optOutNotificationMethods: Schema.optional(Schema.Array(Schema.String))
})

/**
 * When codex asks before acting, as `thread/start`, `thread/resume` and `turn/start` take it.
 *
 * `"untrusted"`, `"on-request"`, `"never"`, or a `granular` choice per kind of request.
 * `untrusted` is accepted here although it is a fatal error in config.toml (0.171.0).
 */
export const ApprovalPolicy = Schema.Union(
  Schema.Literal("untrusted", "on-request", "never"),
  Schema.Struct({
    granular: Schema.Struct({
      sandbox_approval: Schema.Boolean,
      rules: Schema.Boolean,
      mcp_elicitations: Schema.Boolean,
      request_permissions: Schema.optional(Schema.Boolean),
      skill_approval: Schema.optional(Schema.Boolean)
    })
  })
)
export type ApprovalPolicy = Schema.Schema.Type<typeof ApprovalPolicy>

/** The thread-level sandbox mode (thread/start, thread/resume). */
export const SandboxMode = Schema.Literal("read-only", "workspace-write", "danger-full-access")
export type SandboxMode = Schema.Schema.Type<typeof SandboxMode>

/** The turn-level sandbox policy override (turn/start `sandboxPolicy`). */
export const SandboxPolicy = Schema.Union(
  Schema.Struct({ type: Schema.Literal("dangerFullAccess") }),
  Schema.Struct({ type: Schema.Literal("readOnly"), networkAccess: Schema.optional(Schema.Boolean) }),
  Schema.Struct({
    type: Schema.Literal("workspaceWrite"),
    writableRoots: Schema.optional(Schema.Array(Schema.String)),
    networkAccess: Schema.optional(Schema.Boolean),
    excludeTmpdirEnvVar: Schema.optional(Schema.Boolean),
    excludeSlashTmp: Schema.optional(Schema.Boolean)
  })
)
export type SandboxPolicy = Schema.Schema.Type<typeof SandboxPolicy>

/**
 * The sandbox policy `type` values of 0.171.0, as `EffectiveSandbox` reads them.
 *
 * `externalSandbox` may be reported but cannot be asked for with `SandboxPolicy`; any other value
 * decodes as `"unknown"`.
 */
export const SandboxPolicyTypes = ["dangerFullAccess", "readOnly", "externalSandbox", "workspaceWrite"] as const

/** The sandbox the server reports as effective (shown, and worth comparing with what was asked). */
export const EffectiveSandbox = Schema.Struct({
  type: OpenEnum.make(...SandboxPolicyTypes),
  writableRoots: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  networkAccess: Schema.optionalWith(Schema.Unknown, { default: () => null })
})

/**
 * One piece of input to a turn, a text, an image URL or a local image path.
 *
 * @example
 * ```ts
 * import type { ClientMethods } from "@warden/protocol"
 *
 * const input: ReadonlyArray<ClientMethods.UserInput> = [{ type: "text", text: "Run the tests" }]
 * ```
 */
export const UserInput = Schema.Union(
  Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }),
  Schema.Struct({ type: Schema.Literal("image"), url: Schema.String }),
  Schema.Struct({ type: Schema.Literal("localImage"), path: Schema.String })
)
export type UserInput = Schema.Schema.Type<typeof UserInput>

/** A dynamic tool (`item/tool/call` server requests); needs `experimentalApi`. */
export const DynamicToolSpec = Schema.Struct({
  type: Schema.Literal("function"),
  name: Schema.String,
  description: Schema.String,
  inputSchema: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  deferLoading: Schema.optional(Schema.Boolean)
})

/** Config overrides, dotted keys as in `-c` (e.g. `"sandbox_workspace_write.writable_roots"`). */
const Config = Schema.Record({ key: Schema.String, value: Schema.Unknown })

const nullable = <A, I>(schema: Schema.Schema<A, I>) =>
  Schema.optionalWith(Schema.NullOr(schema), { default: () => null })

// ---------------------------------------------------------------------------------------------
// initialize

/**
 * The params of `initialize`, the first request on a connection.
 *
 * Any other request before it is refused with -32600 "Not initialized", a second one with -32600
 * "Already initialized". After its response the client sends the `initialized` notification.
 */
export const InitializeParams = Schema.Struct({
  clientInfo: ClientInfo,
  capabilities: Schema.optional(InitializeCapabilities)
})
/**
 * The result of `initialize`, the server's user agent and its `CODEX_HOME`.
 *
 * `platformFamily`/`platformOs` are sent by 0.171.0 but only shown: their absence is tolerated.
 */
export const InitializeResult = Schema.Struct({
  userAgent: Schema.String,
  codexHome: Schema.String,
  platformFamily: Schema.optional(Schema.String),
  platformOs: Schema.optional(Schema.String)
})

// ---------------------------------------------------------------------------------------------
// thread/start, thread/resume

/**
 * The params of `thread/start`, all optional, so `{}` starts a thread with the server's defaults.
 *
 * `config` takes overrides with dotted keys, as `-c` does. The thread id is in the result's
 * `thread.id`; `thread/started` may arrive after the response.
 */
export const ThreadStartParams = Schema.Struct({
  cwd: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  modelProvider: Schema.optional(Schema.String),
  approvalPolicy: Schema.optional(ApprovalPolicy),
  sandbox: Schema.optional(SandboxMode),
  config: Schema.optional(Config),
  /** false (the default) keeps a rollout so `thread/resume` works later, also after a restart. */
  ephemeral: Schema.optional(Schema.Boolean),
  baseInstructions: Schema.optional(Schema.String),
  developerInstructions: Schema.optional(Schema.String),
  /** Experimental: needs `capabilities.experimentalApi` on initialize. */
  dynamicTools: Schema.optional(Schema.Array(DynamicToolSpec))
})

/**
 * The params of `thread/resume`, re-attaching a thread from its rollout.
 *
 * It works for a thread started with `ephemeral` false, also after an app-server restart with the
 * same `CODEX_HOME`, and replays the thread's pending approval and input requests with their
 * original ids. A refused resume never became a thread.
 */
export const ThreadResumeParams = Schema.Struct({
  threadId: Schema.String,
  cwd: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  modelProvider: Schema.optional(Schema.String),
  approvalPolicy: Schema.optional(ApprovalPolicy),
  sandbox: Schema.optional(SandboxMode),
  config: Schema.optional(Config),
  baseInstructions: Schema.optional(Schema.String),
  developerInstructions: Schema.optional(Schema.String),
  /** true skips the deprecated full-history hydration (which also sends a `deprecationNotice`). */
  excludeTurns: Schema.optional(Schema.Boolean)
})

/**
 * The result of `thread/start` and `thread/resume`, which answer alike.
 *
 * Only `thread.id` is required (a non-empty string, read from `result.thread.id` only); the other
 * fields become `null` when absent.
 */
export const ThreadResult = Schema.Struct({
  thread: Thread,
  model: nullable(Schema.String),
  modelProvider: nullable(Schema.String),
  cwd: nullable(Schema.String),
  approvalPolicy: nullable(Schema.Union(Schema.String, Schema.Record({ key: Schema.String, value: Schema.Unknown }))),
  sandbox: nullable(EffectiveSandbox)
})
export type ThreadResult = Schema.Schema.Type<typeof ThreadResult>

// ---------------------------------------------------------------------------------------------
// turn/start, turn/steer, turn/interrupt

/**
 * The params of `turn/start`, the input of a new turn and the overrides it runs with.
 *
 * Overrides given here become the thread's defaults for later turns. A `turn/start` while a turn is
 * active is folded into that turn.
 */
export const TurnStartParams = Schema.Struct({
  threadId: Schema.String,
  input: Schema.Array(UserInput),
  cwd: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  effort: Schema.optional(Schema.String),
  summary: Schema.optional(Schema.Literal("auto", "concise", "detailed", "none")),
  approvalPolicy: Schema.optional(ApprovalPolicy),
  sandboxPolicy: Schema.optional(SandboxPolicy),
  /** A JSON Schema the final answer must follow. */
  outputSchema: Schema.optional(Schema.Unknown),
  /**
   * Experimental (needs `experimentalApi`): `plan` makes request_user_input questions blocking.
   * `developer_instructions: null` means the mode's built-in instructions.
   */
  collaborationMode: Schema.optional(
    Schema.Struct({
      mode: Schema.Literal("plan", "default"),
      settings: Schema.Struct({
        model: Schema.String,
        developer_instructions: Schema.optional(Schema.NullOr(Schema.String)),
        reasoning_effort: Schema.optional(Schema.NullOr(Schema.String))
      })
    })
  )
})

/**
 * The result of `turn/start`, the new turn's id and status.
 *
 * It arrives when the turn is accepted (status `inProgress`), not when it finishes: the end is the
 * `turn/completed` notification.
 */
export const TurnStartResult = Schema.Struct({
  turn: Schema.Struct({ id: Schema.NonEmptyString, status: TurnStatus })
})

/**
 * The params of `turn/steer`, more input for the turn that is running.
 *
 * A wrong `expectedTurnId` is refused with -32600.
 */
export const TurnSteerParams = Schema.Struct({
  threadId: Schema.String,
  expectedTurnId: Schema.String,
  input: Schema.Array(UserInput)
})
/** The result of `turn/steer`, the id of the turn the input went to. */
export const TurnSteerResult = Schema.Struct({ turnId: Schema.NonEmptyString })

/**
 * The params of `turn/interrupt`, the turn to stop.
 *
 * Answered `{}`; the turn then completes with status `interrupted`.
 */
export const TurnInterruptParams = Schema.Struct({ threadId: Schema.String, turnId: Schema.String })
/** The result of `turn/interrupt`, an empty object. */
export const TurnInterruptResult = Schema.Struct({})

// ---------------------------------------------------------------------------------------------
// thread/unsubscribe

/**
 * The params of `thread/unsubscribe`: this connection no longer wants the thread's events.
 *
 * The thread stays loaded (and codex keeps its writer lock, so no other app-server process on the
 * same codex home can resume it) until it has had no subscriber and no activity for the thread's
 * `thread_unload_delay_secs` (default 30 minutes); then codex unloads it, releases the lock and
 * sends `thread/closed`. Measured on 0.171.0: unsubscribing alone, or a turn still running, keeps
 * the lock.
 */
export const ThreadUnsubscribeParams = Schema.Struct({ threadId: Schema.String })
/** The result of `thread/unsubscribe`: `unsubscribed`, `notSubscribed` or `notLoaded` (shown only). */
export const ThreadUnsubscribeResult = Schema.Struct({ status: Schema.String })

// ---------------------------------------------------------------------------------------------
// The table

/**
 * The client methods Warden sends, each with its params and result schema.
 *
 * `initialize`, `thread/start`, `thread/resume`, `thread/unsubscribe`, `turn/start`, `turn/steer`
 * and `turn/interrupt`; `ParamsOf` and `ResultOf` give their types, `typed` a sender that uses them.
 */
export const ClientMethods = {
  initialize: { params: InitializeParams, result: InitializeResult },
  "thread/start": { params: ThreadStartParams, result: ThreadResult },
  "thread/resume": { params: ThreadResumeParams, result: ThreadResult },
  "thread/unsubscribe": { params: ThreadUnsubscribeParams, result: ThreadUnsubscribeResult },
  "turn/start": { params: TurnStartParams, result: TurnStartResult },
  "turn/steer": { params: TurnSteerParams, result: TurnSteerResult },
  "turn/interrupt": { params: TurnInterruptParams, result: TurnInterruptResult }
} as const

type Table = typeof ClientMethods
/** The name of a method in `ClientMethods`. */
export type ClientMethod = keyof Table
/** The names of the `ClientMethods`, as a list. */
export const ClientMethodNames = Object.keys(ClientMethods) as ReadonlyArray<ClientMethod>

/** The params type of a client method, as its schema's `Type`. */
export type ParamsOf<M extends ClientMethod> = Schema.Schema.Type<Table[M]["params"]>
/** The decoded result type of a client method. */
export type ResultOf<M extends ClientMethod> = Schema.Schema.Type<Table[M]["result"]>

/** The client notification sent once after the initialize response. */
export const InitializedNotification = "initialized" as const

/**
 * The error when codex answers a client request with a result that does not decode.
 *
 * Warden never guesses (a thread id from elsewhere, say): the request fails. It keeps the `method`,
 * the raw `result` and the `cause`; `message` tells what did not match (protocol drift?).
 */
export class ClientResultInvalid extends Data.TaggedError("ClientResultInvalid")<{
  readonly method: string
  readonly result: unknown
  readonly cause: ParseResult.ParseError
  readonly message: string
}> {}

/**
 * The error when a client request's params do not match its schema, so nothing was sent.
 */
export class ClientParamsInvalid extends Data.TaggedError("ClientParamsInvalid")<{
  readonly method: string
  readonly cause: ParseResult.ParseError
  readonly message: string
}> {}

const describe = (error: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(error)

// The table's entries differ per method; these views erase that for the generic helpers below.
const paramsSchema = (method: ClientMethod) =>
  ClientMethods[method].params as unknown as Schema.Schema<unknown, unknown>
const resultSchema = (method: ClientMethod) =>
  ClientMethods[method].result as unknown as Schema.Schema<unknown, unknown>

/**
 * Encodes a client method's params through its schema, for the wire.
 *
 * Only the keys the schema types are kept. Fails with `ClientParamsInvalid` when the params do
 * not match the schema.
 */
export const encodeParams = <M extends ClientMethod>(
  method: M,
  params: ParamsOf<M>
): Effect.Effect<unknown, ClientParamsInvalid> =>
  Schema.encode(paramsSchema(method), { errors: "all" })(params).pipe(
    Effect.mapError(
      (cause) =>
        new ClientParamsInvalid({
          method,
          cause,
          message: `refusing to send ${method}: its params do not match the protocol: ${describe(cause)}`
        })
    )
  )

/**
 * Decodes a client method's raw result into its typed result.
 *
 * Unknown keys are ignored and shown-only enums tolerate new values, but the ids are strict. Fails
 * with `ClientResultInvalid` when the result does not match.
 */
export const decodeResult = <M extends ClientMethod>(
  method: M,
  result: unknown
): Effect.Effect<ResultOf<M>, ClientResultInvalid> =>
  Either.match(Schema.decodeUnknownEither(resultSchema(method), { errors: "all" })(result), {
    onRight: (decoded) => Effect.succeed(decoded as ResultOf<M>),
    onLeft: (cause) =>
      Effect.fail(
        new ClientResultInvalid({
          method,
          result,
          cause,
          message: `codex answered ${method} with a result this supervisor cannot read (protocol drift?): ${describe(cause)}`
        })
      )
  })

/**
 * Wraps an untyped request sender into a typed one that encodes the params and decodes the result.
 *
 * The sender takes a method and encoded params and yields the raw `result` (sending the frame and
 * matching the response by id is its business). The typed sender fails with the sender's own
 * errors, `ClientParamsInvalid` (nothing sent) or `ClientResultInvalid`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ClientMethods } from "@warden/protocol"
 *
 * declare const send: (method: string, params: unknown) => Effect.Effect<unknown, Error>
 * const request = ClientMethods.typed(send)
 *
 * const program = Effect.gen(function*() {
 *   const { thread } = yield* request("thread/start", { cwd: "/repo", approvalPolicy: "on-request" })
 *   const { turn } = yield* request("turn/start", { threadId: thread.id, input: [{ type: "text", text: "Run the tests" }] })
 *   return turn.id
 * })
 * ```
 */
export const typed =
  <E, R>(send: (method: string, params: unknown) => Effect.Effect<unknown, E, R>) =>
  <M extends ClientMethod>(
    method: M,
    params: ParamsOf<M>
  ): Effect.Effect<ResultOf<M>, E | ClientParamsInvalid | ClientResultInvalid, R> =>
    encodeParams(method, params).pipe(
      Effect.flatMap((encoded) => send(method, encoded)),
      Effect.flatMap((raw) => decodeResult(method, raw))
    )
