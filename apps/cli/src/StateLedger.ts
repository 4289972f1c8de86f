/**
 * The ledger behind `warden run --state PATH` (and `warden audit`, `warden rules`): opening the
 * SQLite file, recording a run, and the remembered rules the desk consults. This is the only CLI
 * module that imports `@warden/ledger`; the others load it with `import()` when a command needs
 * it, so `warden --version` and a `--no-state` run never load SQLite.
 *
 * The ledger is opened in the caller's scope, which must enclose the supervisor's (the ledger is
 * built first and closed last: it records the refusals the supervisor writes while it stops).
 */
import { CardFacts, Ledger, LedgerEvent, Remembered } from "@warden/ledger"
import type { Card } from "@warden/approvals"
import type { ServerRequests } from "@warden/protocol"
import type { Supervisor, WorkItem } from "@warden/supervisor"
import { Context, Effect, Either, Layer } from "effect"
import type { Scope } from "effect"
import * as ExitCodes from "./ExitCodes.js"
import type * as StdinDecisions from "./StdinDecisions.js"

export { CardFacts, Ledger, Remembered }
export { Replay } from "@warden/ledger"

/** Opens the ledger in the current scope (closed, and flushed, when the scope closes); a failure is exit 1 with why. */
export const openLedger = (filename: string): Effect.Effect<Ledger.LedgerShape, ExitCodes.CliExit, Scope.Scope> =>
  Layer.build(Ledger.layerSqlite({ filename })).pipe(
    Effect.map((context) => Context.get(context, Ledger.Ledger)),
    Effect.mapError((error) => new ExitCodes.CliExit({ code: ExitCodes.Failed, message: `--state ${filename}: ${error.message}` }))
  )

/** What `Session.run` and `warden run` need of a recorded run. */
export interface Recorder {
  readonly runId: string
  readonly ledger: Ledger.LedgerShape
  /** Records everything the supervisor and its approvals engine publish from now on. */
  readonly attach: (supervisor: Supervisor.SupervisorShape) => Effect.Effect<void>
  /** Records a work item as submitted (the one event no stream publishes). */
  readonly submitted: (item: WorkItem.WorkItem) => void
  /**
   * The desk's `remembered` lookup: the remembered rules in force, as loaded at start and
   * updated by `rememberAlways` (an in-memory snapshot: the lookup does no I/O).
   */
  readonly remembered: (request: ServerRequests.DecodedRequest, context: Card.CardContext) => { readonly ruleId: string } | undefined
  /**
   * Stores a remembered rule scoped to what `card` asked (`Remembered.scopeFor` of the card's
   * facts), authored by `author`, and adds it to the snapshot. Left: why none can be stored.
   */
  readonly rememberAlways: (card: Card.CardView, author: string) => Effect.Effect<Either.Either<Remembered.RememberedRule, string>>
  /** `rememberAlways` as `--approvals stdin` uses it (author `stdin`). */
  readonly always: StdinDecisions.RememberAlways
}

/** Opens the ledger at `filename` and begins a run in it. */
export const record = (
  filename: string,
  info: { readonly label: string; readonly info: unknown }
): Effect.Effect<Recorder, ExitCodes.CliExit, Scope.Scope> =>
  Effect.gen(function*() {
    const ledger = yield* openLedger(filename)
    let rules: ReadonlyArray<Remembered.RememberedRule> = yield* ledger.rememberedRules().pipe(
      Effect.mapError((error) => new ExitCodes.CliExit({ code: ExitCodes.Failed, message: `--state ${filename}: ${error.message}` }))
    )
    const run = yield* ledger.beginRun({ label: info.label, info: info.info })
    const rememberAlways = (card: Card.CardView, author: string): Effect.Effect<Either.Either<Remembered.RememberedRule, string>> =>
      Effect.gen(function*() {
        const rebuilt = CardFacts.toRequest({ method: card.method, threadId: card.threadId, turnId: card.turnId, facts: CardFacts.fromView(card) })
        if (rebuilt === undefined) return Either.left("its request cannot be read back")
        const scope = Remembered.scopeFor(rebuilt.request, rebuilt.context)
        if (Either.isLeft(scope)) return Either.left(scope.left)
        const stored = yield* ledger.remember({ scope: scope.right, author, from: { runId: run.id, cardId: card.id } }).pipe(Effect.either)
        if (Either.isLeft(stored)) return Either.left(stored.left.message)
        rules = [...rules, stored.right]
        return Either.right(stored.right)
      })
    return {
      runId: run.id,
      ledger,
      attach: (supervisor) => run.attach(supervisor),
      submitted: (item) => {
        run.record(LedgerEvent.itemSubmitted(item))
      },
      remembered: (request, context) => {
        const hit = Remembered.rememberedFor(request, context, rules, Date.now())
        return hit === undefined ? undefined : { ruleId: hit.id }
      },
      rememberAlways,
      always: (card) =>
        rememberAlways(card, "stdin").pipe(Effect.map(Either.map((rule) => ({ id: rule.id, describe: Remembered.describeScope(rule.scope) }))))
    } satisfies Recorder
  })
