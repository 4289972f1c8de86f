/**
 * The protocol schema a codex binary describes itself with, loaded, indexed and made a validator.
 *
 * It comes from `codex app-server generate-json-schema --out DIR` (offline, ~0.1 s). The index
 * holds the methods each direction knows and where each server request's response schema lives;
 * `makeValidator` checks answers and results against it with ajv. It is a separate entry point,
 * `@warden/protocol/SchemaDump` (it uses `node:child_process`, the file system and ajv).
 *
 * Layout of the dump (measured on 0.171.0):
 * - `DIR/codex_app_server_protocol.schemas.json`: ONE draft-07 bundle with everything. Its
 *   `definitions` hold the v1/legacy and envelope types (`ClientRequest`, `ServerRequest`,
 *   `ServerNotification`, `ClientNotification`, `InitializeParams`, and the ten server requests'
 *   `XxxParams` / `XxxResponse`, e.g. `CommandExecutionRequestApprovalResponse`) and, nested under
 *   `definitions.v2`, ~700 v2 types (`ThreadStartResponse`, `TurnError`, `ThreadItem`...). Refs are
 *   `#/definitions/Name` or `#/definitions/v2/Name`; nested definitions repeat `$schema`.
 * - `DIR/codex_app_server_protocol.v2.schemas.json` (v2 only), `DIR/<Type>.json` (one
 *   self-contained file per top-level type), `DIR/v1/*.json`, `DIR/v2/*.json`: the same types again.
 * - An envelope is `{oneOf: [{properties: {method: {enum: [m]}, params: {$ref}}, ...}]}`. Nothing
 *   maps a request to its response: the response is named after the params (`XxxParams` ->
 *   `XxxResponse`, next to it). All ten server requests follow this; a few client methods take no
 *   params or break the pattern (their `responseRef` is null).
 * - `--experimental` adds experimental methods and fields (110 -> 189 client methods in 0.171.0).
 */
import { execFile } from "node:child_process"
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Ajv, type ValidateFunction } from "ajv"
import { Data, Effect, Either } from "effect"
import * as Json from "./Json.js"

/** A JSON Schema node of the dump, or any JSON object read from it. */
export type JsonSchema = { readonly [key: string]: unknown }

/** The file of a dump directory that holds every definition in one draft-07 bundle. */
export const BundleFile = "codex_app_server_protocol.schemas.json"

/**
 * The error when a schema dump cannot be generated, read or indexed, with a `reason`.
 *
 * - `GenerateFailed`: the binary failed, timed out (60 s), or the temporary directory could not be
 *   made; the message has the first stderr lines.
 * - `ReadFailed`: the bundle file could not be read or is not JSON.
 * - `LayoutChanged`: the bundle is not shaped as this module expects (an envelope without `oneOf`,
 *   a variant without a single method, a server request without its `XxxResponse`).
 */
export class SchemaDumpError extends Data.TaggedError("SchemaDumpError")<{
  readonly reason: "GenerateFailed" | "ReadFailed" | "LayoutChanged"
  readonly message: string
  readonly cause?: unknown
}> {}

/** One method of an envelope, with the refs of its params and response schemas. */
export interface MethodEntry {
  readonly method: string
  /** `#/definitions/...` of the params, null when the method takes none. */
  readonly paramsRef: string | null
  /** `#/definitions/...` of the response (requests only), null when the dump has none. */
  readonly responseRef: string | null
}

/**
 * A loaded and indexed dump, with the bundle and the methods of each envelope as entries and names.
 *
 * Made by `generate`, `load` or `fromBundle`.
 */
export interface SchemaDump {
  readonly bundle: JsonSchema
  readonly clientRequests: ReadonlyArray<MethodEntry>
  readonly clientNotifications: ReadonlyArray<MethodEntry>
  /** Every entry has a `responseRef` (loading fails otherwise). */
  readonly serverRequests: ReadonlyArray<MethodEntry>
  readonly serverNotifications: ReadonlyArray<MethodEntry>
  readonly clientRequestMethods: ReadonlyArray<string>
  readonly clientNotificationMethods: ReadonlyArray<string>
  readonly serverRequestMethods: ReadonlyArray<string>
  readonly serverNotificationMethods: ReadonlyArray<string>
}

