/**
 * The pinned real `codex` binary, set up to run `codex app-server` offline against a
 * `ScriptedModel`.
 *
 * It gets a fresh CODEX_HOME, HOME and workspace per use (removed when the scope
 * closes), a mock model provider, plugins disabled, and the feature flags, `-c` overrides and MCP
 * servers a test asks for.
 *
 * This module only prepares the launch (`{command, args, env, cwd, ...}`); spawning and stopping the
 * child is the caller's job. Spawn it in the same scope AFTER `make`, so the child is stopped before
 * its directories are removed (finalizers run in reverse order).
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import { Data, Effect } from "effect"
import type { Scope } from "effect"
import * as McpServer from "./McpServer.js"

/**
 * The pinned codex could not be prepared; `reason` says why.
 *
 * `UnsupportedPlatform` (no native
 * package for this OS and CPU), `BinaryMissing` (not installed: run `pnpm install`), `TempDir`
 * (the fresh directories could not be made), `Version` (`codex --version` failed), `InvalidOption`
 * (a bad retry count, `-c` key or MCP server name).
 */
export class RealCodexError extends Data.TaggedError("RealCodexError")<{
  readonly reason: "UnsupportedPlatform" | "BinaryMissing" | "TempDir" | "Version" | "InvalidOption"
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message() {
    return `RealCodex (${this.reason}): ${this.detail}`
  }
}

const platformPackages: Readonly<Record<string, { readonly pkg: string; readonly triple: string }>> = {
  "linux-x64": { pkg: "@openai/codex-linux-x64", triple: "x86_64-unknown-linux-musl" },
  "android-x64": { pkg: "@openai/codex-linux-x64", triple: "x86_64-unknown-linux-musl" },
  "linux-arm64": { pkg: "@openai/codex-linux-arm64", triple: "aarch64-unknown-linux-musl" },
  "android-arm64": { pkg: "@openai/codex-linux-arm64", triple: "aarch64-unknown-linux-musl" },
  "darwin-x64": { pkg: "@openai/codex-darwin-x64", triple: "x86_64-apple-darwin" },
  "darwin-arm64": { pkg: "@openai/codex-darwin-arm64", triple: "aarch64-apple-darwin" },
  "win32-x64": { pkg: "@openai/codex-win32-x64", triple: "x86_64-pc-windows-msvc" },
  "win32-arm64": { pkg: "@openai/codex-win32-arm64", triple: "aarch64-pc-windows-msvc" }
}

/** The version of `@openai/codex` installed in the workspace (its package.json). */
export const pinnedVersion: Effect.Effect<string, RealCodexError> = Effect.try({
  try: () => {
    const require = createRequire(import.meta.url)
    const json = JSON.parse(Fs.readFileSync(require.resolve("@openai/codex/package.json"), "utf8")) as {
      readonly version?: unknown
    }
    if (typeof json.version !== "string") throw new Error("no version field")
    return json.version
  },
  catch: (cause) =>
    new RealCodexError({
      reason: "BinaryMissing",
      detail: "cannot read @openai/codex/package.json; run `pnpm install` at the workspace root",
      cause
    })
})

/**
 * The path of the native codex executable, found through the installed `@openai/codex`.
 *
 * `@openai/codex` → its platform package (an optional dependency, resolved
 * from the @openai/codex package directory) → `vendor/<triple>/bin/codex`.
 */
