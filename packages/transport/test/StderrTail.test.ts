import { assert, describe, it } from "@effect/vitest"
import * as StderrTail from "../src/internal/StderrTail.js"

const bytes = (text: string) => new TextEncoder().encode(text)

describe("StderrTail", () => {
  it("keeps everything while under capacity", () => {
    const tail = StderrTail.make(16)
    tail.write(bytes("abc"))
    tail.write(bytes("def\n"))
    assert.strictEqual(tail.text(), "abcdef\n")
    assert.strictEqual(tail.size(), 7)
  })

  it("keeps the last bytes across many small writes (wrap-around)", () => {
    const tail = StderrTail.make(10)
    let all = ""
    for (let i = 0; i < 37; i++) {
      const piece = `${i},`
      all += piece
      tail.write(bytes(piece))
    }
    assert.strictEqual(tail.text(), all.slice(-10))
    assert.strictEqual(tail.size(), 10)
  })

  it("one write larger than the capacity keeps its end", () => {
    const tail = StderrTail.make(8)
    tail.write(bytes("0123456789abcdef"))
    assert.strictEqual(tail.text(), "89abcdef")
  })

  it("a character cut at the start of the window is dropped, not shown as U+FFFD", () => {
    const tail = StderrTail.make(7)
    tail.write(bytes("日本語")) // 9 bytes: the window starts inside 日
    assert.strictEqual(tail.text(), "本語")
  })

  it("copies what it keeps (the caller may reuse its buffer)", () => {
    const tail = StderrTail.make(8)
    const buffer = bytes("keep")
    tail.write(buffer)
    buffer.fill(0x21)
    assert.strictEqual(tail.text(), "keep")
  })

  it("defaults to 64 KiB", () => {
    const tail = StderrTail.make()
    tail.write(new Uint8Array(100 * 1024).fill(0x61))
    assert.strictEqual(tail.size(), 64 * 1024)
  })
})
