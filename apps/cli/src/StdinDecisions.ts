/**
 * `--approvals stdin`: decisions arrive as JSON lines on standard input,
 * `{"cardId": "c1", "decision": "accept" | "acceptForSession" | "decline" | "cancel" | <the
 * method's structured answer>}` (see `Decision.fromJson`). A line that does not parse, or names
 * no open card, is reported on stderr and changes nothing. End of input leaves the open cards to
 * their deadlines.
 */
import type { Supervisor } from "@warden/supervisor"
import { Decision } from "@warden/protocol"
import { Effect, Exit, Mailbox } from "effect"
import type { Scope } from "effect"
import * as Readline from "node:readline"

export type LineVerdict =
  | { readonly _tag: "Decision"; readonly cardId: string; readonly decision: Decision.Decision }
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
    return { _tag: "Invalid", reason: "not a JSON object; expected {\"cardId\": ..., \"decision\": ...}" }
  }
  const record = value as Record<string, unknown>
  const cardId = record["cardId"]
  if (typeof cardId !== "string" || cardId === "") return { _tag: "Invalid", reason: "no \"cardId\" string" }
  if (!("decision" in record)) return { _tag: "Invalid", reason: `no "decision" for card ${cardId}` }
  const decision = Decision.fromJson(record["decision"])
  if (decision === undefined) {
    return {
      _tag: "Invalid",
      reason: `card ${cardId}: decision ${JSON.stringify(record["decision"]).slice(0, 120)} is not one of "accept", "acceptForSession", "decline", "cancel" or a structured answer`
    }
  }
  return { _tag: "Decision", cardId, decision }
}

/** Read stdin until it ends, answering cards; every problem is reported through `report`. */
export const run = (
  supervisor: Supervisor.SupervisorShape,
  report: (line: string) => void
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function*() {
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
      Effect.gen(function*() {
        lineNumber++
        const verdict = parseLine(line)
        switch (verdict._tag) {
          case "Blank":
            return
          case "Invalid":
            report(`warden: stdin line ${lineNumber} ignored: ${verdict.reason}`)
            return
          case "Decision": {
            const result = yield* supervisor.inbox.answer(verdict.cardId, verdict.decision)
            if (result._tag === "UnknownCard") {
              report(`warden: stdin line ${lineNumber} ignored: no open card ${verdict.cardId}`)
            } else if (result._tag === "AlreadySettled") {
              report(`warden: stdin line ${lineNumber} ignored: card ${verdict.cardId} already settled (${result.settlement.outcome})`)
            } else if (result.settlement.outcome === "refused") {
              report(`warden: stdin line ${lineNumber}: card ${verdict.cardId} refused: ${result.settlement.detail ?? "the decision cannot be expressed"}`)
            }
          }
        }
      })
    const loop: Effect.Effect<void> = Effect.gen(function*() {
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
