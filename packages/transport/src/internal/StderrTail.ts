/**
 * The last bytes of the peer's stderr. stderr is tracing, never protocol: it is drained always (an
 * undrained pipe blocks the child) and only its end is kept, because that is where the reason for
 * a failure usually is. A fixed byte ring: constant memory however long the run, no string
 * concatenation per chunk, decoded only when someone asks.
 */

/** 64 KiB: a few hundred lines of tracing. */
export const DEFAULT_STDERR_TAIL_BYTES = 64 * 1024

export interface StderrTail {
  /** Keep the bytes (copied; the caller may reuse its buffer). */
  readonly write: (bytes: Uint8Array) => void
  /** The kept bytes as UTF-8; a character cut at the start of the window is dropped. */
  readonly text: () => string
  /** How many bytes are kept (at most the capacity). */
  readonly size: () => number
}

/** UTF-8 continuation bytes look like 10xxxxxx. */
const isContinuation = (byte: number): boolean => (byte & 0xc0) === 0x80

export const make = (capacity: number = DEFAULT_STDERR_TAIL_BYTES): StderrTail => {
  if (!(Number.isInteger(capacity) && capacity > 0)) {
    throw new RangeError(`stderrTailBytes must be a positive integer, got ${capacity}`)
  }
  const ring = new Uint8Array(capacity)
  let next = 0 // where the next byte goes
  let kept = 0
  let wrapped = false // bytes were dropped off the front at least once

  const write = (bytes: Uint8Array): void => {
    if (bytes.length >= capacity) {
      ring.set(bytes.subarray(bytes.length - capacity))
      next = 0
      wrapped = wrapped || bytes.length > capacity || kept > 0
      kept = capacity
      return
    }
    const first = Math.min(bytes.length, capacity - next)
    ring.set(bytes.subarray(0, first), next)
    ring.set(bytes.subarray(first), 0)
    next = (next + bytes.length) % capacity
    if (kept + bytes.length > capacity) wrapped = true
    kept = Math.min(capacity, kept + bytes.length)
  }

  const text = (): string => {
    const start = (next - kept + capacity) % capacity
    const ordered = new Uint8Array(kept)
    const first = Math.min(kept, capacity - start)
    ordered.set(ring.subarray(start, start + first))
    ordered.set(ring.subarray(0, kept - first), first)
    let from = 0
    // The window may begin inside a multi-byte character: drop its tail rather than print U+FFFD.
    if (wrapped) while (from < ordered.length && from < 3 && isContinuation(ordered[from]!)) from++
    return new TextDecoder("utf-8", { fatal: false }).decode(ordered.subarray(from))
  }

  return { write, text, size: () => kept }
}
