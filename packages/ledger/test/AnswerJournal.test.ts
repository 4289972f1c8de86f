/**
 * The answer journal's records (`AnswerJournal`): each card's last answer read back exactly (any
 * texts, lone surrogates included, any numbers, an infinite deadline), whether the file is mapped
 * or appended to; a file cut anywhere or holding what a crash left reads its whole records and
 * nothing else; a source and a decision masked; a file replaced once large keeps what waits; a
 * journal an earlier version wrote (JSON lines) is still read; a card left open at the end of the
 * turn that opened it is on record by its opening, one answered in that turn by its answer only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Card } from "@warden/approvals"
import type { Approvals } from "@warden/approvals"
import { Effect, FastCheck as fc } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as AnswerJournal from "../src/internal/AnswerJournal.js"
import * as JournalFile from "../src/internal/JournalFile.js"
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

/** What the journal must read back of an answer: its entry, as the ledger stores its fields. */
const expected = (f: Fields): AnswerJournal.Entry => ({
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
})

/** Each card's last answer, in the order the cards first came. */
const lastByCard = (answers: ReadonlyArray<Fields>): ReadonlyArray<AnswerJournal.Entry> => {
  const byCard = new Map<string, AnswerJournal.Entry>()
  for (const f of answers) byCard.set(Store.id(f.id), expected(f))
  return Array.from(byCard.values())
}

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

/** A journal in a fresh directory of `root`: appended to with `write(2)`, or mapped (the native module). */
const journalIn = (root: string, name: string, kind: "appended" | "mapped") => {
  const dir = Path.join(root, name)
  const native = kind === "mapped" ? JournalFile.loadNative() : undefined
  if (kind === "mapped") assert.isDefined(native, "the native module is built (pnpm install)")
  return { dir, journal: AnswerJournal.make(dir, (message) => assert.fail(message), { native }) }
}

/** A command card's answer, `i`-th: card `c<i>`, request `i`, a few threads, turns and items. */
const numbered = (i: number): Fields => ({
  id: `c${i}`,
  requestId: i,
  method: "item/commandExecution/requestApproval",
  threadId: `thr_${i % 7}`,
  turnId: `turn_${i % 13}`,
  workItem: i % 5,
  openedAt: 1_765_080_000_000 + i,
  deadlineAt: 1_765_080_900_000 + i,
  outcome: "accepted",
  source: { _tag: "Handler" } as Approvals.Answering["source"],
  decision: "accept",
  at: 1_765_080_000_000 + i
})

