/**
 * Fuzzing the framing layer with arbitrary bytes: JSON lines mixed with random bytes, invalid
 * UTF-8 (lone continuation bytes, truncated and overlong sequences, surrogates, a BOM), blank and
 * CRLF lines, non-object JSON, and lines just under, at and over the bound, cut into chunks at any
 * byte. Whatever arrives, the decoder (and a connection on the in-memory transport) either yields
 * frames or fails with a typed protocol fault; it never throws, never hangs, never yields a frame
 * after a fault, and refuses a runaway line as soon as it passes the bound (so it never holds more
 * than the bound plus one chunk).
 *
 * The oracle is a plain reference decoder over the whole stream: cut on 0x0A, strip one CR, skip
 * empty lines, refuse a line over the bound (bytes), decode (invalid sequences become U+FFFD, a BOM
 * is dropped at the start of the stream), skip blank text, JSON.parse, demand an object.
 *
 * Both properties are asynchronous and yield to the event loop every ~25 ms of work (`yieldNow`):
 * thousands of cases in one synchronous call would starve the worker's RPC with vitest (as the
 * schedule properties did: "Timeout calling onTaskUpdate"). WARDEN_PROPERTY_SEED replays a seed.
 */
import { assert, describe, it } from "@effect/vitest"
import { yieldNow } from "@warden/test-support/EventLoop"
import { Buffer } from "node:buffer"
import { Effect, Exit, FastCheck as fc, Option, TestContext } from "effect"
import { MemoryTransport } from "../src/index.js"
import * as FrameDecoder from "../src/internal/FrameDecoder.js"
import type { Transport } from "../src/index.js"

type JsonObject = Transport.JsonObject

const encoder = new TextEncoder()
const NL = 0x0a
const CR = 0x0d

// ---------------------------------------------------------------------------------------------
// The reference

const isBlank = (text: string) => /^[ \t\r\n]*$/.test(text)

interface Expected {
  readonly frames: ReadonlyArray<JsonObject>
  readonly fault: boolean
}

export const reference = (stream: Uint8Array, max: number): Expected => {
  const frames: Array<JsonObject> = []
  let start = 0
  let first = true
  const decode = (from: number, to: number) => {
    let text = Buffer.from(stream.buffer, stream.byteOffset + from, to - from).toString("utf8")
    if (first && text.charCodeAt(0) === 0xfeff) text = text.slice(1)
    first = false
    return text
  }
  for (let nl = stream.indexOf(NL, start); nl !== -1; nl = stream.indexOf(NL, start)) {
    let end = nl
    if (end > start && stream[end - 1] === CR) end--
    if (end === start) first = false
    else {
      if (end - start > max) return { frames, fault: true }
      const text = decode(start, end)
      let value: unknown
      try {
        value = JSON.parse(text)
      } catch {
        if (!isBlank(text)) return { frames, fault: true }
      }
      if (value !== undefined) {
        if (typeof value !== "object" || value === null || Array.isArray(value)) return { frames, fault: true }
        frames.push(value as JsonObject)
      }
    }
    start = nl + 1
  }
  // An unterminated rest: over the bound (a character still incomplete, or a CR that may be half
  // of a CRLF, not counted), or anything but blank, is a fault.
  if (openBytes(stream.subarray(start)) > max) return { frames, fault: true }
  return { frames, fault: stream.length > start && !isBlank(decode(start, stream.length)) }
}

/** Bytes of an open line that count against the bound: not an incomplete last character, not a trailing CR. */
const openBytes = (line: Uint8Array): number => {
  let n = line.length
  if (n > 0 && line[n - 1] === CR) return n - 1
  // The start of a multi-byte character whose continuation bytes have not all arrived.
  let k = 0
  while (k < 3 && n - 1 - k >= 0 && (line[n - 1 - k]! & 0xc0) === 0x80) k++
  const lead = n - 1 - k >= 0 ? line[n - 1 - k]! : 0
  const needs =
    lead >= 0xf0 && lead <= 0xf4 ? 3 : lead >= 0xe0 && lead <= 0xef ? 2 : lead >= 0xc2 && lead <= 0xdf ? 1 : -1
  if (needs > k) n -= k + 1
  return n
}