// ---------------------------------------------------------------------------------------------
// Reading the bundle

const isRecord = (value: unknown): value is JsonSchema => Json.isRecord(value)

const layoutChanged = (message: string) =>
  new SchemaDumpError({ reason: "LayoutChanged", message: `the schema dump's layout changed: ${message}` })

/** Walk a local `#/a/b/c` ref inside the bundle. */
export const resolveRef = (bundle: JsonSchema, ref: string): JsonSchema | undefined => {
  if (!ref.startsWith("#/")) return undefined
  let node: unknown = bundle
  for (const key of ref.slice(2).split("/")) {
    if (!isRecord(node) || !Object.hasOwn(node, key)) return undefined
    node = node[key]
  }
  return isRecord(node) ? node : undefined
}

/** A named type, top-level or under `v2`, with the ref that reaches it. */
export const findDefinition = (
  dump: Pick<SchemaDump, "bundle">,
  name: string
): { readonly ref: string; readonly schema: JsonSchema } | undefined => {
  for (const ref of [`#/definitions/${name}`, `#/definitions/v2/${name}`]) {
    const schema = resolveRef(dump.bundle, ref)
    if (schema !== undefined) return { ref, schema }
  }
  return undefined
}

const envelope = (
  bundle: JsonSchema,
  name: string,
  withResponses: boolean
): Either.Either<ReadonlyArray<MethodEntry>, SchemaDumpError> => {
  const schema = resolveRef(bundle, `#/definitions/${name}`)
  const variants = schema?.["oneOf"]
  if (!Array.isArray(variants)) return Either.left(layoutChanged(`no definitions.${name}.oneOf in ${BundleFile}`))
  const entries: Array<MethodEntry> = []
  for (const variant of variants) {
    const properties = isRecord(variant) ? variant["properties"] : undefined
    const methodSchema = isRecord(properties) ? properties["method"] : undefined
    const methods = isRecord(methodSchema) ? methodSchema["enum"] : undefined
    if (!Array.isArray(methods) || methods.length !== 1 || typeof methods[0] !== "string") {
      return Either.left(
        layoutChanged(`a ${name} variant has no single method enum: ${JSON.stringify(variant).slice(0, 300)}`)
      )
    }
    const params = isRecord(properties) ? properties["params"] : undefined
    const paramsRef = isRecord(params) && typeof params["$ref"] === "string" ? params["$ref"] : null
    const guess = paramsRef?.endsWith("Params") ? `${paramsRef.slice(0, -"Params".length)}Response` : null
    const responseRef = withResponses && guess !== null && resolveRef(bundle, guess) !== undefined ? guess : null
    entries.push({ method: methods[0], paramsRef, responseRef })
  }
  return Either.right(entries)
}

/**
 * Indexes a parsed bundle (pure; `load` and `generate` use it).
 *
 * Fails (`Left`) with a `SchemaDumpError` of reason `LayoutChanged` when the bundle is not shaped
 * as expected, including a server request with no `XxxResponse` next to its params.
 */
export const fromBundle = (bundle: unknown): Either.Either<SchemaDump, SchemaDumpError> =>
  Either.gen(function* () {
    if (!isRecord(bundle)) return yield* Either.left(layoutChanged(`${BundleFile} is not a JSON object`))
    const clientRequests = yield* envelope(bundle, "ClientRequest", true)
    const clientNotifications = yield* envelope(bundle, "ClientNotification", false)
    const serverRequests = yield* envelope(bundle, "ServerRequest", true)
    const serverNotifications = yield* envelope(bundle, "ServerNotification", false)
    const orphan = serverRequests.find((entry) => entry.responseRef === null)
    if (orphan !== undefined) {
      return yield* Either.left(
        layoutChanged(
          `server request ${orphan.method} (params ${orphan.paramsRef ?? "none"}) has no XxxResponse definition next to its params`
        )
      )
    }
    const methods = (entries: ReadonlyArray<MethodEntry>) => entries.map((entry) => entry.method)
    return {
      bundle,
      clientRequests,
      clientNotifications,
      serverRequests,
      serverNotifications,
      clientRequestMethods: methods(clientRequests),
      clientNotificationMethods: methods(clientNotifications),
      serverRequestMethods: methods(serverRequests),
      serverNotificationMethods: methods(serverNotifications)
    }
  })

