/**
 * Crash recovery: a process recording a run is SIGKILLed; another opens the same file and finds
 * the run still `running`, its unfinished work items (threads, remaining prompts) and its open
 * card; `recover` strands the card and hands the items over exactly once; `markStranded` is
 * idempotent and refused for a run the ledger is recording; the accounting stays exact.
 */
import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Ledger, LedgerEvent } from "../src/index.js"
import * as AnswerJournal from "../src/internal/AnswerJournal.js"
import * as JournalFile from "../src/internal/JournalFile.js"
import { commandParams, script, tempDir } from "./support.js"

const root = Path.resolve(__dirname, "../../..")
const crashRun = Path.join(__dirname, "fixtures", "crash-run.ts")
const answerCrash = Path.join(__dirname, "fixtures", "answer-crash.ts")
const openCrash = Path.join(__dirname, "fixtures", "open-crash.ts")

/**
 * Run a fixture (`args` after `node --import tsx`) that prints `run <id>` and then SIGKILLs itself:
 * the run's id, once it died so (and never printed `not killed`); else a failure saying `what`.
 */
const runUntilKilled = (args: ReadonlyArray<string>, what: string, env: NodeJS.ProcessEnv = process.env) =>
  Effect.acquireUseRelease(
    Effect.sync(() =>
      ChildProcess.spawn(process.execPath, ["--import", "tsx", ...args], {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"],
        env
      })
    ),
    (child) =>
      Effect.async<string, Error>((resume) => {
        let out = ""
        let err = ""
        child.stdout!.on("data", (chunk: Buffer) => {
          out += chunk.toString("utf8")
        })
        child.stderr!.on("data", (chunk: Buffer) => {
          err += chunk.toString("utf8")
        })
        child.on("exit", (code, signal) => {
          const run = /run (\S+)\n/.exec(out)
          if (signal === "SIGKILL" && run && !out.includes("not killed")) resume(Effect.succeed(run[1]!))
          else resume(Effect.fail(new Error(`the fixture did not die ${what} (${code ?? signal}): ${out} ${err}`)))
        })
      }),
    (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  )

/**
 * Run the answer-crash fixture: it prints its run's id, answers a card `accept`, and SIGKILLs
 * itself at `point` (before its settlement can be committed). The run's id, once it died so.
 */
const answerThenDie = (
  filename: string,
  point: "answering" | "written",
  opening: "recorded" | "unrecorded",
  journal: "on" | "off",
  /** How the journal's file is written: mapped (the native module, as built by `pnpm install`) or appended. */
  kind: "mapped" | "appended" = "mapped",
  /** `none`: the card has no deadline (an infinite one, which the journal's JSON writes as null). */
  deadline: "some" | "none" = "some"
) =>
  runUntilKilled([answerCrash, filename, point, opening, journal, deadline], `at ${point}`, {
    ...process.env,
    WARDEN_JOURNAL_NATIVE: kind === "mapped" ? "" : "off"
  })

/**
 * Run the open-crash fixture: a card opened during a saturated second (the ledger holds what it
 * records), never answered; the process SIGKILLs itself 200 ms later. The run's id, once it died so.
 */
const openThenDie = (filename: string, journal: "on" | "off") =>
  runUntilKilled([openCrash, filename, journal], "with its card open")

/** Run the crash fixture until it says its run is written, SIGKILL it, and return the run's id. */
const recordThenKill = (filename: string) =>
  Effect.acquireUseRelease(
    Effect.sync(() =>
      ChildProcess.spawn(process.execPath, ["--import", "tsx", crashRun, filename], {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"]
      })
    ),
    (child) =>
      Effect.async<string, Error>((resume) => {
        let out = ""
        let err = ""
        child.stdout!.on("data", (chunk: Buffer) => {
          out += chunk.toString("utf8")
          const line = /flushed (\S+)\n/.exec(out)
          if (line) resume(Effect.succeed(line[1]!))
        })
        child.stderr!.on("data", (chunk: Buffer) => {
          err += chunk.toString("utf8")
        })
        child.on("exit", (code, signal) =>
          resume(Effect.fail(new Error(`the crash fixture exited early (${code ?? signal}): ${err}`)))
        )
      }).pipe(
        Effect.tap(() =>
          Effect.async<void>((resume) => {
            child.removeAllListeners("exit")
            child.on("exit", () => resume(Effect.void))
            child.kill("SIGKILL")
          })
        )
      ),
    (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  )

describe("recovery", () => {
  it.live(
    "after a SIGKILL: the run is still running, its unfinished items and open card are found, and recovered exactly once",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const filename = Path.join(yield* tempDir, "ledger.db")
          const dead = yield* recordThenKill(filename)

          yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            const [before] = yield* ledger.runs()
            assert.strictEqual(before!.runId, dead)
            assert.strictEqual(before!.status, "running")

            const unfinished = yield* ledger.unfinishedItems(dead)
            assert.deepStrictEqual(
              unfinished.map((i) => [i.item, i.status, i.threadId, i.generation, i.turnsDone, i.remainingPrompts]),
              [
                ["2", "running", "thr_2", 0, 1, ["second turn", "third turn"]],
                ["3", "pending", undefined, undefined, 0, ["never started"]]
              ]
            )
            assert.deepStrictEqual(unfinished[0]!.options, { cwd: "/repo" })
            const open = yield* ledger.openCards(dead)
            assert.deepStrictEqual(
              open.map((c) => [c.cardId, c.title, c.workItem]),
              [["c2", "run: make deploy (in /repo)", "2"]]
            )

            const run = yield* ledger.beginRun({ label: "resume", resumedFrom: dead })
            const recovered = yield* ledger.recover(dead, run.id)
            assert.strictEqual(recovered.stranded, 1)
            assert.deepStrictEqual(
              recovered.items.map((i) => [i.item, i.remainingPrompts]),
              [
                ["2", ["second turn", "third turn"]],
                ["3", ["never started"]]
              ]
            )
            // Exactly once: a second recovery finds nothing, stranding again changes nothing.
            // The turn in progress at the crash will never complete: closed as crashed.
            assert.strictEqual(recovered.crashedTurns, 1)
            assert.deepStrictEqual(
              (yield* ledger.turns(dead)).map((t) => [t.turnId, t.status, t.error]),
              [
                ["turn_1", "completed", undefined],
                ["turn_2", "completed", undefined],
                ["turn_3", "crashed", "in progress when its run died"]
              ]
            )
            const again = yield* ledger.recover(dead, run.id)
            assert.deepStrictEqual(again, { stranded: 0, crashedTurns: 0, items: [], notResumed: [] })
            assert.strictEqual(yield* ledger.markStranded(dead), 0)

            const items = yield* ledger.workItems(dead)
            assert.deepStrictEqual(
              items.map((i) => [i.item, i.status, i.handedTo]),
              [
                ["1", "finished", undefined],
                ["2", "handed-over", run.id],
                ["3", "handed-over", run.id]
              ]
            )
            const cards = yield* ledger.cards({ runId: dead })
            assert.deepStrictEqual(
              cards.map((c) => [c.cardId, c.settlement?.outcome, c.settlement?.source, c.settlement?.written]),
              [
                ["c1", "accepted", "person", true],
                ["c2", "stranded", "stranded", false]
              ]
            )
            assert.deepStrictEqual(yield* ledger.accounting(dead), {
              cards: 2,
              open: 0,
              settled: 1,
              stranded: 1,
              byOutcome: { accepted: 1, stranded: 1 },
              lateDecisions: 0
            })
            yield* ledger.flush // queries read what is written: the new run's row is written with the next batch
            const runs = yield* ledger.runs()
            assert.deepStrictEqual(
              runs.map((r) => [r.runId, r.status, r.resumedFrom]).sort(),
              [
                [dead, "crashed", undefined],
                [run.id, "running", dead]
              ].sort()
            )
          }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
        })
      ),
    { timeout: 60_000 }
  )

  it.scoped(
    "recover hands over only the items that can run again as asked; the rest are recorded not-resumed with their reason",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        const s = yield* script()
        const dead = yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const run = yield* ledger.beginRun()
          yield* run.attach(s.source)
          run.record(LedgerEvent.itemSubmitted({ id: 0, prompt: "fix the test" }))
          run.record(LedgerEvent.itemSubmitted({ id: 1, prompt: "log in with password=Hunter2Secret9x and deploy" }))
          run.record(
            LedgerEvent.itemSubmitted({
              id: 2,
              prompt: "deploy",
              config: { env: { OPENAI_API_KEY: "sk-proj-Zq3vB7xK9mT2wR5nL8pD4fH6jY1cA0sE" } }
            })
          )
          run.record(LedgerEvent.itemSubmitted({ id: 3, prompt: "all done" }))
          s.work({ _tag: "ThreadReady", item: 3, threadId: "thr_3", resumed: false })
          s.work({ _tag: "TurnStarted", item: 3, threadId: "thr_3", turnId: "turn_3", prompt: "all done" })
          s.work({
            _tag: "TurnCompleted",
            item: 3,
            threadId: "thr_3",
            turn: { turnId: "turn_3", status: "completed", finalMessage: "ok", items: [], error: undefined, errors: [] }
          })
          yield* ledger.flush
          return run.id
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

        yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const into = yield* ledger.beginRun({ resumedFrom: dead })
          const recovered = yield* ledger.recover(dead, into.id)
          assert.deepStrictEqual(
            recovered.items.map((i) => [i.item, i.status, i.handedTo]),
            [["0", "handed-over", into.id]]
          )
          assert.deepStrictEqual(
            recovered.notResumed.map((i) => [i.item, i.reason]),
            [
              ["1", "prompt-masked"],
              ["2", "options-masked"],
              ["3", "nothing-left"]
            ]
          )
          const items = yield* ledger.workItems(dead)
          assert.deepStrictEqual(
            items.map((i) => [i.item, i.status, i.handedTo, i.failureReason]),
            [
              ["0", "handed-over", into.id, undefined],
              ["1", "not-resumed", undefined, "prompt-masked"],
              ["2", "not-resumed", undefined, "options-masked"],
              ["3", "not-resumed", undefined, "nothing-left"]
            ]
          )
          assert.match(items[1]!.failureDetail ?? "", /held a secret and was stored masked/)
          // Once: a second recovery finds nothing.
          assert.deepStrictEqual(yield* ledger.recover(dead, into.id), {
            stranded: 0,
            crashedTurns: 0,
            items: [],
            notResumed: []
          })
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
      })
  )

  it.scoped("markStranded strands each open card once, leaves settled ones alone, and refuses a live run", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      const s = yield* script()
      const first = yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const run = yield* ledger.beginRun()
        yield* run.attach(s.source)
        run.record(LedgerEvent.itemSubmitted({ id: 1, prompt: "p" }))
        const a = yield* s.open("item/commandExecution/requestApproval", commandParams("thr_1", "turn_1", "make a"))
        yield* s.open("item/commandExecution/requestApproval", commandParams("thr_1", "turn_1", "make b"))
        yield* s.open("item/commandExecution/requestApproval", commandParams("thr_1", "turn_1", "make c"))
        yield* s.approvals.answer(a.id, Decision.Decline)
        yield* ledger.flush
        const refused = yield* Effect.flip(ledger.markStranded(run.id))
        assert.strictEqual(refused.reason, "LiveRun")
        assert.deepStrictEqual(
          (yield* ledger.openCards(run.id)).map((c) => c.cardId),
          ["c2", "c3"]
        )
        return run.id
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

      yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        // Only the cards named (a fleet's: those its table has open or stranded), then the rest.
        assert.strictEqual(yield* ledger.markStranded(first, ["c2", "c1"]), 1)
        assert.deepStrictEqual(
          (yield* ledger.openCards(first)).map((c) => c.cardId),
          ["c3"]
        )
        assert.strictEqual(yield* ledger.markStranded(first, []), 0)
        assert.strictEqual(yield* ledger.markStranded(first), 1)
        assert.strictEqual(yield* ledger.markStranded(first), 0)
        assert.strictEqual(yield* ledger.markStranded("no-such-run"), 0)
        const cards = yield* ledger.cards({ runId: first })
        assert.deepStrictEqual(
          cards.map((c) => c.settlement?.outcome),
          ["declined", "stranded", "stranded"]
        )
        // A cleanly closed run stays `ended`; only a run that was still `running` becomes `crashed`.
        const [run] = yield* ledger.runs()
        assert.strictEqual(run!.status, "ended")
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
    })
  )

  it.scoped(
    "markStrandedItem strands one item's open cards once, leaves its settled cards, other items and the run's status alone",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        const s = yield* script()
        const first = yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const run = yield* ledger.beginRun()
          yield* run.attach(s.source)
          run.record(LedgerEvent.itemSubmitted({ id: "a", prompt: "p" }))
          run.record(LedgerEvent.itemSubmitted({ id: "b", prompt: "q" }))
          const a1 = yield* s.open(
            "item/commandExecution/requestApproval",
            commandParams("thr_1", "turn_1", "make a"),
            { context: { workItem: "a" } }
          )
          yield* s.open("item/commandExecution/requestApproval", commandParams("thr_1", "turn_1", "make b"), {
            context: { workItem: "a" }
          })
          yield* s.open("item/commandExecution/requestApproval", commandParams("thr_2", "turn_2", "make c"), {
            context: { workItem: "b" }
          })
          yield* s.approvals.answer(a1.id, Decision.Decline)
          yield* ledger.flush
          assert.strictEqual((yield* Effect.flip(ledger.markStrandedItem(run.id, "a"))).reason, "LiveRun")
          return run.id
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

        yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          assert.strictEqual(yield* ledger.markStrandedItem(first, "a"), 1)
          assert.strictEqual(yield* ledger.markStrandedItem(first, "a"), 0)
          const cards = yield* ledger.cards({ runId: first })
          assert.deepStrictEqual(
            cards.map((c) => [c.cardId, c.settlement?.outcome]),
            [
              ["c1", "declined"],
              ["c2", "stranded"],
              ["c3", undefined]
            ]
          )
          const [run] = yield* ledger.runs()
          assert.strictEqual(run!.status, "ended")
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
      })
  )

  it.scoped(
    "markStrandedItem with card ids strands only those of the item's open cards (what the fleet's storage stranded)",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        const s = yield* script()
        const first = yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const run = yield* ledger.beginRun()
          yield* run.attach(s.source)
          run.record(LedgerEvent.itemSubmitted({ id: "a", prompt: "p" }))
          for (const command of ["make a", "make b", "make c"]) {
            yield* s.open("item/commandExecution/requestApproval", commandParams("thr_1", "turn_1", command), {
              context: { workItem: "a" }
            })
          }
          yield* ledger.flush
          return run.id
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

        yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          // c9 is no card of the run; c2 is stranded once; an empty list strands nothing.
          assert.strictEqual(yield* ledger.markStrandedItem(first, "a", ["c2", "c9"]), 1)
          assert.strictEqual(yield* ledger.markStrandedItem(first, "a", ["c2"]), 0)
          assert.strictEqual(yield* ledger.markStrandedItem(first, "a", []), 0)
          assert.deepStrictEqual(
            (yield* ledger.cards({ runId: first })).map((c) => [c.cardId, c.settlement?.outcome]),
            [
              ["c1", undefined],
              ["c2", "stranded"],
              ["c3", undefined]
            ]
          )
          // Without card ids, the rest of the item's open cards.
          assert.strictEqual(yield* ledger.markStrandedItem(first, "a"), 2)
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
      })
  )

  it.scoped(
    "a settlement recorded after the card was stranded does not replace it (one settlement per card) and is kept as a late decision",
    () =>
      Effect.gen(function* () {
        const filename = Path.join(yield* tempDir, "ledger.db")
        const s = yield* script()
        // A first ledger records the card open, a second strands it, the first then records the
        // card's settlement (a run wrongly taken for dead): the ledger keeps exactly one.
        const runId = yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const run = yield* ledger.beginRun({ id: "r-shared" })
          yield* run.attach(s.source)
          const card = yield* s.open(
            "item/commandExecution/requestApproval",
            commandParams("thr_1", "turn_1", "make it")
          )
          yield* ledger.flush
          const stranded = yield* Effect.provide(
            Effect.flatMap(Ledger.Ledger, (other) => other.markStranded(run.id)),
            Ledger.layerSqlite({ filename })
          )
          assert.strictEqual(stranded, 1)
          yield* s.approvals.answer(card.id, Decision.Accept)
          const stats = yield* ledger.flush
          assert.strictEqual(stats.failed, 0)
          return run.id
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

        yield* Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          assert.deepStrictEqual(yield* ledger.accounting(runId), {
            cards: 1,
            open: 0,
            settled: 0,
            stranded: 1,
            byOutcome: { stranded: 1 },
            lateDecisions: 1
          })
          const late = yield* ledger.lateDecisions({ runId })
          assert.deepStrictEqual(
            late.map((l) => [l.cardId, l.decision, l.source, l.outcome]),
            [["c1", "accept", "person", "stranded"]]
          )
        }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
      })
  )

  // Durability (docs/ledger.md): an answer is in the answer journal before codex can act on it, and
  // the settlement is committed after. Killed in between, the card is stranded with the answer
  // that was being written: never lost, never recorded as accepted (codex may not have got it).
  // A card without a deadline (an infinite one) too: its line says null (JSON has no infinity).
  for (const [point, opening, kind, deadline] of [
    ["answering", "recorded", "mapped", "some"],
    ["answering", "recorded", "appended", "some"],
    ["written", "recorded", "mapped", "some"],
    ["written", "unrecorded", "mapped", "some"],
    ["written", "unrecorded", "appended", "some"],
    ["written", "unrecorded", "mapped", "none"]
  ] as const) {
    it.live(
      `killed ${point === "answering" ? "as the answer was about to be written" : "as the answer was written"}, its card's opening ${opening}, the journal ${kind}${deadline === "none" ? ", the card without a deadline" : ""}: recovery strands it with the answer that was being written, once`,
      () =>
        Effect.scoped(
          Effect.gen(function* () {
            const filename = Path.join(yield* tempDir, "ledger.db")
            const dead = yield* answerThenDie(filename, point, opening, "on", kind, deadline)
            const journalFile = AnswerJournal.fileOf(`${filename}.answers`, dead)
            assert.isTrue(Fs.existsSync(journalFile), "the dead run's answer journal is there")
            // Mapped: allocated ahead, the line stored in the mapping (in the page cache when the
            // process was killed); appended: the line's bytes only.
            if (kind === "mapped") assert.strictEqual(Fs.statSync(journalFile).size, JournalFile.MappedBytes)
            else assert.isBelow(Fs.statSync(journalFile).size, 1024)
            yield* Effect.gen(function* () {
              const ledger = yield* Ledger.Ledger
              // Not committed: the card is open (or, opened in the same step, not recorded at all).
              assert.deepStrictEqual(
                (yield* ledger.openCards(dead)).map((c) => c.cardId),
                opening === "recorded" ? ["c1"] : []
              )
              const run = yield* ledger.beginRun({ label: "resume", resumedFrom: dead })
              const recovered = yield* ledger.recover(dead, run.id)
              assert.strictEqual(recovered.stranded, 1)
              const cards = yield* ledger.cards({ runId: dead })
              assert.deepStrictEqual(
                cards.map((c) => [
                  c.cardId,
                  c.method,
                  c.workItem,
                  c.settlement?.outcome,
                  c.settlement?.decision,
                  c.settlement?.written
                ]),
                [["c1", "item/commandExecution/requestApproval", "2", "stranded", "accept", false]]
              )
              assert.match(
                cards[0]!.settlement!.detail ?? "",
                /its answer \(accepted, decision accept, by person\) was being written to codex: codex may have received it/
              )
              assert.strictEqual(Number.isFinite(cards[0]!.deadlineAt), deadline === "some")
              if (opening === "recorded") assert.strictEqual(cards[0]!.title, "run: make deploy (in /repo)")
              else assert.match(cards[0]!.title, /its opening was not recorded; from the answer journal/)
              assert.deepStrictEqual((yield* ledger.accounting(dead)).byOutcome, { stranded: 1 })
              // Once: the journal is gone with the recovery, and a second one finds nothing.
              assert.isFalse(Fs.existsSync(journalFile))
              assert.strictEqual(yield* ledger.markStranded(dead), 0)
              assert.strictEqual((yield* ledger.recover(dead, run.id)).stranded, 0)
            }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
          })
        ),
      { timeout: 60_000 }
    )
  }

  it.live(
    "killed with a card open whose opening the ledger still held (a saturated loop): the answer journal has its opening, and recovery strands it once, never answered; without the journal it is lost",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          for (const journal of ["off", "on"] as const) {
            const filename = Path.join(dir, `ledger-${journal}.db`)
            const dead = yield* openThenDie(filename, journal)
            yield* Effect.gen(function* () {
              const ledger = yield* Ledger.Ledger
              // The opening was held, never committed: the card is not in the ledger (the item
              // recorded before the burst is).
              assert.deepStrictEqual(yield* ledger.cards({ runId: dead }), [])
              assert.include(
                (yield* ledger.workItems(dead)).map((i) => i.item),
                "2"
              )
              const run = yield* ledger.beginRun({ label: "resume", resumedFrom: dead })
              const recovered = yield* ledger.recover(dead, run.id)
              const cards = yield* ledger.cards({ runId: dead })
              if (journal === "off") {
                // The gap the journal's openings close: the card is nowhere.
                assert.strictEqual(recovered.stranded, 0)
                assert.deepStrictEqual(cards, [])
                return
              }
              assert.strictEqual(recovered.stranded, 1)
              assert.deepStrictEqual(
                cards.map((c) => [
                  c.cardId,
                  c.method,
                  c.workItem,
                  c.settlement?.outcome,
                  c.settlement?.decision,
                  c.settlement?.written,
                  c.settlement?.detail
                ]),
                [
                  [
                    "c1",
                    "item/commandExecution/requestApproval",
                    "2",
                    "stranded",
                    undefined,
                    false,
                    "open when its run died; never answered"
                  ]
                ]
              )
              assert.match(cards[0]!.title, /its opening was not recorded; from the answer journal/)
              // Once: the journal is gone with the recovery, and a second one finds nothing.
              assert.isFalse(Fs.existsSync(AnswerJournal.fileOf(`${filename}.answers`, dead)))
              assert.strictEqual((yield* ledger.recover(dead, run.id)).stranded, 0)
              assert.strictEqual(yield* ledger.markStranded(dead), 0)
            }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
          }
        })
      ),
    { timeout: 60_000 }
  )

  it.live(
    "without the answer journal the same kill loses the answer: the card is stranded as never answered, or not recorded at all",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const recorded = Path.join(dir, "recorded.db")
          const unrecorded = Path.join(dir, "unrecorded.db")
          const deadRecorded = yield* answerThenDie(recorded, "written", "recorded", "off")
          const deadUnrecorded = yield* answerThenDie(unrecorded, "written", "unrecorded", "off")
          assert.isFalse(Fs.existsSync(`${recorded}.answers`))
          yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            assert.strictEqual(yield* ledger.markStranded(deadRecorded), 1)
            const [card] = yield* ledger.cards({ runId: deadRecorded })
            assert.deepStrictEqual([card?.settlement?.outcome, card?.settlement?.decision], ["stranded", undefined])
            assert.strictEqual(card?.settlement?.detail, "open when its run died; never answered")
          }).pipe(Effect.provide(Ledger.layerSqlite({ filename: recorded })))
          yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            assert.strictEqual(yield* ledger.markStranded(deadUnrecorded), 0)
            assert.strictEqual((yield* ledger.accounting(deadUnrecorded)).cards, 0)
          }).pipe(Effect.provide(Ledger.layerSqlite({ filename: unrecorded })))
        })
      ),
    { timeout: 60_000 }
  )

  it.live(
    "a journal that cannot be read stops recovery and changes nothing; a sweep given some cards keeps the journal until every card it names is settled",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const filename = Path.join(yield* tempDir, "ledger.db")
          const dead = yield* answerThenDie(filename, "written", "recorded", "on")
          const journalFile = AnswerJournal.fileOf(`${filename}.answers`, dead)
          const kept = Fs.readFileSync(journalFile)
          yield* Effect.gen(function* () {
            const ledger = yield* Ledger.Ledger
            // Unreadable (a directory where the file was): nothing is recovered without it.
            Fs.rmSync(journalFile)
            Fs.mkdirSync(journalFile)
            const failed = yield* Effect.flip(ledger.markStranded(dead))
            assert.strictEqual(failed.reason, "Open")
            assert.deepStrictEqual(
              (yield* ledger.openCards(dead)).map((c) => c.cardId),
              ["c1"]
            )
            assert.strictEqual((yield* ledger.runs())[0]?.status, "running")
            Fs.rmdirSync(journalFile)
            Fs.writeFileSync(journalFile, kept)
            // A fleet's sweep strands only the cards it is given: the journal stays for the rest.
            assert.strictEqual(yield* ledger.markStranded(dead, []), 0)
            assert.isTrue(Fs.existsSync(journalFile))
            assert.strictEqual(yield* ledger.markStranded(dead, ["c1"]), 1)
            const [card] = yield* ledger.cards({ runId: dead })
            assert.deepStrictEqual([card?.settlement?.outcome, card?.settlement?.decision], ["stranded", "accept"])
            assert.isFalse(Fs.existsSync(journalFile), "every card the journal names is settled: it is gone")
          }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
        })
      ),
    { timeout: 60_000 }
  )
})
