/**
 * Running a `warden` command line on `NodeRuntime.runMain`: SIGINT/SIGTERM interrupt the main
 * fiber, so every scope closes (open cards refused, the app-server stopped) before exit. The exit
 * code is the contract's (see ExitCodes.ts). bin.ts decides which command tree runs (Cli.ts).
 */
import { ValidationError } from "@effect/cli"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import { SecretMask } from "@warden/approvals"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import type { Cli } from "./Cli.js"
import * as ExitCodes from "../contract/ExitCodes.js"
import * as Screen from "../terminal/Screen.js"

/**
 * Warnings and errors, masked, on stderr. Information records (what `--otlp` exports: a turn
 * started, a card settled) are for the collector, not the terminal.
 */
const stderrLogger = Logger.filterLogLevel(
  Logger.withConsoleError(Logger.map(Logger.stringLogger, (line) => SecretMask.maskText(line))),
  LogLevel.greaterThanEqual(LogLevel.Warning)
)

export const main = (cli: Cli, argv: ReadonlyArray<string>): void => {
  // A closed stdout (e.g. `warden run --json ... | head -1`) must not crash the run.
  process.stdout.on("error", () => {})
  process.stderr.on("error", () => {})

  // runMain turns the first SIGINT/SIGTERM into interruption and then stops listening, so a second
  // signal would kill the process mid-cleanup. Signals come in pairs more often than people press
  // twice: a terminal signals the whole process group, and a runner such as tsx relays the same
  // signal again. So a repeat within a second is ignored; a later one stops at once.
  let firstSignalAt: number | undefined
  const onSignal = () => {
    const now = Date.now()
    if (firstSignalAt === undefined) firstSignalAt = now
    else if (now - firstSignalAt > 1_000) {
      process.stderr.write("warden: stopping now, without cleaning up\n")
      process.exit(ExitCodes.Failed)
    }
  }
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)

  const program = cli(argv).pipe(
    Effect.as(ExitCodes.Ok),
    Effect.catchAll((error: unknown) => {
      if (ValidationError.isValidationError(error)) return Effect.succeed(ExitCodes.Usage) // already printed
      if (error instanceof ExitCodes.CliExit) {
        if (error.message) process.stderr.write(`warden: ${SecretMask.maskText(error.message)}\n`)
        return Effect.succeed(error.code)
      }
      process.stderr.write(`warden: ${SecretMask.maskText(error instanceof Error ? error.message : String(error))}\n`)
      return Effect.succeed(ExitCodes.Failed)
    }),
    Effect.catchAllDefect((defect) => {
      process.stderr.write(`warden: internal error: ${SecretMask.maskText(Cause.pretty(Cause.die(defect)))}\n`)
      return Effect.succeed(ExitCodes.Failed)
    }),
    // What @effect/cli needs (CliApp.Environment), not the whole NodeContext: its command executor
    // and worker manager are never used, and loading them is start-up time.
    // Logs go to stderr: with --json, stdout carries nothing but the events.
    Effect.provide(
      Layer.mergeAll(
        NodeFileSystem.layer,
        NodePath.layer,
        NodeTerminal.layer,
        Logger.replace(Logger.defaultLogger, stderrLogger)
      )
    )
  )

  NodeRuntime.runMain(program, {
    disableErrorReporting: true,
    // runMain adds Effect's pretty logger (to stdout) unless told not to; the logger provided
    // above is the only one: stderr, masked.
    disablePrettyLogger: true,
    teardown: (exit, onExit) => {
      const code = ExitCodes.final(
        Exit.isSuccess(exit) && typeof exit.value === "number"
          ? exit.value
          : Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
            ? ExitCodes.whenStopped()
            : ExitCodes.Failed
      )
      process.exitCode = code
      // Exits once stdout and stderr took what was written (a slow reader of a pipe must still
      // get every line, `run.finished` included). Nothing should be left running; if something is,
      // it must not keep the process alive: 3 s after that, the process exits anyway (60 s while
      // a reader does not take what was written).
      const give = setTimeout(() => process.exit(code), 60_000).unref()
      Screen.whenWritten(() => {
        clearTimeout(give)
        setTimeout(() => process.exit(code), 3_000).unref()
        onExit(code)
      })
    }
  })
}