// ---------------------------------------------------------------------------------------------
// Streams

const jsonObject = fc.dictionary(
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.jsonValue({ stringUnit: "binary", maxDepth: 2 }),
  { maxKeys: 4 }
)

const invalidUtf8: ReadonlyArray<ReadonlyArray<number>> = [
  [0xff],
  [0xfe, 0xff],
  [0x80],
  [0xbf, 0x80],
  [0xc0, 0x80], // overlong NUL
  [0xc3], // truncated 2-byte
  [0xe2, 0x82], // truncated 3-byte
  [0xed, 0xa0, 0x80], // a surrogate
  [0xf0, 0x82, 0x82, 0xac], // overlong euro
  [0xf4, 0x90, 0x80, 0x80], // past U+10FFFF
  [0xef, 0xbb, 0xbf] // a BOM
]

/** One piece of a stream, as bytes. */
const piece = (max: number): fc.Arbitrary<Uint8Array> =>
  fc.oneof(
    // A good frame, LF or CRLF.
    {
      weight: 6,
      arbitrary: fc
        .tuple(jsonObject, fc.boolean())
        .map(([o, crlf]) => encoder.encode(JSON.stringify(o) + (crlf ? "\r\n" : "\n")))
    },
    // Blank lines.
    { weight: 1, arbitrary: fc.constantFrom("\n", "\r\n", "  \t\n", " ").map((s) => encoder.encode(s)) },
    // Any bytes at all (newlines and invalid UTF-8 included).
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 24 }) },
    // Invalid UTF-8 on its own, or inside a JSON string (which stays a frame).
    { weight: 2, arbitrary: fc.constantFrom(...invalidUtf8).map((b) => Uint8Array.from(b)) },
    {
      weight: 2,
      arbitrary: fc
        .constantFrom(...invalidUtf8)
        .map((b) => Uint8Array.from([...encoder.encode('{"s":"'), ...b, ...encoder.encode('"}\n')]))
    },
    // JSON that is not an object.
    {
      weight: 1,
      arbitrary: fc.constantFrom("[1]\n", '"x"\n', "null\n", "42\n", '{"a":\n').map((s) => encoder.encode(s))
    },
    // Lines around the bound (content of max - 3 .. max + 3 bytes), LF or CRLF, and far past it.
    {
      weight: 2,
      arbitrary: fc
        .tuple(fc.integer({ min: -3, max: 3 }), fc.boolean(), fc.constantFrom("a", "é", "😀"))
        .map(([delta, crlf, ch]) => {
          const filler = Math.max(0, max + delta - 8)
          const unit = encoder.encode(ch).length
          const text = '{"p":"' + ch.repeat(Math.floor(filler / unit)) + "a".repeat(filler % unit) + '"}'
          return encoder.encode(text + (crlf ? "\r\n" : "\n"))
        })
    },
    {
      weight: 1,
      arbitrary: fc.integer({ min: 2, max: 4 }).map((k) => encoder.encode('{"long":"' + "x".repeat(max * k) + '"}\n'))
    }
  )

/** Bytes as a person reads them: printable ASCII as is, the rest as \xHH. */
const showBytes = (bytes: Uint8Array): string => {
  let out = ""
  for (const b of bytes)
    out +=
      b >= 0x20 && b < 0x7f && b !== 0x5c
        ? String.fromCharCode(b)
        : b === 0x0a
          ? "\\n"
          : b === 0x0d
            ? "\\r"
            : `\\x${b.toString(16).padStart(2, "0")}`
  return out
}

/** One fuzz case; it prints as the chunks the decoder is fed, one per line. */
class FuzzCase {
  constructor(
    readonly max: number,
    readonly pieces: ReadonlyArray<Uint8Array>,
    readonly cuts: ReadonlyArray<number>,
    readonly beforeLf: ReadonlyArray<number>
  ) {}
  get stream(): Uint8Array {
    return join(this.pieces)
  }
  chunks(): Array<Uint8Array> {
    const stream = this.stream
    return cut(stream, cutPoints(stream, this.cuts, this.beforeLf))
  }
  [fc.toStringMethod](): string {
    return `\nbound ${this.max} bytes; chunks fed in order:\n${this.chunks()
      .map((c, i) => `  ${i + 1}. "${showBytes(c)}"`)
      .join("\n")}\n`
  }
}

