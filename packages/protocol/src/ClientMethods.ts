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
import { Data, Effect, ParseResult, Schema } from "effect"
import * as OpenEnum from "./OpenEnum.js"
import { Thread } from "./Thread.js"
import { TurnStatus } from "./Turn.js"

// ---------------------------------------------------------------------------------------------
// Shared shapes

export const ClientInfo = Schema.Struct({
  /** Must be a valid HTTP header value. */
  name: Schema.String,
  title: Schema.optional(Schema.String),
  version: Schema.String
})

export const InitializeCapabilities = Schema.Struct({
  /** Needed for `dynamicTools` and other experimental methods/fields. */
  experimentalApi: Schema.optional(Schema.Boolean),
  /** Opt into `attestation/generate` requests. */
  requestAttestation: Schema.optional(Schema.Boolean),
  /** Exact notification methods the server should not send on this connection. */
  optOutNotificationMethods: Schema.optional(Schema.Array(Schema.String))
})

/** `untrusted` is accepted here although it is a fatal error in config.toml (0.171.0). */
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

export const SandboxPolicyTypes = ["dangerFullAccess", "readOnly", "externalSandbox", "workspaceWrite"] as const

/** The sandbox the server reports as effective (shown, and worth comparing with what was asked). */
export const EffectiveSandbox = Schema.Struct({
  type: OpenEnum.make(...SandboxPolicyTypes),
  writableRoots: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  networkAccess: Schema.optionalWith(Schema.Unknown, { default: () => null })
})

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

const nullable = <A, I>(schema: Schema.Schema<A, I>) => Schema.optionalWith(Schema.NullOr(schema), { default: () => null })

// ---------------------------------------------------------------------------------------------
// initialize

export const InitializeParams = Schema.Struct({
  clientInfo: ClientInfo,
  capabilities: Schema.optional(InitializeCapabilities)
})
/** `platformFamily`/`platformOs` are sent by 0.171.0 but only shown: their absence is tolerated. */
export const InitializeResult = Schema.Struct({
  userAgent: Schema.String,
  codexHome: Schema.String,
  platformFamily: Schema.optional(Schema.String),
  platformOs: Schema.optional(Schema.String)
})

// ---------------------------------------------------------------------------------------------
// thread/start, thread/resume

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

/** thread/start and thread/resume answer alike; only `thread.id` is required. */
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

/** Overrides given here become the thread's defaults for later turns. */
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
  collaborationMode: Schema.optional(Schema.Struct({
    mode: Schema.Literal("plan", "default"),
    settings: Schema.Struct({
      model: Schema.String,
      developer_instructions: Schema.optional(Schema.NullOr(Schema.String)),
      reasoning_effort: Schema.optional(Schema.NullOr(Schema.String))
    })
  }))
})

/** Resolves when the turn is accepted (status `inProgress`), not when it finishes. */
export const TurnStartResult = Schema.Struct({
  turn: Schema.Struct({ id: Schema.NonEmptyString, status: TurnStatus })
})

/** A wrong `expectedTurnId` is refused with -32600. */
export const TurnSteerParams = Schema.Struct({
  threadId: Schema.String,
  expectedTurnId: Schema.String,
  input: Schema.Array(UserInput)
})
export const TurnSteerResult = Schema.Struct({ turnId: Schema.NonEmptyString })

/** Answered `{}`; the turn then completes with status `interrupted`. */
export const TurnInterruptParams = Schema.Struct({ threadId: Schema.String, turnId: Schema.String })
export const TurnInterruptResult = Schema.Struct({})

// ---------------------------------------------------------------------------------------------
// The table

export const ClientMethods = {
  "initialize": { params: InitializeParams, result: InitializeResult },
  "thread/start": { params: ThreadStartParams, result: ThreadResult },
  "thread/resume": { params: ThreadResumeParams, result: ThreadResult },
  "turn/start": { params: TurnStartParams, result: TurnStartResult },
  "turn/steer": { params: TurnSteerParams, result: TurnSteerResult },
  "turn/interrupt": { params: TurnInterruptParams, result: TurnInterruptResult }
} as const

type Table = typeof ClientMethods
export type ClientMethod = keyof Table
export const ClientMethodNames = Object.keys(ClientMethods) as ReadonlyArray<ClientMethod>

export type ParamsOf<M extends ClientMethod> = Schema.Schema.Type<Table[M]["params"]>
export type ResultOf<M extends ClientMethod> = Schema.Schema.Type<Table[M]["result"]>

/** The client notification sent once after the initialize response. */
export const InitializedNotification = "initialized" as const

/** codex answered with a result this supervisor cannot read: never guess, fail the request. */
export class ClientResultInvalid extends Data.TaggedError("ClientResultInvalid")<{
  readonly method: string
  readonly result: unknown
  readonly cause: ParseResult.ParseError
  readonly message: string
}> {}

/** Params that do not match the schema are never sent. */
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

export const encodeParams = <M extends ClientMethod>(
  method: M,
  params: ParamsOf<M>
): Effect.Effect<unknown, ClientParamsInvalid> =>
  Schema.encode(paramsSchema(method), { errors: "all" })(params).pipe(
    Effect.mapError((cause) =>
      new ClientParamsInvalid({
        method,
        cause,
        message: `refusing to send ${method}: its params do not match the protocol: ${describe(cause)}`
      })
    )
  )

export const decodeResult = <M extends ClientMethod>(
  method: M,
  result: unknown
): Effect.Effect<ResultOf<M>, ClientResultInvalid> =>
  Schema.decodeUnknown(resultSchema(method), { errors: "all" })(result).pipe(
    Effect.map((decoded) => decoded as ResultOf<M>),
    Effect.mapError((cause) =>
      new ClientResultInvalid({
        method,
        result,
        cause,
        message: `codex answered ${method} with a result this supervisor cannot read (protocol drift?): ${describe(cause)}`
      })
    )
  )

/**
 * Wrap an untyped sender (e.g. the transport's `request(method, params)`) into a typed one:
 * params are encoded, the raw result is decoded into `ResultOf<M>`.
 */
export const typed = <E, R>(send: (method: string, params: unknown) => Effect.Effect<unknown, E, R>) =>
<M extends ClientMethod>(
  method: M,
  params: ParamsOf<M>
): Effect.Effect<ResultOf<M>, E | ClientParamsInvalid | ClientResultInvalid, R> =>
  encodeParams(method, params).pipe(
    Effect.flatMap((encoded) => send(method, encoded)),
    Effect.flatMap((raw) => decodeResult(method, raw))
  )
