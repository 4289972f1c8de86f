import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import * as FrameDecoder from "../src/internal/FrameDecoder.js"
import type { Transport } from "../src/index.js"

const encoder = new TextEncoder()
const bytes = (text: string) => encoder.encode(text)

/** Cut `data` at the given points (any naturals; taken modulo the length, deduplicated, sorted). */
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

/** Push every chunk, then end; collect the frames and the (first) fault. */
const decodeAll = (chunks: ReadonlyArray<Uint8Array>, options?: FrameDecoder.Options) => {
  const decoder = FrameDecoder.make(options)
  const frames: Array<Transport.JsonObject> = []
  let fault: FrameDecoder.FrameFault | undefined
  for (const chunk of chunks) {
    const batch = decoder.push(chunk)
    frames.push(...batch.frames)
    fault ??= batch.fault
  }
  fault ??= decoder.end()
  return { frames, fault, decoder }
}

// Objects whose keys and strings use the whole code point range (astral included).
const jsonObject = FastCheck.dictionary(
  FastCheck.string({ unit: "binary", maxLength: 8 }),
  FastCheck.jsonValue({ stringUnit: "binary", maxDepth: 3 }),
  { maxKeys: 5 }
)

describe("FrameDecoder", () => {
  it.prop(
    "any objects, any line endings, any cut points: the same frames",
    {
      objects: FastCheck.array(jsonObject, { maxLength: 8 }),
      crlf: FastCheck.array(FastCheck.boolean(), { minLength: 8, maxLength: 8 }),
      blank: FastCheck.array(FastCheck.constantFrom("", "\n", "\r\n", "  \t\n"), { minLength: 8, maxLength: 8 }),
      cuts: FastCheck.array(FastCheck.nat(), { maxLength: 30 })
    },
    ({ blank, crlf, cuts, objects }) => {
      const text = objects.map((o, i) => blank[i] + JSON.stringify(o) + (crlf[i] ? "\r\n" : "\n")).join("")
      const { fault, frames } = decodeAll(cut(bytes(text), cuts))
      assert.isUndefined(fault)
      // Compare with what JSON itself round-trips (e.g. -0 becomes 0, "__proto__" an own key).
      assert.deepStrictEqual(
        frames,
        objects.map((o) => JSON.parse(JSON.stringify(o)))
      )
    },
    { fastCheck: { numRuns: 300 } }
  )

  it("a whole chunk of frames comes back as one batch", () => {
    const batch = FrameDecoder.make().push(bytes('{"a":1}\n{"b":2}\n{"c":'))
    assert.deepStrictEqual(batch.frames, [{ a: 1 }, { b: 2 }])
    assert.isUndefined(batch.fault)
  })

  it("a character cut across chunks arrives whole (every cut inside a 4-byte character)", () => {
    const data = bytes('{"s":"🦀"}\n')
    for (const at of [7, 8, 9]) {
      const { fault, frames } = decodeAll([data.subarray(0, at), data.subarray(at)])
      assert.isUndefined(fault)
      assert.deepStrictEqual(frames, [{ s: "🦀" }])
    }
  })

  it("a long frame over many chunks (the long-line path) decodes, with the frames around it", () => {
    const big = { method: "turn/diff/updated", params: { diff: "+ 日本 line\n".repeat(20_000) } }
    const data = bytes(`{"a":1}\n${JSON.stringify(big)}\r\n{"b":2}\n`)
    const chunks = cut(
      data,
      Array.from({ length: data.length / 997 }, (_, i) => i * 997 + 5)
    )
    const { fault, frames } = decodeAll(chunks)
    assert.isUndefined(fault)
    assert.deepStrictEqual(frames, [{ a: 1 }, big, { b: 2 }])
  })

  it("a byte-order mark is dropped at the very start of the stream only", () => {
    const bom = new Uint8Array([0xef, 0xbb, 0xbf])
    const first = decodeAll([bom.subarray(0, 2), new Uint8Array([...bom.subarray(2), ...bytes('{"a":1}\n')])])
    assert.isUndefined(first.fault)
    assert.deepStrictEqual(first.frames, [{ a: 1 }])
    const later = decodeAll([bytes('{"a":1}\n'), new Uint8Array([...bom, ...bytes('{"b":2}\n')])])
    assert.deepStrictEqual(later.frames, [{ a: 1 }])
    assert.include(later.fault?.message ?? "", "not valid JSON")
  })

  it("invalid UTF-8 inside a string becomes U+FFFD, as TextDecoder decodes it; the frame survives", () => {
    const data = new Uint8Array([...bytes('{"s":"a'), 0xff, 0xe2, 0x82, ...bytes('b"}\n')])
    const { fault, frames } = decodeAll([data])
    assert.isUndefined(fault)
    assert.deepStrictEqual(frames, [{ s: new TextDecoder().decode(data.subarray(6, 10)) + "b" }])
    assert.deepStrictEqual(frames, [{ s: "a\uFFFD\uFFFDb" }])
  })

  it("the residue is a copy: a caller may reuse its buffer for the next chunk", () => {
    const decoder = FrameDecoder.make()
    const buffer = new Uint8Array(16)
    const first = bytes('{"k":"ab')
    buffer.set(first)
    assert.deepStrictEqual(decoder.push(buffer.subarray(0, first.length)).frames, [])
    buffer.fill(0x7a) // "zzzz...": overwrites what the decoder was given
    const second = bytes('cd"}\n')
    buffer.set(second)
    assert.deepStrictEqual(decoder.push(buffer.subarray(0, second.length)).frames, [{ k: "abcd" }])
  })

  it("blank and whitespace-only lines are skipped", () => {
    const { fault, frames } = decodeAll([bytes('\n\r\n   \n\t\r\n{"a":1}\n\n')])
    assert.isUndefined(fault)
    assert.deepStrictEqual(frames, [{ a: 1 }])
  })

  it("a line that is not JSON is fatal, quotes the line, and stops the decoder", () => {
    const decoder = FrameDecoder.make()
    const batch = decoder.push(
      bytes('{"ok":1}\n{"method":"item/commandExecution/requestApproval","id":4\n{"next":2}\n')
    )
    assert.deepStrictEqual(batch.frames, [{ ok: 1 }])
    assert.include(batch.fault?.message ?? "", "unreadable frame: not valid JSON")
    assert.include(batch.fault?.message ?? "", "approval request whose id is now lost")
    assert.include(batch.fault?.message ?? "", "requestApproval")
    assert.strictEqual(decoder.fault(), batch.fault)
    assert.deepStrictEqual(decoder.push(bytes('{"later":3}\n')).frames, [])
    assert.isUndefined(decoder.end())
  })

  for (const [line, kind] of [
    ["[1,2]", "array"],
    ["null", "null"],
    ["42", "number"],
    ['"text"', "string"],
    ["true", "boolean"]
  ]) {
    it(`a JSON ${kind} is fatal: not a JSON object`, () => {
      const { fault, frames } = decodeAll([bytes(`{"a":1}\n${line}\n`)])
      assert.deepStrictEqual(frames, [{ a: 1 }])
      assert.include(fault?.message ?? "", "unreadable frame: not a JSON object")
      assert.include(fault?.message ?? "", JSON.stringify(line)) // quoted, so control characters show
    })
  }

  it("quotes at most the first 200 characters of the offending line", () => {
    const { fault } = decodeAll([bytes("z".repeat(5000) + "\n")])
    assert.include(fault?.message ?? "", `"${"z".repeat(200)}"`)
    assert.notInclude(fault?.message ?? "", "z".repeat(201))
    assert.include(fault?.message ?? "", "first 200 of 5000 characters")
  })

  describe("the bound, in UTF-8 bytes", () => {
    const max = 64
    const frameOf = (size: number) => {
      const text = JSON.stringify({ s: "x".repeat(size - 8) }) // {"s":""} is 8 bytes
      assert.strictEqual(text.length, size)
      return text
    }

    it("a terminated line of exactly the bound passes", () => {
      const { fault, frames } = decodeAll([bytes(frameOf(max) + "\n")], { maxFrameBytes: max })
      assert.isUndefined(fault)
      assert.strictEqual(frames.length, 1)
    })

    it("a terminated line one byte over is fatal before it is parsed", () => {
      const { fault, frames } = decodeAll([bytes('{"a":1}\n' + frameOf(max + 1) + "\n")], { maxFrameBytes: max })
      assert.deepStrictEqual(frames, [{ a: 1 }])
      assert.include(fault?.message ?? "", "oversized frame")
      assert.include(fault?.message ?? "", `passed the ${max}-byte bound`)
    })

    it("counts bytes, not characters: 20 three-byte characters are 68 bytes", () => {
      const line = JSON.stringify({ s: "日".repeat(20) }) // 28 UTF-16 units, 68 bytes
      const { fault } = decodeAll([bytes(line + "\n")], { maxFrameBytes: max })
      assert.include(fault?.message ?? "", "a line of at least 68 bytes")
    })

    it("an unterminated residue over the bound is fatal at once, without waiting for a newline or EOF", () => {
      const decoder = FrameDecoder.make({ maxFrameBytes: max })
      assert.isUndefined(decoder.push(bytes('{"s":"' + "y".repeat(40))).fault)
      const batch = decoder.push(bytes("y".repeat(40)))
      assert.include(batch.fault?.message ?? "", "86 bytes arrived with no newline")
      assert.isUndefined(decoder.end())
    })

    it("the residue after the last newline of a chunk is bounded too", () => {
      const { fault, frames } = decodeAll([bytes('{"a":1}\n' + "q".repeat(max + 1))], { maxFrameBytes: max })
      assert.deepStrictEqual(frames, [{ a: 1 }])
      assert.include(fault?.message ?? "", "with no newline")
    })

    it("the residue is counted in bytes; a partial character counts once it completes", () => {
      const decoder = FrameDecoder.make({ maxFrameBytes: 10 })
      const han = bytes("日")
      assert.isUndefined(decoder.push(bytes("日日日")).fault) // 9 bytes, 3 characters
      assert.isUndefined(decoder.push(han.subarray(0, 2)).fault) // held by the decoder
      assert.include(decoder.push(han.subarray(2)).fault?.message ?? "", "12 bytes arrived with no newline")
    })

    it("a long line growing chunk by chunk is measured exactly once it may be over", () => {
      const decoder = FrameDecoder.make({ maxFrameBytes: 300 })
      assert.isUndefined(decoder.push(bytes('{"s":"' + "é".repeat(50))).fault) // 106 bytes, 56 units
      assert.isUndefined(decoder.push(bytes("é".repeat(50))).fault) // 206 bytes, 106 units: now measured
      assert.isUndefined(decoder.push(bytes("é".repeat(47))).fault) // 300 bytes: exactly the bound
      assert.include(decoder.push(bytes("z")).fault?.message ?? "", "301 bytes arrived with no newline")
    })
  })

  describe("end of stream", () => {
    it("a truncated last frame is a fault reported by end()", () => {
      const decoder = FrameDecoder.make()
      assert.deepStrictEqual(decoder.push(bytes('{"a":1}\n{"id":0,"method":"item/fileChange/req')).frames, [{ a: 1 }])
      const fault = decoder.end()
      assert.include(fault?.message ?? "", "truncated frame")
      assert.include(fault?.message ?? "", "item/fileChange/req")
      assert.isUndefined(decoder.end())
      assert.deepStrictEqual(decoder.push(bytes('{"b":2}\n')).frames, [])
    })

    it("a complete object without its newline is still truncated", () => {
      assert.include(decodeAll([bytes('{"a":1}')]).fault?.message ?? "", "truncated frame")
    })

    it("a partial character at EOF is truncated too", () => {
      assert.include(decodeAll([bytes("日").subarray(0, 1)]).fault?.message ?? "", "truncated frame")
    })

    it("a clean end, or only whitespace after the last newline, is no fault", () => {
      assert.isUndefined(decodeAll([bytes('{"a":1}\n')]).fault)
      assert.isUndefined(decodeAll([bytes('{"a":1}\n  \r')]).fault)
      assert.isUndefined(decodeAll([]).fault)
    })
  })

  it("rejects a bound that is not a positive integer", () => {
    assert.throws(() => FrameDecoder.make({ maxFrameBytes: 0 }), /positive integer/)
  })
})
