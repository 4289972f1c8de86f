/**
 * The command line that starts `codex app-server`: the binary (default `codex` on PATH), `-c`
 * overrides and `--enable` feature flags, in the order codex expects them.
 */
import { ChildProcessTransport } from "@warden/transport"
import type { Layer } from "effect"
import type { Transport } from "@warden/transport"

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
  readonly env?: Readonly<Record<string, string | undefined>>
  readonly cwd?: string
}

export const argv = (codex: CodexCommand): ReadonlyArray<string> => [
  "app-server",
  ...(codex.config ?? []).flatMap((kv) => ["-c", kv]),
  ...(codex.enable ?? []).flatMap((feature) => ["--enable", feature]),
  ...(codex.disable ?? []).flatMap((feature) => ["--disable", feature]),
  ...(codex.args ?? [])
]

/** A Transport layer that spawns the app-server as a child process. */
export const transportLayer = (codex: CodexCommand = {}): Layer.Layer<Transport.Transport> =>
  ChildProcessTransport.layer({
    command: codex.command ?? "codex",
    args: argv(codex),
    ...(codex.env !== undefined ? { env: { ...process.env, ...codex.env } } : {}),
    ...(codex.cwd !== undefined ? { cwd: codex.cwd } : {})
  })
