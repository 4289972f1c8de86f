/**
 * A FakeAppServer-like peer for the benchmarks, on the in-memory transport (the real connection
 * core: the same FrameDecoder, writer and end rules as a child process).
 *
 * It answers `initialize`, `thread/start` (then `thread/started`), `turn/start` (then
 * `turn/started`), `turn/interrupt` (then `turn/completed` interrupted) and `thread/unsubscribe` as
 * codex 0.171.0 does, stays silent on every other client request (so they stay pending), and
 * reports each answer to a server request through `onAnswer`, synchronously, the moment the
 * client's writer hands it over (`MemoryTransport`'s `onClientWrite`: a pipe carries the answer
 * then; the peer's own fiber reads it a scheduler hop later, and that hop is the test double's, not
 * the client's).
 * Unlike the test kit's FakeAppServer it keeps no searchable history of answers (a linear `find`
 * per card would be measured too).
 */
import { MemoryTransport } from "@warden/transport"
import type { Transport } from "@warden/transport"
import { Effect } from "effect"

type JsonObject = Transport.JsonObject

export interface BenchPeer {
  readonly memory: MemoryTransport.MemoryTransport
  /** Called for every client answer to a server request (a frame with an id and no method). */
  onAnswer: (id: number | string, frame: JsonObject) => void
  /** Called for every client request the peer leaves unanswered. */
  onSilent: (method: string, id: number | string) => void
  readonly answers: () => number
  readonly threadsStarted: () => number
  readonly turnsStarted: () => number
  /** The turn started on a thread (the latest), as the peer numbered it. */
  readonly turnOf: (threadId: string) => string | undefined
  /** Client requests left unanswered so far, by method. */
  readonly silent: (method: string) => number
}

export const make = (options: Omit<MemoryTransport.Options, "program"> = {}): BenchPeer => {
  let answers = 0
  let threads = 0
  let turns = 0
  const turnOf = new Map<string, string>()
  const silent = new Map<string, number>()
  const self: BenchPeer = {
    memory: undefined as unknown as MemoryTransport.MemoryTransport,
    onAnswer: () => {},
    onSilent: () => {},
    answers: () => answers,
    threadsStarted: () => threads,
    turnsStarted: () => turns,
    turnOf: (threadId) => turnOf.get(threadId),
    silent: (method) => silent.get(method) ?? 0
  }
  // Answers to server requests (a frame with an id and no method), as the writer hands them over.
  const onClientWrite = (frame: JsonObject) => {
    const id = frame["id"] as number | string | undefined
    if (frame["method"] === undefined && id !== undefined) {
      answers++
      self.onAnswer(id, frame)
    }
  }
  const program = (peer: MemoryTransport.Peer): Effect.Effect<void> =>
    Effect.gen(function* () {
      while (true) {
        const [frames, done] = yield* peer.written.takeAll
        let out = ""
        for (const frame of frames) {
          const id = frame["id"] as number | string | undefined
          const method = frame["method"] as string | undefined
          if (method === undefined) continue // an answer: reported by onClientWrite
          if (id === undefined) continue // initialized
          const params = frame["params"] as Record<string, any> | undefined
          switch (method) {
            case "initialize":
              out +=
                JSON.stringify({
                  id,
                  result: {
                    userAgent: "bench-peer/0.171.0",
                    codexHome: "/tmp/bench",
                    platformFamily: "unix",
                    platformOs: "linux"
                  }
                }) + "\n"
              break
            case "thread/start": {
              const thread = { id: `thr_${++threads}`, preview: "", ephemeral: false }
              out += JSON.stringify({ id, result: { thread } }) + "\n"
              out += JSON.stringify({ method: "thread/started", params: { thread } }) + "\n"
              break
            }
            case "turn/start": {
              const turn = { id: `turn_${++turns}`, status: "inProgress", items: [], error: null }
              turnOf.set(String(params?.["threadId"]), turn.id)
              out += JSON.stringify({ id, result: { turn } }) + "\n"
              out += JSON.stringify({ method: "turn/started", params: { threadId: params?.["threadId"], turn } }) + "\n"
              break
            }
            case "thread/unsubscribe":
              // A work item's end (Warden lets go of its thread): answered as 0.171.0 does.
              out += JSON.stringify({ id, result: { status: "unsubscribed" } }) + "\n"
              break
            case "turn/interrupt": {
              // As 0.171.0: the response, then the turn completes as interrupted.
              out += JSON.stringify({ id, result: {} }) + "\n"
              const turn = { id: params?.["turnId"], status: "interrupted", items: [], error: null }
              out +=
                JSON.stringify({ method: "turn/completed", params: { threadId: params?.["threadId"], turn } }) + "\n"
              break
            }
            default:
              silent.set(method, (silent.get(method) ?? 0) + 1)
              self.onSilent(method, id)
          }
        }
        // One write per batch, as a server flushing its stdout would.
        if (out.length > 0) yield* peer.sendRaw(out)
        if (done) return
      }
    })
  ;(self as { memory: MemoryTransport.MemoryTransport }).memory = MemoryTransport.make({
    ...options,
    program,
    onClientWrite
  })
  return self
}
