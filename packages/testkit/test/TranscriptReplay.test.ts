/**
 * TranscriptReplay on its own: how transcripts are split into client actions, and a bare client on
 * the in-memory transport (no supervisor) to show what the replayed server does: ids echoed,
 * frames emitted after the action they followed, cues, passes, leftovers, EOF. The replay of every
 * transcript THROUGH the supervisor is in packages/supervisor/test/e2e/replay.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Transport } from "@warden/transport"
import { Effect, Queue } from "effect"
import { TranscriptReplay } from "../src/index.js"

type Frame = TranscriptReplay.Frame

/** A bare client on a replay's transport: send frames, read what the replayed server sent. */
const bareClient = (replay: TranscriptReplay.Replay) =>
  Effect.gen(function* () {
    const connection = yield* replay.memory.transport.connect
    const seen: Array<Frame> = []
    const read = (what: string, predicate: (frame: Frame) => boolean) =>
      Effect.gen(function* () {
        while (true) {
          const index = seen.findIndex(predicate)
          if (index >= 0) return seen.splice(0, index + 1)
          const [frames, done] = yield* connection.incoming.takeAll
          seen.push(...frames)
          if (done && !seen.some(predicate)) return yield* Effect.die(new Error(`the replay ended before ${what}`))
        }
      }).pipe(
        Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new Error(`no ${what}: ${replay.describe()}`) })
      )
    const send = (frame: Transport.JsonObject) => connection.send(frame).pipe(Effect.orDie)
    return { connection, read, send }
  })

const lines = (transcript: TranscriptReplay.Transcript, dir: "in" | "out") =>
  transcript.lines.filter((l) => l.dir === dir).length

describe("TranscriptReplay.plan", () => {
  it("accounts for every line of every transcript: out lines are actions, in lines are emitted once", () => {
    const all = TranscriptReplay.loadAll()
    assert.isAtLeast(all.length, 57)
    for (const transcript of all) {
      const plan = TranscriptReplay.plan(transcript)
      const actions = plan.procs.flatMap((p) => p.actions)
      assert.strictEqual(actions.length, lines(transcript, "out"), transcript.name)
      const emitted = plan.procs.reduce(
        (n, p) => n + p.prelude.length + p.actions.reduce((m, a) => m + a.emits.length, 0),
        0
      )
      assert.strictEqual(emitted, lines(transcript, "in"), transcript.name)
      for (const action of actions) {
        if (action.kind === "skip") assert.isString(action.why, `${transcript.name}: a skip says why`)
        else assert.isString(action.key, `${transcript.name}: a matched action has a key`)
      }
    }
  })

  it("hostile client actions are skipped with a reason; the supervisor's own are auto; a person's are cued", () => {
    const garbage = TranscriptReplay.plan(TranscriptReplay.load("h-garbage"))
    assert.deepStrictEqual(
      garbage.procs[0]!.actions.filter((a) => a.kind !== "skip").map((a) => a.key),
      [
        "request initialize",
        "notification initialized",
        "request thread/start",
        `request turn/start ${garbage.threads[0]!.threadId}`
      ]
    )
    assert.deepStrictEqual(
      garbage.skipped.slice(0, 3).map((s) => s.why),
      ["a request before initialize", "a second initialize", "raw bytes: Warden writes only whole JSON-RPC frames"]
    )

    const steer = TranscriptReplay.plan(TranscriptReplay.load("g-steer"))
    assert.deepStrictEqual(
      steer.procs[0]!.actions.map((a) => a.kind),
      ["auto", "auto", "auto", "auto", "skip", "cue", "skip"]
    )
    const cue = steer.procs[0]!.actions[5]!.cue
    assert.strictEqual(cue?._tag, "Steer")
    assert.strictEqual(cue?._tag === "Steer" ? cue.text : "", "STEER: please also say hi")

    const double = TranscriptReplay.plan(TranscriptReplay.load("h-double-answer"))
    assert.deepStrictEqual(
      double.skipped.map((s) => s.why),
      ["a second answer to the same request", "an answer to a request id the server never used"]
    )
    const answer = double.procs[0]!.actions.find((a) => a.kind === "cue")!.cue!
    assert.deepStrictEqual(answer._tag === "Answer" ? answer.decision : undefined, { _tag: "Accept" })
  })

  it("threads, turns and processes: a restart scenario resumes the thread on process 2", () => {
    const plan = TranscriptReplay.plan(TranscriptReplay.load("g-resume-after-restart"))
    assert.deepStrictEqual(
      plan.procs.map((p) => p.proc),
      [1, 2]
    )
    assert.strictEqual(plan.threads.length, 1)
    assert.deepStrictEqual(
      plan.threads[0]!.turns.map((t) => [t.proc, t.prompt, t.status]),
      [
        [1, "first message before restart", "completed"],
        [2, "second message after restart", "completed"]
      ]
    )
    assert.deepStrictEqual(
      plan.skipped.map((s) => [s.proc, s.what]),
      [
        [2, "thread/list #2"],
        [2, "thread/resume #5"]
      ]
    )

    const pending = TranscriptReplay.plan(TranscriptReplay.load("h-close-stdin-pending-approval"))
    assert.isFalse(pending.threads[0]!.endsNormally)
    assert.deepStrictEqual(
      pending.serverRequests.map((r) => [r.method, r.id]),
      [["item/commandExecution/requestApproval", 0]]
    )
  })

  it("transcriptDecision reads the capturing client's answer in Warden's words, or says it has none", () => {
    assert.deepStrictEqual(TranscriptReplay.transcriptDecision({ id: 0, result: { decision: "decline" } }), {
      _tag: "Decline"
    })
    assert.deepStrictEqual(TranscriptReplay.transcriptDecision({ id: 0, result: { answers: {} } }), {
      _tag: "Answers",
      answers: {}
    })
    assert.isUndefined(TranscriptReplay.transcriptDecision({ id: 0, result: { decision: "maybe" } }))
    assert.isUndefined(TranscriptReplay.transcriptDecision({ id: 0, error: { code: -32001, message: "no" } }))
  })
})

