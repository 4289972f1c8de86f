/**
 * Play the SERVER side of a captured transcript of the real codex app-server
 * (`fixtures/codex-0.171.0/*.jsonl` at the repository root) to a client on the in-memory transport.
 *
 * A transcript line is `{dir, t, proc?, frame}`: `in` is what the server sent, `out` what the
 * capturing client sent, `proc` the process (scenarios that restart the server run two). The
 * replay turns each process into a script of CLIENT ACTIONS, each followed by the server frames
 * that came after it (up to the next client action), and plays it on connection N for process N:
 *
 * - `auto` actions are what any supervisor sends by itself (`initialize`, `initialized`,
 *   `thread/start`, `thread/resume`, `turn/start`): the replay waits for the client's frame with
 *   the same key (method + thread id; never the request id, ours differ) and then emits the server
 *   frames that followed it. Responses echo the CLIENT's id (the transcript's id is rewritten);
 *   a response to a request the client never sent is dropped. Server requests go out as they are.
 * - `cue` actions are what a person or an embedder does (answer a server request, `turn/interrupt`,
 *   `turn/steer`): the replay publishes a {@link Cue} on `cues` and waits for the client's frame;
 *   a harness that cannot perform the action calls `pass` and the action is skipped. A matching
 *   frame that arrived earlier (e.g. a refusal Warden wrote on its own) satisfies it at once.
 * - `skip` actions are what a Warden client never sends (raw garbage, requests before
 *   `initialize`, a second `initialize`, a second answer to one id, an answer to an id the server
 *   never used, a steer or interrupt of a turn that is not running, other client methods such as
 *   `thread/loaded/list` or `account/read`): the replay emits the frames that followed them
 *   (without the response to the skipped request), and `plan.skipped` says why, for the test to print.
 *
 * Client frames are matched in transcript order; a frame that comes early waits in a buffer for its
 * turn. When a process's script is over, a process that is not the last one exits (the client sees
 * its app-server go away and may restart it; the next connection plays the next process); the last
 * one keeps serving: client requests the transcript had no place for get a JSON-RPC error, answers
 * are recorded. A `thread/unsubscribe` (a work item's end, which no transcript recorded) is
 * answered at once as 0.171.0 does (`unsubscribed`), whatever the process's script is at. Closing
 * stdin ends the peer with exit code 0, as codex does on EOF.
 *
 * `violations` checks the answers the client wrote against invariants that hold whatever it
 * decided: at most one answer per server request id, no answer to an id never requested, every
 * result valid for its method in the pinned binary's own schema (`SchemaDump`), error frames only
 * where the method's refusal is one.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { ServerRequests } from "@warden/protocol"
import type { Decision as DecisionNs } from "@warden/protocol"
import * as SchemaDump from "@warden/protocol/SchemaDump"
import { MemoryTransport } from "@warden/transport"
import type { Transport } from "@warden/transport"
import { Deferred, Effect, Queue } from "effect"
import type { Layer } from "effect"
import * as PinnedSchema from "./PinnedSchema.js"
import type * as RealCodex from "./RealCodex.js"
import {
  type Action,
  type Cue,
  describeFrame,
  idKey,
  isRecord,
  keyOf,
  type Plan,
  plan,
  str
} from "./internal/TranscriptPlan.js"

export {
  type Action,
  type Cue,
  keyOf,
  type Plan,
  plan,
  type ProcPlan,
  type ServerRequestPlan,
  type ThreadPlan,
  transcriptDecision,
  type TurnPlan
} from "./internal/TranscriptPlan.js"

// ---------------------------------------------------------------------------------------------
// Transcripts

/** One JSON-RPC frame of a transcript (or `{__raw}` / `{__unparsed}` for bytes that were not JSON). */
export type Frame = { readonly [key: string]: unknown }

/** One line of a transcript, with its frame, direction, time and process. */
export interface Line {
  /** `in`: the server sent it; `out`: the capturing client sent it. */
  readonly dir: "in" | "out"
  /** Milliseconds since the scenario started. */
  readonly t: number
  /** The app-server process (1-based; scenarios that restart the server have a 2). */
  readonly proc: number
  readonly frame: Frame
}

/** A parsed transcript, its name (the file name without `.jsonl`) and its lines in order. */
export interface Transcript {
  readonly name: string
  readonly lines: ReadonlyArray<Line>
}