describe("AnswerJournal", () => {
  for (const kind of ["appended", "mapped"] as const)
    it.scoped(`${kind}: reads back each card's last answer exactly, for any values, one answer after another`, () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        let run = 0
        fc.assert(
          fc.property(
            fc
              .uniqueArray(text, { minLength: 1, maxLength: 3 })
              .chain((pool) => fc.array(fields(pool), { maxLength: 12 })),
            (answers) => {
              const { dir, journal } = journalIn(root, `answers-${run++}`, kind)
              for (const f of answers) journal.append("run-1", answerOf(f), f.at)
              journal.close()
              assert.deepStrictEqual(AnswerJournal.read(dir, "run-1"), lastByCard(answers))
            }
          ),
          { numRuns: kind === "mapped" ? 100 : 300 }
        )
      })
    )

  it("a file cut anywhere (a crash mid-record), or holding what a crash left between records, reads its whole records and nothing else", () => {
    const answers: ReadonlyArray<Fields> = Array.from({ length: 6 }, (_, i) => ({
      ...numbered(i + 1),
      // Card and request ids of other shapes: defined as strings.
      ...(i % 2 === 1 ? { id: `card-${i}`, requestId: `req-${i}` } : {})
    }))
    const bytes = AnswerJournal.encode(answers.map(expected))
    const all = lastByCard(answers)
    let previous = 0
    for (let cut = 0; cut <= bytes.length; cut++) {
      const read = AnswerJournal.entriesOf(bytes.subarray(0, cut))
      // The first answers, each exactly as written; never fewer as the cut moves on.
      assert.deepStrictEqual(read, all.slice(0, read.length))
      assert.isAtLeast(read.length, previous)
      previous = read.length
    }
    assert.strictEqual(previous, all.length)
    // A record cut short, the newline a reopened file ends it with, zeros: skipped, the rest read.
    const first = AnswerJournal.encode(answers.slice(0, 3).map(expected))
    const torn = first.subarray(0, first.length - 30)
    const mixed = Buffer.concat([first, torn, Buffer.from("\n"), new Uint8Array(4096), first, torn])
    assert.deepStrictEqual(AnswerJournal.entriesOf(mixed), lastByCard(answers.slice(0, 3)))
    // One bit changed in a record: that record is not read (its check), the others are.
    for (let at = 0; at < bytes.length; at += 7) {
      const flipped = Buffer.from(bytes)
      flipped[at] = flipped[at]! ^ 0x10
      for (const e of AnswerJournal.entriesOf(flipped)) assert.deepInclude(all, e)
    }
  })

  it("masks a source and a decision: the file never holds a secret in them", () => {
    const secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
    const bytes = Buffer.from(
      AnswerJournal.encode([
        expected({
          ...numbered(1),
          source: { _tag: "Rule", ruleId: `token=${secret}` } as unknown as Approvals.Answering["source"],
          decision: `accept ${secret}`
        })
      ])
    )
    for (const encoding of ["latin1", "utf16le", "utf8"] as const) assert.notInclude(bytes.toString(encoding), secret)
    const [entry] = AnswerJournal.entriesOf(bytes)
    assert.strictEqual(entry?.requestId, "1")
    assert.notInclude(`${entry?.source} ${entry?.decision}`, secret)
  })

  it.scoped(
    "replaced once large: only the answers still waiting are kept, and answers after it read back with them",
    () =>
      Effect.gen(function* () {
        const { dir, journal } = journalIn(yield* tempDir, "answers", "mapped")
        const n = Math.ceil(AnswerJournal.CutAt / AnswerJournal.AnswerBytes) + 100
        for (let i = 1; i <= n; i++) journal.append("run-1", answerOf(numbered(i)), numbered(i).at)
        // And a card left open (its opening's record, at its turn's end): it waits too.
        const open = n + 50
        journal.opened("run-1", answerOf(numbered(open)).card)
        yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
        const opening: AnswerJournal.Entry = {
          ...expected(numbered(open)),
          outcome: null,
          source: null,
          decision: null,
          at: numbered(open).openedAt
        }
        const file = AnswerJournal.fileOf(dir, "run-1")
        assert.strictEqual(AnswerJournal.entriesOf(Fs.readFileSync(file)).length, n + 1)
        // All but the last ten committed: the file was replaced (once half of it was committed) by
        // the answers waiting then, the last ten among them.
        for (let i = 1; i <= n - 10; i++) journal.committed("run-1", `c${i}`)
        const waiting = Array.from({ length: 10 }, (_, k) => n - 9 + k)
        const kept = AnswerJournal.entriesOf(Fs.readFileSync(file))
        assert.isBelow(kept.length, n)
        for (const e of kept)
          assert.deepStrictEqual(e, e.cardId === `c${open}` ? opening : expected(numbered(Number(e.cardId.slice(1)))))
        for (const i of waiting) assert.isTrue(kept.some((e) => e.cardId === `c${i}`))
        assert.deepInclude(kept, opening, "the opening still waiting is kept")
        // Appended to the new file with its strings: threads and turns it holds, and new ones.
        for (const i of [n + 1, n + 2]) journal.append("run-1", answerOf(numbered(i)), numbered(i).at)
        const last: Fields = { ...numbered(n + 3), threadId: "thr_new", turnId: "turn_new" }
        journal.append("run-1", answerOf(last), last.at)
        journal.close()
        const read = AnswerJournal.read(dir, "run-1")
        assert.strictEqual(read.length, kept.length + 3)
        assert.deepStrictEqual(read.slice(-14), [
          ...waiting.map((i) => expected(numbered(i))),
          opening,
          expected(numbered(n + 1)),
          expected(numbered(n + 2)),
          expected(last)
        ])
      })
  )

  for (const kind of ["appended", "mapped"] as const)
    it.scoped(
      `${kind}: a card left open at the end of the turn that opened it is on record by its opening; one answered in that turn, or later, by its answer`,
      () =>
        Effect.gen(function* () {
          const { dir, journal } = journalIn(yield* tempDir, "answers", kind)
          const turnEnd = () => Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
          const card = (i: number, f: Partial<Fields> = {}) => answerOf({ ...numbered(i), ...f }).card
          // Turn 1: c1 answered in its turn (no opening record), c2 and c3 left open (a string
          // request id and a card id that is not `c<n>`, defined as texts), c4 of an ended run.
          journal.opened("run-1", card(1))
          journal.opened("run-1", card(2, { requestId: "req-2" }))
          journal.opened("run-1", card(3, { id: "card-3", threadId: null, deadlineAt: Number.POSITIVE_INFINITY }))
          journal.append("run-1", answerOf(numbered(1)), numbered(1).at)
          journal.ended("run-2")
          journal.opened("run-2", card(4))
          const before = AnswerJournal.read(dir, "run-1").map((e) => e.cardId)
          assert.deepStrictEqual(before, ["c1"], "nothing of an opening before its turn's end")
          yield* turnEnd()
          const opening = (i: number, f: Partial<Fields> = {}): AnswerJournal.Entry => ({
            ...expected({ ...numbered(i), ...f }),
            outcome: null,
            source: null,
            decision: null,
            at: numbered(i).openedAt
          })
          assert.deepStrictEqual(AnswerJournal.read(dir, "run-1"), [
            expected(numbered(1)),
            opening(2, { requestId: "req-2" }),
            opening(3, { id: "card-3", threadId: null, deadlineAt: Number.POSITIVE_INFINITY })
          ])
          assert.isFalse(Fs.existsSync(AnswerJournal.fileOf(dir, "run-2")), "an ended run needs no journal")
          // Turn 2: c2 answered; its answer wins over its opening. c3's settlement committed: it no
          // longer waits (a replacement would leave it out), but its records stay until then.
          journal.append("run-1", answerOf(numbered(2)), numbered(2).at)
          journal.committed("run-1", "card-3")
          yield* turnEnd()
          journal.close()
          assert.deepStrictEqual(AnswerJournal.read(dir, "run-1"), [
            expected(numbered(1)),
            expected(numbered(2)),
            opening(3, { id: "card-3", threadId: null, deadlineAt: Number.POSITIVE_INFINITY })
          ])
        })
    )

  it("an opening's record reads back as one (no outcome, source or decision), cut anywhere or whole", () => {
    const entries: ReadonlyArray<AnswerJournal.Entry> = [
      expected(numbered(1)),
      { ...expected(numbered(2)), outcome: null, source: null, decision: null },
      { ...expected({ ...numbered(3), id: "x-3", turnId: undefined }), outcome: null, source: null, decision: null }
    ]
    const bytes = AnswerJournal.encode(entries)
    assert.deepStrictEqual(AnswerJournal.entriesOf(bytes), entries)
    for (let cut = 0; cut < bytes.length; cut++)
      for (const e of AnswerJournal.entriesOf(bytes.subarray(0, cut))) assert.deepInclude(entries, e)
  })

  it.scoped("reads an earlier version's journal of the run (JSON lines), and removes it with the run's", () =>
    Effect.gen(function* () {
      const dir = Path.join(yield* tempDir, "answers")
      Fs.mkdirSync(dir)
      const entry = expected({ ...numbered(2), deadlineAt: Number.POSITIVE_INFINITY, turnId: null })
      Fs.writeFileSync(
        AnswerJournal.linesFileOf(dir, "run-1"),
        `${JSON.stringify({ ...entry, cardId: "c1" })}\n${JSON.stringify(entry)}\n{"cardId":"c9","req`
      )
      assert.deepStrictEqual(AnswerJournal.read(dir, "run-1"), [{ ...entry, cardId: "c1" }, entry])
      AnswerJournal.remove(dir, "run-1")
      assert.deepStrictEqual(Fs.readdirSync(dir), [])
    })
  )

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
