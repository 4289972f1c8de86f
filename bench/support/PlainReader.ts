/**
 * The baselines Warden's read loop is measured against, written the way a hand-written client is.
 *
 * `PlainClient`: what a small custom driver of `codex app-server` does with stdout after
 * `stdout.setEncoding("utf8")` (a StringDecoder): append to a string buffer, cut lines at
 * `indexOf("\n")`, `JSON.parse` each, then a switch on the method: responses complete a pending
 * callback, approval requests call the approval callback (which writes its answer at once),
 * notifications go to the listener of their thread (or a connection-level listener). No bounds,
 * no fault handling beyond what JSON.parse throws, no per-card state: the least a working client
 * does.
 *
 * `rawLimit`: the same bytes through the same StringDecoder, `split("\n")` and `JSON.parse`, and
 * nothing else: no routing, no dispatch. `rawLimitBytes`: the same, but lines cut on the bytes and
 * decoded one by one (faster when most lines are ASCII). No reader can do less than the faster of
 * the two and still have the frames.
 */
import { StringDecoder } from "node:string_decoder"

type Json = Record<string, any>

export interface PlainCallbacks {
  /** Notifications of a thread: (threadId, method, params). */
  readonly onThreadEvent: (threadId: string, method: string, params: Json) => void
  readonly onConnectionEvent: (method: string, params: unknown) => void
  /** A server request; returns the result to answer with. */
  readonly onApproval: (id: number | string, method: string, params: Json) => unknown
  /** Writes one line to the peer's stdin. */
  readonly write: (line: string) => void
}

export class PlainClient {
  private buffer = ""
  private readonly decoder = new StringDecoder("utf8")
  private readonly pending = new Map<number | string, (result: unknown, error: unknown) => void>()

  constructor(private readonly callbacks: PlainCallbacks) {}

  request(id: number, method: string, params: unknown, done: (result: unknown, error: unknown) => void): void {
    this.pending.set(id, done)
    this.callbacks.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n")
  }

  onData(chunk: Uint8Array): void {
    this.buffer += this.decoder.write(chunk as Buffer)
    let nl: number
    while ((nl = this.buffer.indexOf("\n")) !== -1) {
      const line = this.buffer.slice(0, nl)
      this.buffer = this.buffer.slice(nl + 1)
      if (line.trim().length === 0) continue
      this.dispatch(JSON.parse(line))
    }
  }

  private dispatch(message: Json): void {
    const method = message["method"]
    if (method === undefined) {
      const done = this.pending.get(message["id"])
      if (done) {
        this.pending.delete(message["id"])
        done(message["result"], message["error"])
      }
      return
    }
    const params = message["params"]
    switch (method) {
      case "item/commandExecution/requestApproval":
      case "item/fileChange/requestApproval":
      case "item/permissions/requestApproval":
      case "item/tool/requestUserInput":
      case "mcpServer/elicitation/request": {
        const result = this.callbacks.onApproval(message["id"], method, params)
        this.callbacks.write(JSON.stringify({ jsonrpc: "2.0", id: message["id"], result }) + "\n")
        return
      }
      case "thread/started":
        this.callbacks.onThreadEvent(params.thread.id, method, params)
        return
      default:
        if (typeof params?.threadId === "string") this.callbacks.onThreadEvent(params.threadId, method, params)
        else this.callbacks.onConnectionEvent(method, params)
    }
  }
}

/**
 * The same, cutting lines on the bytes and decoding each line on its own (ASCII lines stay one-byte
 * strings, which JSON.parse reads fastest): the fastest split + parse measured on this mix.
 */
export const rawLimitBytes = () => {
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true })
  let pending: Array<Uint8Array> = []
  let pendingBytes = 0
  let frames = 0
  let last: unknown
  const parse = (line: Uint8Array) => {
    if (line.length === 0) return
    last = JSON.parse(decoder.decode(line))
    frames++
  }
  return {
    onData: (chunk: Uint8Array) => {
      let start = 0
      let nl = chunk.indexOf(10)
      if (nl !== -1 && pendingBytes > 0) {
        const line = new Uint8Array(pendingBytes + nl)
        let at = 0
        for (const p of pending) {
          line.set(p, at)
          at += p.length
        }
        line.set(chunk.subarray(0, nl), at)
        pending = []
        pendingBytes = 0
        parse(line)
        start = nl + 1
        nl = chunk.indexOf(10, start)
      }
      for (; nl !== -1; start = nl + 1, nl = chunk.indexOf(10, start)) parse(chunk.subarray(start, nl))
      if (start < chunk.length) {
        pending.push(chunk.slice(start))
        pendingBytes += chunk.length - start
      }
    },
    frames: () => frames,
    last: () => last
  }
}

/** split + JSON.parse of the same chunks, nothing else. Returns a sink and the frame count. */
export const rawLimit = () => {
  const decoder = new StringDecoder("utf8")
  let residue = ""
  let frames = 0
  let last: unknown
  return {
    onData: (chunk: Uint8Array) => {
      const parts = (residue + decoder.write(chunk as Buffer)).split("\n")
      residue = parts.pop()!
      for (const part of parts) {
        if (part.length === 0) continue
        last = JSON.parse(part)
        frames++
      }
    },
    frames: () => frames,
    /** Keeps the last parse observable so it cannot be optimised away. */
    last: () => last
  }
}