/**
 * Loads a dump directory written earlier by `generate-json-schema --out DIR`.
 *
 * Only `BundleFile` is read. Fails with `SchemaDumpError`: `ReadFailed` when it cannot be read or
 * parsed, `LayoutChanged` as `fromBundle` does.
 */
export const load = (dir: string): Effect.Effect<SchemaDump, SchemaDumpError> =>
  Effect.tryPromise({
    try: async () => JSON.parse(await readFile(join(dir, BundleFile), "utf8")) as unknown,
    catch: (cause) =>
      new SchemaDumpError({
        reason: "ReadFailed",
        message: `could not read ${join(dir, BundleFile)}: ${String(cause)}`,
        cause
      })
  }).pipe(Effect.flatMap(fromBundle))

/**
 * The variables of this process a generator gets when its caller passes no environment: what
 * codex needs to start (PATH to find what it runs, HOME for its own files), and nothing else.
 */
const MinimalEnvNames = ["PATH", "HOME"] as const

/** `env` (default: the `MinimalEnvNames` of this process) without undefined values, with `CODEX_HOME` set. */
const childEnv = (
  env: Readonly<Record<string, string | undefined>> | undefined,
  codexHome: string
): Record<string, string> => {
  const out: Record<string, string> = {}
  if (env === undefined) {
    for (const name of MinimalEnvNames) {
      const value = process.env[name]
      if (value !== undefined) out[name] = value
    }
  } else {
    for (const [name, value] of Object.entries(env)) if (value !== undefined) out[name] = value
  }
  // A private CODEX_HOME whatever `env` says: no user config.toml is read, nothing is written under ~/.codex.
  out["CODEX_HOME"] = codexHome
  return out
}

const runGenerator = (binary: string, args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.async<void, SchemaDumpError>((resume) => {
    const child = execFile(
      binary,
      args,
      {
        env,
        timeout: 60_000,
        killSignal: "SIGKILL",
        maxBuffer: 4 * 1024 * 1024
      },
      (error, _stdout, stderr) => {
        if (error === null) return resume(Effect.void)
        const tail = String(stderr).trim().split("\n").slice(0, 5).join(" | ")
        resume(
          Effect.fail(
            new SchemaDumpError({
              reason: "GenerateFailed",
              message: `\`${binary} ${args.join(" ")}\` failed (${error.message.split("\n")[0]}): ${tail}`,
              cause: error
            })
          )
        )
      }
    )
    // Interrupted: the child must not outlive us.
    return Effect.sync(() => {
      child.kill("SIGKILL")
    })
  })

/** How `generate` runs the binary. */
export interface GenerateOptions {
  /** Pass `--experimental` (experimental methods and fields). Default false. */
  readonly experimental?: boolean
  /**
   * The child's environment (its `CODEX_HOME` is replaced by a private one). Default: only `PATH`
   * and `HOME` of this process. Pass `ChildEnv.make()` of `@warden/transport` for ours without
   * Warden's own variables and withheld secrets.
   */
  readonly env?: Readonly<Record<string, string | undefined>>
}

/**
 * Runs `<binary> app-server generate-json-schema --out <tmp>` and loads the result.
 *
 * The binary runs with a private, empty `CODEX_HOME` (no user config is read), `--experimental`
 * when asked, and the environment `env`. Without `env` it gets only this process's `PATH` and
 * `HOME` (and the private `CODEX_HOME`): built from nothing, so that no variable of Warden's
 * (`WARDEN_*`, a secret withheld from children) can reach it unless the caller passes it. A caller
 * that wants more passes it, filtered as every child's is: `ChildEnv.make()` of
 * `@warden/transport` (the protocol imports no transport, so it cannot apply that rule itself).
 * Any `CODEX_HOME` in `env` is replaced by the private one. The temporary directory is removed
 * afterwards, whatever happens. Bounded by a 60 s timeout (SIGKILL), and the child is killed on
 * interruption. Fails with `SchemaDumpError`: `GenerateFailed` when the binary cannot run or
 * fails, else as `load`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as SchemaDump from "@warden/protocol/SchemaDump"
 *
 * const program = Effect.gen(function*() {
 *   // PATH and HOME only; `{ env: ChildEnv.make() }` (of @warden/transport) gives it the rest of ours
 *   const dump = yield* SchemaDump.generate("codex")
 *   const validator = SchemaDump.makeValidator(dump)
 *   return validator.serverRequestResponse("item/commandExecution/requestApproval", { decision: "decline" })
 *   // { _tag: "Valid" }
 * })
 * ```
 */
export const generate = (binary: string, options?: GenerateOptions): Effect.Effect<SchemaDump, SchemaDumpError> =>
  Effect.acquireUseRelease(
    Effect.tryPromise({
      try: () => mkdtemp(join(tmpdir(), "warden-codex-schema-")),
      catch: (cause) =>
        new SchemaDumpError({
          reason: "GenerateFailed",
          message: `could not create a temporary directory: ${String(cause)}`,
          cause
        })
    }),
    (dir) =>
      Effect.tryPromise({
        try: () => mkdir(join(dir, "codex-home")),
        catch: (cause) =>
          new SchemaDumpError({
            reason: "GenerateFailed",
            message: `could not prepare ${dir}: ${String(cause)}`,
            cause
          })
      }).pipe(
        Effect.zipRight(
          runGenerator(
            binary,
            [
              "app-server",
              "generate-json-schema",
              "--out",
              join(dir, "out"),
              ...(options?.experimental === true ? ["--experimental"] : [])
            ],
            childEnv(options?.env, join(dir, "codex-home"))
          )
        ),
        Effect.zipRight(load(join(dir, "out")))
      ),
    (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }).catch(() => undefined))
  )

