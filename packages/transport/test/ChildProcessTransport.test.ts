/**
 * What only a real child shows: signals, process groups, spawn errors, real broken pipes.
 * Real time (`it.live`); every wait is on an event, and every bound is asserted from above.
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { ChildProcessTransport, Transport } from "../src/index.js"

const peerScript = fileURLToPath(new URL("./fixtures/peer.mjs", import.meta.url))

const connectWith = (options: ChildProcessTransport.Options) =>
  Effect.flatMap(Transport.Transport, (transport) => transport.connect).pipe(
    Effect.provide(ChildProcessTransport.layer(options))
  )

const peer = (options?: Partial<ChildProcessTransport.Options>) =>
  connectWith({ command: process.execPath, args: [peerScript], ...options })

/** Gone: no such process, or a zombie (dead, waiting for a parent that may never reap it). */
const isGone = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH"
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")
  } catch {
    return true
  }
}

/** Ask the peer a command and take its one-frame answer. */
const ask = (connection: Transport.Connection, command: Transport.JsonObject) =>
  Effect.zipRight(connection.send(command), connection.incoming.take)

describe("ChildProcessTransport", () => {
  it.live(
    "a child that closes its stdout but stays alive: the end is StdoutClosed, the child is stopped",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const connection = yield* Scope.extend(peer({ drainGrace: "200 millis" }), scope)
        const { pid } = (yield* ask(connection, { cmd: "pid" })) as { pid: number }
        yield* connection.send({ cmd: "echo", id: 1, payload: "last words" })
        yield* connection.send({ cmd: "close-stdout" })
        assert.deepStrictEqual(yield* connection.incoming.take, { id: 1, echo: "last words" })
        // No close, no abort, no exit: the end comes from stdout alone.
        const ended = yield* connection.ended
        assert.strictEqual(ended.reason._tag, "StdoutClosed")
        assert.include(ended.message, "closed its stdout without exiting")
        assert.include(ended.stderrTail, "stdout closed, staying alive")
        assert.isFalse(connection.isOpen())
        assert.isTrue(isGone(pid), "the child was stopped (SIGTERM) before the end was reported")
        yield* Scope.close(scope, Exit.void)
      }),
    20_000
  )

  it.live(
    "a child that traps SIGTERM is SIGKILLed within the bound, scope close returns, nothing remains",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const connection = yield* Scope.extend(peer({ killGrace: "300 millis" }), scope)
        const { pid } = (yield* ask(connection, { cmd: "pid" })) as { pid: number }
        assert.deepStrictEqual(yield* ask(connection, { cmd: "trap-sigterm" }), { trapped: true })
        const started = Date.now()
        yield* Scope.close(scope, Exit.void)
        const elapsed = Date.now() - started
        assert.isAtLeast(elapsed, 250, "it waited for the grace period before SIGKILL")
        assert.isBelow(elapsed, 3000, "scope close is bounded")
        assert.isTrue(isGone(pid))
        const ended = connection.endedNow()
        assert.strictEqual(ended?.reason._tag, "ClosedByUs")
        assert.include(ended?.stderrTail ?? "", "ignoring SIGTERM", "SIGTERM was sent first, and the tail is complete")
      }),
    20_000
  )

  it.live(
    "the whole process group dies: a grandchild that ignores SIGTERM too",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const connection = yield* Scope.extend(peer({ killGrace: "300 millis" }), scope)
        const { pid } = (yield* ask(connection, { cmd: "pid" })) as { pid: number }
        const { grandchild } = (yield* ask(connection, { cmd: "spawn-grandchild" })) as { grandchild: number }
        assert.isFalse(isGone(grandchild))
        yield* Scope.close(scope, Exit.void)
        assert.isTrue(isGone(pid))
        assert.isTrue(isGone(grandchild))
      }),
    20_000
  )

  it.live(
    "a natural exit also takes down what the child left running",
    () =>
      Effect.gen(function* () {
        const connection = yield* peer({ killGrace: "300 millis" })
        const { grandchild } = (yield* ask(connection, { cmd: "spawn-grandchild" })) as { grandchild: number }
        yield* connection.send({ cmd: "exit", code: 0 })
        assert.deepStrictEqual((yield* connection.ended).reason, { _tag: "Exited", code: 0, signal: null })
        yield* connection.close // returns once the stop sequence (with its SIGKILL) has run
        assert.isTrue(isGone(grandchild))
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "a grandchild holding stdout open delays the report by drainGrace only, and still dies",
    () =>
      Effect.gen(function* () {
        const connection = yield* peer({ killGrace: "1500 millis", drainGrace: "200 millis" })
        const { grandchild } = (yield* ask(connection, { cmd: "spawn-grandchild", holdPipes: true })) as {
          grandchild: number
        }
        const started = Date.now()
        yield* connection.send({ cmd: "exit", code: 0 })
        assert.deepStrictEqual((yield* connection.ended).reason, { _tag: "Exited", code: 0, signal: null })
        assert.isBelow(Date.now() - started, 1000, "reported without waiting for the group's SIGKILL")
        assert.isFalse(isGone(grandchild), "its stdout still open, the grandchild outlived the report")
        yield* connection.close
        assert.isTrue(isGone(grandchild))
      }).pipe(Effect.scoped),
    20_000
  )

  it.live("a missing binary: connect fails with SpawnFailed saying what was tried", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Effect.scoped(connectWith({ command: "/nonexistent/bin/codex", args: ["app-server"] }))
      )
      assert.strictEqual(error._tag, "SpawnFailed")
      assert.strictEqual(error.command, "/nonexistent/bin/codex app-server")
      assert.include(error.message, "could not start /nonexistent/bin/codex app-server")
      assert.include(error.message, "ENOENT")
      assert.include(error.message, "not found")
    })
  )

  it.live("a missing working directory is named in the SpawnFailed message", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(Effect.scoped(peer({ cwd: "/nonexistent/workdir" })))
      assert.strictEqual(error._tag, "SpawnFailed")
      assert.include(error.message, "/nonexistent/workdir")
    })
  )

  it.live(
    "a child that closed its stdin: the next send ends the connection with WriteFailed",
    () =>
      Effect.gen(function* () {
        const script = `require("node:fs").closeSync(0); process.stdout.write('{"ready":true}\\n'); setInterval(() => {}, 1000)`
        const connection = yield* connectWith({
          command: process.execPath,
          args: ["-e", script],
          killGrace: "300 millis"
        })
        assert.deepStrictEqual(yield* connection.incoming.take, { ready: true })
        yield* connection.send({ id: 0, result: { decision: "decline" } })
        const ended = yield* connection.ended
        assert.strictEqual(ended.reason._tag, "WriteFailed")
        assert.include(ended.message, "EPIPE")
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "frames written just before the exit are all delivered before the end",
    () =>
      Effect.gen(function* () {
        const connection = yield* peer()
        const frames = Array.from({ length: 500 }, (_, n) => ({ n, pad: "p".repeat(200) }))
        yield* connection.send({ cmd: "raw", data: frames.map((f) => JSON.stringify(f) + "\n").join("") })
        yield* connection.send({ cmd: "exit", code: 2 })
        const ended = yield* connection.ended
        assert.deepStrictEqual(ended.reason, { _tag: "Exited", code: 2, signal: null })
        const received: Array<Transport.JsonObject> = []
        while (true) {
          const [chunk, done] = yield* connection.incoming.takeAll
          received.push(...chunk)
          if (done) break
        }
        assert.deepStrictEqual(received, frames)
      }).pipe(Effect.scoped),
    20_000
  )
})
