/**
 * Embedding Warden with Effect: the Supervisor service, a handler that decides cards, and a
 * stream of events. Everything lives in the layer's scope.
 *
 *   pnpm --filter @warden/examples effect     (runs offline against the pinned codex)
 */
import { Decision } from "@warden/protocol"
import { CodexCommand, Supervisor } from "@warden/supervisor"
import { Console, Effect, Layer, Stream } from "effect"
import { offlineCodex } from "./OfflineCodex.js"

const program = (workspace: string) =>
  Effect.gen(function* () {
    const supervisor = yield* Supervisor.Supervisor
    // Watch work events in the background (the fiber lives in this scope).
    yield* supervisor.events.pipe(
      Stream.filter((e) => e._tag === "Work" && e.event._tag === "TurnCompleted"),
      Stream.runForEach((e) => Console.log(`event: ${e._tag === "Work" ? e.event._tag : e._tag}`)),
      Effect.forkScoped
    )
    const result = yield* supervisor.run({ prompt: "say hello", cwd: workspace })
    yield* Console.log(`status: ${result.status}; final message: ${result.finalMessage}`)
    return result
  })

const layer = (codex: CodexCommand.CodexCommand) =>
  Supervisor.layer({
    approvals: {
      // A program decides: accept commands that start with `echo`, leave the rest to the deadline.
      // It runs in its own fiber, never on the connection's read loop.
      handler: (card) =>
        Effect.sync(() =>
          card.summary.kind === "command" && card.summary.argv?.[0] === "echo" ? Decision.Accept : undefined
        ),
      deadlines: { default: "1 minute" }
    }
  }).pipe(Layer.provide(CodexCommand.transportLayer(codex)))

if (import.meta.url === `file://${process.argv[1]}`) {
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const codex = yield* offlineCodex
        yield* program(codex.cwd ?? process.cwd()).pipe(Effect.provide(layer(codex)))
      })
    )
  ).catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}
