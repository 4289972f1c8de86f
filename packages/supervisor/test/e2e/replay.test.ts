/**
 * Every golden transcript of codex 0.171.0, its server side replayed through the Supervisor on the
 * in-memory transport (TranscriptReplay), twice: cards answered as the transcript's client answered
 * them, and cards declined at once by a handler. Client actions a Warden client never makes
 * (garbage, a second answer, `thread/loaded/list`...) are skipped by the replay; each test prints
 * what it skipped and why.
 *
 * Checked for every transcript and mode:
 * - no connection ended with a protocol error; one connection per process of the transcript;
 * - every server request became a card that settled, got at most one answer, in the method's
 *   vocabulary (valid in the pinned binary's own schema), and the answer on the wire is the one the
 *   settlement recorded: the transcript's decision where the harness decided and Warden has a word
 *   for it, the method's refusal otherwise; where the transcript's answer IS the refusal, Warden's
 *   answer is byte-for-byte the transcript's;
 * - a thread whose turns all ended in the transcript ends as its last turn did (completed,
 *   interrupted, failed), turn by turn; one that did not end is stopped by the supervisor's close,
 *   its cards refused.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ApprovalEvent, Card } from "@warden/approvals"
import { TranscriptReplay } from "@warden/testkit"
import { Effect, Exit } from "effect"
import type { ReplayOutcome } from "./support/ReplayHarness.js"
import { runReplay } from "./support/ReplayHarness.js"
import type { Mode } from "./support/ReplayHarness.js"

const transcripts = TranscriptReplay.loadAll()

const settlementOf = (
  approvals: ReadonlyArray<ApprovalEvent.ApprovalEvent>,
  cardId: string
): Card.Settlement | undefined => {
  for (const e of approvals) if (e._tag === "CardSettled" && e.settlement.card.id === cardId) return e.settlement
  return undefined
}

const explain = (outcome: ReplayOutcome): string =>
  `steps: ${JSON.stringify(outcome.steps.map((s) => `${s.cue._tag}: ${s.did}`))}; ${outcome.replay.describe()}`

const check = (outcome: ReplayOutcome, mode: Mode) =>
  Effect.gen(function* () {
    const { plan } = outcome.replay
    const report = outcome.report
    const name = plan.name
    const validator = yield* TranscriptReplay.pinnedValidator

    // The connection(s): one per process, none ended by a protocol fault.
    assert.strictEqual(report.connections, plan.procs.length, `${name}: connections`)
    assert.deepStrictEqual(
      report.finishedProcs,
      plan.procs.map((p) => p.proc),
      `${name}: every process played to the end`
    )
    for (const e of outcome.events) {
      if (e._tag === "ConnectionLost" || e._tag === "ConnectionFailed") {
        assert.notStrictEqual(e.reason?._tag, "Protocol", `${name}: ${e.message}`)
      }
    }
    assert.isTrue(outcome.stdinEndedAfterClose, `${name}: closing the supervisor ended the app-server's stdin`)

    // Answers: invariants, then what each one had to be.
    assert.deepStrictEqual(TranscriptReplay.violations(report, validator), [], `${name}: answer invariants`)
    assert.strictEqual(report.serverRequests.length, plan.serverRequests.length, `${name}: server requests sent`)
    if (plan.threads.every((t) => t.endsNormally))
      assert.strictEqual(outcome.openBeforeClose, 0, `${name}: no card open at the end`)
    for (const request of report.serverRequests) {
      const what = `${name} (${mode}): ${request.method} #${JSON.stringify(request.id)}`
      const opened = outcome.approvals.find((e) => e._tag === "CardOpened" && e.card.requestId === request.id)
      assert.isDefined(opened, `${what}: a card opened`)
      const card = opened?._tag === "CardOpened" ? opened.card : undefined
      const settlement = settlementOf(outcome.approvals, card!.id)
      assert.isDefined(settlement, `${what}: the card settled`)
      const answers = TranscriptReplay.answersTo(report, request.connection, request.id)
      assert.isAtMost(answers.length, 1, `${what}: at most one answer`)
      if (!settlement!.written) {
        assert.strictEqual(answers.length, 0, `${what}: nothing written, nothing on the wire`)
        assert.include(["withdrawn", "connection-lost"], settlement!.outcome, `${what}: ${settlement!.detail}`)
        continue
      }
      assert.strictEqual(answers.length, 1, `${what}: the written answer is on the wire`)
      const wire = TranscriptReplay.answerBody(answers[0]!)
      assert.deepStrictEqual(
        wire,
        TranscriptReplay.replyBody(settlement!.reply!),
        `${what}: the wire carries the recorded reply`
      )
      const cue = outcome.steps.find((s) => s.cue._tag === "Answer" && s.cue.requestId === request.id)?.cue
      const transcriptAnswer = cue?._tag === "Answer" ? TranscriptReplay.answerBody(cue.answer) : undefined
      const decidedByHarness = settlement!.source._tag === "Person"
      const expected =
        decidedByHarness && mode === "transcript" && cue?._tag === "Answer"
          ? TranscriptReplay.wardenAnswer(request, cue.decision)
          : TranscriptReplay.refusal(request)
      assert.deepStrictEqual(
        wire,
        TranscriptReplay.replyBody(expected),
        `${what}: decided by ${settlement!.source._tag} (${settlement!.outcome})`
      )
      const refusal = TranscriptReplay.replyBody(TranscriptReplay.refusal(request))
      if (JSON.stringify(wire) === JSON.stringify(refusal)) {
        // The audit must not call a refusal an acceptance (an empty grant, no answers are refusals).
        assert.notInclude(
          ["accepted"],
          settlement!.outcome,
          `${what}: the answer written is the refusal; recorded as ${settlement!.outcome}`
        )
      }
      if (transcriptAnswer !== undefined && JSON.stringify(transcriptAnswer) === JSON.stringify(refusal)) {
        assert.deepStrictEqual(
          wire,
          transcriptAnswer,
          `${what}: the transcript refused; so did Warden, in the same words`
        )
      }
    }
    // Every card settled (none left hanging by the close).
    for (const e of outcome.approvals) {
      if (e._tag === "CardOpened")
        assert.isDefined(settlementOf(outcome.approvals, e.card.id), `${name}: card ${e.card.title} settled`)
    }

    // Work items: as the transcript's turns ended.
    assert.strictEqual(outcome.items.length, plan.threads.length, `${name}: one work item per thread`)
    for (const item of outcome.items) {
      const what = `${name} (${mode}): thread ${item.thread.threadId}`
      if (item.thread.endsNormally) {
        assert.isTrue(
          Exit.isSuccess(item.exit),
          `${what}: ${Exit.isFailure(item.exit) ? String(item.exit.cause) : ""} ${explain(outcome)}`
        )
        if (Exit.isSuccess(item.exit)) {
          const result = item.exit.value
          assert.strictEqual(result.threadId, item.thread.threadId, what)
          assert.deepStrictEqual(
            result.turns.map((t) => t.status),
            item.thread.turns.map((t) => t.status),
            `${what}: turn statuses`
          )
          assert.strictEqual(
            result.status,
            item.thread.turns[item.thread.turns.length - 1]!.status,
            `${what}: final status`
          )
        }
      } else {
        assert.isTrue(
          Exit.isFailure(item.exit),
          `${what}: a thread that never ended in the transcript is stopped by the close`
        )
      }
    }
  })

const summary = (outcome: ReplayOutcome, mode: Mode) => {
  const { plan } = outcome.replay
  const actions = plan.procs.flatMap((p) => p.actions)
  const reduced = plan.skipped.map((s) => `\n    skipped ${s.what}: ${s.why}`).join("")
  const steps = outcome.steps
    .map(
      (s) =>
        `\n    ${s.cue._tag === "Answer" ? `${s.cue.method} #${JSON.stringify(s.cue.requestId)}` : s.cue._tag.toLowerCase()}: ${s.did}`
    )
    .join("")
  const unexpected = outcome.report.unexpected
    .map(
      (u) => `\n    not in the transcript: ${String(u.frame["method"] ?? `answer #${JSON.stringify(u.frame["id"])}`)}`
    )
    .join("")
  // eslint-disable-next-line no-console
  console.info(
    `[replay] ${plan.name} (${mode}): ${actions.length} client actions (${actions.filter((a) => a.kind === "auto").length} auto, ` +
      `${actions.filter((a) => a.kind === "cue").length} cued, ${plan.skipped.length} skipped), ${plan.serverRequests.length} server requests, ` +
      `${plan.threads.length} work item(s)${steps}${reduced}${unexpected}`
  )
}

describe("every golden transcript replayed through the Supervisor", () => {
  it.scopedLive("f-hol-two-threads: thread B's work item completes while thread A's card is open", () =>
    Effect.gen(function* () {
      let checked = false
      const outcome = yield* runReplay(TranscriptReplay.load("f-hol-two-threads"), "transcript", {
        beforeAnswer: (cue, { items, supervisor }) =>
          Effect.gen(function* () {
            if (cue.requestId !== 0) return // A's card (request 0) is answered last, after B's turn completed
            const [a, b] = items
            const exitB = yield* b!.exit
            assert.isTrue(Exit.isSuccess(exitB) && exitB.value.status === "completed", "B completed")
            const open = yield* supervisor.inbox.open
            assert.deepStrictEqual(
              open.map((c) => [c.threadId, c.requestId]),
              [[a!.threadId, 0]],
              "A's card is still open"
            )
            checked = true
          })
      })
      assert.isTrue(checked)
      yield* check(outcome, "transcript")
    })
  )

  it("covers every shared transcript", () => {
    // 57 in codex-0.171.0: the a- to h- families, tools-* and x-*.
    assert.isAtLeast(transcripts.length, 57)
    for (const family of ["a-", "b-", "c-", "d-", "e-", "f-", "g-", "h-", "tools-", "x-"]) {
      assert.isTrue(
        transcripts.some((t) => t.name.startsWith(family)),
        family
      )
    }
  })

  for (const transcript of transcripts) {
    for (const mode of ["transcript", "decline"] as const) {
      it.scopedLive(`${transcript.name} (${mode})`, () =>
        Effect.gen(function* () {
          const outcome = yield* runReplay(transcript, mode)
          summary(outcome, mode)
          yield* check(outcome, mode)
        })
      )
    }
  }
})