describe("TranscriptReplay on the in-memory transport (a bare client)", () => {
  it.scopedLive(
    "echoes the client's ids, emits what followed each action, cues answers, serves leftovers, exits on EOF",
    () =>
      Effect.gen(function* () {
        const replay = yield* TranscriptReplay.make(TranscriptReplay.load("a-cmd-decline"))
        const threadId = replay.plan.threads[0]!.threadId
        const { connection, read, send } = yield* bareClient(replay)

        // A turn/start sent too early waits for its turn in the script (matched by method + thread, not id).
        yield* send({ id: "early", method: "turn/start", params: { threadId, input: [] } })
        yield* send({ id: "init-1", method: "initialize", params: { clientInfo: { name: "bare", version: "0" } } })
        const init = yield* read("initialize response", (f) => f["id"] === "init-1")
        assert.isString((init[init.length - 1]!["result"] as Record<string, unknown>)["codexHome"])
        yield* send({ method: "initialized" })
        yield* send({ id: 41, method: "thread/start", params: {} })
        const started = yield* read("thread/start response", (f) => f["id"] === 41)
        assert.strictEqual((started[started.length - 1]!["result"] as any).thread.id, threadId)

        // The early turn/start is matched now: its response echoes "early"; then the approval request.
        const turn = yield* read("turn/start response", (f) => f["id"] === "early")
        assert.strictEqual((turn[turn.length - 1]!["result"] as any).turn.status, "inProgress")
        const approval = yield* read("approval request", (f) => f["method"] === "item/commandExecution/requestApproval")
        assert.strictEqual(approval[approval.length - 1]!["id"], 0, "server request ids are sent as they are")

        // The transcript's client answered here: a cue says so, with its decision.
        const { cue } = yield* Queue.take(replay.cues)
        assert.strictEqual(cue._tag, "Answer")
        assert.deepStrictEqual(cue._tag === "Answer" ? cue.decision : undefined, { _tag: "Decline" })
        yield* send({ id: 0, result: { decision: "decline" } })
        const completed = yield* read("turn/completed", (f) => f["method"] === "turn/completed")
        assert.isTrue(completed.some((f) => f["method"] === "serverRequest/resolved"))
        yield* replay.done
        assert.isTrue(replay.isDone())

        // Past the script: a request gets an error (nobody hangs), and it is recorded as unexpected.
        yield* send({ id: 99, method: "thread/loaded/list", params: {} })
        const error = yield* read("error for a leftover request", (f) => f["id"] === 99)
        assert.strictEqual((error[error.length - 1]!["error"] as any).code, -32600)

        yield* connection.close
        const ended = yield* connection.ended
        assert.deepStrictEqual(ended.reason, { _tag: "ClosedByUs" })
        const report = replay.report()
        assert.deepStrictEqual(report.finishedProcs, [1])
        assert.deepStrictEqual(
          report.unexpected.map((u) => u.frame["method"]),
          ["thread/loaded/list"]
        )
        assert.deepStrictEqual(
          report.serverRequests.map((r) => [r.connection, r.id, r.method]),
          [[1, 0, "item/commandExecution/requestApproval"]]
        )
        assert.deepStrictEqual(TranscriptReplay.answersTo(report, 1, 0), [{ id: 0, result: { decision: "decline" } }])
      })
  )

  it.scopedLive("a cue the harness passes on is skipped; responses to requests never sent are dropped", () =>
    Effect.gen(function* () {
      const replay = yield* TranscriptReplay.make(TranscriptReplay.load("g-interrupt-stall"))
      const threadId = replay.plan.threads[0]!.threadId
      const { read, send } = yield* bareClient(replay)
      yield* send({ id: 1, method: "initialize", params: {} })
      yield* read("initialize response", (f) => f["id"] === 1)
      yield* send({ method: "initialized" })
      yield* send({ id: 2, method: "thread/start", params: {} })
      yield* send({ id: 3, method: "turn/start", params: { threadId } })
      yield* read("turn/start response", (f) => f["id"] === 3)
      const { cue, seq } = yield* Queue.take(replay.cues)
      assert.strictEqual(cue._tag, "Interrupt")
      yield* replay.pass(seq)
      const rest = yield* read("turn/completed", (f) => f["method"] === "turn/completed")
      assert.isFalse(
        rest.some((f) => f["method"] === undefined && f["id"] !== undefined),
        "the interrupt's response was dropped"
      )
      yield* replay.done
      const report = replay.report()
      assert.deepStrictEqual(
        report.passed.map((p) => p.cue._tag),
        ["Interrupt"]
      )
      assert.deepStrictEqual(
        report.droppedResponses.map((d) => d.id),
        [4, 5]
      )
    })
  )

  it.scopedLive(
    "a process that is not the last exits at the end of its script; the next connection plays the next one",
    () =>
      Effect.gen(function* () {
        const replay = yield* TranscriptReplay.make(TranscriptReplay.load("g-resume-after-restart"))
        const threadId = replay.plan.threads[0]!.threadId
        const first = yield* bareClient(replay)
        yield* first.send({ id: 1, method: "initialize", params: {} })
        yield* first.read("initialize response", (f) => f["id"] === 1)
        yield* first.send({ method: "initialized" })
        yield* first.send({ id: 2, method: "thread/start", params: {} })
        yield* first.send({ id: 3, method: "turn/start", params: { threadId } })
        yield* first.read("turn/completed", (f) => f["method"] === "turn/completed")
        const ended = yield* first.connection.ended
        assert.deepStrictEqual(ended.reason, { _tag: "Exited", code: 0, signal: null })

        const second = yield* bareClient(replay)
        yield* second.send({ id: 1, method: "initialize", params: {} })
        yield* second.read("initialize response", (f) => f["id"] === 1)
        yield* second.send({ method: "initialized" })
        yield* second.send({ id: 2, method: "thread/resume", params: { threadId } })
        const resumed = yield* second.read("thread/resume response", (f) => f["id"] === 2)
        assert.strictEqual((resumed[resumed.length - 1]!["result"] as any).thread.id, threadId)
        yield* second.send({ id: 3, method: "turn/start", params: { threadId } })
        yield* second.read("turn/completed", (f) => f["method"] === "turn/completed")
        yield* replay.done
        assert.deepStrictEqual(replay.report().finishedProcs, [1, 2])
        assert.strictEqual(replay.report().connections, 2)
      })
  )
})