/** The golden transcripts of codex 0.171.0 (`$WARDEN_FIXTURES` overrides). */
export const fixturesDir: string =
  process.env["WARDEN_FIXTURES"] ?? fileURLToPath(new URL("../../../fixtures/codex-0.171.0", import.meta.url))

/** Parse one `.jsonl` transcript. */
export const parse = (name: string, text: string): Transcript => ({
  name,
  lines: text
    .split("\n")
    .filter((line) => line.trim().length > 0)
    .map((line, index) => {
      const raw = JSON.parse(line) as { dir?: unknown; t?: unknown; proc?: unknown; frame?: unknown }
      if ((raw.dir !== "in" && raw.dir !== "out") || !isRecord(raw.frame)) {
        throw new Error(`${name}: line ${index + 1} is not {dir: "in" | "out", t, frame}`)
      }
      return {
        dir: raw.dir,
        t: typeof raw.t === "number" ? raw.t : 0,
        proc: typeof raw.proc === "number" ? raw.proc : 1,
        frame: raw.frame
      }
    })
})

/** Read `<dir>/<name>.jsonl`. */
export const load = (name: string, dir: string = fixturesDir): Transcript =>
  parse(name, Fs.readFileSync(Path.join(dir, `${name}.jsonl`), "utf8"))

/** Every transcript in `dir`, by name. */
export const loadAll = (dir: string = fixturesDir): ReadonlyArray<Transcript> =>
  Fs.readdirSync(dir)
    .filter((f) => f.endsWith(".jsonl"))
    .sort()
    .map((f) => load(f.slice(0, -".jsonl".length), dir))

// ---------------------------------------------------------------------------------------------
// The replay

/** A cue the replay waits on, to perform (answer, interrupt, steer) or to `pass(seq)`. */
export interface PendingCue {
  /** Pass this back to `pass` when the harness cannot perform the action. */
  readonly seq: number
  readonly cue: Cue
}

/** A frame the client wrote, and on which connection (1-based). */
export interface ClientFrame {
  readonly connection: number
  readonly frame: Frame
}

/** A server request the replay sent to the client, with the id it used on that connection. */
export interface SentRequest {
  readonly connection: number
  readonly id: string | number
  readonly method: string
  readonly params: unknown
}

/** What happened during a replay so far (the client's frames, what matched, what was passed, skipped or unexpected). */
export interface Report {
  /** How many connections the client opened. */
  readonly connections: number
  /** Every frame the client wrote, in order. */
  readonly clientFrames: ReadonlyArray<ClientFrame>
  /** Server requests the replay sent, per connection. */
  readonly serverRequests: ReadonlyArray<SentRequest>
  /** Script actions matched to a client frame. */
  readonly matched: ReadonlyArray<{ readonly proc: number; readonly index: number; readonly frame: Frame }>
  /** Cue actions the harness passed on (it could not perform them). */
  readonly passed: ReadonlyArray<{ readonly proc: number; readonly index: number; readonly cue: Cue }>
  /** Client frames the transcript had no place for (requests among them were answered with an error). */
  readonly unexpected: ReadonlyArray<ClientFrame>
  /** Responses of the transcript not sent, because the client never sent their request. */
  readonly droppedResponses: ReadonlyArray<{ readonly proc: number; readonly id: unknown }>
  /** Processes whose script was played to the end. */
  readonly finishedProcs: ReadonlyArray<number>
}

/**
 * A running replay, with the `layer` for the client under test.
 *
 * It also has the cues a harness performs, and the report that {@link violations} checks.
 */
export interface Replay {
  readonly transcript: Transcript
  readonly plan: Plan
  /** The in-memory transport the replay plays on. */
  readonly memory: MemoryTransport.MemoryTransport
  /** The `Transport` to provide to the client: connection N plays process N. */
  readonly layer: Layer.Layer<Transport.Transport>
  /** Cues in script order. One consumer. */
  readonly cues: Queue.Dequeue<PendingCue>
  /** The harness cannot perform this cue: skip its action. */
  readonly pass: (seq: number) => Effect.Effect<void>
  /** Completes once the last process's script has been played to the end. */
  readonly done: Effect.Effect<void>
  /** Whether `done` has completed. */
  readonly isDone: () => boolean
  /** A snapshot of the replay so far. */
  readonly report: () => Report
  /** Where the replay stands (for timeouts and failures). */
  readonly describe: () => string
}

type Incoming =
  | { readonly _tag: "Frame"; readonly frame: Frame }
  | { readonly _tag: "Pass"; readonly seq: number }
  | { readonly _tag: "StdinEnded" }

