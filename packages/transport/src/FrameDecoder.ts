/**
 * Newline-delimited JSON framing: bytes in, JSON objects out. Pure, synchronous and stateful, so a
 * transport can decode each stdout chunk inside its `data` callback, in order, with no fiber hop.
 *
 * - UTF-8 is decoded with ONE streaming `TextDecoder` (`{ stream: true }`): a character cut across
 *   two chunks is held back and arrives whole (the per-chunk decoders in @effect/platform turn it
 *   into U+FFFD). `fatal: false` because an invalid byte outside a JSON string already makes the
 *   line unparseable (U+FFFD is not JSON syntax), and inside a string it damages only that text,
 *   never the framing or an id; a throwing decoder would only add a second fault path.
 *   0x0A never occurs inside a multi-byte sequence and the decoder never swallows it, so byte
 *   newlines and string newlines correspond one to one.
 * - `\r\n` is tolerated; blank (whitespace-only) lines are skipped.
 * - Every fault is fatal and final: a line that is not JSON, or not a JSON object, may have been an
 *   approval request whose id is now lost, so there is nothing safe to skip to. After a fault the
 *   decoder yields nothing more.
 * - The bound is in BYTES: the UTF-8 size of the line's decoded text, without its terminator
 *   (for valid UTF-8 exactly the bytes on the wire; a partial character still held by the decoder
 *   counts once it completes). It is checked on every terminated line BEFORE it is parsed and on the
 *   unterminated residue after each chunk, so a runaway line is refused without waiting for its
 *   end and never holds more than the bound plus one chunk. Cheaply: a UTF-16 code unit is 1 to 3
 *   UTF-8 bytes, so a line with more units than the bound is over it and one with at most bound/3
 *   units is under it; only lines in between (> 5.3 MiB by default) are measured.
 *
 * Hot path: one `decode` per chunk, `indexOf("\n")` over the new text only, one `slice` +
 * `JSON.parse` per frame, one array per chunk that yields frames. No regex, no per-frame objects of
 * our own.
 */
import { Buffer } from "node:buffer"
import { Data } from "effect"
import type { JsonObject } from "./Transport.js"

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
const STREAM = { stream: true }
const UNMEASURED = -1
/** Past this many UTF-16 units of residue, a chunk is searched on its own (see `push`). */
const LONG_RESIDUE = 4096

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

class Decoder implements FrameDecoder {
  private readonly utf8 = new TextDecoder("utf-8", { fatal: false })
  /** Text after the last newline seen (never contains a newline). */
  private residue = ""
  /** UTF-8 size of `residue` once it is long enough to matter (see `residueOverBound`). */
  private residueBytes = UNMEASURED
  private stopped: FrameFault | undefined
  private finished = false

  constructor(private readonly max: number) {}

  push(bytes: Uint8Array): FrameBatch {
    if (this.stopped !== undefined || this.finished) return EMPTY
    const decoded = this.utf8.decode(bytes, STREAM)
    let text: string
    let nl: number
    if (this.residue.length < LONG_RESIDUE) {
      text = this.residue.length === 0 ? decoded : this.residue + decoded
      nl = text.indexOf("\n")
    } else {
      // A long line in progress: the residue never holds a newline, so search only the new text,
      // and keep the line as a rope (`+` does not copy) until its newline arrives. Linear, where
      // searching (so flattening) the whole residue on every chunk was quadratic.
      const found = decoded.indexOf("\n")
      text = this.residue + decoded
      nl = found === -1 ? -1 : this.residue.length + found
    }
    if (nl === -1) {
      this.residue = text
      return this.residueOverBound(decoded) ? this.failUnterminated(undefined) : EMPTY
    }
    let frames: Array<JsonObject> | undefined
    let start = 0
    do {
      let end = nl
      if (end > start && text.charCodeAt(end - 1) === 13) end--
      if (end > start) {
        const units = end - start
        if (units > this.max) return this.fail(frames, this.oversized(units, text.slice(start, end)))
        const line = text.slice(start, end)
        if (units * 3 > this.max) {
          const size = Buffer.byteLength(line, "utf8")
          if (size > this.max) return this.fail(frames, this.oversized(size, line))
        }
        let value: unknown
        try {
          value = JSON.parse(line)
        } catch {
          if (!isBlank(line)) {
            return this.fail(frames, `unreadable frame: not valid JSON (${MAYBE_APPROVAL}): ${preview(line)}`)
          }
          value = undefined
        }
        if (value !== undefined) {
          if (typeof value !== "object" || value === null || Array.isArray(value)) {
            return this.fail(frames, `unreadable frame: not a JSON object (${MAYBE_APPROVAL}): ${preview(line)}`)
          }
          if (frames === undefined) frames = [value as JsonObject]
          else frames.push(value as JsonObject)
        }
      }
      start = nl + 1
      nl = text.indexOf("\n", start)
    } while (nl !== -1)
    this.residue = start === text.length ? "" : text.slice(start)
    this.residueBytes = UNMEASURED
    if (this.residueOverBound(this.residue)) return this.failUnterminated(frames)
    return frames === undefined ? EMPTY : { frames, fault: undefined }
  }

  /**
   * Whether the residue, which just grew by `added`, is past the bound. Measured only once it may
   * be (more than bound/3 units), then kept exact incrementally: O(chunk) per chunk, never
   * O(residue) per chunk.
   */
  private residueOverBound(added: string): boolean {
    if (this.residueBytes === UNMEASURED) {
      if (this.residue.length * 3 <= this.max) return false
      this.residueBytes = Buffer.byteLength(this.residue, "utf8")
    } else {
      this.residueBytes += Buffer.byteLength(added, "utf8")
    }
    return this.residueBytes > this.max
  }

  end(): FrameFault | undefined {
    if (this.stopped !== undefined || this.finished) return undefined
    this.finished = true
    const rest = this.residue + this.utf8.decode()
    this.residue = ""
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
      `oversized frame: ${this.residueBytes} bytes arrived with no newline, past the ${this.max}-byte bound (${MAYBE_APPROVAL}): ${preview(this.residue)}`
    )
  }

  private fail(frames: Array<JsonObject> | undefined, detail: string): FrameBatch {
    this.stopped = new FrameFault({ detail })
    this.residue = ""
    return { frames: frames ?? EMPTY.frames, fault: this.stopped }
  }
}

export const make = (options?: Options): FrameDecoder => {
  const max = options?.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
  if (!(Number.isInteger(max) && max > 0)) throw new RangeError(`maxFrameBytes must be a positive integer, got ${max}`)
  return new Decoder(max)
}
