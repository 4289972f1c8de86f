import { assert, describe, it } from "@effect/vitest"
import { exchanges, transcript, transcripts } from "@warden/test-support/Transcripts"
import { Effect, Either } from "effect"
import * as ClientMethods from "../src/ClientMethods.js"

const isClientMethod = (method: string): method is ClientMethods.ClientMethod =>
  (ClientMethods.ClientMethodNames as ReadonlyArray<string>).includes(method)

/** Every (request, successful response) pair of a method we type, across all transcripts. */
const realResults = transcripts.flatMap((t) =>
  exchanges(t).flatMap((x) =>
    isClientMethod(x.method) && "result" in x
      ? [{ transcript: t.name, method: x.method, params: x.params, result: x.result }]
      : []
  )
)

describe("ClientMethods against the real responses", () => {
  it.effect("every result the server sent for a typed method decodes, and its params encode unchanged", () =>
    Effect.gen(function* () {
      const seen = new Set<string>()
      for (const r of realResults) {
        const decoded = yield* Effect.either(ClientMethods.decodeResult(r.method, r.result))
        assert.isTrue(
          Either.isRight(decoded),
          `${r.transcript} ${r.method}: ${Either.isLeft(decoded) ? decoded.left.message : ""}`
        )
        // What we sent in the transcripts is expressible with the typed params.
        const encoded = yield* Effect.either(ClientMethods.encodeParams(r.method, r.params as never))
        assert.isTrue(Either.isRight(encoded), `${r.transcript} ${r.method} params`)
        if (Either.isRight(encoded)) assert.deepStrictEqual(encoded.right, r.params)
        seen.add(r.method)
      }
      // thread/unsubscribe (a work item's end) is in no shared transcript: its real answer, measured
      // on 0.171.0, is decoded below and checked against the binary's schema in conformance.test.ts.
      assert.deepStrictEqual(
        [...seen].sort(),
        ClientMethods.ClientMethodNames.filter((m) => m !== "thread/unsubscribe").sort()
      )
    })
  )

  it.effect("thread/unsubscribe: 0.171.0's answer decodes; the status is shown, not checked", () =>
    Effect.gen(function* () {
      const answer = yield* ClientMethods.decodeResult("thread/unsubscribe", { status: "unsubscribed" })
      assert.strictEqual(answer.status, "unsubscribed")
      assert.strictEqual(
        (yield* ClientMethods.decodeResult("thread/unsubscribe", { status: "notLoaded" })).status,
        "notLoaded"
      )
      assert.isTrue(Either.isLeft(yield* Effect.either(ClientMethods.decodeResult("thread/unsubscribe", {}))))
      assert.deepStrictEqual(yield* ClientMethods.encodeParams("thread/unsubscribe", { threadId: "t1" }), {
        threadId: "t1"
      })
    })
  )

  it.effect("decoded results carry the ids at their real places", () =>
    Effect.gen(function* () {
      const x = exchanges(transcript("a-cmd-accept"))
      const result = (method: string) => x.find((e) => e.method === method)?.result

      const init = yield* ClientMethods.decodeResult("initialize", result("initialize"))
      assert.strictEqual(init.platformOs, "linux")
      assert.strictEqual(init.codexHome, "/tmp/rc-home-a-cmd-accept-nXS1k9")

      const thread = yield* ClientMethods.decodeResult("thread/start", result("thread/start"))
      assert.strictEqual(thread.thread.id, "01a2299e-64e8-7690-b331-db5260c075fa")
      assert.strictEqual(thread.model, "mock-model")
      assert.strictEqual(thread.approvalPolicy, "on-request")
      assert.deepStrictEqual(thread.sandbox, { type: "workspaceWrite", writableRoots: [], networkAccess: false })

      const turn = yield* ClientMethods.decodeResult("turn/start", result("turn/start"))
      assert.deepStrictEqual(turn.turn, { id: "01a2299e-64fe-7071-b73d-c51b3097d0bb", status: "inProgress" })

      const steer = exchanges(transcript("g-steer-during-command")).find(
        (e) => e.method === "turn/steer" && "result" in e
      )
      const steered = yield* ClientMethods.decodeResult("turn/steer", steer?.result)
      assert.strictEqual(steered.turnId, "01a2299f-e7d0-7a32-af59-71a004da47d3")

      const resumed = exchanges(transcript("g-resume-after-restart")).find((e) => e.method === "thread/resume")
      const resume = yield* ClientMethods.decodeResult("thread/resume", resumed?.result)
      assert.strictEqual(resume.thread.id, "01a2299f-1d9f-7db3-b506-a04a004af2c5")
      assert.deepStrictEqual(resume.thread.status, { _tag: "Idle" })
    })
  )

  it.effect("a thread/start result without thread.id fails, even with a threadId beside it", () =>
    Effect.gen(function* () {
      const good = exchanges(transcript("a-cmd-accept")).find((e) => e.method === "thread/start")?.result as {
        thread: Record<string, unknown>
      }
      const { id, ...threadWithoutId } = good.thread
      const noId = { ...good, threadId: id, thread: threadWithoutId }
      const failure = yield* Effect.flip(ClientMethods.decodeResult("thread/start", noId))
      assert.strictEqual(failure._tag, "ClientResultInvalid")
      assert.strictEqual(failure.method, "thread/start")
      assert.include(failure.message, "thread/start")
      assert.include(failure.message, "id")

      for (const bad of [{ threadId: "x" }, { thread: { id: "" } }, { thread: { id: 7 } }, null]) {
        const either = yield* Effect.either(ClientMethods.decodeResult("thread/start", bad))
        assert.isTrue(Either.isLeft(either), JSON.stringify(bad))
      }
      const noTurnId = yield* Effect.either(
        ClientMethods.decodeResult("turn/start", { turnId: "x", turn: { status: "inProgress" } })
      )
      assert.isTrue(Either.isLeft(noTurnId))
      const noSteerId = yield* Effect.either(ClientMethods.decodeResult("turn/steer", { turn: { id: "x" } }))
      assert.isTrue(Either.isLeft(noSteerId))
    })
  )

  it.effect("unknown keys and unknown shown-only values are tolerated", () =>
    Effect.gen(function* () {
      const turn = yield* ClientMethods.decodeResult("turn/start", {
        turn: { id: "t", status: "queued", extra: 1 },
        more: true
      })
      assert.deepStrictEqual(turn, { turn: { id: "t", status: "unknown" } })
      const thread = yield* ClientMethods.decodeResult("thread/start", {
        thread: { id: "th", status: { type: "warming" } },
        sandbox: { type: "somethingNew" }
      })
      assert.deepStrictEqual(thread.thread.status, { _tag: "Unknown", type: "warming" })
      assert.strictEqual(thread.sandbox?.type, "unknown")
      assert.isNull(thread.model)
      const interrupted = yield* ClientMethods.decodeResult("turn/interrupt", {})
      assert.deepStrictEqual(interrupted, {})
    })
  )

  it.effect("typed(send) encodes params, sends by method and decodes the result", () =>
    Effect.gen(function* () {
      const sent: Array<[string, unknown]> = []
      const request = ClientMethods.typed((method, params) => {
        sent.push([method, params])
        return Effect.succeed(method === "turn/steer" ? { turnId: "t2" } : { turn: { id: "t1", status: "inProgress" } })
      })
      const started = yield* request("turn/start", { threadId: "th", input: [{ type: "text", text: "hi" }] })
      assert.strictEqual(started.turn.id, "t1")
      const steered = yield* request("turn/steer", {
        threadId: "th",
        expectedTurnId: "t1",
        input: [{ type: "text", text: "more" }]
      })
      assert.strictEqual(steered.turnId, "t2")
      assert.deepStrictEqual(sent, [
        ["turn/start", { threadId: "th", input: [{ type: "text", text: "hi" }] }],
        ["turn/steer", { threadId: "th", expectedTurnId: "t1", input: [{ type: "text", text: "more" }] }]
      ])
      // A result of the wrong shape fails the request with a typed error.
      const wrong = yield* Effect.flip(
        request("turn/interrupt", { threadId: "th", turnId: "t1" }).pipe(
          Effect.zipRight(request("thread/start", { cwd: "/w" }))
        )
      )
      assert.strictEqual(wrong._tag, "ClientResultInvalid")
    })
  )

  it.effect("params that do not match are never sent", () =>
    Effect.gen(function* () {
      const request = ClientMethods.typed(() => Effect.die("must not be called"))
      const refused = yield* Effect.flip(request("thread/start", { sandbox: "wide-open" as never }))
      assert.strictEqual(refused._tag, "ClientParamsInvalid")
      assert.include(refused.message, "thread/start")
    })
  )
})