const encoder = new TextEncoder()

/**
 * Build the replay; connect a client through `layer` (or `memory.transport`). Never fails.
 *
 * @example
 * ```ts
 * import { Supervisor } from "@warden/supervisor"
 * import { TranscriptReplay } from "@warden/testkit"
 * import { Effect } from "effect"
 *
 * const test = Effect.scoped(
 *   Effect.gen(function*() {
 *     const replay = yield* TranscriptReplay.make(TranscriptReplay.load("a-cmd-decline"))
 *     const supervisor = yield* Supervisor.make().pipe(Effect.provide(replay.layer))
 *     for (const thread of replay.plan.threads) {
 *       yield* supervisor.start({ prompt: thread.turns[0]?.prompt ?? "" }) // the transcript's work items
 *     }
 *     // meanwhile, in another fiber: take replay.cues, perform each through the supervisor
 *     // (inbox.answer, handle.interrupt, handle.steer), or replay.pass(seq)
 *     yield* replay.done
 *     const problems = TranscriptReplay.violations(replay.report(), yield* TranscriptReplay.pinnedValidator)
 *   })
 * )
 * ```
 */
export const make = (transcript: Transcript, options?: MemoryTransport.Options): Effect.Effect<Replay> =>
  Effect.gen(function* () {
    const thePlan = plan(transcript)
    const cues = yield* Queue.unbounded<PendingCue>()
    const doneSignal = yield* Deferred.make<void>()
    let connections = 0
    let cueSeq = 0
    let finished = false
    const clientFrames: Array<ClientFrame> = []
    const serverRequests: Array<SentRequest> = []
    const matched: Array<{ proc: number; index: number; frame: Frame }> = []
    const passed: Array<{ proc: number; index: number; cue: Cue }> = []
    const unexpected: Array<ClientFrame> = []
    const droppedResponses: Array<{ proc: number; id: unknown }> = []
    const finishedProcs: Array<number> = []
    const inboxes = new Map<number, Queue.Queue<Incoming>>()
    const position = new Map<number, string>()

    const program = (peer: MemoryTransport.Peer): Effect.Effect<void> =>
      Effect.gen(function* () {
        const connection = ++connections
        const procPlan = thePlan.procs[connection - 1]
        if (procPlan === undefined) {
          position.set(connection, "no such process in the transcript: exited 1")
          yield* peer.writeStderr(`TranscriptReplay: ${transcript.name} has no process ${connection}\n`)
          return yield* peer.exit(1)
        }
        const last = connection === thePlan.procs.length
        const proc = procPlan.proc
        const inbox = yield* Queue.unbounded<Incoming>()
        inboxes.set(connection, inbox)
        const buffer: Array<Frame> = []
        const idMap = new Map<string, unknown>() // transcript request id -> client request id
        let stdinEnded = false

        yield* Effect.gen(function* () {
          while (true) {
            const [frames, done] = yield* peer.written.takeAll
            for (const frame of frames) {
              clientFrames.push({ connection, frame })
              // A work item's end: no transcript has a place for it; answered as 0.171.0 does.
              if (frame["method"] === "thread/unsubscribe" && frame["id"] !== undefined) {
                if (!peer.hasExited())
                  yield* peer.sendFrame({ id: frame["id"] as string | number, result: { status: "unsubscribed" } })
                continue
              }
              yield* Queue.offer(inbox, { _tag: "Frame", frame })
            }
            if (done) return yield* Queue.offer(inbox, { _tag: "StdinEnded" })
          }
        }).pipe(Effect.fork) // a child of the peer's program: it ends with it

        const emit = (lines: ReadonlyArray<Line>) =>
          Effect.gen(function* () {
            // Frames the server wrote at the same millisecond go out as one chunk (as a pipe read
            // would deliver them), so the client sees packed frames the way it does in production.
            let chunk = ""
            let chunkT: number | undefined
            const flush = Effect.suspend(() => {
              const text = chunk
              chunk = ""
              return text.length > 0 && !stdinEnded && !peer.hasExited()
                ? peer.sendRaw(encoder.encode(text))
                : Effect.void
            })
            for (const line of lines) {
              let frame = line.frame
              const method = str(frame["method"])
              const id = frame["id"]
              if (method === undefined && id !== undefined) {
                if (!idMap.has(idKey(id))) {
                  droppedResponses.push({ proc, id })
                  continue
                }
                frame = { ...frame, id: idMap.get(idKey(id)) }
                idMap.delete(idKey(id))
              } else if (method !== undefined && id !== undefined) {
                serverRequests.push({ connection, id: id as string | number, method, params: frame["params"] })
              }
              if (chunkT !== undefined && chunkT !== line.t) yield* flush
              chunkT = line.t
              chunk += JSON.stringify(frame) + "\n"
            }
            yield* flush
          })

        /** Next client frame with this key (buffered ones first), a pass of `seq`, or the end of stdin. */
        const awaitFrame = (key: string | undefined, seq: number | undefined) =>
          Effect.gen(function* () {
            const buffered = buffer.findIndex((f) => keyOf(f) === key)
            if (buffered >= 0) return { _tag: "Frame" as const, frame: buffer.splice(buffered, 1)[0]! }
            while (true) {
              const next = yield* Queue.take(inbox)
              switch (next._tag) {
                case "StdinEnded":
                  stdinEnded = true
                  return next
                case "Pass":
                  if (next.seq === seq) return next
                  break
                case "Frame":
                  if (keyOf(next.frame) === key) return next
                  buffer.push(next.frame)
              }
            }
          })

        const bindId = (action: Action, frame: Frame) => {
          if (action.frame["method"] !== undefined && action.frame["id"] !== undefined)
            idMap.set(idKey(action.frame["id"]), frame["id"])
          matched.push({ proc, index: action.index, frame })
        }

        yield* emit(procPlan.prelude)
        for (const action of procPlan.actions) {
          if (stdinEnded) break
          position.set(
            connection,
            `process ${proc}, action ${action.index} (${action.kind} ${describeFrame(action.frame)})`
          )
          if (action.kind === "skip") {
            yield* emit(action.emits)
            continue
          }
          let seq: number | undefined
          if (action.kind === "cue" && !buffer.some((f) => keyOf(f) === action.key)) {
            seq = ++cueSeq
            yield* Queue.offer(cues, { seq, cue: action.cue! })
          }
          const got = yield* awaitFrame(action.key, seq)
          if (got._tag === "StdinEnded") break
          if (got._tag === "Pass") passed.push({ proc, index: action.index, cue: action.cue! })
          else bindId(action, got.frame)
          yield* emit(action.emits)
        }
        if (stdinEnded) {
          position.set(connection, `${position.get(connection)}: the client closed stdin; exited 0`)
          return yield* peer.exit(0)
        }
        finishedProcs.push(proc)
        if (!last) {
          position.set(connection, `process ${proc} played to the end; exited so that the client restarts it`)
          return yield* peer.exit(0)
        }
        position.set(connection, `process ${proc} played to the end; serving leftovers`)
        finished = true
        yield* Deferred.succeed(doneSignal, undefined)

        // Whatever the transcript had no place for: requests get an error (nobody hangs), the rest is recorded.
        const leftover = (frame: Frame) =>
          Effect.gen(function* () {
            unexpected.push({ connection, frame })
            if (str(frame["method"]) !== undefined && frame["id"] !== undefined && !peer.hasExited()) {
              yield* peer.sendFrame({
                id: frame["id"] as string | number,
                error: {
                  code: -32600,
                  message: `TranscriptReplay: ${String(frame["method"])} is not in the transcript ${transcript.name}`
                }
              })
            }
          })
        for (const frame of buffer.splice(0)) yield* leftover(frame)
        while (true) {
          const next = yield* Queue.take(inbox)
          if (next._tag === "StdinEnded") return yield* peer.exit(0)
          if (next._tag === "Frame") yield* leftover(next.frame)
        }
      })

    const memory = MemoryTransport.make({ ...options, program })

    return {
      transcript,
      plan: thePlan,
      memory,
      layer: memory.layer,
      cues,
      pass: (seq) =>
        Effect.suspend(() => {
          const inbox = inboxes.get(connections)
          return inbox ? Queue.offer(inbox, { _tag: "Pass", seq }) : Effect.void
        }).pipe(Effect.asVoid),
      done: Deferred.await(doneSignal),
      isDone: () => finished,
      report: () => ({
        connections,
        clientFrames: clientFrames.slice(),
        serverRequests: serverRequests.slice(),
        matched: matched.slice(),
        passed: passed.slice(),
        unexpected: unexpected.slice(),
        droppedResponses: droppedResponses.slice(),
        finishedProcs: finishedProcs.slice()
      }),
      describe: () =>
        `replay of ${transcript.name}: ${connections} connection(s); ` +
        Array.from(position, ([c, where]) => `connection ${c}: ${where}`).join("; ") +
        `; last client frames: ${clientFrames
          .slice(-4)
          .map((f) => describeFrame(f.frame))
          .join(", ")}`
    }
  })