describe("TranscriptReplay.violations", () => {
  it.live("reports double answers, answers to unknown ids, invalid shapes and error frames where a result is due", () =>
    Effect.gen(function* () {
      const validator = yield* TranscriptReplay.pinnedValidator
      const request = (id: number, method: string) => ({ connection: 1, id, method, params: {} })
      const answer = (frame: Frame) => ({ connection: 1, frame })
      const report: TranscriptReplay.Report = {
        connections: 1,
        serverRequests: [
          request(0, "item/commandExecution/requestApproval"),
          request(1, "item/commandExecution/requestApproval"),
          request(2, "item/fileChange/requestApproval"),
          request(3, "account/chatgptAuthTokens/refresh")
        ],
        clientFrames: [
          answer({ id: 0, result: { decision: "decline" } }),
          answer({ id: 0, result: { decision: "accept" } }),
          answer({ id: 1, result: { decision: "maybe" } }),
          answer({ id: 2, error: { code: -32001, message: "no" } }),
          answer({ id: 3, error: { code: -32001, message: "no" } }),
          answer({ id: 7, result: { decision: "accept" } })
        ],
        matched: [],
        passed: [],
        unexpected: [],
        droppedResponses: [],
        finishedProcs: [1]
      }
      const found = TranscriptReplay.violations(report, validator)
      assert.strictEqual(found.length, 4, found.join("\n"))
      assert.match(found.join("\n"), /#1 is not valid/)
      assert.match(found.join("\n"), /item\/fileChange\/requestApproval #2 was answered with an error frame/)
      assert.match(found.join("\n"), /an answer to id 7, which the server never used/)
      assert.match(found.join("\n"), /server request 0 got 2 answers/)
      const clean = { ...report, clientFrames: report.clientFrames.filter((f) => f.frame["id"] === 0).slice(0, 1) }
      assert.deepStrictEqual(TranscriptReplay.violations(clean, validator), [])
    })
  )
})
