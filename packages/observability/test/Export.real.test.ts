/**
 * Observability end to end: the REAL pinned codex app-server against a ScriptedModel, a Supervisor
 * with `Observability.layer` exporting to an in-process OTLP/HTTP receiver (support/Receiver.ts).
 *
 * Three work items, one card each: accepted by the handler, declined by it, left to its deadline.
 * A password is on the accepted command's line. After the layer's scope closes (the flush on
 * shutdown), the receiver holds: one trace per work item (work item → thread → turn → card, and
 * the client requests), the metric values of those three cards, log records in those traces, and
 * no secret anywhere.
 *
 * Then a collector that refuses connections: the run completes all the same, and the failure is
 * reported once, masked.
 */
import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import * as OtlpReceiver from "@warden/test-support/OtlpReceiver"
import { freePort } from "@warden/test-support/Processes"
import { ProcessTree, RealCodex, ScriptedModel, Step } from "@warden/testkit"
import { Supervisor } from "@warden/supervisor"
import type { Telemetry, WorkItem } from "@warden/supervisor"
import { ChildProcessTransport } from "@warden/transport"
import { Effect, type Layer, Metric } from "effect"
import { Observability } from "../src/index.js"

const { points } = OtlpReceiver
const attr = OtlpReceiver.attribute

/**
 * Effect's metrics live in one registry per process, and the exporter sends their cumulative
 * values: a supervisor that ran earlier in this process (another test file in the same worker)
 * counted into the same counters. So the values before this test's run are taken from the
 * registry, and an exported total is compared with what was there before.
 */
type Baseline = ReadonlyArray<{
  readonly metricKey: { readonly name: string; readonly tags: ReadonlyArray<{ key: string; value: string }> }
  readonly metricState: unknown
}>
const registryTotal = (baseline: Baseline, name: string, labels: Readonly<Record<string, string>>): number =>
  baseline
    .filter(
      (p) =>
        p.metricKey.name === name &&
        Object.entries(labels).every(([k, v]) => p.metricKey.tags.some((t) => t.key === k && t.value === v))
    )
    .reduce((n, p) => {
      const state = p.metricState as { count?: number | bigint; value?: number }
      return n + Number(state.count ?? state.value ?? 0)
    }, 0)

const secret = "hunter2-very-secret-value"
const method = "item/commandExecution/requestApproval"

const escalated = (cmd: string, callId: string) =>
  Step.execCommand({ cmd, escalated: true, justification: "observability e2e", callId })

const script: ScriptedModel.ScriptInput = {
  lanes: {
    A: [escalated(`echo accept-me --password ${secret}`, "call_a"), Step.message("A done")],
    B: [escalated("echo decline-me", "call_b"), Step.message("B done")],
    C: [escalated("echo wait-me", "call_c"), Step.message("C done")]
  }
}

/** The handler: accept A's command, decline B's, say nothing about C's (its deadline refuses it). */
const handler = (card: { readonly summary: { readonly kind: string; readonly command?: string } }) =>
  Effect.succeed(
    card.summary.kind === "command" && card.summary.command?.includes("accept-me")
      ? Decision.Accept
      : card.summary.kind === "command" && card.summary.command?.includes("decline-me")
        ? Decision.Decline
        : undefined
  )

/** Run the three items on the real codex with `observability` provided below the supervisor. */
const runThree = (observability: Layer.Layer<Telemetry.Telemetry>) =>
  Effect.gen(function* () {
    const model = yield* ScriptedModel.make(script)
    const launch = yield* RealCodex.make({ baseUrl: model.baseUrl })
    const transport = ChildProcessTransport.layer({
      command: launch.command,
      args: launch.args,
      env: launch.env,
      cwd: launch.cwd
    })
    const item = (id: string): WorkItem.WorkItem => ({
      id,
      prompt: `${ScriptedModel.laneMarker(id)} ${id}`,
      cwd: launch.workspace,
      sandbox: "workspace-write",
      approvalPolicy: "on-request"
    })
    return yield* Effect.scoped(
      Effect.gen(function* () {
        const supervisor = yield* Supervisor.make({
          approvals: { handler, deadlines: { default: "1500 millis" } },
          concurrency: 3
        }).pipe(Effect.provide(transport))
        return yield* Effect.all([supervisor.run(item("A")), supervisor.run(item("B")), supervisor.run(item("C"))], {
          concurrency: 3
        })
      })
    ).pipe(Effect.provide(observability))
  }).pipe(Effect.scoped)

