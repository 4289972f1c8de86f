/**
 * Where the ledger lives (`--state PATH`, `--no-state`), worked out without loading it.
 */
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ExitCodes from "./ExitCodes.js"

/** `$XDG_STATE_HOME/warden/ledger.db` (an absolute XDG_STATE_HOME), else `~/.local/state/warden/ledger.db`. */
export const defaultPath = (env: NodeJS.ProcessEnv = process.env): string => {
  const xdg = env["XDG_STATE_HOME"]
  const base = xdg !== undefined && xdg !== "" && Path.isAbsolute(xdg) ? xdg : Path.join(Os.homedir(), ".local", "state")
  return Path.join(base, "warden", "ledger.db")
}

/** The file `--state` names (absolute), else the default. */
export const resolve = (state: Option.Option<string>): string => (Option.isSome(state) ? Path.resolve(state.value) : defaultPath())

/** Kernel filesystems that hold no regular files of ours (statfs magic numbers, Linux). */
const PseudoFilesystems: ReadonlyMap<number, string> = new Map([
  [0x9fa0, "proc"],
  [0x62656572, "sysfs"],
  [0x1cd1, "devpts"],
  [0x63677270, "cgroup2"],
  [0x27e0eb, "cgroup"],
  [0x64626720, "debugfs"],
  [0x74726163, "tracefs"],
  [0x73636673, "securityfs"],
  [0xcafe4a11, "bpf"]
])

const statOrUndefined = (path: string): Fs.Stats | undefined => {
  try {
    return Fs.statSync(path)
  } catch {
    return undefined
  }
}

/**
 * Why `path` cannot hold the ledger's file, or undefined when it can (as far as can be told
 * without creating anything): it exists and is not a regular file; the deepest part of it that
 * exists is not a directory; or that directory is on a kernel filesystem (`/proc`, `/sys`, ...),
 * where Node's recursive mkdir would never return.
 */
export const unusable = (path: string): string | undefined => {
  const existing = statOrUndefined(path)
  if (existing !== undefined) return existing.isFile() ? undefined : "it exists and is not a regular file"
  let at = Path.dirname(path)
  let stat = statOrUndefined(at)
  while (stat === undefined && Path.dirname(at) !== at) {
    at = Path.dirname(at)
    stat = statOrUndefined(at)
  }
  if (stat === undefined) return undefined
  if (!stat.isDirectory()) return `${at} is not a directory`
  try {
    const kind = PseudoFilesystems.get(Number(Fs.statfsSync(at).type))
    if (kind !== undefined) return `${at} is on a ${kind} filesystem, which holds no files of ours`
  } catch {
    // statfs is not available here: the ledger's own checks still apply
  }
  return undefined
}

/**
 * `warden run`: the ledger's file, or undefined with `--no-state`. A usage error (exit 2): both
 * given, or a path that cannot hold a file (`unusable`).
 */
export const forRun = (state: Option.Option<string>, noState: boolean): Effect.Effect<string | undefined, ExitCodes.CliExit> => {
  if (noState && Option.isSome(state)) return Effect.fail(ExitCodes.usage("--state and --no-state cannot both be given"))
  if (noState) return Effect.succeed(undefined)
  const path = resolve(state)
  const why = unusable(path)
  return why === undefined ? Effect.succeed(path) : Effect.fail(ExitCodes.usage(`--state ${path}: cannot hold the ledger: ${why}`))
}

/** Loads StateLedger.ts (and with it SQLite) only when a command needs the ledger. */
export const loadStateLedger: Effect.Effect<typeof import("./StateLedger.js")> = Effect.promise(() => import("./StateLedger.js"))
