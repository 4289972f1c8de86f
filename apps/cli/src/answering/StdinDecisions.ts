/**
 * `--approvals stdin`: decisions arrive as JSON lines on standard input,
 * `{"cardId": "c1", "decision": "accept" | "acceptForSession" | "decline" | "cancel" | <the
 * method's structured answer>}` (see `Decision.fromJson`). A line that does not parse, or names
 * no open card, is reported on stderr and changes nothing. End of input leaves the open cards to
 * their deadlines.
 *
 * `"decision": "always"` (with the ledger, `warden run --state`): remember an allow scoped to what
 * the card asked (`Remembered.scopeFor`: the exact argv of a simple command, the deepest directory
 * of the changed or asked paths, the MCP server and tool; author `stdin`), then accept the card.
 * Later cards in that scope are accepted with source `remembered:<id>`, in this run and later ones;
 * a deny rule still wins. When no scope can be derived (not a simple command, a network permission,
 * ...) or the rule cannot be stored, nothing is remembered and the card is NOT answered: it stays
 * open for another answer (or its deadline).
 *
 * `{"group": "g…", "decision": D}`: one answer for many cards. Every open card of that group
 * (`card.opened`'s `group`: the same method asking the same thing, see `CardGroup`) gets `D`, each
 * in its own method's vocabulary and written once; cards of the group that do not offer `D` stay
 * open. `"always"` answers one card only (it names what it remembers by that card).
 */
import type { WebInbox } from "@warden/inbox"
import type { Supervisor } from "@warden/supervisor"
import { Decision } from "@warden/protocol"
import { Effect, Either, Exit, Mailbox } from "effect"
import type { Scope } from "effect"
import * as Readline from "node:readline"

export type LineVerdict =
  | { readonly _tag: "Decision"; readonly cardId: string; readonly decision: Decision.Decision }
  | { readonly _tag: "Always"; readonly cardId: string }
  | { readonly _tag: "Group"; readonly group: string; readonly decision: Decision.Decision }
  | { readonly _tag: "Blank" }
  | { readonly _tag: "Invalid"; readonly reason: string }

/** Read one line of the protocol. */
export const parseLine = (line: string): LineVerdict => {
  if (line.trim() === "") return { _tag: "Blank" }
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch (error) {
    return { _tag: "Invalid", reason: `not JSON (${error instanceof Error ? error.message : String(error)})` }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { _tag: "Invalid", reason: 'not a JSON object; expected {"cardId": ..., "decision": ...}' }
  }
  const record = value as Record<string, unknown>
  const group = record["group"]
  if (group !== undefined && record["cardId"] === undefined) {
    if (typeof group !== "string" || !/^g[0-9a-f]{16}$/.test(group))
      return { _tag: "Invalid", reason: '"group" is not a group id (g and 16 hex digits, from card.opened)' }
    if (!("decision" in record)) return { _tag: "Invalid", reason: `no "decision" for group ${group}` }
    if (record["decision"] === "always")
      return { _tag: "Invalid", reason: `group ${group}: "always" answers one card at a time (give its cardId)` }
    const decision = Decision.fromJson(record["decision"])
    if (decision === undefined) {
      return {
        _tag: "Invalid",
        reason: `group ${group}: decision ${JSON.stringify(record["decision"]).slice(0, 120)} is not a decision`
      }
    }
    return { _tag: "Group", group, decision }
  }
  const cardId = record["cardId"]
  if (typeof cardId !== "string" || cardId === "") return { _tag: "Invalid", reason: 'no "cardId" string' }
  if (!("decision" in record)) return { _tag: "Invalid", reason: `no "decision" for card ${cardId}` }
  if (record["decision"] === "always") return { _tag: "Always", cardId }
  const decision = Decision.fromJson(record["decision"])
  if (decision === undefined) {
    return {
      _tag: "Invalid",
      reason: `card ${cardId}: decision ${JSON.stringify(record["decision"]).slice(0, 120)} is not one of "accept", "acceptForSession", "decline", "cancel", "always" or a structured answer`
    }
  }
  return { _tag: "Decision", cardId, decision }
}

