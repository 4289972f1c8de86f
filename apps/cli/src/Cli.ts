/**
 * The `warden` command: `run`, `demo` and `doctor`, with @effect/cli's built-ins (`--help`,
 * `--version`, `--completions bash|zsh|fish|sh`).
 */
import { Command } from "@effect/cli"
import { Console, Effect } from "effect"
import * as DemoCommand from "./DemoCommand.js"
import * as DoctorCommand from "./DoctorCommand.js"
import * as ExitCodes from "./ExitCodes.js"
import * as RunCommand from "./RunCommand.js"
import { version } from "./Version.js"

const root = Command.make("warden", {}, () =>
  Console.error("warden: supervise codex app-server agents. Commands: run, demo, doctor (`warden --help` for details).").pipe(
    Effect.zipRight(Effect.fail(new ExitCodes.CliExit({ code: ExitCodes.Usage })))
  )).pipe(
    Command.withDescription("Warden supervises codex app-server agents; every approval is a card, and deny is the default in every failure mode."),
    Command.withSubcommands([RunCommand.command, DemoCommand.command, DoctorCommand.command])
  )

export const run = Command.run(root, { name: "warden", version })