// ---------------------------------------------------------------------------------------------
// Checks

/** The answers the client wrote to server request `id` on `connection`. */
export const answersTo = (report: Report, connection: number, id: string | number): ReadonlyArray<Frame> =>
  report.clientFrames
    .filter(
      (f) =>
        f.connection === connection &&
        f.frame["method"] === undefined &&
        f.frame["id"] !== undefined &&
        idKey(f.frame["id"]) === idKey(id)
    )
    .map((f) => f.frame)

/** What Warden writes for `decision` on this request (its encoder), or the method's refusal when it cannot express it. */
export const wardenAnswer = (
  request: { readonly id: string | number; readonly method: string; readonly params: unknown },
  decision: DecisionNs.Decision | undefined
): ServerRequests.Reply => {
  const decoded = ServerRequests.decode(request.id, request.method, request.params)
  if (decoded._tag !== "Known" || decision === undefined) return ServerRequests.refusalFor(decoded)
  const encoded = ServerRequests.answerFor(decoded, decision)
  return encoded._tag === "Right" ? encoded.right : ServerRequests.refusalFor(decoded)
}

/** The method's refusal (the answer written when nobody decided). */
export const refusal = (request: {
  readonly id: string | number
  readonly method: string
  readonly params: unknown
}): ServerRequests.Reply => ServerRequests.refusalFor(ServerRequests.decode(request.id, request.method, request.params))