/**
 * Remembers an allow scoped to what the card asked (the ledger's `rememberAlways`); Left: why
 * nothing was remembered. The web inbox takes the same (`WebInboxConfig.always`).
 */
export type RememberAlways = WebInbox.RememberAlways

/** Read stdin until it ends, answering cards; every problem is reported through `report`. */
export const run = (
  supervisor: Supervisor.SupervisorShape,
  report: (line: string) => void,
  always?: RememberAlways
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const lines = yield* Mailbox.make<string>()
    const rl = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const rl = Readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false })
        rl.on("line", (line) => lines.unsafeOffer(line))
        rl.on("close", () => lines.unsafeDone(Exit.void))
        return rl
      }),
      (rl) =>
        Effect.sync(() => {
          rl.close()
          process.stdin.destroy()
        })
    )
    void rl
    let lineNumber = 0
    const handle = (line: string) =>
      Effect.gen(function* () {
        lineNumber++
        const verdict = parseLine(line)
        switch (verdict._tag) {
          case "Blank":
            return
          case "Invalid":
            report(`warden: stdin line ${lineNumber} ignored: ${verdict.reason}`)
            return
          case "Always": {
            if (always === undefined) {
              report(`warden: stdin line ${lineNumber} ignored: "always" needs the ledger (run without --no-state)`)
              return
            }
            const card = (yield* supervisor.approvals.openCards).find((c) => c.id === verdict.cardId)
            if (card === undefined) {
              report(`warden: stdin line ${lineNumber} ignored: no open card ${verdict.cardId}`)
              return
            }
            const remembered = yield* always(card)
            if (Either.isLeft(remembered)) {
              report(
                `warden: stdin line ${lineNumber}: card ${verdict.cardId} not remembered (${remembered.left}); it stays open`
              )
              return
            }
            report(
              `warden: remembered ${remembered.right.id}: allow ${remembered.right.describe} (from card ${verdict.cardId})`
            )
            yield* answer(verdict.cardId, Decision.Accept)
            return
          }
          case "Decision":
            yield* answer(verdict.cardId, verdict.decision)
            return
          case "Group": {
            const result = yield* supervisor.approvals.answerGroup(verdict.group, verdict.decision, "stdin")
            if (result.answered.length === 0 && result.notOffered.length === 0) {
              report(`warden: stdin line ${lineNumber} ignored: no open card in group ${verdict.group}`)
              return
            }
            const settled = result.answered.filter((a) => a.result._tag === "Settled")
            report(
              `warden: stdin line ${lineNumber}: group ${verdict.group}: ${settled.length} card(s) answered` +
                (result.answered.length > settled.length
                  ? `, ${result.answered.length - settled.length} already settled`
                  : "") +
                (result.notOffered.length > 0
                  ? `; left open (the decision is not offered): ${result.notOffered.join(", ")}`
                  : "")
            )
            return
          }
        }
      })
    const answer = (cardId: string, decision: Decision.Decision) =>
      Effect.gen(function* () {
        const result = yield* supervisor.approvals.answer(cardId, decision, "stdin")
        if (result._tag === "UnknownCard") {
          report(`warden: stdin line ${lineNumber} ignored: no open card ${cardId}`)
        } else if (result._tag === "AlreadySettled") {
          report(
            `warden: stdin line ${lineNumber} ignored: card ${cardId} already settled (${result.settlement.outcome})`
          )
        } else if (result.settlement.outcome === "refused") {
          report(
            `warden: stdin line ${lineNumber}: card ${cardId} refused: ${result.settlement.detail ?? "the decision cannot be expressed"}`
          )
        }
      })
    const loop: Effect.Effect<void> = Effect.gen(function* () {
      while (true) {
        const [batch, done] = yield* lines.takeAll
        for (const line of batch) yield* handle(line)
        if (done) {
          report("warden: stdin ended; open cards wait for their deadlines")
          return
        }
      }
    })
    yield* loop.pipe(Effect.interruptible, Effect.forkScoped)
  })
