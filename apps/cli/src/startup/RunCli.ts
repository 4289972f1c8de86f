/**
 * `warden run ...` alone: the same root command as Cli.ts with only the `run` subcommand, so that
 * nothing `demo` or `doctor` needs (the test kit, the schema validator) is loaded. bin.ts sends a
 * command line here when its first argument is `run`; the published CLI runs this module (with
 * Main.ts) as one bundled, tree-shaken file (see scripts/build.mjs).
 *
 * A plain command line (options, then PROMPTs) is read by FastArgs.ts and goes straight to the
 * `run` handler; anything else (`--help`, a misspelt option, ...) to @effect/cli, as before.
 */
import * as CommandTree from "./CommandTree.js"
import * as FastArgs from "./FastArgs.js"
import * as Main from "./Main.js"
import * as RunCommand from "../commands/RunCommand.js"

export const run: CommandTree.Cli = CommandTree.make([RunCommand.command])

/** `warden run ...` (`argv` as `process.argv`): the `run` handler at once for a plain command line, else the command tree. */
export const runFast: CommandTree.Cli = (argv) => {
  const parsed = FastArgs.parseRun<RunCommand.Parsed>(RunCommand.options, "prompts", argv.slice(2))
  return parsed !== undefined ? RunCommand.handler(parsed) : run(argv)
}

/** Runs `warden run ...` (`argv` as `process.argv`) to its exit code. */
export const start = (argv: ReadonlyArray<string>): void => Main.main(runFast, argv)
