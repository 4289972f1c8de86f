/**
 * The command line that starts `codex app-server`, and the Transport layer that runs it.
 *
 * The binary (default `codex` on PATH), `-c` overrides, `--enable` and `--disable` feature flags and
 * further arguments, in the order codex expects them.
 */
import { ChildProcessTransport } from "@warden/transport"
import type { Layer } from "effect"
import type { Transport } from "@warden/transport"

/**
 * How to start `codex app-server`, every field optional.
 *
 * The executable, `-c` overrides, feature flags, extra arguments, environment and working
 * directory. Every field is optional (`{}` runs `codex app-server` from
 * PATH); `createSupervisor`'s `codex` option takes this.
 */
export interface CodexCommand {
  /** The codex executable (default `codex`, found on PATH). */
  readonly command?: string
  /** `-c key=value` overrides, as `key=value` strings (values are TOML). */
  readonly config?: ReadonlyArray<string>
  /** `--enable FEATURE` flags. */
  readonly enable?: ReadonlyArray<string>
  /** `--disable FEATURE` flags. */
  readonly disable?: ReadonlyArray<string>
  /** Any further arguments after `app-server`. */
  readonly args?: ReadonlyArray<string>
  /**
   * Variables added to (or, `undefined`, removed from) this process's environment for the child.
   * Warden's own variables (`WARDEN_*`) and withheld secrets never reach it (`ChildEnv` of
   * `@warden/transport`).
   */
  readonly env?: Readonly<Record<string, string | undefined>>
  /** The child's working directory (default: this process's). */
  readonly cwd?: string
}

/**
 * The child's arguments, starting with `app-server`.
 *
 * Then `-c` for each override, `--enable` and `--disable` for each feature, then `args`; for
 * example `["app-server", "-c", "model=\"gpt-5\"", "--enable", "request_permissions_tool"]`.
 */
export const argv = (codex: CodexCommand): ReadonlyArray<string> => [
  "app-server",
  ...(codex.config ?? []).flatMap((kv) => ["-c", kv]),
  ...(codex.enable ?? []).flatMap((feature) => ["--enable", feature]),
  ...(codex.disable ?? []).flatMap((feature) => ["--disable", feature]),
  ...(codex.args ?? [])
]

/**
 * A Transport layer that spawns the app-server as a child process, a new one for each connection
 * the supervisor opens.
 *
 * It is `ChildProcessTransport.layer` with {@link argv}; `env` is added to this process's
 * environment, and the result goes through `ChildEnv.make` (no `WARDEN_*` variable, no withheld
 * secret). Building it starts nothing; a child that cannot be spawned fails that connection
 * with `SpawnFailed`, which the supervisor reports as `ConnectionFailed` and retries per its
 * restart policy.
 *
 * @example
 * ```ts
 * import { CodexCommand, Supervisor } from "@warden/supervisor"
 * import { Layer } from "effect"
 *
 * const WardenLive = Supervisor.layer({ concurrency: 2 }).pipe(
 *   Layer.provide(CodexCommand.transportLayer({ command: "/opt/codex/bin/codex", config: ['model="gpt-5"'], env: { RUST_LOG: "warn" } }))
 * )
 * ```
 */
export const transportLayer = (codex: CodexCommand = {}): Layer.Layer<Transport.Transport> =>
  ChildProcessTransport.layer({
    command: codex.command ?? "codex",
    args: argv(codex),
    ...(codex.env !== undefined ? { env: { ...process.env, ...codex.env } } : {}),
    ...(codex.cwd !== undefined ? { cwd: codex.cwd } : {})
  })
