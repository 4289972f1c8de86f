/**
 * Newline-delimited JSON framing: bytes in, JSON objects out. Pure, synchronous and stateful, so a
 * transport can decode each stdout chunk inside its `data` callback, in order, with no fiber hop.
 *
 * - Lines are cut on the BYTES (0x0A), then each line is decoded on its own. 0x0A never occurs
 *   inside a multi-byte UTF-8 sequence, so a character cut across two chunks is still decoded
 *   whole (the per-chunk decoders in @effect/platform turn it into U+FFFD). Decoding per line also
 *   keeps ASCII lines one-byte strings, which JSON.parse reads fastest, where decoding a whole
 *   chunk made every frame of it two-byte as soon as one character of the chunk was not ASCII
 *   (measured in bench/: the realistic mix decodes about a third faster).
 * - Decoding replaces invalid sequences by U+FFFD exactly as `TextDecoder("utf-8", { fatal: false })`
 *   does (Buffer's `toString("utf8", start, end)`, which needs no view object per line): an
 *   invalid byte outside a JSON string
 *   already makes the line unparseable (U+FFFD is not JSON syntax), and inside a string it damages
 *   only that text, never the framing or an id; a throwing decoder would only add a second fault
 *   path. A byte-order mark is dropped at the very start of the stream only, as a streaming
 *   decoder does.
 * - `\r\n` is tolerated; blank (whitespace-only) lines are skipped.
 * - Every fault is fatal and final: a line that is not JSON, or not a JSON object, may have been an
 *   approval request whose id is now lost, so there is nothing safe to skip to. After a fault the
 *   decoder yields nothing more.
 * - The bound is in BYTES on the wire, without the line's terminator (for valid UTF-8, exactly the
 *   UTF-8 size of the decoded text). It is checked on every terminated line BEFORE it is decoded
 *   and parsed, and on the unterminated residue after each chunk (a character still incomplete at
 *   the end of the residue counts once it completes), so a runaway line is refused without
 *   waiting for its end and never holds more than the bound plus one chunk.
 *
 * Hot path: one `indexOf(0x0A)` per line over the chunk's bytes, one `toString` + `JSON.parse` per
 * frame (`JsonCensus.parse`: a line of 64 KiB or more is also scanned once, so that what reads its
 * large objects knows their sizes without enumerating them), one array per chunk that yields frames. The residue (a line still open at the end of a
 * chunk) is kept as copied byte pieces and joined once when its newline arrives: linear in the
 * line's length however many chunks it spans. No regex, no per-frame objects of our own.
 */
import { Buffer } from "node:buffer"
import { JsonCensus } from "@warden/json"
import { Data } from "effect"
import type { JsonObject } from "../Transport.js"

/** 16 MiB: generous (a `turn/diff/updated` carries a whole turn's diff), but bounded. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024

/** How much of an offending line a fault quotes. */
const PREVIEW_CHARS = 200

const MAYBE_APPROVAL = "it may have been an approval request whose id is now lost"

/** Why the byte stream stopped being readable. Fatal for the connection. */
export class FrameFault extends Data.TaggedError("FrameFault")<{ readonly detail: string }> {
  override get message(): string {
    return this.detail
  }
}

/** What one chunk produced: the frames before any fault, in order, then the fault if there was one. */
export interface FrameBatch {
  readonly frames: ReadonlyArray<JsonObject>
  readonly fault: FrameFault | undefined
}

/** Methods, not detachable functions: call them on the decoder (`decoder.push(chunk)`). */
export interface FrameDecoder {
  /**
   * Decode one chunk. A non-empty `frames` array is fresh and owned by the caller (it may be
   * handed to `Mailbox.unsafeOfferAll`, which keeps it without copying).
   */
  push(bytes: Uint8Array): FrameBatch
  /**
   * The stream ended. A non-blank unterminated residue is a truncated frame: a fault.
   * Afterwards the decoder yields nothing more.
   */
  end(): FrameFault | undefined
  /** The fault that stopped this decoder, if any. */
  fault(): FrameFault | undefined
}