// ---------------------------------------------------------------------------------------------
// Enumerations, for drift checks

/**
 * The string values of an enum-like definition, found by name.
 *
 * Its own `enum`, then the enums of its `oneOf`/`anyOf` arms, recursively; empty when the
 * definition is missing.
 */
export const enumValues = (dump: Pick<SchemaDump, "bundle">, name: string): ReadonlyArray<string> => {
  const found = findDefinition(dump, name)
  if (found === undefined) return []
  const strings = (node: unknown): ReadonlyArray<string> => {
    if (!isRecord(node)) return []
    const own = Array.isArray(node["enum"]) ? node["enum"].filter((v): v is string => typeof v === "string") : []
    const arms = [node["oneOf"], node["anyOf"]].flatMap((list) => (Array.isArray(list) ? list.flatMap(strings) : []))
    return [...own, ...arms]
  }
  return strings(found.schema)
}

/**
 * The discriminator values of a tagged union, such as ThreadItem's `type`.
 *
 * They are read from the `oneOf` arms' `properties[key].enum`; empty when the definition is
 * missing or not a `oneOf`.
 */
export const tagValues = (dump: Pick<SchemaDump, "bundle">, name: string, key: string): ReadonlyArray<string> => {
  const arms = findDefinition(dump, name)?.schema["oneOf"]
  if (!Array.isArray(arms)) return []
  return arms.flatMap((arm) => {
    const properties = isRecord(arm) ? arm["properties"] : undefined
    const tag = isRecord(properties) ? properties[key] : undefined
    const values = isRecord(tag) ? tag["enum"] : undefined
    return Array.isArray(values) ? values.filter((v): v is string => typeof v === "string") : []
  })
}

// ---------------------------------------------------------------------------------------------
// Validation

/**
 * The outcome of validating a value against the dump, `Valid`, `Invalid` or `Unavailable`.
 *
 * `Invalid` carries ajv's errors as one string.
 */
export type Validation =
  | { readonly _tag: "Valid" }
  | { readonly _tag: "Invalid"; readonly errors: string }
  /** Nothing to validate against: unknown method, no response schema, or a schema ajv refused. */
  | { readonly _tag: "Unavailable"; readonly reason: string }

