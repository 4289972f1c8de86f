/**
 * Remembered decisions wired to the approvals engine: the rules in force as an in-memory snapshot
 * (the synchronous `remembered` lookup a connection's cards consult, no I/O on the read loop), and "always" for a
 * card (derive its scope, store the rule, add it to the snapshot).
 *
 * Every place a person answers "always" goes through here (`warden run`'s terminal prompt and
 * `--approvals stdin`, the promise facade's `approvals.remember` hook), so the scoping is one:
 * `Remembered.scopeFor` of the card's facts (the exact argv of a simple command, the deepest
 * directory of the changed or asked paths, the MCP server and tool). The cards consult the
 * lookup only after the configured rules said nothing, so a deny rule always wins.
 */
import type { Card } from "@warden/approvals"
import type { ServerRequests } from "@warden/protocol"
import { Effect, Either } from "effect"
import * as CardFacts from "./CardFacts.js"
import { LedgerError } from "./internal/LedgerError.js"
import type { LedgerShape } from "./Ledger.js"
import * as Remembered from "./Remembered.js"

/**
 * The scope "always" would remember for this card, or why none can be (in words).
 *
 * The card's facts (`CardFacts.fromView`) are read back into a request (`CardFacts.toRequest`)
 * and `Remembered.scopeFor` derives the narrowest scope covering it. A card whose facts hold a
 * masked value (a secret in its command line, path or tool) has none: a rule would hold the mask,
 * not the value, and match nothing. Pure; use it to offer "always" only where it can work.
 */
export const scopeForCard = (card: Card.CardView): Either.Either<Remembered.RememberedScope, string> => {
  const facts = CardFacts.fromView(card)
  // The facts are the card's masked summary: a rule built from a masked value (`-p•••`) would
  // name the mask, never the secret, and so could never match the card it came from.
  if (facts.masked)
    return Either.left("what it asks held a value that looks secret and was masked, so no rule could match it")
  const rebuilt = CardFacts.toRequest({ method: card.method, threadId: card.threadId, turnId: card.turnId, facts })
  return rebuilt === undefined
    ? Either.left("its request cannot be read back")
    : Remembered.scopeFor(rebuilt.request, rebuilt.context)
}

/** Who answered "always", and for how long. */
export interface AlwaysInput {
  /** Who answered (1 to 200 characters), e.g. a user name or the answering channel. */
  readonly author: string
  /** When the rule stops matching (epoch ms, after now); default never. */
  readonly expiresAt?: number
  /** A note kept with the rule (stored masked). */
  readonly note?: string
}

/**
 * The remembered rules in force for one run's cards, and "always".
 *
 * `lookup` is what `ApprovalsConfig.remembered` takes. `always` fails with `LedgerError`:
 * `Invalid` when no scope can be derived from the card (a compound command, a network permission,
 * a form asking for content, a value that was masked, ...) or the ledger refuses it, `Sql` when it cannot be stored; then
 * nothing was remembered.
 */
export interface Remembering {
  /**
   * The cards' `remembered` lookup (`DecisionConfig.remembered`) over the snapshot: the rule in force that allows this request
   * now (`Remembered.rememberedFor`), or undefined. Synchronous, no I/O.
   */
  readonly lookup: (
    request: ServerRequests.DecodedRequest,
    context: Card.CardContext
  ) => { readonly ruleId: string } | undefined
  /** The rules in the snapshot (in force when loaded, plus those `always` stored since). */
  readonly rules: () => ReadonlyArray<Remembered.RememberedRule>
  /**
   * Store an allow scoped to what `card` asked (`scopeForCard`), from this run and card, and add it
   * to the snapshot. The card itself is not answered: accept it after this succeeds.
   */
  readonly always: (card: Card.CardView, input: AlwaysInput) => Effect.Effect<Remembered.RememberedRule, LedgerError>
  /**
   * Store an allow of `scope` (a proposal taken: `Suggest.rememberedScope`), from `from` (the card
   * it was offered on, of this run unless said), and add it to the snapshot.
   */
  readonly scoped: (
    scope: Remembered.RememberedScope,
    input: AlwaysInput & { readonly from?: { readonly runId: string; readonly cardId: string } }
  ) => Effect.Effect<Remembered.RememberedRule, LedgerError>
  /** Reload the snapshot from the ledger (e.g. after `warden rules revoke` in another process). */
  readonly reload: Effect.Effect<void, LedgerError>
}

/**
 * Load the rules in force from `ledger` and return a `Remembering` for the run `runId` (the run
 * the remembered rules say they came from). Fails with `LedgerError` (`Sql`) when the rules cannot
 * be read.
 *
 * @example
 * ```ts
 * import { Ledger, Remembering } from "@warden/ledger"
 * import { Decision } from "@warden/protocol"
 * import { Supervisor } from "@warden/supervisor"
 * import { Effect, Layer } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const ledger = yield* Ledger.Ledger
 *   const run = yield* ledger.beginRun({ label: "nightly" })
 *   const remembering = yield* Remembering.make(ledger, run.id)
 *   const supervisor = yield* Supervisor.make({ approvals: { remembered: remembering.lookup } })
 *   // A person answered "always" to an open card:
 *   const answerAlways = (cardId: string) =>
 *     Effect.gen(function*() {
 *       const card = (yield* supervisor.approvals.openCards).find((c) => c.id === cardId)
 *       if (card === undefined) return
 *       yield* remembering.always(card, { author: "alice" })
 *       yield* supervisor.inbox.answer(cardId, Decision.Accept)
 *     })
 *   return answerAlways
 * })
 * ```
 */
export const make = (ledger: LedgerShape, runId: string): Effect.Effect<Remembering, LedgerError> =>
  Effect.gen(function* () {
    let rules: ReadonlyArray<Remembered.RememberedRule> = yield* ledger.rememberedRules()
    const clock = yield* Effect.clock
    const scoped: Remembering["scoped"] = (scope, input) =>
      Effect.map(
        ledger.remember({
          scope,
          author: input.author,
          ...(input.from !== undefined ? { from: input.from } : {}),
          ...(input.expiresAt !== undefined ? { expiresAt: input.expiresAt } : {}),
          ...(input.note !== undefined ? { note: input.note } : {})
        }),
        (rule) => {
          rules = [...rules, rule]
          return rule
        }
      )
    return {
      lookup: (request, context) => {
        const hit = Remembered.rememberedFor(request, context, rules, clock.unsafeCurrentTimeMillis())
        return hit === undefined ? undefined : { ruleId: hit.id }
      },
      rules: () => rules,
      always: (card, input) =>
        Effect.gen(function* () {
          const scope = scopeForCard(card)
          if (Either.isLeft(scope))
            return yield* new LedgerError({
              reason: "Invalid",
              detail: `card ${card.id} cannot be remembered: ${scope.left}`
            })
          return yield* scoped(scope.right, { ...input, from: { runId, cardId: card.id } })
        }),
      scoped,
      reload: Effect.map(ledger.rememberedRules(), (loaded) => {
        rules = loaded
      })
    } satisfies Remembering
  })
