/**
 * The `warden` command: `run`, `demo` and `doctor`, with @effect/cli's built-ins (`--help`,
 * `--version`, `--completions bash|zsh|fish|sh`).
 */
import * as CommandTree from "./CommandTree.js"
import * as DemoCommand from "./DemoCommand.js"
import * as DoctorCommand from "./DoctorCommand.js"
import * as RunCommand from "./RunCommand.js"

export type { Cli } from "./CommandTree.js"

export const run: CommandTree.Cli = CommandTree.make([RunCommand.command, DemoCommand.command, DoctorCommand.command])