/**
 * A bound, a stream, and where it is cut into chunks: at any byte, and right before some line
 * feeds (so a CRLF is cut between its CR and its LF).
 */
const fuzzCase = fc
  .constantFrom(16, 64, 256)
  .chain((max) =>
    fc
      .tuple(
        fc.array(piece(max), { maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 4 })
      )
      .map(([pieces, cuts, beforeLf]) => new FuzzCase(max, pieces, cuts, beforeLf))
  )

/** The cut points of a case: the arbitrary ones, and just before the k-th line feed for each k. */
const cutPoints = (stream: Uint8Array, cuts: ReadonlyArray<number>, beforeLf: ReadonlyArray<number>): Array<number> => {
  const lfs: Array<number> = []
  for (let i = stream.indexOf(NL); i !== -1; i = stream.indexOf(NL, i + 1)) lfs.push(i)
  return [...cuts, ...(lfs.length > 0 ? beforeLf.map((k) => lfs[k % lfs.length]!) : [])]
}

const join = (pieces: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of pieces) {
    out.set(p, at)
    at += p.length
  }
  return out
}

const cut = (data: Uint8Array, points: ReadonlyArray<number>): Array<Uint8Array> => {
  const at = [...new Set(points.map((p) => p % (data.length + 1)))].sort((a, b) => a - b)
  const chunks: Array<Uint8Array> = []
  let from = 0
  for (const p of [...at, data.length]) {
    chunks.push(data.subarray(from, p))
    from = p
  }
  return chunks
}

/** Bytes of the line still open after `upTo` bytes of the stream (see `openBytes`). */
const openLineBytes = (stream: Uint8Array, upTo: number): number =>
  openBytes(stream.subarray(stream.lastIndexOf(NL, upTo - 1) + 1, upTo))

const isFault = (fault: unknown): boolean =>
  fault instanceof FrameDecoder.FrameFault &&
  fault._tag === "FrameFault" &&
  typeof fault.detail === "string" &&
  fault.detail.length > 0

// ---------------------------------------------------------------------------------------------
// Running: asynchronous, yielding (`yieldNow`, as the supervisor's property families)

const seed = process.env["WARDEN_PROPERTY_SEED"] !== undefined ? Number(process.env["WARDEN_PROPERTY_SEED"]) : undefined

/** `fc.assert` of an async property over `arbitrary`, each case after `yieldNow`; shrinking as usual. */
const property = <A>(
  name: string,
  arbitrary: fc.Arbitrary<A>,
  numRuns: number,
  check: (value: A) => void | Promise<void>
) =>
  it(name, async () => {
    await fc.assert(
      fc.asyncProperty(arbitrary, async (value) => {
        await yieldNow()
        await check(value)
      }),
      { numRuns, ...(seed !== undefined ? { seed } : {}) }
    )
  }, 120_000)

