/**
 * `warden run ...` alone: the same root command as Cli.ts with only the `run` subcommand, so that
 * nothing `demo` or `doctor` needs (the test kit, the schema validator) is loaded. bin.ts sends a
 * command line here when its first argument is `run`; the published CLI runs this module (with
 * Main.ts) as one bundled, tree-shaken file (see scripts/build.mjs).
 */
import * as CommandTree from "./CommandTree.js"
import * as Main from "./Main.js"
import * as RunCommand from "./RunCommand.js"

export const run: CommandTree.Cli = CommandTree.make([RunCommand.command])

/** Runs `warden run ...` (`argv` as `process.argv`) to its exit code. */
export const start = (argv: ReadonlyArray<string>): void => Main.main(run, argv)
