/**
 * Adaptive admission (AIMD) on the fake app-server, on the TestClock: pressure from codex (a rate
 * limit in a turn's `error` notification, a limit reached in `account/rateLimits/updated`, a
 * `-32001` overload answer) halves the number of items admitted, once per cooldown; each quiet
 * period adds one back, up to `concurrency`; running items are never stopped; fixed admission
 * ignores pressure.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue } from "effect"
import type { Supervisor } from "../src/index.js"
import { advance, supervise, waitFor } from "./support.js"

type Changed = Extract<Supervisor.SupervisorEvent, { _tag: "AdmissionChanged" }>
const isChanged = (e: Supervisor.SupervisorEvent): e is Changed => e._tag === "AdmissionChanged"

const rateLimited = (threadId: string) => ({
  threadId,
  turnId: "turn_1",
  willRetry: true,
  error: { message: "Rate limit reached", codexErrorInfo: "rateLimitExceeded", additionalDetails: null }
})

const adaptive = {
  concurrency: 4,
  admission: { adaptive: true, cooldown: "5 seconds", recoverAfter: "30 seconds" }
} as const

describe("adaptive admission", () => {
  it.scoped(
    "a rate limit halves admission once per storm; quiet periods add one back each, up to concurrency; running items go on",
    () =>
      Effect.gen(function* () {
        const { fake, supervisor, events } = yield* supervise(adaptive, { turns: "manual" })
        const a = yield* supervisor.start({ id: "a", prompt: "a" })
        const thread = yield* a.threadId
        yield* fake.nextRequest("turn/start")
        // A storm: three errors in a row lower the limit once.
        for (let i = 0; i < 3; i++) yield* fake.notify("error", rateLimited(thread))
        const lowered = yield* waitFor(events, isChanged)
        assert.deepStrictEqual([lowered.limit, lowered.max, lowered.reason], [2, 4, "rateLimitExceeded"])

        // a holds one permit of 2: b is admitted, c and d wait.
        const b = yield* supervisor.start({ id: "b", prompt: "b" })
        const c = yield* supervisor.start({ id: "c", prompt: "c" })
        const d = yield* supervisor.start({ id: "d", prompt: "d" })
        yield* b.threadId
        const started = () => fake.requestsSoFar().filter((r) => r.method === "thread/start").length
        assert.strictEqual(started(), 2)

        yield* advance("30 seconds")
        const up1 = yield* waitFor(events, isChanged)
        assert.deepStrictEqual([up1.limit, up1.reason], [3, "recovered"])
        yield* c.threadId
        assert.strictEqual(started(), 3)
        yield* advance("30 seconds")
        const up2 = yield* waitFor(events, isChanged)
        assert.deepStrictEqual([up2.limit, up2.reason], [4, "recovered"])
        yield* d.threadId
        assert.strictEqual(started(), 4)
        // At the top: quiet periods change nothing more.
        yield* advance("30 seconds")
        yield* advance("30 seconds")
        const more = yield* Queue.takeAll(events)
        assert.isFalse([...more].some(isChanged))
        // Nothing was stopped: a is still running its first turn.
        yield* fake.completeTurn(thread, "turn_1", "completed", { message: "a done" })
        assert.strictEqual((yield* a.await).finalMessage, "a done")
      })
  )

  it.scoped("a rate limit reached in account/rateLimits/updated lowers admission; a plain update does not", () =>
    Effect.gen(function* () {
      const { fake, supervisor, events } = yield* supervise(adaptive, { turns: "manual" })
      yield* supervisor.ready
      const snapshot = (extra: Record<string, unknown>) => ({
        rateLimits: {
          limitId: "codex",
          limitName: null,
          primary: null,
          secondary: null,
          credits: null,
          rateLimitReachedType: null,
          ...extra
        }
      })
      yield* fake.notify(
        "account/rateLimits/updated",
        snapshot({ primary: { usedPercent: 40, windowDurationMins: 300, resetsAt: null } })
      )
      yield* fake.notify("account/rateLimits/updated", snapshot({ rateLimitReachedType: "rate_limit_reached" }))
      const lowered = yield* waitFor(events, isChanged)
      assert.deepStrictEqual([lowered.limit, lowered.reason], [2, "rate limit reached (rate_limit_reached)"])
    })
  )

  it.scoped("a -32001 overload answer lowers admission (and the request is retried as before)", () =>
    Effect.gen(function* () {
      let refused = 0
      const { supervisor, events } = yield* supervise(adaptive, {
        behaviour: {
          "thread/start": () =>
            refused++ === 0
              ? { error: { code: -32001, message: "Server overloaded; retry later." } }
              : { result: { thread: { id: "thr_o" } } }
        }
      })
      const run = yield* Effect.fork(supervisor.run({ prompt: "x" }))
      const lowered = yield* waitFor(events, isChanged)
      assert.deepStrictEqual([lowered.limit, lowered.reason], [2, "the app-server is overloaded (-32001)"])
      yield* advance("200 millis")
      const result = yield* run.await
      assert.strictEqual(result._tag, "Success")
      assert.strictEqual(refused, 2)
    })
  )

  it.scoped("fixed admission (the default) ignores pressure", () =>
    Effect.gen(function* () {
      const { fake, supervisor, events } = yield* supervise({ concurrency: 2 }, { turns: "manual" })
      const a = yield* supervisor.start({ prompt: "a" })
      const thread = yield* a.threadId
      yield* fake.nextRequest("turn/start")
      yield* fake.notify("error", rateLimited(thread))
      const b = yield* supervisor.start({ prompt: "b" })
      yield* b.threadId
      const seen = yield* Queue.takeAll(events)
      assert.isFalse([...seen].some(isChanged))
    })
  )
})