describe("framing fuzz", () => {
  property(
    "FrameDecoder: arbitrary bytes in any chunks yield the reference frames, or a typed fault; never throws; refuses a runaway line at the bound",
    fuzzCase,
    3_000,
    (fuzz) => {
      const { max } = fuzz
      const stream = fuzz.stream
      const expected = reference(stream, max)
      const decoder = FrameDecoder.make({ maxFrameBytes: max })
      const frames: Array<JsonObject> = []
      let fault: FrameDecoder.FrameFault | undefined
      let fed = 0
      for (const chunk of fuzz.chunks()) {
        const batch = decoder.push(chunk) // a throw fails the property
        fed += chunk.length
        if (fault !== undefined) {
          assert.strictEqual(batch.frames.length, 0, "a frame after a fault")
          continue
        }
        frames.push(...batch.frames)
        if (batch.fault !== undefined) {
          assert.isTrue(isFault(batch.fault), `not a typed fault: ${String(batch.fault)}`)
          fault = batch.fault
          continue
        }
        // Memory bound: a line open past the bound must have been refused by now (bound + one chunk at most).
        assert.isAtMost(
          openLineBytes(stream, fed),
          max,
          `a line of ${openLineBytes(stream, fed)} bytes is still held (bound ${max})`
        )
      }
      const atEnd = decoder.end()
      if (fault !== undefined) assert.isUndefined(atEnd, "a second fault after the first")
      else if (atEnd !== undefined) {
        assert.isTrue(isFault(atEnd))
        fault = atEnd
      }
      assert.strictEqual(decoder.fault() !== undefined, fault !== undefined)
      assert.deepStrictEqual(frames, expected.frames)
      assert.strictEqual(fault !== undefined, expected.fault, fault?.detail ?? "the reference decoder faults here")
    }
  )

  // On the TestClock, as `it.effect` would run it: no timer is needed (the peer exits, its pipes close).
  property(
    "a connection on the memory transport: frames arrive as the reference says, or it ends with a typed protocol error; never dies, never hangs",
    fuzzCase,
    500,
    (fuzz) =>
      Effect.runPromise(
        Effect.provide(
          Effect.gen(function* () {
            const { max } = fuzz
            const stream = fuzz.stream
            const expected = reference(stream, max)
            const memory = MemoryTransport.make({ maxFrameBytes: max })
            const exit = yield* Effect.exit(
              Effect.scoped(
                Effect.gen(function* () {
                  const connection = yield* memory.transport.connect
                  for (const chunk of fuzz.chunks()) yield* memory.peer.sendRaw(chunk)
                  yield* memory.peer.closeStdout
                  yield* memory.peer.exit(0)
                  // The end needs no timer (the peer exited and its pipes closed): it is reported at once.
                  for (let spins = 0; spins < 1_000 && connection.endedNow() === undefined; spins++)
                    yield* Effect.yieldNow()
                  const ended = connection.endedNow()
                  assert.isDefined(ended, "the connection's end was never reported")
                  const frames: Array<JsonObject> = []
                  while (true) {
                    const [batch, done] = yield* connection.incoming.takeAll
                    frames.push(...batch)
                    if (done) break
                  }
                  return { ended: ended!, frames }
                })
              )
            )
            assert.isTrue(Exit.isSuccess(exit), Exit.isFailure(exit) ? String(exit.cause) : "")
            if (Exit.isFailure(exit)) return
            const { ended, frames } = exit.value
            assert.deepStrictEqual(frames, expected.frames)
            if (expected.fault) {
              assert.strictEqual(ended.reason._tag, "Protocol")
              assert.match(ended.reason._tag === "Protocol" ? ended.reason.detail : "", /frame/)
            } else {
              assert.strictEqual(ended.reason._tag, "Exited")
            }
          }),
          TestContext.TestContext
        )
      )
  )

  // Found by the first property (shrunk): the bound counted a line's CR when a chunk ended between
  // its CR and its LF, so a line of exactly the bound was refused or not depending on where the
  // pipe happened to cut it. Fixed in FrameDecoder.residueComplete.
  it("a line of exactly the bound ending in CRLF is a frame wherever the chunks are cut", () => {
    const line = '{"p":"' + "a".repeat(56) + '"}' // 64 bytes
    for (let at = 1; at <= line.length + 1; at++) {
      const bytes = encoder.encode(line + "\r\n")
      const decoder = FrameDecoder.make({ maxFrameBytes: 64 })
      const first = decoder.push(bytes.subarray(0, at))
      const second = decoder.push(bytes.subarray(at))
      assert.isUndefined(first.fault ?? second.fault, `cut at ${at}`)
      assert.deepStrictEqual([...first.frames, ...second.frames], [{ p: "a".repeat(56) }], `cut at ${at}`)
    }
  })

  it("a 4 MiB line against a 4 KiB bound is refused with the first chunk, not after the last", () => {
    const decoder = FrameDecoder.make({ maxFrameBytes: 4_096 })
    const chunk = new Uint8Array(64 * 1_024).fill(0x61)
    let faultAt: number | undefined
    for (let i = 0; i < 64; i++) {
      const batch = decoder.push(chunk)
      if (batch.fault !== undefined) {
        faultAt ??= i
        assert.match(batch.fault.detail, /oversized frame/)
      }
    }
    assert.strictEqual(faultAt, 0)
    assert.isTrue(Option.isSome(Option.fromNullable(decoder.fault())))
  })
})
