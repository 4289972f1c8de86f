/**
 * What only the in-memory pair can show deterministically: the stop sequence's bounds on the
 * TestClock, backpressure, each way a pipe breaks, and the order rules of the end.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Mailbox, Option, Stream, TestClock } from "effect"
import { MemoryTransport } from "../src/index.js"
import type { Transport } from "../src/index.js"

const allFrames = (mailbox: Mailbox.ReadonlyMailbox<Transport.JsonObject>) =>
  Mailbox.toStream(mailbox).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))

/** Let forked fibers (the writer, the stopper) run; no time passes. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

const setup = (options?: MemoryTransport.Options) =>
  Effect.gen(function* () {
    const memory = MemoryTransport.make(options)
    const connection = yield* memory.transport.connect
    return { connection, peer: memory.peer, memory }
  })

describe("MemoryTransport", () => {
  it.scoped("a peer that traps SIGTERM is SIGKILLed exactly when killGrace expires", () =>
    Effect.gen(function* () {
      const { connection, peer } = yield* setup({ killGrace: "2 seconds" })
      yield* peer.trapSigterm
      const closing = yield* Effect.fork(connection.close)
      yield* TestClock.adjust("1999 millis")
      assert.deepStrictEqual(peer.signals(), ["SIGTERM"])
      assert.isNull(closing.unsafePoll())
      assert.isFalse(connection.isOpen())
      assert.isUndefined(connection.endedNow())
      yield* TestClock.adjust("1 millis")
      yield* Fiber.join(closing)
      assert.deepStrictEqual(peer.signals(), ["SIGTERM", "SIGKILL"])
      assert.strictEqual(connection.endedNow()?.reason._tag, "ClosedByUs")
    })
  )

  it.scoped("an exit whose pipes stay open is reported after drainGrace; frames read meanwhile are delivered", () =>
    Effect.gen(function* () {
      const { connection, peer } = yield* setup({ drainGrace: "500 millis" })
      yield* peer.exit(3, null, { drain: false })
      assert.isFalse(connection.isOpen())
      yield* peer.sendFrame({ last: "words" }) // a child's last frames often race its exit
      yield* TestClock.adjust("499 millis")
      assert.isUndefined(connection.endedNow())
      yield* TestClock.adjust("1 millis")
      const ended = yield* connection.ended
      assert.deepStrictEqual(ended.reason, { _tag: "Exited", code: 3, signal: null })
      assert.deepStrictEqual(yield* allFrames(connection.incoming), [{ last: "words" }])
    })
  )

  it.scoped("false from write is backpressure: the writer waits for drain and keeps the order", () =>
    Effect.gen(function* () {
      const { connection, peer } = yield* setup()
      yield* peer.holdWrites
      yield* connection.send({ n: 1 })
      yield* connection.send({ n: 2 })
      yield* settle
      assert.deepStrictEqual(peer.writtenSoFar(), [])
      assert.isTrue(connection.isOpen())
      yield* connection.send({ n: 3 })
      yield* peer.releaseWrites
      yield* settle
      yield* connection.send({ n: 4 })
      yield* settle
      assert.deepStrictEqual(peer.writtenSoFar(), [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }])
      assert.isTrue(connection.isOpen())
    })
  )

  it.scoped(
    "a frame sent while nothing is queued is handed to the pipe during the send; after a write reports backpressure, later frames wait for the drain, in order",
    () =>
      Effect.gen(function* () {
        const handed: Array<Transport.JsonObject> = []
        const { connection, peer } = yield* setup({ onClientWrite: (frame) => handed.push(frame) })
        yield* settle // the writer waits for frames
        assert.strictEqual(connection.trySend({ n: 1 }), "queued")
        assert.deepStrictEqual(handed, [{ n: 1 }], "written in the sender's step")
        yield* peer.holdWrites
        connection.trySend({ n: 2 }) // written, but the pipe says: wait for drain
        connection.trySend({ n: 3 }) // so this one is queued
        yield* connection.send({ n: 4 })
        yield* settle
        assert.deepStrictEqual(peer.writtenSoFar(), [{ n: 1 }])
        yield* peer.releaseWrites
        assert.deepStrictEqual(peer.writtenSoFar(), [{ n: 1 }, { n: 2 }], "the held write, then the drain")
        yield* settle
        assert.deepStrictEqual(
          peer.writtenSoFar(),
          [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }],
          "the queued frames after the drain, in one write"
        )
        connection.trySend({ n: 5 })
        assert.deepStrictEqual(handed.at(-1), { n: 5 }, "direct again once the writer is idle")
        assert.deepStrictEqual(yield* Effect.map(peer.written.takeN(5), ([frames]) => Chunk.toReadonlyArray(frames)), [
          { n: 1 },
          { n: 2 },
          { n: 3 },
          { n: 4 },
          { n: 5 }
        ])
        assert.isTrue(connection.isOpen())
      })
  )

  describe("a direct reader (setDirectReader) handles frames in the data call", () => {
    const sizeOf = (connection: Transport.Connection) => Option.getOrElse(connection.incoming.unsafeSize(), () => -1)

    it.scoped(
      "while one is set, each chunk's frames go to it during the data call, in order, and not to incoming",
      () =>
        Effect.gen(function* () {
          const { connection, peer } = yield* setup()
          const seen: Array<ReadonlyArray<Transport.JsonObject>> = []
          connection.setDirectReader!((frames) => {
            seen.push(frames)
            return undefined
          })
          peer.unsafeSendRaw('{"n":1}\n{"n":2}\n{"n":')
          assert.deepStrictEqual(seen, [[{ n: 1 }, { n: 2 }]], "given in the call")
          peer.unsafeSendRaw("3}\n")
          assert.deepStrictEqual(seen, [[{ n: 1 }, { n: 2 }], [{ n: 3 }]])
          assert.strictEqual(sizeOf(connection), 0)
          connection.setDirectReader!(undefined)
          peer.unsafeSendRaw('{"n":4}\n')
          assert.strictEqual(seen.length, 2, "unset: to incoming")
          assert.deepStrictEqual(Chunk.toReadonlyArray((yield* connection.incoming.takeAll)[0]), [{ n: 4 }])
        })
    )

    it.scoped("what it leaves goes to incoming, and it is unset: later chunks queue behind what it left", () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup()
        let calls = 0
        connection.setDirectReader!((frames) => {
          calls++
          return frames.slice(1)
        })
        peer.unsafeSendRaw('{"n":1}\n{"n":2}\n{"n":3}\n')
        peer.unsafeSendRaw('{"n":4}\n')
        assert.strictEqual(calls, 1)
        assert.deepStrictEqual(Chunk.toReadonlyArray((yield* connection.incoming.takeAll)[0]), [
          { n: 2 },
          { n: 3 },
          { n: 4 }
        ])
      })
    )

    it.scoped("frames that arrive while it runs (a write of its own answered at once) come after what it leaves", () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup()
        let calls = 0
        connection.setDirectReader!((frames) => {
          calls++
          peer.unsafeSendRaw('{"answer":1}\n') // as a peer that answers inside our write would
          return frames.slice(1)
        })
        peer.unsafeSendRaw('{"n":1}\n{"n":2}\n')
        assert.strictEqual(calls, 1, "not called again from inside itself")
        assert.deepStrictEqual(Chunk.toReadonlyArray((yield* connection.incoming.takeAll)[0]), [
          { n: 2 },
          { answer: 1 }
        ])
        peer.unsafeSendRaw('{"n":3}\n')
        assert.strictEqual(calls, 1, "unset, since frames were left to incoming")
      })
    )

    it.scoped("frames that arrive while it runs go to incoming even when it handled everything, and it is unset", () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup()
        let calls = 0
        connection.setDirectReader!(() => {
          if (calls++ === 0) peer.unsafeSendRaw('{"answer":1}\n')
          return undefined
        })
        peer.unsafeSendRaw('{"n":1}\n')
        peer.unsafeSendRaw('{"n":2}\n')
        assert.strictEqual(calls, 1)
        assert.deepStrictEqual(Chunk.toReadonlyArray((yield* connection.incoming.takeAll)[0]), [
          { answer: 1 },
          { n: 2 }
        ])
      })
    )

    it.scoped("a direct reader that throws ends the connection (InternalDefect); the data call does not throw", () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup()
        connection.setDirectReader!(() => {
          throw new Error("the reader broke")
        })
        peer.unsafeSendRaw('{"n":1}\n')
        assert.isFalse(connection.isOpen())
        const ended = yield* connection.ended
        assert.deepStrictEqual(ended.reason, {
          _tag: "InternalDefect",
          detail: "the direct reader threw: the reader broke"
        })
      })
    )

    it.scoped("after a protocol fault nothing more reaches it", () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup()
        const seen: Array<Transport.JsonObject> = []
        connection.setDirectReader!((frames) => {
          seen.push(...frames)
          return undefined
        })
        peer.unsafeSendRaw('{"n":1}\nnot json\n{"n":2}\n')
        peer.unsafeSendRaw('{"n":3}\n')
        assert.deepStrictEqual(seen, [{ n: 1 }])
        assert.strictEqual((yield* connection.ended).reason._tag, "Protocol")
      })
    )
  })

  describe("a broken pipe ends the connection", () => {
    it.scoped("a write whose callback reports an error: WriteFailed", () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup()
        yield* peer.failNextWrite("write EPIPE")
        yield* connection.send({ answer: "decline" })
        const ended = yield* connection.ended
        assert.deepStrictEqual(ended.reason, { _tag: "WriteFailed", detail: "write EPIPE" })
        assert.include(ended.message, "writing to the app-server failed: write EPIPE")
      })
    )

    it.scoped("a write that throws: WriteFailed", () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup()
        yield* peer.breakWrites("Cannot call write after a stream was destroyed")
        yield* connection.send({ answer: "decline" })
        assert.deepStrictEqual((yield* connection.ended).reason, {
          _tag: "WriteFailed",
          detail: "Cannot call write after a stream was destroyed"
        })
      })
    )

    it.scoped(
      "a write that throws while the writer is idle: the frame is refused as closed (nothing was written), the end is WriteFailed",
      () =>
        Effect.gen(function* () {
          const { connection, peer } = yield* setup()
          yield* settle // the writer waits: the next frame is written in the call
          yield* peer.breakWrites("EPIPE")
          assert.strictEqual(connection.trySend({ answer: "decline" }), "closed")
          assert.isFalse(connection.isOpen())
          const failed = yield* Effect.flip(connection.send({ answer: "accept" }))
          assert.strictEqual(failed._tag, "ConnectionClosed")
          assert.deepStrictEqual((yield* connection.ended).reason, { _tag: "WriteFailed", detail: "EPIPE" })
          assert.deepStrictEqual(peer.writtenSoFar(), [])
        })
    )

    it.scoped(
      "a write whose callback reports an error in the call, while the writer is idle: refused as closed, the end is WriteFailed",
      () =>
        Effect.gen(function* () {
          const { connection, peer } = yield* setup()
          yield* settle
          yield* peer.failNextWrite("EPIPE")
          assert.strictEqual(connection.trySend({ answer: "decline" }), "closed")
          assert.deepStrictEqual((yield* connection.ended).reason, { _tag: "WriteFailed", detail: "EPIPE" })
        })
    )

    it.scoped("an error event on stdin: WriteFailed", () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup()
        yield* peer.stdinError("read ECONNRESET")
        assert.isFalse(connection.isOpen())
        assert.strictEqual((yield* connection.ended).reason._tag, "WriteFailed")
      })
    )

    it.scoped("an error event on stdout: ReadFailed, frames before it delivered", () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup()
        yield* peer.sendFrame({ before: true })
        yield* peer.stdoutError("read EIO")
        const ended = yield* connection.ended
        assert.deepStrictEqual(ended.reason, { _tag: "ReadFailed", detail: "read EIO" })
        assert.deepStrictEqual(yield* allFrames(connection.incoming), [{ before: true }])
      })
    )
  })

  it.scoped("close flushes frames sent before it, then ends stdin, then SIGTERM", () =>
    Effect.gen(function* () {
      const { connection, peer } = yield* setup()
      yield* connection.send({ n: 1 })
      yield* connection.send({ n: 2 })
      yield* connection.close
      assert.deepStrictEqual(yield* allFrames(peer.written), [{ n: 1 }, { n: 2 }])
      assert.isTrue(peer.stdinEnded())
      assert.deepStrictEqual(peer.signals(), ["SIGTERM"])
    })
  )

  it.scoped("after a fault, queued frames are dropped, not written", () =>
    Effect.gen(function* () {
      const { connection, peer } = yield* setup()
      yield* peer.holdWrites
      yield* connection.send({ n: 1 })
      yield* settle // the writer is now waiting for drain with {n:1}
      yield* connection.send({ n: 2 })
      yield* connection.abort("fault")
      yield* peer.releaseWrites
      yield* connection.ended
      assert.deepStrictEqual(peer.writtenSoFar(), [{ n: 1 }])
    })
  )

  it.scoped("the first cause wins: abort, then exit", () =>
    Effect.gen(function* () {
      const { connection, peer } = yield* setup()
      yield* peer.trapSigterm
      yield* connection.abort("duplicate open request id 3")
      yield* peer.exit(1)
      assert.deepStrictEqual((yield* connection.ended).reason, {
        _tag: "Protocol",
        detail: "duplicate open request id 3"
      })
    })
  )

  it.scoped("frames after a protocol fault are never delivered, even in later chunks", () =>
    Effect.gen(function* () {
      const { connection, peer } = yield* setup({ killGrace: "1 second" })
      yield* peer.trapSigterm // survives SIGTERM, so it can keep writing
      yield* peer.sendRaw('{"ok":1}\n{"id":5,"method":"item/tool/call"\n')
      yield* settle
      yield* peer.sendFrame({ late: 1 })
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* connection.ended).reason._tag, "Protocol")
      assert.deepStrictEqual(yield* allFrames(connection.incoming), [{ ok: 1 }])
      assert.deepStrictEqual(peer.signals(), ["SIGTERM", "SIGKILL"])
    })
  )

  it.scoped("a truncated last frame when stdout closes is a Protocol fault", () =>
    Effect.gen(function* () {
      const { connection, peer } = yield* setup()
      yield* peer.sendRaw('{"a":1}\n{"id":0,"method":"item/commandExecution/requestAppr')
      yield* peer.closeStdout
      const ended = yield* connection.ended
      assert.strictEqual(ended.reason._tag, "Protocol")
      assert.include(ended.message, "truncated frame")
      assert.include(ended.message, "requestAppr")
      assert.deepStrictEqual(yield* allFrames(connection.incoming), [{ a: 1 }])
    })
  )

  it.scoped("an exit seen before the truncated EOF stays Exited (the first cause wins)", () =>
    Effect.gen(function* () {
      const { connection, peer } = yield* setup()
      yield* peer.sendRaw('{"partial":')
      yield* peer.exit(0)
      assert.deepStrictEqual((yield* connection.ended).reason, { _tag: "Exited", code: 0, signal: null })
    })
  )

  it.scoped(
    "stdout closed while the peer lives: after the drain grace the end is StdoutClosed and the peer is stopped",
    () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup({ drainGrace: "500 millis" })
        yield* peer.sendFrame({ id: 1 })
        yield* peer.closeStdout
        assert.isTrue(connection.isOpen(), "not before the grace: an exiting child closes stdout first")
        const ended = yield* Effect.fork(connection.ended)
        yield* TestClock.adjust("499 millis")
        assert.isTrue(connection.isOpen())
        yield* TestClock.adjust("1 millis")
        const end = yield* Fiber.join(ended)
        assert.deepStrictEqual(end.reason, { _tag: "StdoutClosed" })
        assert.deepStrictEqual(peer.signals(), ["SIGTERM"])
        assert.isTrue(peer.hasExited())
        // The frame read before the end is still delivered.
        assert.deepStrictEqual(yield* connection.incoming.take, { id: 1 })
      })
  )

  it.scoped("stdout closed by an exiting peer: the end is the exit, not StdoutClosed", () =>
    Effect.gen(function* () {
      const { connection, peer } = yield* setup({ drainGrace: "500 millis" })
      yield* peer.closeStdout
      yield* TestClock.adjust("100 millis")
      yield* peer.exit(3)
      const end = yield* connection.ended
      assert.deepStrictEqual(end.reason, { _tag: "Exited", code: 3, signal: null })
      assert.deepStrictEqual(peer.signals(), [])
    })
  )

  it.scoped(
    "a frame that cannot be serialised is a typed failure; nothing is queued and the connection stays open",
    () =>
      Effect.gen(function* () {
        const { connection, peer } = yield* setup()
        const error = yield* Effect.flip(connection.send({ id: 1n }))
        assert.strictEqual(error._tag, "UnencodableFrame")
        assert.include(error.message, "BigInt")
        const cyclic: Record<string, unknown> = {}
        cyclic["self"] = cyclic
        assert.strictEqual(connection.trySend({ id: 2n }), "unencodable")
        assert.strictEqual(connection.trySend(cyclic), "unencodable")
        assert.isTrue(connection.isOpen())
        // The writer still works, and nothing of the refused frames reached the peer.
        assert.strictEqual(connection.trySend({ id: 3 }), "queued")
        const written = yield* peer.written.take
        assert.deepStrictEqual(written, { id: 3 })
      })
  )

  it.effect("spawnFailure makes connect fail with SpawnFailed", () =>
    Effect.gen(function* () {
      const memory = MemoryTransport.make({ spawnFailure: "spawn codex ENOENT" })
      const error = yield* Effect.flip(Effect.scoped(memory.transport.connect))
      assert.strictEqual(error._tag, "SpawnFailed")
      assert.include(error.message, "spawn codex ENOENT")
    })
  )

  it.effect("each connect gets a fresh peer and runs the program; `peer` follows the latest", () =>
    Effect.gen(function* () {
      const memory = MemoryTransport.make({
        program: (peer) =>
          Effect.flatMap(peer.written.take, (frame) => peer.sendFrame({ seen: frame })).pipe(Effect.orDie)
      })
      for (const n of [1, 2]) {
        yield* Effect.scoped(
          Effect.gen(function* () {
            const connection = yield* memory.transport.connect
            yield* connection.send({ n })
            assert.deepStrictEqual(yield* connection.incoming.take, { seen: { n } })
            assert.deepStrictEqual(memory.peer.writtenSoFar(), [{ n }])
          })
        )
      }
      assert.strictEqual(memory.connections(), 2)
    })
  )
})