/** Checks of answers and results against the dump's schemas, made by `makeValidator`. */
export interface Validator {
  /** Check an answer (a `result`) to a server request, e.g. `{decision:"decline"}`. */
  readonly serverRequestResponse: (method: string, value: unknown) => Validation
  /** Check a client request's `result` as the server would send it. */
  readonly clientRequestResult: (method: string, value: unknown) => Validation
  /** Check a value against any `#/definitions/...` ref of the bundle. */
  readonly ref: (ref: string, value: unknown) => Validation
}

const integerIn = (min: number, max: number) => ({
  type: "number" as const,
  validate: (n: number) => Number.isInteger(n) && n >= min && n <= max
})
/** The Rust-flavoured formats the dump uses (0.171.0). Others found in a dump are accepted as-is. */
const formats = {
  int32: integerIn(-(2 ** 31), 2 ** 31 - 1),
  int64: integerIn(-Number.MAX_VALUE, Number.MAX_VALUE),
  uint: integerIn(0, Number.MAX_VALUE),
  uint8: integerIn(0, 255),
  uint16: integerIn(0, 65_535),
  uint32: integerIn(0, 2 ** 32 - 1),
  uint64: integerIn(0, Number.MAX_VALUE),
  double: { type: "number" as const, validate: (n: number) => Number.isFinite(n) }
}

const formatsUsed = (node: unknown, into: Set<string>): Set<string> => {
  if (Array.isArray(node)) {
    for (const child of node) formatsUsed(child, into)
  } else if (isRecord(node)) {
    for (const [key, child] of Object.entries(node)) {
      if (key === "format" && typeof child === "string") into.add(child)
      else formatsUsed(child, into)
    }
  }
  return into
}

const BundleId = "codex-app-server"

/**
 * An ajv (draft-07, the dump's `$schema`) validator over the bundle. Compiled lazily per ref and
 * cached. strictTypes is off: the envelopes put `properties` beside `oneOf` without `type`.
 */
export const makeValidator = (dump: SchemaDump): Validator => {
  const ajv = new Ajv({ strict: true, strictTypes: false, allowUnionTypes: true, allErrors: true })
  for (const [name, format] of Object.entries(formats)) ajv.addFormat(name, format)
  for (const name of formatsUsed(dump.bundle, new Set())) {
    if (!Object.hasOwn(formats, name)) ajv.addFormat(name, true)
  }
  ajv.addSchema(dump.bundle as object, BundleId)

  const compiled = new Map<string, ValidateFunction | string>()
  const compile = (ref: string): ValidateFunction | string => {
    const cached = compiled.get(ref)
    if (cached !== undefined) return cached
    let result: ValidateFunction | string
    if (resolveRef(dump.bundle, ref) === undefined) {
      result = `the dump has no ${ref}`
    } else {
      try {
        result = ajv.compile({ $ref: `${BundleId}${ref}` })
      } catch (error) {
        result = `ajv could not compile ${ref}: ${error instanceof Error ? error.message : String(error)}`
      }
    }
    compiled.set(ref, result)
    return result
  }

  const check = (ref: string, value: unknown): Validation => {
    const validate = compile(ref)
    if (typeof validate === "string") return { _tag: "Unavailable", reason: validate }
    if (validate(value)) return { _tag: "Valid" }
    return { _tag: "Invalid", errors: ajv.errorsText(validate.errors, { dataVar: "value", separator: "; " }) }
  }

  const byMethod = (entries: ReadonlyArray<MethodEntry>, kind: string) => {
    const index = new Map(entries.map((entry) => [entry.method, entry] as const))
    return (method: string, value: unknown): Validation => {
      const entry = index.get(method)
      if (entry === undefined) return { _tag: "Unavailable", reason: `the dump has no ${kind} ${method}` }
      if (entry.responseRef === null)
        return { _tag: "Unavailable", reason: `the dump names no response for ${kind} ${method}` }
      return check(entry.responseRef, value)
    }
  }

  return {
    serverRequestResponse: byMethod(dump.serverRequests, "server request"),
    clientRequestResult: byMethod(dump.clientRequests, "client request"),
    ref: check
  }
}
