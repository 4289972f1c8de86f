/**
 * `warden run --otlp URL` (and `OTEL_EXPORTER_OTLP_ENDPOINT`) against the real pinned codex and a
 * ScriptedModel: the run's trace, metrics and logs reach an in-process OTLP/HTTP receiver before
 * the process exits, with no secret in them; a collector that refuses connections costs nothing
 * but one masked line on stderr.
 */
import { assert, describe, it } from "@effect/vitest"
import * as OtlpReceiver from "@warden/test-support/OtlpReceiver"
import { freePort } from "@warden/test-support/Processes"
import { ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"

const secret = "hunter2-very-secret-value"
const lanes = {
  cmd: [
    Step.execCommand({ cmd: `echo deny-me --password ${secret}`, escalated: true, justification: "otlp test" }),
    Step.message("cmd done")
  ]
}
const prompt = `${ScriptedModel.laneMarker("cmd")} run the command`

/** A loopback port nobody listens on (it was free a moment ago). */
const closedPort = freePort

describe("warden run --otlp (real codex 0.171.0)", () => {
  it.scopedLive(
    "the run's trace (item → thread → turn → card), its metrics and logs reach the collector before exit; no secret; OTEL_SERVICE_NAME",
    () =>
      Effect.gen(function* () {
        const receiver = yield* OtlpReceiver.make
        const codex = yield* Codex.setup({ lanes })
        const cli = yield* CliProcess.spawn(
          ["run", ...codex.flags, "--json", "--approvals", "deny", "--no-state", "--otlp", receiver.url, prompt],
          { env: { ...codex.env, OTEL_SERVICE_NAME: "warden-cli-test" }, stdin: "ignore" }
        )
        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 0, signal: null }, cli.stderr())
        assert.notInclude(cli.stderr(), "exporting telemetry", "no export failed")
        assert.notInclude(cli.stderr(), "turn started", "information records go to the collector, not the terminal")

        const spans = receiver.spans()
        const card = spans.find((s) => s.name === "warden.card")
        const turn = spans.find((s) => s.spanId === card?.parentSpanId)
        const thread = spans.find((s) => s.spanId === turn?.parentSpanId)
        const item = spans.find((s) => s.spanId === thread?.parentSpanId)
        assert.strictEqual(turn?.name, "warden.turn")
        assert.strictEqual(thread?.name, "warden.thread")
        assert.strictEqual(item?.name, "warden.workItem")
        assert.strictEqual(OtlpReceiver.attribute(item?.attributes, "warden.item"), "0")
        assert.strictEqual(OtlpReceiver.attribute(card?.attributes, "warden.outcome"), "declined")
        assert.strictEqual(OtlpReceiver.attribute(card?.attributes, "warden.source"), "handler")

        const settled = receiver.metrics().get("warden.cards.settled")
        assert.strictEqual(OtlpReceiver.total(settled, { "warden.outcome": "declined", "warden.source": "handler" }), 1)
        assert.strictEqual(
          OtlpReceiver.total(receiver.metrics().get("warden.work_items"), { "warden.status": "completed" }),
          1
        )
        const cardLog = receiver.logs().find((l) => OtlpReceiver.attribute(l.attributes, "cardId") !== undefined)
        assert.strictEqual(cardLog?.traceId, item?.traceId, "the card's log record carries the item's trace id")

        const everything = receiver.allText()
        assert.include(everything, "warden-cli-test", "OTEL_SERVICE_NAME is the service name")
        assert.include(everything, "deny-me")
        assert.notInclude(everything, secret)
      }),
    { timeout: 90_000 }
  )

  it.scopedLive(
    "OTEL_EXPORTER_OTLP_ENDPOINT refusing connections: the run completes; the failure is said once on stderr, masked",
    () =>
      Effect.gen(function* () {
        const port = yield* closedPort
        const codex = yield* Codex.setup({ lanes })
        const cli = yield* CliProcess.spawn(
          ["run", ...codex.flags, "--json", "--approvals", "deny", "--no-state", prompt],
          {
            env: { ...codex.env, OTEL_EXPORTER_OTLP_ENDPOINT: `http://warden:collector-pa55@127.0.0.1:${port}` },
            stdin: "ignore"
          }
        )
        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 0, signal: null }, cli.stderr())
        const lines = cli
          .stderr()
          .split("\n")
          .filter((l) => l.includes("exporting telemetry"))
        assert.strictEqual(lines.length, 1, cli.stderr())
        assert.include(lines[0], `127.0.0.1:${port}`)
        assert.notInclude(cli.stderr(), "collector-pa55")
        assert.strictEqual(cli.json().at(-1)?.type, "run.finished")
      }),
    { timeout: 90_000 }
  )
})
