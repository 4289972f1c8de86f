/**
 * The answer journal's line, written out by hand in the answer's step (`AnswerJournal.makeLine`):
 * exactly `JSON.stringify` of its entry, for any values, however they repeat from one answer to
 * the next (the builder keeps the last value of each repeating field); and read back, a card
 * without a deadline included (its infinite deadline written as null).
 */
import { assert, describe, it } from "@effect/vitest"
import { Card } from "@warden/approvals"
import type { Approvals } from "@warden/approvals"
import { Effect, FastCheck as fc } from "effect"
import * as Path from "node:path"
import * as AnswerJournal from "../src/internal/AnswerJournal.js"
import * as Store from "../src/internal/Store.js"
import { tempDir } from "./support.js"

/** An answer with the fields the journal reads (the rest of a card is not read). */
interface Fields {
  readonly id: string | number
  readonly requestId: string | number
  readonly method: string
  readonly threadId: string | null | undefined
  readonly turnId: string | null | undefined
  readonly workItem: string | number | undefined
  readonly openedAt: number
  readonly deadlineAt: number
  readonly outcome: string
  readonly source: Approvals.Answering["source"]
  readonly decision: string | undefined
  readonly at: number
}

const answerOf = (f: Fields): Approvals.Answering =>
  ({
    card: {
      id: f.id,
      requestId: f.requestId,
      method: f.method,
      threadId: f.threadId,
      turnId: f.turnId,
      workItem: f.workItem,
      openedAt: f.openedAt,
      deadlineAt: f.deadlineAt
    },
    outcome: f.outcome,
    source: f.source,
    decision: f.decision
  }) as unknown as Approvals.Answering

/** What the line must be: the entry as the journal's reader takes it, by `JSON.stringify`. */
const expected = (f: Fields): string =>
  `${JSON.stringify({
    cardId: Store.id(f.id),
    requestId: Store.requestId(f.requestId),
    method: Store.id(f.method),
    threadId: Store.optionalId(f.threadId),
    turnId: Store.optionalId(f.turnId),
    itemKey: f.workItem === undefined ? null : Store.itemKey(f.workItem),
    outcome: f.outcome,
    source: Store.text(Card.describeSource(f.source)),
    decision: f.decision === undefined ? null : Store.text(f.decision),
    at: f.at,
    openedAt: f.openedAt,
    deadlineAt: f.deadlineAt
  })}\n`

