/**
 * ONE behaviour suite, run against both transports by swapping the layer: the in-memory pair (on
 * the TestClock, driven by MemoryPeer) and a real child (`node test/fixtures/peer.mjs`, real time).
 * Every wait is on an event (a frame, the end), never on a sleep.
 */
import { Buffer } from "node:buffer"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import type { Vitest } from "@effect/vitest"
import { Chunk, Effect, Exit, Mailbox, Scope, Stream } from "effect"
import type { Layer } from "effect"
import { ChildProcessTransport, MemoryTransport, Transport } from "../src/index.js"
import * as MemoryPeer from "./fixtures/MemoryPeer.js"

const MAX_FRAME_BYTES = 1024
const peerScript = fileURLToPath(new URL("./fixtures/peer.mjs", import.meta.url))

interface Implementation {
  readonly name: string
  /** `it.scoped` (TestClock) or `it.scopedLive` (real time, real processes). */
  readonly test: Vitest.Test<Scope.Scope>
  readonly layer: () => Layer.Layer<Transport.Transport>
}

const implementations: ReadonlyArray<Implementation> = [
  {
    name: "MemoryTransport",
    test: it.scoped,
    layer: () => MemoryTransport.make({ maxFrameBytes: MAX_FRAME_BYTES, program: MemoryPeer.program }).layer
  },
  {
    name: "ChildProcessTransport",
    test: it.scopedLive,
    layer: () =>
      ChildProcessTransport.layer({ command: process.execPath, args: [peerScript], maxFrameBytes: MAX_FRAME_BYTES })
  }
]

const connect = Effect.flatMap(Transport.Transport, (transport) => transport.connect)

/** Every frame until the connection's end (the mailbox ends when the end is reported). */
const allFrames = (connection: Transport.Connection) =>
  Mailbox.toStream(connection.incoming).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))

const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64")

