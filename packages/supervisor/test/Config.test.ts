/**
 * Configuration is decoded once, at construction: a value the engine would choke on later (on
 * the read loop, while a card opens) is a ConfigError from `make`, naming the field.
 */
import { assert, describe, it } from "@effect/vitest"
import { Approvals } from "@warden/approvals"
import { FakeAppServer } from "@warden/testkit"
import { Duration, Effect, Either, Option } from "effect"
import { Config, Supervisor } from "../src/index.js"

describe("configuration decoded at construction", () => {
  it.scoped(
    "a per-method card deadline that Duration.decode rejects fails Supervisor.make, before any app-server starts",
    () =>
      Effect.gen(function* () {
        const fake = FakeAppServer.make()
        const error = yield* Effect.flip(
          Supervisor.make({
            approvals: { deadlines: { perMethod: { "item/commandExecution/requestApproval": "ten minutes" as never } } }
          }).pipe(Effect.provide(fake.layer))
        )
        assert.strictEqual(error._tag, "ConfigError")
        assert.include(
          error.message,
          "approvals.deadlines.perMethod.item/commandExecution/requestApproval: expected a duration"
        )
        assert.strictEqual(fake.connections(), 0, "nothing was started")
      })
  )

  it.scoped("Approvals.make checks its own configuration the same way", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(Approvals.make({ deadlines: { default: -5 }, settledHistory: 1.5 }))
      assert.strictEqual(error._tag, "ConfigError")
      assert.include(error.message, "deadlines.default: expected a duration")
      assert.include(error.message, "settledHistory: expected a whole number of at least 0, not 1.5")
    })
  )

  it("every kind of bad value is named, several at once; unknown keys are errors", () => {
    const decoded = Config.decode({
      connection: { requestTimeout: "2m", overloadRetries: -1, clientInfo: { name: "x" } },
      restart: { policy: "sometimes", backoff: {} },
      pool: 2.5,
      approvals: { rules: { rules: [{ id: "r", effect: "maybe", match: {} }] } },
      extra: true
    })
    assert.isTrue(Either.isLeft(decoded))
    const message = Either.isLeft(decoded) ? decoded.left.message : ""
    for (const part of [
      "connection.requestTimeout",
      "connection.overloadRetries",
      "connection.clientInfo.version",
      "restart.policy",
      "restart.backoff",
      "pool",
      "approvals.rules.rules.0.effect",
      "extra: unknown setting"
    ]) {
      assert.include(message, part)
    }
  })

  it("good values decode to Durations once (strings, milliseconds, Durations)", () => {
    const decoded = Config.decode({
      connection: { requestTimeout: 1500, requestTimeouts: { "turn/start": "3 seconds" } },
      approvals: { deadlines: { default: Duration.minutes(1) } },
      stallTimeout: "10 minutes",
      concurrency: 8
    })
    assert.isTrue(Either.isRight(decoded))
    if (Either.isLeft(decoded)) return
    const config = decoded.right
    assert.isTrue(Duration.isDuration(config.connection?.requestTimeout))
    assert.strictEqual(Duration.toMillis(config.connection!.requestTimeout!), 1500)
    assert.strictEqual(Duration.toMillis(config.connection!.requestTimeouts!["turn/start"]!), 3000)
    assert.strictEqual(Duration.toMillis(config.stallTimeout!), 600_000)
    assert.strictEqual(config.concurrency, 8)
  })

  it.effect("resolve applies every default once: nothing optional is left, given values win", () =>
    Effect.gen(function* () {
      const resolved = yield* Config.resolve({})
      assert.deepStrictEqual({ ...resolved, runId: "" }, { ...Config.defaults, runId: "" })
      assert.match(resolved.runId, /^r[0-9a-z]{9}-[0-9a-f]{8}$/, "a new run id when none is given")
      const given = yield* Config.resolve({
        connection: {
          requestTimeout: "3 seconds",
          requestTimeouts: { "turn/start": 500 },
          capabilities: { experimentalApi: true }
        },
        restart: { policy: "fail" },
        admission: { adaptive: true },
        runBudget: { maxTokens: 1000 },
        runId: "run-1",
        pool: 2
      })
      assert.strictEqual(Duration.toMillis(given.connection.requestTimeout), 3000)
      assert.strictEqual(Duration.toMillis(given.connection.requestTimeouts.get("turn/start")!), 500)
      assert.deepStrictEqual(given.connection.capabilities, Option.some({ experimentalApi: true }))
      assert.strictEqual(given.connection.overloadRetries, Config.defaults.connection.overloadRetries)
      assert.deepStrictEqual(given.restart, { ...Config.defaults.restart, policy: "fail" })
      assert.deepStrictEqual(given.admission, { ...Config.defaults.admission, adaptive: true })
      assert.deepStrictEqual(given.runBudget, Option.some({ maxTokens: 1000 }))
      assert.strictEqual(given.runId, "run-1")
      assert.strictEqual(given.pool, 2)
      const error = yield* Effect.flip(Config.resolve({ pool: 0 }))
      assert.include(error.message, "pool: expected a whole number of at least 1")
    })
  )
})
