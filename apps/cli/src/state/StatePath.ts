/**
 * Where the ledger lives (`--state PATH`, `--no-state`), worked out without loading it.
 */
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ExitCodes from "../contract/ExitCodes.js"

/** `$XDG_STATE_HOME/warden/ledger.db` (an absolute XDG_STATE_HOME), else `~/.local/state/warden/ledger.db`. */
export const defaultPath = (env: NodeJS.ProcessEnv = process.env): string => {
  const xdg = env["XDG_STATE_HOME"]
  const base =
    xdg !== undefined && xdg !== "" && Path.isAbsolute(xdg) ? xdg : Path.join(Os.homedir(), ".local", "state")
  return Path.join(base, "warden", "ledger.db")
}

/** The file `--state` names (absolute), else the default. */
export const resolve = (state: Option.Option<string>): string =>
  Option.isSome(state) ? Path.resolve(state.value) : defaultPath()

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

const denied = (path: string, mode: number): boolean => {
  try {
    Fs.accessSync(path, mode)
    return false
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return code === "EACCES" || code === "EPERM" || code === "EROFS"
  }
}

/** The deepest directory of `path`'s that exists (where a missing ledger and its directories would be made). */
const deepestExisting = (path: string): string => {
  let at = Path.dirname(path)
  while (statOrUndefined(at) === undefined && Path.dirname(at) !== at) at = Path.dirname(at)
  return at
}

/**
 * Why this user may not use the ledger at `path` as `need` says, or undefined: `read` needs the
 * file readable; `write` needs it writable (or, when it does not exist yet, the directory it would
 * be made in). Root passes these checks whatever the modes.
 */
export const permission = (path: string, need: "read" | "write"): string | undefined => {
  const stat = statOrUndefined(path)
  if (stat === undefined) {
    // Not there: a directory above it may be unsearchable (then its existence cannot be told).
    const dir = deepestExisting(path)
    if (denied(dir, Fs.constants.X_OK)) return `permission denied: you may not look in ${dir}`
    if (need === "write" && denied(dir, Fs.constants.W_OK | Fs.constants.X_OK))
      return `permission denied: you may not make the ledger in ${dir}`
    return undefined
  }
  if (denied(path, Fs.constants.R_OK)) return `permission denied: you may not read it`
  if (need === "write" && denied(path, Fs.constants.W_OK))
    return `permission denied: you may read it but not write it (this command writes the ledger)`
  return undefined
}

/**
 * The one rule for a ledger path every command follows: a `--state` that cannot be used as given
 * is a usage error (exit 2), whatever the command. That is: a path that cannot hold a file
 * (`unusable`: a directory, a device, under `/proc`), a ledger this user may not read (or, for a
 * command that writes it, write), or no ledger where one must already exist (`create: false`:
 * `warden audit`, `rules`, `resume`). A ledger that is there and opens but then fails (not a
 * database, corrupt, a query that fails) is exit 1.
 */
export const check = (
  state: Option.Option<string>,
  need: { readonly access: "read" | "write"; readonly create: boolean }
): Effect.Effect<string, ExitCodes.CliExit> =>
  Effect.suspend(() => {
    const path = resolve(state)
    const why = unusable(path)
    if (why !== undefined) return Effect.fail(ExitCodes.usage(`--state ${path}: cannot hold the ledger: ${why}`))
    const refused = permission(path, need.access)
    if (refused !== undefined) return Effect.fail(ExitCodes.usage(`--state ${path}: ${refused}`))
    if (!need.create && statOrUndefined(path) === undefined) {
      return Effect.fail(
        ExitCodes.usage(`no ledger at ${path} (\`warden run\` records one there; another with --state PATH)`)
      )
    }
    return Effect.succeed(path)
  })

/**
 * `warden run`: the ledger's file, or undefined with `--no-state`. A usage error (exit 2): both
 * given, or a path that cannot be used (`check`: cannot hold a file, may not be written).
 */
export const forRun = (
  state: Option.Option<string>,
  noState: boolean
): Effect.Effect<string | undefined, ExitCodes.CliExit> => {
  if (noState && Option.isSome(state))
    return Effect.fail(ExitCodes.usage("--state and --no-state cannot both be given"))
  if (noState) return Effect.succeed(undefined)
  return check(state, { access: "write", create: true })
}

/** Loads StateLedger.ts (and with it SQLite) only when a command needs the ledger. */
export const loadStateLedger: Effect.Effect<typeof import("./StateLedger.js")> = Effect.promise(
  () => import("./StateLedger.js")
)