/** Any text: lone surrogates, control characters, quotes, backslashes, secrets. */
const text = fc.oneof(
  fc.string({ unit: "binary" }),
  fc.string({ unit: fc.constantFrom("a", '"', "\\", "\n", "\u0000", "\u001f", "\ud800", "\udc00", "é", "😀") }),
  fc.constantFrom("", "thr_1", "token=ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "x".repeat(600))
)
/** Any number, and times in milliseconds around their digit boundaries. */
const number = fc.oneof(
  fc.double(),
  fc.integer({ min: -1e6, max: 1e6 }),
  fc.maxSafeInteger(),
  fc.integer({ min: 999_999_000, max: 1_000_001_000 }),
  fc.integer({ min: 1_700_000_000_000, max: 1_900_000_000_000 }),
  fc.integer({ min: 999_999_999_999_000, max: 1_000_000_000_001_000 }),
  fc.constantFrom(1e9, 1e15, 1e15 - 1, 1_765_080_000_000, 1_765_080_000_009, 1_765_080_100_000, -0, 0.5, 1e21)
)
const source: fc.Arbitrary<Approvals.Answering["source"]> = fc.oneof(
  fc.constant({ _tag: "Handler" } as Approvals.Answering["source"]),
  fc.constant({ _tag: "Deadline" } as Approvals.Answering["source"]),
  text.map((ruleId) => ({ _tag: "Rule", ruleId }) as unknown as Approvals.Answering["source"])
)
/** Fields drawn from a few values each, so that they repeat and alternate between answers. */
const fields = (pool: ReadonlyArray<string>): fc.Arbitrary<Fields> => {
  const repeated = fc.constantFrom(...pool)
  return fc.record({
    id: fc.oneof(text, fc.integer()),
    requestId: fc.oneof(text, fc.integer(), fc.double()),
    method: fc.oneof(repeated, text),
    threadId: fc.oneof(repeated, fc.constant(null), fc.constant(undefined), text),
    turnId: fc.oneof(repeated, fc.constant(null), fc.constant(undefined)),
    workItem: fc.oneof(repeated, fc.integer(), fc.constant(undefined)),
    openedAt: number,
    deadlineAt: number,
    outcome: fc.oneof(fc.constantFrom("accepted", "declined", "refused"), repeated),
    source,
    decision: fc.oneof(fc.constantFrom("accept", "decline"), fc.constant(undefined), repeated, text),
    at: number
  })
}

describe("AnswerJournal's line", () => {
  it("is JSON.stringify of its entry for any values, one answer after another", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(text, { minLength: 1, maxLength: 3 }).chain((pool) => fc.array(fields(pool), { maxLength: 12 })),
        (answers) => {
          const lineOf = AnswerJournal.makeLine()
          for (const f of answers) assert.strictEqual(lineOf(answerOf(f), f.at), expected(f))
        }
      ),
      { numRuns: 500 }
    )
  })

  it("writes a number as JSON does (times in milliseconds by their own path)", () => {
    fc.assert(
      fc.property(number, (n) => {
        assert.strictEqual(AnswerJournal.jsonNumber(n), JSON.stringify(n))
      }),
      { numRuns: 5_000 }
    )
    for (const n of [
      1e9,
      1e9 + 1,
      1e15 - 1,
      1_765_080_000_000,
      1_765_080_000_007,
      1_765_080_000_070,
      1_765_080_099_999
    ])
      assert.strictEqual(AnswerJournal.jsonNumber(n), String(n))
    assert.strictEqual(AnswerJournal.jsonNumber(Number.NaN), "null")
    assert.strictEqual(AnswerJournal.jsonNumber(Number.POSITIVE_INFINITY), "null")
  })

  it("masks a source and a decision, never writes a secret in them", () => {
    const lineOf = AnswerJournal.makeLine()
    const secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
    const line = lineOf(
      answerOf({
        id: "card_1",
        requestId: 7,
        method: "item/commandExecution/requestApproval",
        threadId: "thr_1",
        turnId: "turn_1",
        workItem: "build",
        openedAt: 1_765_080_000_000,
        deadlineAt: 1_765_080_900_000,
        outcome: "accepted",
        source: { _tag: "Rule", ruleId: `token=${secret}` } as unknown as Approvals.Answering["source"],
        decision: `accept ${secret}`,
        at: 1_765_080_000_012
      }),
      1_765_080_000_012
    )
    assert.isFalse(line.includes(secret))
    assert.deepStrictEqual(JSON.parse(line).requestId, "7")
  })

  it.scoped(
    "reads back an answer on a card that has no deadline (its deadlineAt infinite, which JSON writes as null)",
    () =>
      Effect.gen(function* () {
        const dir = Path.join(yield* tempDir, "answers")
        const journal = AnswerJournal.make(dir, (message) => assert.fail(message), { native: undefined })
        const answer = (id: string, deadlineAt: number) =>
          answerOf({
            id,
            requestId: 1,
            method: "item/permissions/requestApproval",
            threadId: "thr_1",
            turnId: "turn_1",
            workItem: "1",
            openedAt: 1_765_080_000_000,
            deadlineAt,
            outcome: "accepted",
            source: { _tag: "Handler" } as Approvals.Answering["source"],
            decision: "accept",
            at: 1_765_080_000_001
          })
        journal.append("run-1", answer("c1", Number.POSITIVE_INFINITY), 1_765_080_000_001)
        journal.append("run-1", answer("c2", 1_765_080_900_000), 1_765_080_000_002)
        journal.close()
        assert.deepStrictEqual(
          AnswerJournal.read(dir, "run-1").map((e) => [e.cardId, e.deadlineAt]),
          [
            ["c1", Number.POSITIVE_INFINITY],
            ["c2", 1_765_080_900_000]
          ]
        )
      })
  )
})
