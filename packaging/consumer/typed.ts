/**
 * A TypeScript program against the installed declarations (`dist/*.d.ts`) of the packed
 * packages: the Effect API and the promise facade, as docs/embedding.md shows them. The
 * outside-install test type-checks it with `tsc --noEmit` in a project that installed the
 * tarballs with npm; it is never compiled in the workspace.
 */
import type { ApprovalEvent, Card } from "@warden/approvals"
import * as RunState from "@warden/inbox/RunState"
import { Ledger } from "@warden/ledger"
import { Observability } from "@warden/observability"
import { Decision } from "@warden/protocol"
import type { Config, Errors, WorkItem } from "@warden/supervisor"
import { CodexCommand, createSupervisor, type Facade, Supervisor } from "@warden/supervisor"
import { RealCodex, ScriptedModel, Step } from "@warden/testkit"
import type { Transport } from "@warden/transport"
import { Console, Effect, Layer, Stream } from "effect"
import type { Scope } from "effect"

// ---- The Effect API -------------------------------------------------------------------------

export const program = (
  workspace: string
): Effect.Effect<WorkItem.WorkResult, Errors.WorkItemFailed, Supervisor.Supervisor | Scope.Scope> =>
  Effect.gen(function* () {
    const supervisor = yield* Supervisor.Supervisor
    yield* supervisor.events.pipe(
      Stream.runForEach((event) => Console.log(event._tag)),
      Effect.forkScoped
    )
    const result = yield* supervisor.run({ prompt: "say hello", cwd: workspace })
    yield* Console.log(result.status, result.finalMessage)
    return result
  })

export const layer = (codex: CodexCommand.CodexCommand): Layer.Layer<Supervisor.Supervisor, Config.ConfigError> =>
  Supervisor.layer({
    approvals: {
      handler: (card: Card.CardView) =>
        Effect.sync(() =>
          card.summary.kind === "command" && card.summary.argv?.[0] === "echo" ? Decision.Accept : undefined
        ),
      deadlines: { default: "1 minute", perMethod: { "mcpServer/elicitation/request": "30 seconds" } }
    },
    stallTimeout: "10 minutes",
    restart: { policy: "resume", maxAttempts: 3, backoff: "1 second" }
  }).pipe(Layer.provide(CodexCommand.transportLayer(codex)))

/** Any Transport layer fits: the supervisor needs one, nothing more. */
export const needsTransport: Layer.Layer<Supervisor.Supervisor, Config.ConfigError, Transport.Transport> =
  Supervisor.layer({})

export const offlineCodex: Effect.Effect<CodexCommand.CodexCommand, unknown, Scope.Scope> = Effect.gen(function* () {
  const model = yield* ScriptedModel.make([
    Step.execCommand({ cmd: "echo hi", escalated: true, justification: "why" }),
    Step.message("done")
  ])
  return RealCodex.codexCommand(yield* RealCodex.make({ baseUrl: model.baseUrl }))
})

export const runEffectApi: Effect.Effect<WorkItem.TurnStatus, unknown> = Effect.scoped(
  Effect.gen(function* () {
    const codex = yield* offlineCodex
    const result = yield* program(codex.cwd ?? ".").pipe(Effect.provide(layer(codex)))
    return result.status
  })
)

// ---- The ledger and the exporters, as docs/ledger.md and docs/observability.md show them -----------

/** The supervisor recorded in a SQLite ledger, its telemetry exported over OTLP. */
export const recordedAndExported = (codex: CodexCommand.CodexCommand, filename: string) =>
  Layer.mergeAll(
    layer(codex),
    Ledger.layerSqlite({ filename }),
    Observability.layer({ endpoint: "http://127.0.0.1:4318", serviceName: "my-service" })
  )
export const ledgerFails: Layer.Layer<Ledger.Ledger, Ledger.LedgerError> = Ledger.layerSqlite({
  filename: "/tmp/warden.db"
})

// ---- The promise facade ---------------------------------------------------------------------

export const runFacade = async (codex: CodexCommand.CodexCommand): Promise<string | undefined> => {
  const warden: Facade.WardenSupervisor = await createSupervisor({
    codex,
    concurrency: 2,
    approvals: {
      deadlines: { default: "2 minutes" },
      rules: { rules: [{ id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } }] },
      handler: async (card, signal) => (card.summary.kind === "command" && !signal.aborted ? "accept" : undefined)
    }
  })
  try {
    void (async () => {
      for await (const update of warden.cards()) {
        if (update._tag === "Opened") await warden.answer(update.card.id, "decline")
      }
    })()
    void (async () => {
      for await (const event of warden.approvalEvents()) {
        const e: ApprovalEvent.ApprovalEvent = event
        void e
      }
    })()
    const result = await warden.run({ prompt: "say hello", cwd: codex.cwd ?? "." })
    return result.finalMessage
  } finally {
    await warden.close()
  }
}

// ---- The declarations are real types, not `any`: each line below must be a type error ---------

export const typeErrors = async (warden: Facade.WardenSupervisor): Promise<void> => {
  // @ts-expect-error concurrency is a number
  await createSupervisor({ concurrency: "two" })
  // @ts-expect-error a work item needs a prompt
  await warden.run({ cwd: "/repo" })
  // @ts-expect-error not a decision
  await warden.answer("c1", 42)
  // @ts-expect-error the supervisor's layer needs a Transport
  const noTransport: Layer.Layer<Supervisor.Supervisor, Config.ConfigError> = Supervisor.layer({})
  void noTransport
  // @ts-expect-error the exporters need an endpoint
  Observability.layer({ serviceName: "no-endpoint" })
}

// ---- The web inbox ----------------------------------------------------------------------------
// Only its run state here: `WebInbox`'s declarations reach @effect/platform's, which need the DOM
// lib (`Storage`, `Transferable`) under `skipLibCheck: false`; consumer/inbox.mjs runs the inbox.

/** The run's state reducer, without the HTTP server. */
export const runState: RunState.RunState = RunState.make(["say hello"], 0)
