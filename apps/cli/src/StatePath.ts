/**
 * Where the ledger lives (`--state PATH`, `--no-state`), worked out without loading it.
 */
import { Effect, Option } from "effect"
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

/** `warden run`: the ledger's file, or undefined with `--no-state`; both given is a usage error. */
export const forRun = (state: Option.Option<string>, noState: boolean): Effect.Effect<string | undefined, ExitCodes.CliExit> => {
  if (noState && Option.isSome(state)) return Effect.fail(ExitCodes.usage("--state and --no-state cannot both be given"))
  return Effect.succeed(noState ? undefined : resolve(state))
}

/** Loads StateLedger.ts (and with it SQLite) only when a command needs the ledger. */
export const loadStateLedger: Effect.Effect<typeof import("./StateLedger.js")> = Effect.promise(() => import("./StateLedger.js"))