export const binaryPath: Effect.Effect<string, RealCodexError> = Effect.suspend(() => {
  const key = `${process.platform}-${process.arch}`
  const target = platformPackages[key]
  if (target === undefined) {
    return Effect.fail(
      new RealCodexError({ reason: "UnsupportedPlatform", detail: `no @openai/codex native package for ${key}` })
    )
  }
  return Effect.try({
    try: () => {
      const codexPackageJson = createRequire(import.meta.url).resolve("@openai/codex/package.json")
      const platformPackageJson = createRequire(codexPackageJson).resolve(`${target.pkg}/package.json`)
      const exe = Path.join(
        Path.dirname(platformPackageJson),
        "vendor",
        target.triple,
        "bin",
        process.platform === "win32" ? "codex.exe" : "codex"
      )
      Fs.accessSync(exe, Fs.constants.X_OK)
      return exe
    },
    catch: (cause) =>
      new RealCodexError({
        reason: "BinaryMissing",
        detail:
          `cannot find the codex native binary (${target.pkg}, vendor/${target.triple}/bin/codex). ` +
          "It is an optional dependency of the pinned @openai/codex devDependency: run `pnpm install` at the " +
          `workspace root, and check that optional dependencies are not skipped. Cause: ${String(cause)}`,
        cause
      })
  })
})