/** A reply as it goes on the wire (without the id). */
export const replyBody = (reply: ServerRequests.Reply): Frame =>
  reply._tag === "Result" ? { result: reply.result } : { error: reply.error }

/** A client answer frame without its envelope (`{result}` or `{error}`). */
export const answerBody = (frame: Frame): Frame =>
  "error" in frame ? { error: frame["error"] } : { result: frame["result"] }

/**
 * The client's answers that break invariants holding whatever it decided, as messages (empty when
 * none do).
 *
 * The invariants: at most one answer per server request id per connection; no answer to an id the
 * server never used; every result valid for its method in the pinned schema; an error frame only
 * where the method's refusal is one.
 */
export const violations = (report: Report, validator: SchemaDump.Validator): ReadonlyArray<string> => {
  const out: Array<string> = []
  const requests = new Map<string, SentRequest>()
  for (const r of report.serverRequests) requests.set(`${r.connection}:${idKey(r.id)}`, r)
  const counts = new Map<string, number>()
  for (const { connection, frame } of report.clientFrames) {
    if (frame["method"] !== undefined || frame["id"] === undefined) continue
    const key = `${connection}:${idKey(frame["id"])}`
    counts.set(key, (counts.get(key) ?? 0) + 1)
    const request = requests.get(key)
    if (request === undefined) {
      out.push(`connection ${connection}: an answer to id ${idKey(frame["id"])}, which the server never used`)
      continue
    }
    if ("result" in frame) {
      const verdict = validator.serverRequestResponse(request.method, frame["result"])
      if (verdict._tag !== "Valid") {
        out.push(
          `connection ${connection}: the answer to ${request.method} #${idKey(request.id)} is not valid: ${verdict._tag === "Invalid" ? verdict.errors : verdict.reason}`
        )
      }
    } else if ("error" in frame) {
      if (refusal(request)._tag !== "Error") {
        out.push(
          `connection ${connection}: ${request.method} #${idKey(request.id)} was answered with an error frame; its refusal is a result`
        )
      }
    } else {
      out.push(
        `connection ${connection}: the answer to ${request.method} #${idKey(request.id)} has neither result nor error`
      )
    }
  }
  for (const [key, count] of counts) {
    if (count > 1)
      out.push(
        `connection ${key.split(":")[0]}: server request ${key.slice(key.indexOf(":") + 1)} got ${count} answers`
      )
  }
  return out
}

/** The pinned binary's schema validator (its dump from `PinnedSchema`, generated once per process, offline). */
export const pinnedValidator: Effect.Effect<
  SchemaDump.Validator,
  SchemaDump.SchemaDumpError | RealCodex.RealCodexError
> = Effect.runSync(Effect.cached(Effect.map(PinnedSchema.dump, SchemaDump.makeValidator)))
