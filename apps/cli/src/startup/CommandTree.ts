/**
 * The `warden` root command over a list of subcommands, run with @effect/cli's built-ins
 * (`--help`, `--version`, `--completions bash|zsh|fish|sh`). Cli.ts has the whole tree; RunCli.ts
 * has `run` alone, for the fast start-up path (bin.ts), so that `warden run` loads nothing that
 * `demo` and `doctor` need.
 */
import { Command } from "@effect/cli"
import type { CliApp } from "@effect/cli"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as ExitCodes from "../contract/ExitCodes.js"
import { version } from "./Version.js"

/** A command line (`process.argv`) run as an effect. */
export type Cli = (argv: ReadonlyArray<string>) => Effect.Effect<void, unknown, CliApp.CliApp.Environment>

/** A subcommand: any name, options and error; it may need no service beyond @effect/cli's own. */
type Subcommand = Command.Command<any, CliApp.CliApp.Environment, unknown, any>

export const make = (subcommands: readonly [Subcommand, ...Array<Subcommand>]): Cli => {
  const root = Command.make("warden", {}, () =>
    Console.error(
      "warden: supervise codex app-server agents. Commands: run, serve, resume, audit, rules, demo, doctor, runner, submit, fleet (`warden --help` for details)."
    ).pipe(Effect.zipRight(Effect.fail(new ExitCodes.CliExit({ code: ExitCodes.Usage }))))
  ).pipe(
    Command.withDescription(
      "Warden supervises codex app-server agents; every approval is a card, and deny is the default in every failure mode."
    ),
    Command.withSubcommands(subcommands)
  )
  return Command.run(root, { name: "warden", version })
}