/** `codex --version` of the native binary, trimmed (such as `codex-cli 0.171.0`). */
export const version: Effect.Effect<string, RealCodexError> = Effect.flatMap(binaryPath, (exe) =>
  Effect.async<string, RealCodexError>((resume) => {
    const child = ChildProcess.execFile(exe, ["--version"], { timeout: 10_000 }, (error, stdout, stderr) => {
      if (error !== null) {
        resume(
          Effect.fail(
            new RealCodexError({
              reason: "Version",
              detail: `\`${exe} --version\` failed: ${stderr.trim()}`,
              cause: error
            })
          )
        )
      } else {
        resume(Effect.succeed(stdout.trim()))
      }
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })
)

/** A TOML basic string (JSON string escapes are valid TOML escapes). */
export const tomlString = (s: string): string => JSON.stringify(s)

const bareKey = /^[A-Za-z0-9_-]+$/

/** A codex feature flag for `--enable`; the two named here are the ones approval scenarios need. */
export type Feature = "request_permissions_tool" | "default_mode_request_user_input" | (string & {})

/** How to set up codex (the scripted model to talk to, features, overrides, MCP servers, retries). */
export interface Options {
  /** The model provider's base URL (`ScriptedModel.baseUrl`, i.e. `http://127.0.0.1:PORT/v1`). */
  readonly baseUrl: string
  /** `--enable FEATURE` for each. */
  readonly features?: ReadonlyArray<Feature>
  /** Extra `--disable FEATURE` (plugins are always disabled: their sync needs the network). */
  readonly disable?: ReadonlyArray<string>
  /** Extra `-c key=value` overrides; the value is a TOML expression written as is (strings: use {@link tomlString}). */
  readonly config?: Readonly<Record<string, string>>
  /** MCP servers to register (`-c mcp_servers.NAME={command=..., args=[...]}`). */
  readonly mcpServers?: ReadonlyArray<McpServer.Registration>
  /** Provider `request_max_retries` (default 0). */
  readonly requestMaxRetries?: number
  /** Provider `stream_max_retries` (default 0). */
  readonly streamMaxRetries?: number
  /** Provider `stream_idle_timeout_ms` (codex's default when absent). */
  readonly streamIdleTimeoutMs?: number
  /** Model name sent to the provider (default `mock-model`). */
  readonly model?: string
  /** Extra environment variables for the child (win over the defaults). */
  readonly env?: Readonly<Record<string, string>>
}

/**
 * How to launch the prepared `codex app-server`, and its fresh directories.
 *
 * Pass `command`, `args`, `env` and `cwd` to a transport (such as `ChildProcessTransport.layer`),
 * or {@link codexCommand} to `createSupervisor`.
 * Its directories exist until the scope of {@link make} closes.
 */
export interface Launch {
  /** Absolute path of the native codex executable. */
  readonly command: string
  /** `app-server` and its flags. */
  readonly args: ReadonlyArray<string>
  /** The child's whole environment (not merged with the parent's: pass it as is). */
  readonly env: Readonly<Record<string, string>>
  /** Working directory for the child: the workspace. */
  readonly cwd: string
  /** The child's CODEX_HOME (fresh, empty). */
  readonly codexHome: string
  /** A fresh empty directory: use it as the thread's `cwd`. */
  readonly workspace: string
  /** The child's HOME (fresh, empty). */
  readonly home: string
}

/**
 * The launch's codex as `warden run` (and `warden runner`) takes it: `--codex <command>`, then
 * each `-c`, `--enable` and `--disable` of its `args` after `app-server`. Give the command the
 * launch's `env`.
 */
export const wardenFlags = (launch: Launch): ReadonlyArray<string> => {
  const args = launch.args.slice(1)
  const out: Array<string> = ["--codex", launch.command]
  for (let i = 0; i < args.length; i += 2) {
    const flag = args[i]!
    if (flag !== "-c" && flag !== "--enable" && flag !== "--disable")
      throw new Error(`unexpected app-server flag ${flag}`)
    out.push(flag, args[i + 1]!)
  }
  return out
}

/** {@link wardenFlags}, and every thread in the launch's workspace with `--sandbox workspace-write`. */
export const wardenRunFlags = (launch: Launch): ReadonlyArray<string> => [
  ...wardenFlags(launch),
  "--cwd",
  launch.workspace,
  "--sandbox",
  "workspace-write"
]

/**
 * The launch as `createSupervisor`'s `codex` option (a `CodexCommand`) takes it.
 *
 * The executable, the flags after `app-server` (the transport adds `app-server` itself), the
 * environment, the cwd.
 */
export const codexCommand = (
  launch: Launch
): {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly cwd: string
} => ({
  command: launch.command,
  args: launch.args.slice(launch.args.indexOf("app-server") + 1),
  env: launch.env,
  cwd: launch.cwd
})

const passThroughEnv = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT"] as const

/** The `-c` value that defines the mock model provider, `model_providers.mock={...}`. */
export const providerOverride = (
  options: Pick<Options, "baseUrl" | "requestMaxRetries" | "streamMaxRetries" | "streamIdleTimeoutMs">
): string => {
  const fields = [
    `name="mock"`,
    `base_url=${tomlString(options.baseUrl)}`,
    `wire_api="responses"`,
    `env_key="OPENAI_API_KEY"`,
    `supports_websockets=false`,
    `request_max_retries=${options.requestMaxRetries ?? 0}`,
    `stream_max_retries=${options.streamMaxRetries ?? 0}`,
    ...(options.streamIdleTimeoutMs === undefined ? [] : [`stream_idle_timeout_ms=${options.streamIdleTimeoutMs}`])
  ]
  return `model_providers.mock={${fields.join(", ")}}`
}

/** The `app-server` argument list for these options (no directories involved). */
export const appServerArgs = (options: Options): Effect.Effect<ReadonlyArray<string>, RealCodexError> =>
  Effect.suspend(() => {
    const nonNegInt = (n: number | undefined) => n === undefined || (Number.isInteger(n) && n >= 0)
    if (
      !nonNegInt(options.requestMaxRetries) ||
      !nonNegInt(options.streamMaxRetries) ||
      !nonNegInt(options.streamIdleTimeoutMs)
    ) {
      return Effect.fail(
        new RealCodexError({
          reason: "InvalidOption",
          detail: "retries and stream_idle_timeout_ms must be non-negative integers"
        })
      )
    }
    const badKey = Object.keys(options.config ?? {}).find((k) => k.trim() === "" || /[\s=]/.test(k))
    if (badKey !== undefined) {
      return Effect.fail(
        new RealCodexError({ reason: "InvalidOption", detail: `invalid -c key ${JSON.stringify(badKey)}` })
      )
    }
    const badServer = (options.mcpServers ?? []).find((s) => !bareKey.test(s.name))
    if (badServer !== undefined) {
      return Effect.fail(
        new RealCodexError({
          reason: "InvalidOption",
          detail: `MCP server name ${JSON.stringify(badServer.name)} must match ${bareKey.source}`
        })
      )
    }
    const c = (kv: string) => ["-c", kv]
    return Effect.succeed([
      "app-server",
      ...c(`model_provider="mock"`),
      ...c(providerOverride(options)),
      ...c(`model=${tomlString(options.model ?? "mock-model")}`),
      ...["plugins", ...(options.disable ?? [])].flatMap((f) => ["--disable", f]),
      ...(options.features ?? []).flatMap((f) => ["--enable", f]),
      ...(options.mcpServers ?? []).flatMap((s) => c(McpServer.override(s))),
      ...Object.entries(options.config ?? {}).flatMap(([k, v]) => c(`${k}=${v}`))
    ])
  })

const makeDirs = Effect.acquireRelease(
  Effect.try({
    try: () => {
      const root = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-codex-")))
      const dirs = {
        root,
        home: Path.join(root, "home"),
        codexHome: Path.join(root, "codex-home"),
        workspace: Path.join(root, "workspace")
      }
      for (const d of [dirs.home, dirs.codexHome, dirs.workspace]) Fs.mkdirSync(d)
      return dirs
    },
    catch: (cause) =>
      new RealCodexError({ reason: "TempDir", detail: `cannot create temporary directories in ${Os.tmpdir()}`, cause })
  }),
  ({ root }) =>
    Effect.promise(() => Fs.promises.rm(root, { recursive: true, force: true, maxRetries: 3 })).pipe(Effect.ignore)
)

/**
 * Locates the binary, makes fresh directories (removed when the scope closes) and returns how to
 * launch `codex app-server` against the given model. Fails with `RealCodexError` (`BinaryMissing`,
 * `UnsupportedPlatform`, `InvalidOption`, `TempDir`). Spawn the child in the same scope, after
 * this, so it is stopped before its directories are removed.
 *
 * @example
 * ```ts
 * import { Decision } from "@warden/protocol"
 * import { Supervisor } from "@warden/supervisor"
 * import { RealCodex, ScriptedModel, Step } from "@warden/testkit"
 * import { ChildProcessTransport } from "@warden/transport"
 * import { Effect } from "effect"
 *
 * const test = Effect.scoped(
 *   Effect.gen(function*() {
 *     const model = yield* ScriptedModel.make([
 *       Step.execCommand({ cmd: "echo hi", escalated: true, justification: "show an approval" }),
 *       Step.message("done")
 *     ])
 *     const launch = yield* RealCodex.make({ baseUrl: model.baseUrl })
 *     const supervisor = yield* Supervisor.make({ approvals: { handler: () => Effect.succeed(Decision.Accept) } }).pipe(
 *       Effect.provide(ChildProcessTransport.layer({ command: launch.command, args: launch.args, env: launch.env, cwd: launch.cwd }))
 *     )
 *     const result = yield* supervisor.run({ prompt: "run it", cwd: launch.workspace })
 *     // result.finalMessage === "done"; model.requests holds what codex sent the model
 *   })
 * ) // run with it.live: the model and the child use real time
 * ```
 */
export const make = (options: Options): Effect.Effect<Launch, RealCodexError, Scope.Scope> =>
  Effect.gen(function* () {
    const command = yield* binaryPath
    const args = yield* appServerArgs(options)
    const dirs = yield* makeDirs
    const env: Record<string, string> = {}
    for (const k of passThroughEnv) {
      const v = process.env[k]
      if (v !== undefined) env[k] = v
    }
    Object.assign(
      env,
      {
        HOME: dirs.home,
        CODEX_HOME: dirs.codexHome,
        OPENAI_API_KEY: "dummy"
      },
      options.env ?? {}
    )
    return {
      command,
      args,
      env,
      cwd: dirs.workspace,
      codexHome: dirs.codexHome,
      workspace: dirs.workspace,
      home: dirs.home
    }
  })
