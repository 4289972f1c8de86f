/**
 * The census of a frame's large objects (`@warden/json`) changes how much of a frame the read loop
 * reads, never what it decides or shows: every adversarial frame shape (testkit Adversarial, 1 MiB
 * each) read with the census and with plain `JSON.parse` gives the same request, offers, card
 * summary, rule verdicts and safety verdict.
 *
 * A file of its own: its 80 readings of 1 MiB frames are the heaviest work of the approvals tests,
 * and in a worker of its own its heap holds nothing of the other bounded-work tests. The readings
 * run one at a time with a turn of the event loop between them (a worker that holds its event loop
 * for a minute loses its calls to vitest's main process, docs/testing.md).
 */
import { assert, describe, it } from "@effect/vitest"
import { JsonCensus } from "@warden/json"
import { ServerRequests } from "@warden/protocol"
import { macrotask } from "@warden/test-support/EventLoop"
import { allowCmd, allowPath, denyCmd, denyPath, rules } from "@warden/test-support/PolicyRules"
import { Adversarial } from "@warden/testkit"
import type { CardContext } from "../src/Card.js"
import { fileChangesOf } from "../src/Card.js"
import * as CardSummary from "../src/internal/CardSummary.js"
import * as SafetyFilter from "../src/internal/SafetyFilter.js"
import * as Policy from "../src/Policy.js"

/** Allow rules for the first word of every command shape, as in BoundedWork.test.ts. */
const allowFirstWords = ["sudo", "env", "eval", "echo", "true", "a", "bash", "cat", "/bin/bash", "ls"].map((w) =>
  allowCmd(`allow-${w}`, w)
)
const withDeny = rules(
  denyCmd("no-rm", "rm"),
  denyPath("etc", "/etc"),
  ...allowFirstWords,
  allowPath("repo", "/work/repo"),
  {
    id: "probe",
    effect: "allow",
    match: { mcp: { server: "probe" } }
  }
)
const allowOnly = rules(...allowFirstWords, allowPath("repo", "/work/repo"))

/** Everything the read loop decides and shows for one frame, read with `parse`. */
const reading = (shape: Adversarial.Shape, parse: (text: string) => unknown): string => {
  const frame = parse(shape.frame) as { id: number; method: string; params: unknown }
  const context: CardContext =
    shape.itemStarted !== undefined
      ? { fileChanges: fileChangesOf((parse(shape.itemStarted) as { params: { item: unknown } }).params.item) }
      : {}
  const request = ServerRequests.decode(frame.id, frame.method, frame.params)
  return JSON.stringify({
    request: request._tag,
    offers: request._tag === "Known" ? ServerRequests.offersFor(request) : [],
    summary: CardSummary.summarize(request, context),
    denyFirst: Policy.evaluate(withDeny, request, context),
    allowOnly: Policy.evaluate(allowOnly, request, context),
    safety: SafetyFilter.check(request)
  })
}

describe("the census and the read loop", () => {
  it("the census changes the work, never the answer: every adversarial frame decides and shows the same parsed either way", {
    timeout: 600_000
  }, async () => {
    const shapes = Adversarial.shapes({ frameBytes: 1024 * 1024 })
    assert.isAbove(shapes.length, 40)
    for (const shape of shapes) {
      await macrotask()
      const withCensus = reading(shape, JsonCensus.parse)
      await macrotask()
      assert.strictEqual(withCensus, reading(shape, JSON.parse), shape.name)
    }
  })
})