for (const implementation of implementations) {
  describe(`Transport behaviour: ${implementation.name}`, () => {
    const test = <A, E>(name: string, body: () => Effect.Effect<A, E, Transport.Transport | Scope.Scope>) =>
      implementation.test(name, () => Effect.provide(body(), implementation.layer()), 20_000)

    test("echo round trip, in order, unicode intact", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        const payload = { text: 'héllo ✓ 日本 🦀 \u2028 "quoted"', list: [1, 2.5, null, true, { nested: "ok" }] }
        yield* connection.send({ cmd: "echo", id: 1, payload })
        yield* connection.send({ cmd: "echo", id: "two", payload: "again" })
        const first = yield* connection.incoming.take
        const second = yield* connection.incoming.take
        assert.deepStrictEqual(
          [first, second],
          [
            { id: 1, echo: payload },
            { id: "two", echo: "again" }
          ]
        )
        assert.isTrue(connection.isOpen())
        assert.isUndefined(connection.endedNow())
      }))

    test("a UTF-8 character split across writes arrives whole", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        const frame = { s: "日本 🦀 ok" }
        const bytes = new TextEncoder().encode(JSON.stringify(frame) + "\n")
        const inHan = new TextEncoder().encode('{"s":"').length + 1 // inside the 3-byte 日
        const inCrab = new TextEncoder().encode('{"s":"日本 ').length + 2 // inside the 4-byte 🦀
        const parts = [bytes.subarray(0, inHan), bytes.subarray(inHan, inCrab), bytes.subarray(inCrab)]
        yield* connection.send({ cmd: "split", parts: parts.map(base64), pauseMs: 30 })
        assert.deepStrictEqual(yield* connection.incoming.take, frame)
      }))

    test("a line that is not JSON ends the connection with Protocol; frames after it are never delivered", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        yield* connection.send({ cmd: "raw", data: '{"before":1}\nnot json at all\n{"after":2}\n' })
        const ended = yield* connection.ended
        assert.strictEqual(ended.reason._tag, "Protocol")
        assert.include(ended.message, "broke the protocol")
        assert.include(ended.message, "unreadable frame: not valid JSON")
        assert.include(ended.message, "approval request")
        assert.include(ended.message, "not json at all")
        assert.deepStrictEqual(yield* allFrames(connection), [{ before: 1 }])
        assert.isFalse(connection.isOpen())
      }))

    test("a JSON line that is not an object is a Protocol fault", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        yield* connection.send({ cmd: "raw", data: "[1,2,3]\n" })
        const ended = yield* connection.ended
        assert.strictEqual(ended.reason._tag, "Protocol")
        assert.include(ended.message, "not a JSON object")
        assert.include(ended.message, "[1,2,3]")
      }))

    test("an oversized terminated frame is a Protocol fault", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        yield* connection.send({ cmd: "raw", data: JSON.stringify({ big: "x".repeat(MAX_FRAME_BYTES) }) + "\n" })
        const ended = yield* connection.ended
        assert.strictEqual(ended.reason._tag, "Protocol")
        assert.include(ended.message, `passed the ${MAX_FRAME_BYTES}-byte bound`)
      }))

    test("an oversized frame with no newline yet is a Protocol fault before it ends", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        yield* connection.send({ cmd: "raw", data: '{"big":"' + "y".repeat(2 * MAX_FRAME_BYTES) })
        const ended = yield* connection.ended
        assert.strictEqual(ended.reason._tag, "Protocol")
        assert.include(ended.message, "with no newline")
      }))

    test("exit with code 1 after writing to stderr: Exited, and the message carries the stderr tail", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        yield* connection.send({ cmd: "stderr", data: "error: config.toml line 3: unknown key `sandbox`\n" })
        yield* connection.send({ cmd: "exit", code: 1 })
        const ended = yield* connection.ended
        assert.deepStrictEqual(ended.reason, { _tag: "Exited", code: 1, signal: null })
        assert.include(ended.message, "exited with code 1")
        assert.include(ended.message, "unknown key `sandbox`")
        assert.include(connection.stderrTail(), "config.toml line 3")
        assert.deepStrictEqual(yield* allFrames(connection), [])
      }))

    test("1 MiB of stderr does not block the peer; the tail keeps the last 64 KiB", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        const bytes = 1024 * 1024
        yield* connection.send({ cmd: "flood-stderr", bytes })
        assert.deepStrictEqual(yield* connection.incoming.take, { flooded: bytes })
        yield* connection.send({ cmd: "exit", code: 0 })
        const ended = yield* connection.ended
        assert.deepStrictEqual(ended.reason, { _tag: "Exited", code: 0, signal: null })
        assert.strictEqual(ended.stderrTail, "x".repeat(64 * 1024))
      }))

    test("send after the end fails with ConnectionClosed carrying the end", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        yield* connection.send({ cmd: "exit", code: 0 })
        const ended = yield* connection.ended
        const error = yield* Effect.flip(connection.send({ cmd: "echo", id: 1, payload: null }))
        assert(error._tag === "ConnectionClosed")
        assert.strictEqual(error.ended, ended)
        assert.include(error.message, "exited with code 0")
      }))

    test("abort(): closed at once, then ended as Protocol with the detail", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        yield* connection.send({ cmd: "echo", id: 1, payload: "up" })
        yield* connection.incoming.take
        yield* connection.abort("duplicate open request id 7")
        assert.isFalse(connection.isOpen())
        const refused = yield* Effect.flip(connection.send({ cmd: "echo", id: 2, payload: "late" }))
        assert.strictEqual(refused._tag, "ConnectionClosed")
        const ended = yield* connection.ended
        assert.deepStrictEqual(ended.reason, { _tag: "Protocol", detail: "duplicate open request id 7" })
        yield* connection.abort("a second fault") // first cause wins
        assert.strictEqual((yield* connection.ended).reason._tag, "Protocol")
        assert.include((yield* connection.ended).message, "duplicate open request id 7")
      }))

    test("close: ClosedByUs, reported when close returns, incoming ended", () =>
      Effect.gen(function* () {
        const connection = yield* connect
        yield* connection.send({ cmd: "echo", id: 1, payload: "up" })
        yield* connection.incoming.take
        yield* connection.close
        const ended = connection.endedNow()
        assert.strictEqual(ended?.reason._tag, "ClosedByUs")
        assert.isFalse(connection.isOpen())
        assert.deepStrictEqual(yield* allFrames(connection), [])
        assert.strictEqual(yield* connection.ended, ended)
        assert.include(ended?.message ?? "", "closed by Warden")
      }))

    test("closing the scope closes the connection", () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const connection = yield* Scope.extend(connect, scope)
        yield* connection.send({ cmd: "echo", id: 1, payload: "up" })
        yield* connection.incoming.take
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual(connection.endedNow()?.reason._tag, "ClosedByUs")
      }))
  })
}