describe("Observability.layer on the real codex app-server", () => {
  it.scopedLive(
    "one trace per work item (work item → thread → turn → card), the card metrics, logs in the traces, no secret",
    () =>
      Effect.gen(function* () {
        const before = new Set(ProcessTree.liveDescendants(process.pid))
        const baseline: Baseline = yield* Metric.snapshot
        /** The exported cumulative total of `metric` (by name) with `labels`, less what this process had counted before. */
        const total = (
          metric: OtlpReceiver.Metric | undefined,
          labels: Readonly<Record<string, string>> = {}
        ): number =>
          OtlpReceiver.total(metric, labels) - (metric === undefined ? 0 : registryTotal(baseline, metric.name, labels))
        const receiver = yield* OtlpReceiver.make
        const results = yield* runThree(
          Observability.layer({
            endpoint: receiver.url,
            serviceName: "warden-test",
            exportInterval: "200 millis",
            headers: { "x-api-key": "collector-key-123" }
          })
        )
        assert.deepStrictEqual(
          results.map((r) => r.status),
          ["completed", "completed", "completed"]
        )
        // The layer's close flushed: everything below arrived before it returned.
        assert.isTrue(receiver.received().every((r) => r.headers["content-type"]?.includes("application/json")))
        assert.isTrue(receiver.received().every((r) => r.headers["x-api-key"] === "collector-key-123"))

        // --- traces ---
        const spans = receiver.spans()
        const byId = new Map(spans.map((s) => [s.spanId, s]))
        const parentOf = (span: OtlpReceiver.Span | undefined) =>
          span?.parentSpanId === undefined ? undefined : byId.get(span.parentSpanId)
        const items = spans.filter((s) => s.name === "warden.workItem")
        assert.deepStrictEqual(items.map((s) => attr(s.attributes, "warden.item")).sort(), ["A", "B", "C"])
        assert.strictEqual(new Set(items.map((s) => s.traceId)).size, 3, "one trace per work item")
        for (const root of items) assert.isUndefined(root.parentSpanId, "a work item is the root of its trace")

        const cards = spans.filter((s) => s.name === "warden.card")
        assert.strictEqual(cards.length, 3)
        const outcomes: Record<string, string> = {}
        for (const card of cards) {
          const turn = parentOf(card)
          const thread = parentOf(turn)
          const root = parentOf(thread)
          assert.strictEqual(turn?.name, "warden.turn", "a card's span is a child of its turn's")
          assert.strictEqual(thread?.name, "warden.thread")
          assert.strictEqual(root?.name, "warden.workItem")
          if (turn === undefined || root === undefined) return assert.fail("no span tree")
          assert.strictEqual(card.traceId, root.traceId)
          assert.strictEqual(attr(card.attributes, "warden.method"), method)
          assert.strictEqual(attr(card.attributes, "warden.card.kind"), "command")
          assert.strictEqual(attr(card.attributes, "warden.thread_id"), attr(turn.attributes, "warden.thread_id"))
          assert.strictEqual(attr(card.attributes, "warden.turn_id"), attr(turn.attributes, "warden.turn_id"))
          assert.isAtLeast(Number(attr(card.attributes, "warden.latency_ms")), 0)
          assert.strictEqual(attr(turn.attributes, "warden.status"), "completed")
          assert.isAbove(Number(attr(turn.attributes, "warden.tokens.input")), 0, "the turn's tokens are on its span")
          assert.isAbove(Number(attr(turn.attributes, "warden.tokens.output")), 0)
          assert.include(String(attr(card.attributes, "warden.card.title")), "echo")
          outcomes[String(attr(root.attributes, "warden.item"))] =
            `${attr(card.attributes, "warden.outcome")} ${attr(card.attributes, "warden.source")}`
        }
        assert.deepStrictEqual(outcomes, { A: "accepted handler", B: "declined handler", C: "timeout deadline" })
        const decisions = cards
          .map((c) => attr(c.attributes, "warden.decision"))
          .filter((d) => d !== undefined)
          .sort()
        assert.deepStrictEqual(decisions, ["accept", "decline"])

        // Client requests: spans under their thread (thread/start) and turn (turn/start).
        const requests = spans.filter((s) => s.name === "warden.request")
        const starts = requests.filter((s) => attr(s.attributes, "rpc.method") === "turn/start")
        assert.strictEqual(starts.length, 3)
        for (const s of starts) assert.strictEqual(parentOf(s)?.name, "warden.turn")
        assert.strictEqual(requests.filter((s) => attr(s.attributes, "rpc.method") === "thread/start").length, 3)
        assert.isTrue(
          spans.some((s) => s.name === "warden.connection"),
          "the connection's span is exported (a trace of its own)"
        )

        // --- metrics (cumulative: the last export holds the final values) ---
        const metrics = receiver.metrics()
        const settled = metrics.get("warden.cards.settled")
        assert.strictEqual(
          total(settled, { "warden.outcome": "accepted", "warden.source": "handler", "warden.method": method }),
          1
        )
        assert.strictEqual(total(settled, { "warden.outcome": "declined", "warden.source": "handler" }), 1)
        assert.strictEqual(total(settled, { "warden.outcome": "timeout", "warden.source": "deadline" }), 1)
        assert.strictEqual(total(settled), 3)
        const latency = metrics.get("warden.card.duration")
        assert.strictEqual(total(latency), 3)
        assert.strictEqual(attr(points(latency, { "warden.outcome": "timeout" })[0]?.attributes, "unit"), "ms")
        assert.isAtLeast(
          Number(points(latency, { "warden.outcome": "timeout" })[0]?.sum),
          1500,
          "the timed-out card waited its deadline"
        )
        assert.deepStrictEqual(
          points(metrics.get("warden.cards.open"), { "warden.method": method }).map((p) => p.asDouble ?? p.asInt),
          [0]
        )
        assert.strictEqual(total(metrics.get("warden.turns"), { "warden.status": "completed" }), 3)
        assert.strictEqual(total(metrics.get("warden.work_items"), { "warden.status": "completed" }), 3)
        assert.isAbove(total(metrics.get("warden.tokens"), { "warden.token.type": "input" }), 0)
        assert.isAbove(total(metrics.get("warden.tokens"), { "warden.token.type": "output" }), 0)
        assert.strictEqual(
          total(metrics.get("warden.request.duration"), { "rpc.method": "turn/start", "warden.outcome": "ok" }),
          3
        )
        assert.isAbove(total(metrics.get("warden.read_loop.lag")), 0)

        // --- logs: one per card settled and per turn, in their traces ---
        const logs = receiver.logs()
        const traceIds = new Set(items.map((s) => s.traceId))
        const cardLogs = logs.filter((l) => attr(l.attributes, "cardId") !== undefined)
        assert.strictEqual(cardLogs.length, 3)
        for (const log of cardLogs) {
          assert.isTrue(traceIds.has(log.traceId ?? ""), "a card's log record carries its work item's trace id")
          assert.strictEqual(byId.get(log.spanId ?? "")?.name, "warden.card")
          assert.isString(attr(log.attributes, "threadId"))
          assert.isString(attr(log.attributes, "turnId"))
        }
        const turnLogs = logs.filter((l) => /^turn /.test(String(l.body?.stringValue ?? "")))
        assert.isAtLeast(turnLogs.length, 6)
        for (const log of turnLogs) assert.isTrue(traceIds.has(log.traceId ?? ""))

        // --- no secret anywhere ---
        const everything = receiver.allText()
        assert.include(everything, "accept-me", "the accepted card's (masked) title is exported")
        assert.notInclude(everything, secret)
        assert.notInclude(everything, "collector-key-123")

        const left = ProcessTree.liveDescendants(process.pid).filter((p) => !before.has(p))
        assert.deepStrictEqual(left, [], "no process started by the test remains")
      }),
    { timeout: 120_000 }
  )

  it.scopedLive(
    "a collector that refuses connections: the run completes, the failure is reported once, masked",
    () =>
      Effect.gen(function* () {
        // A port that was free a moment ago and is closed now: connections are refused.
        const port = yield* freePort
        const reports: Array<string> = []
        const results = yield* runThree(
          Observability.layer({
            endpoint: `http://user:pa55word-in-url@127.0.0.1:${port}`,
            exportInterval: "100 millis",
            onExportError: (message) => Effect.sync(() => reports.push(message))
          })
        )
        assert.deepStrictEqual(
          results.map((r) => r.status),
          ["completed", "completed", "completed"]
        )
        assert.strictEqual(reports.length, 1, `reported once: ${reports.join(" | ")}`)
        assert.include(reports[0], "exporting telemetry")
        assert.include(reports[0], String(port))
        assert.notInclude(reports[0], "pa55word-in-url")
      }),
    { timeout: 120_000 }
  )
})
