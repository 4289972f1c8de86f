/**
 * The `warden` command: `run`, `serve`, `demo`, `doctor`, `audit`, `rules`, `resume`, and the fleet's `runner`, `submit`, `fleet`, with @effect/cli's built-ins (`--help`,
 * `--version`, `--completions bash|zsh|fish|sh`).
 */
import * as ClusterCommands from "../commands/ClusterCommands.js"
import * as CommandTree from "./CommandTree.js"
import * as DemoCommand from "../commands/DemoCommand.js"
import * as DoctorCommand from "../commands/DoctorCommand.js"
import * as LedgerCommands from "../commands/LedgerCommands.js"
import * as ResumeCommand from "../commands/ResumeCommand.js"
import * as RunCommand from "../commands/RunCommand.js"
import * as ServeCommand from "../commands/ServeCommand.js"

export type { Cli } from "./CommandTree.js"

export const run: CommandTree.Cli = CommandTree.make([
  RunCommand.command,
  ServeCommand.command,
  DemoCommand.command,
  DoctorCommand.command,
  LedgerCommands.audit,
  LedgerCommands.rules,
  ResumeCommand.command,
  ClusterCommands.runner,
  ClusterCommands.submit,
  ClusterCommands.fleet,
  ClusterCommands.steer,
  ClusterCommands.interrupt
])
