#!/usr/bin/env node
/**
 * The `warden` executable. Runs the CLI on `NodeRuntime.runMain`: SIGINT/SIGTERM interrupt the
 * main fiber, so every scope closes (open cards refused, the app-server stopped) before exit.
 * The exit code is the contract's (see ExitCodes.ts).
 */
import { ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit, Layer, Logger } from "effect"
import * as Cli from "./Cli.js"
import * as ExitCodes from "./ExitCodes.js"
import { SecretMask } from "@warden/approvals"

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

const main = Cli.run(process.argv).pipe(
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
  // Logs go to stderr: with --json, stdout carries nothing but the events.
  Effect.provide(Layer.merge(NodeContext.layer, Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.map(Logger.stringLogger, SecretMask.maskText)))))
)

NodeRuntime.runMain(main, {
  disableErrorReporting: true,
  teardown: (exit, onExit) => {
    const code = Exit.isSuccess(exit) && typeof exit.value === "number" ? exit.value : ExitCodes.Failed
    // Nothing should be left running; if something is, it must not keep the process alive.
    setTimeout(() => process.exit(code), 3_000).unref()
    process.exitCode = code
    onExit(code)
  }
})
