/**
 * `ThreadState`: a thread's rollout taken after a completed turn (cut after the turn's
 * `task_complete` line, waiting for codex to write it), bounded, and restored into another codex
 * home only when it is what was stored and its path stays under `sessions/`. On real files in a
 * temporary codex home; the real codex resuming a restored thread is `apps/cli/test/cluster-thread-move.test.ts`.
 */
import { assert, describe, it } from "@effect/vitest"
import { type Duration, Effect, Fiber, Option, TestClock } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ThreadState from "../src/internal/ThreadState.js"

const threadId = "01a24671-f486-78e1-ae66-a59d7082bd5b"
const rel = `sessions/2026/12/05/rollout-2026-12-05T13-43-23-${threadId}.jsonl`
const line = (o: Record<string, unknown>) => `${JSON.stringify(o)}\n`
const started = (turn: string) => line({ type: "event_msg", payload: { type: "task_started", turn_id: turn } })
const message = (text: string) => line({ type: "response_item", payload: { type: "message", text } })
const completed = (turn: string) =>
  line({ type: "event_msg", payload: { type: "task_complete", root_turn_id: turn, turn_id: turn } })

const codexHome = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-thread-state-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

const write = (home: string, text: string) => {
  Fs.mkdirSync(Path.dirname(Path.join(home, rel)), { recursive: true })
  Fs.writeFileSync(Path.join(home, rel), text)
}

/** A macrotask turn: the file reads of the fiber under test complete on the event loop. */
const macrotask = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/** Until the fiber under test waits on the test clock (between two reads of the rollout) or is done. */
const untilWaiting = (fiber: Fiber.Fiber<unknown, unknown>): Effect.Effect<void> =>
  Effect.gen(function* () {
    while ((yield* TestClock.sleeps()).length === 0 && Option.isNone(yield* Fiber.poll(fiber))) yield* macrotask
  })

/** Move the test clock on by `step` each time the fiber waits, until it is done. */
const driveToEnd = <A, E>(fiber: Fiber.Fiber<A, E>, step: Duration.DurationInput) =>
  Effect.gen(function* () {
    while (Option.isNone(yield* Fiber.poll(fiber))) {
      yield* untilWaiting(fiber)
      if (Option.isNone(yield* Fiber.poll(fiber))) yield* TestClock.adjust(step)
    }
    return yield* Fiber.join(fiber)
  })

describe("ThreadState", () => {
  it.scoped("a snapshot is cut after the completed turn's task_complete line and restores byte for byte", () =>
    Effect.gen(function* () {
      const a = yield* codexHome
      const b = yield* codexHome
      const turn1 = started("t1") + message("remember PELICAN") + completed("t1")
      // The next turn has begun: its lines are not part of the state after turn 1.
      write(a, turn1 + started("t2") + message("half of turn 2"))
      const snapshot = yield* ThreadState.capture({ codexHome: a, threadId, turnId: "t1" })
      assert.strictEqual(snapshot.path, rel)
      assert.strictEqual(snapshot.bytes, Buffer.byteLength(turn1))
      yield* ThreadState.restore(b, snapshot)
      assert.strictEqual(Fs.readFileSync(Path.join(b, rel), "utf8"), turn1)
      assert.strictEqual(Fs.statSync(Path.join(b, rel)).mode & 0o777, 0o600)
    })
  )

  it.scoped("a snapshot waits for codex to write the turn's end (bounded), then takes it", () =>
    Effect.gen(function* () {
      const home = yield* codexHome
      write(home, started("t1") + message("working"))
      const taking = yield* Effect.fork(ThreadState.capture({ codexHome: home, threadId, turnId: "t1" }))
      // It read the rollout without the turn's end, and waits to read it again.
      yield* untilWaiting(taking)
      assert.isTrue(Option.isNone(yield* Fiber.poll(taking)))
      Fs.appendFileSync(Path.join(home, rel), completed("t1"))
      const snapshot = yield* driveToEnd(taking, "100 millis")
      assert.strictEqual(snapshot.bytes, Fs.statSync(Path.join(home, rel)).size)
      // Never written: NotFlushed once the wait is over.
      write(home, started("t1") + message("still working"))
      const never = yield* Effect.fork(Effect.flip(ThreadState.capture({ codexHome: home, threadId, turnId: "t1" })))
      assert.strictEqual((yield* driveToEnd(never, "1 second")).reason, "NotFlushed")
    })
  )

  it.scoped("no rollout, or one over the bound: a typed error, nothing stored", () =>
    Effect.gen(function* () {
      const home = yield* codexHome
      assert.strictEqual(
        (yield* Effect.flip(ThreadState.capture({ codexHome: home, threadId, turnId: "t1" }))).reason,
        "NotFound"
      )
      write(home, started("t1") + message("x".repeat(2000)) + completed("t1"))
      const tooLarge = yield* Effect.flip(
        ThreadState.capture({ codexHome: home, threadId, turnId: "t1", maxBytes: 1000 })
      )
      assert.strictEqual(tooLarge.reason, "TooLarge")
    })
  )

  it.scoped("a stored state that does not match its checksum, or whose path leaves sessions/, is never written", () =>
    Effect.gen(function* () {
      const a = yield* codexHome
      const b = yield* codexHome
      write(a, started("t1") + completed("t1"))
      const snapshot = yield* ThreadState.capture({ codexHome: a, threadId, turnId: "t1" })
      const other = yield* ThreadState.capture({ codexHome: a, threadId, turnId: "t1" })
      const forged = { ...snapshot, content: Buffer.from("not gzip").toString("base64") }
      assert.strictEqual((yield* Effect.flip(ThreadState.restore(b, forged))).reason, "Corrupt")
      const wrongSum = { ...other, sha256: "0".repeat(64) }
      assert.strictEqual((yield* Effect.flip(ThreadState.restore(b, wrongSum))).reason, "Corrupt")
      for (const path of ["../outside.jsonl", "sessions/../../outside.jsonl", "/etc/passwd", "sessions//x.jsonl"]) {
        assert.strictEqual((yield* Effect.flip(ThreadState.restore(b, { ...snapshot, path }))).reason, "BadPath", path)
      }
      assert.isFalse(Fs.existsSync(Path.join(b, "sessions")))
      assert.isFalse(Fs.existsSync(Path.join(Path.dirname(b), "outside.jsonl")))
    })
  )
})
