/**
 * Only for running the examples without an account: the test kit's scripted model on loopback
 * and the pinned codex binary pointed at it. In your own code, `codex` is just
 * `{ command: "codex" }` (or a path) plus whatever `-c` overrides you use.
 */
import type { CodexCommand } from "@warden/supervisor"
import { RealCodex, ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import type { Scope } from "effect"

/** A model that asks to run one command (needing approval), then answers. */
export const offlineCodex: Effect.Effect<CodexCommand.CodexCommand, unknown, Scope.Scope> = Effect.gen(function* () {
  const model = yield* ScriptedModel.make([
    Step.execCommand({
      cmd: "echo hello from codex",
      escalated: true,
      justification: "the example wants to show an approval"
    }),
    Step.message("The command ran; all done.")
  ])
  return RealCodex.codexCommand(yield* RealCodex.make({ baseUrl: model.baseUrl }))
})

/** Run `main` with an offline codex, cleaning everything up afterwards. */
export const withOfflineCodex = (main: (codex: CodexCommand.CodexCommand, workspace: string) => Promise<void>) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const codex = yield* offlineCodex
        yield* Effect.promise(() => main(codex, codex.cwd ?? process.cwd()))
      })
    )
  )