export interface Options {
  /** Longest accepted line, in UTF-8 bytes. Default 16 MiB. */
  readonly maxFrameBytes?: number | undefined
}

const EMPTY: FrameBatch = Object.freeze({ frames: Object.freeze([]) as ReadonlyArray<JsonObject>, fault: undefined })
const NEWLINE = 0x0a
const CR = 0x0d

const preview = (line: string): string =>
  JSON.stringify(line.length > PREVIEW_CHARS ? line.slice(0, PREVIEW_CHARS) : line) +
  (line.length > PREVIEW_CHARS ? ` (first ${PREVIEW_CHARS} of ${line.length} characters)` : "")

/** Whitespace JSON allows around a value; a line made only of it is blank, not a frame. */
const isBlank = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c !== 32 && c !== 9 && c !== 13 && c !== 10) return false
  }
  return true
}

const concat = (pieces: ReadonlyArray<Uint8Array>, total: number): Uint8Array => {
  if (pieces.length === 1) return pieces[0]!
  const out = new Uint8Array(total)
  let at = 0
  for (const piece of pieces) {
    out.set(piece, at)
    at += piece.length
  }
  return out
}

/**
 * How many bytes at the end of `bytes` are the start of a UTF-8 character that has not arrived
 * whole yet (0 to 3). Invalid sequences count as complete: they decode to U+FFFD now.
 */
const incompleteTail = (bytes: Uint8Array): number => {
  let i = bytes.length - 1
  let continuation = 0
  while (i >= 0 && continuation < 3 && (bytes[i]! & 0xc0) === 0x80) {
    i--
    continuation++
  }
  if (i < 0) return 0
  const lead = bytes[i]!
  const needs =
    lead >= 0xf0 && lead <= 0xf4 ? 3 : lead >= 0xe0 && lead <= 0xef ? 2 : lead >= 0xc2 && lead <= 0xdf ? 1 : 0
  return needs > continuation ? continuation + 1 : 0
}

/** A Buffer over the same memory (no copy), for `toString("utf8", start, end)`. */
const bufferOf = (bytes: Uint8Array): Buffer =>
  Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

class Decoder implements FrameDecoder {
  /** The next line is the stream's first: a byte-order mark at its start is dropped. */
  private firstLine = true
  /** Bytes after the last newline seen (never a newline among them), copied, in order. */
  private residue: Array<Uint8Array> = []
  private residueBytes = 0
  private stopped: FrameFault | undefined
  private finished = false

  constructor(private readonly max: number) {}

  push(chunk: Uint8Array): FrameBatch {
    if (this.stopped !== undefined || this.finished) return EMPTY
    const bytes = bufferOf(chunk)
    let nl = bytes.indexOf(NEWLINE)
    if (nl === -1) {
      this.keep(bytes, 0)
      return this.residueOverBound() ? this.failUnterminated(undefined) : EMPTY
    }
    const frames: Array<JsonObject> = []
    let start = 0
    if (this.residueBytes > 0) {
      // The line the previous chunks left open ends here: join it once.
      this.residue.push(bytes.subarray(0, nl))
      const line = bufferOf(concat(this.residue, this.residueBytes + nl))
      this.residue = []
      this.residueBytes = 0
      const fault = this.line(line, 0, line.length, frames)
      if (fault !== undefined) return this.fail(frames, fault)
      start = nl + 1
      nl = bytes.indexOf(NEWLINE, start)
    }
    while (nl !== -1) {
      const fault = this.line(bytes, start, nl, frames)
      if (fault !== undefined) return this.fail(frames, fault)
      start = nl + 1
      nl = bytes.indexOf(NEWLINE, start)
    }
    this.keep(bytes, start)
    if (this.residueOverBound()) return this.failUnterminated(frames)
    return frames.length === 0 ? EMPTY : { frames, fault: undefined }
  }

  /** Decode `bytes[start, end)` (invalid sequences become U+FFFD, as TextDecoder does). */
  private text(bytes: Buffer, start: number, end: number): string {
    const text = bytes.toString("utf8", start, end)
    if (!this.firstLine) return text
    this.firstLine = false
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
  }

  /** One terminated line (`bytes[start, end)`, without its newline): a frame, nothing, or a fault. */
  private line(bytes: Buffer, start: number, end: number, frames: Array<JsonObject>): string | undefined {
    if (end > start && bytes[end - 1] === CR) end--
    if (end === start) {
      this.firstLine = false
      return undefined
    }
    const size = end - start
    if (size > this.max) return this.oversized(size, this.text(bytes, start, end))
    const line = this.text(bytes, start, end)
    let value: unknown
    try {
      value = JsonCensus.parse(line)
    } catch {
      if (isBlank(line)) return undefined
      return `unreadable frame: not valid JSON (${MAYBE_APPROVAL}): ${preview(line)}`
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return `unreadable frame: not a JSON object (${MAYBE_APPROVAL}): ${preview(line)}`
    }
    frames.push(value as JsonObject)
    return undefined
  }

  /** Keep `bytes[from..]` as residue (a copy: the caller may reuse its buffer). */
  private keep(bytes: Buffer, from: number): void {
    if (from >= bytes.length) return
    this.residue.push(new Uint8Array(bytes.subarray(from))) // a copy (Buffer#slice would not be one)
    this.residueBytes += bytes.length - from
  }

  /**
   * Bytes of the residue that count against the bound: an incomplete last character counts once it
   * completes, and a last CR not at all (it may be the first half of the line's CRLF terminator).
   */
  private residueComplete(): number {
    const tail: Array<number> = [] // the residue's last 4 bytes, whichever pieces hold them
    for (let i = this.residue.length - 1; i >= 0 && tail.length < 4; i--) {
      const piece = this.residue[i]!
      for (let j = piece.length - 1; j >= 0 && tail.length < 4; j--) tail.unshift(piece[j]!)
    }
    return this.residueBytes - (tail[tail.length - 1] === CR ? 1 : incompleteTail(Uint8Array.from(tail)))
  }

  /** Whether the residue is past the bound. Cheap until it may be: only then is its tail looked at. */
  private residueOverBound(): boolean {
    return this.residueBytes > this.max && this.residueComplete() > this.max
  }

  private residueText(): string {
    const bytes = bufferOf(concat(this.residue, this.residueBytes))
    return this.text(bytes, 0, bytes.length)
  }

  end(): FrameFault | undefined {
    if (this.stopped !== undefined || this.finished) return undefined
    this.finished = true
    const rest = this.residueText()
    this.residue = []
    this.residueBytes = 0
    if (isBlank(rest)) return undefined
    this.stopped = new FrameFault({
      detail: `truncated frame: the stream ended in the middle of a line (${Buffer.byteLength(rest, "utf8")} bytes with no newline; ${MAYBE_APPROVAL}): ${preview(rest)}`
    })
    return this.stopped
  }

  fault(): FrameFault | undefined {
    return this.stopped
  }

  private oversized(atLeast: number, line: string): string {
    return `oversized frame: a line of at least ${atLeast} bytes passed the ${this.max}-byte bound (${MAYBE_APPROVAL}): ${preview(line)}`
  }

  private failUnterminated(frames: Array<JsonObject> | undefined): FrameBatch {
    return this.fail(
      frames,
      `oversized frame: ${this.residueComplete()} bytes arrived with no newline, past the ${this.max}-byte bound (${MAYBE_APPROVAL}): ${preview(this.residueText())}`
    )
  }

  private fail(frames: Array<JsonObject> | undefined, detail: string): FrameBatch {
    this.stopped = new FrameFault({ detail })
    this.residue = []
    this.residueBytes = 0
    return { frames: frames !== undefined && frames.length > 0 ? frames : EMPTY.frames, fault: this.stopped }
  }
}

export const make = (options?: Options): FrameDecoder => {
  const max = options?.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
  if (!(Number.isInteger(max) && max > 0)) throw new RangeError(`maxFrameBytes must be a positive integer, got ${max}`)
  return new Decoder(max)
}
