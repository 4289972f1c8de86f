/**
 * What a recorded transcript asks of a replay: per process, the frames the server sends, on which
 * cue (a client frame, the previous action), and what Warden must answer. Public through
 * `TranscriptReplay`.
 */
import { Decision, Json } from "@warden/protocol"
import type { Decision as DecisionNs } from "@warden/protocol"
import type { Frame, Line, Transcript } from "../TranscriptReplay.js"

// ---------------------------------------------------------------------------------------------
// Helpers

export const isRecord = Json.isRecord

export const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

export const idKey = (id: unknown): string => JSON.stringify(id)

export const isRaw = (frame: Frame): boolean => "__raw" in frame || "__unparsed" in frame

/**
 * The key a client frame is matched by, never the client's own request id.
 *
 * Requests by method and thread, notifications by method, answers by the server request id they
 * answer; raw frames have none.
 */
export const keyOf = (frame: Frame): string | undefined => {
  if (isRaw(frame)) return undefined
  const method = str(frame["method"])
  const id = frame["id"]
  if (method !== undefined) {
    if (id === undefined) return `notification ${method}`
    const threadId = isRecord(frame["params"]) ? str(frame["params"]["threadId"]) : undefined
    return `request ${method}${threadId === undefined ? "" : ` ${threadId}`}`
  }
  if (id !== undefined) return `answer ${idKey(id)}`
  return undefined
}

export const textOf = (params: unknown): string => {
  const input = isRecord(params) ? params["input"] : undefined
  if (!Array.isArray(input)) return ""
  return input.flatMap((i: unknown) => (isRecord(i) && typeof i["text"] === "string" ? [i["text"]] : [])).join("\n")
}

// ---------------------------------------------------------------------------------------------
// The plan

/** What the harness is asked to do, as the capturing client did at this point. */
export type Cue =
  | {
      readonly _tag: "Answer"
      readonly proc: number
      /** The server request id (as the server sent it). */
      readonly requestId: string | number
      readonly method: string
      readonly params: unknown
      /** What the capturing client wrote: `{result}` or `{error}`. */
      readonly answer: Frame
      /** That answer in Warden's vocabulary; undefined when it has no word for it (error frames, bad shapes). */
      readonly decision: DecisionNs.Decision | undefined
    }
  | { readonly _tag: "Interrupt"; readonly proc: number; readonly threadId: string; readonly turnId: string }
  | {
      readonly _tag: "Steer"
      readonly proc: number
      readonly threadId: string
      readonly turnId: string
      readonly text: string
    }

/**
 * One client action of a process's script (`auto`, `cue` or `skip`; see the module doc), with the
 * server frames the replay emits after it.
 */
export interface Action {
  readonly proc: number
  /** Position in the process's script. */
  readonly index: number
  readonly t: number
  /** The capturing client's frame. */
  readonly frame: Frame
  readonly kind: "auto" | "cue" | "skip"
  /** The matching key (auto and cue). */
  readonly key: string | undefined
  /** Why a Warden client does not send this (skip). */
  readonly why: string | undefined
  readonly cue: Cue | undefined
  /** The server frames that followed this action, up to the next client action. */
  readonly emits: ReadonlyArray<Line>
}

/** The script of one app-server process, the frames it sends first and then its actions in order. */
export interface ProcPlan {
  readonly proc: number
  /** Server frames before the first client action. */
  readonly prelude: ReadonlyArray<Line>
  readonly actions: ReadonlyArray<Action>
}

/** One turn of a thread in the transcript, with its prompt, its id and how it ended (if it did). */
export interface TurnPlan {
  readonly proc: number
  readonly prompt: string
  readonly turnId: string | undefined
  /** `turn/completed`'s status; undefined when the transcript never saw the turn end. */
  readonly status: string | undefined
}

/** One thread the transcript started (a work item), with its turns across processes. */
export interface ThreadPlan {
  readonly threadId: string
  readonly startParams: Readonly<Record<string, unknown>>
  readonly turns: ReadonlyArray<TurnPlan>
  /** Every turn of the thread ended (turn/completed) in the transcript. */
  readonly endsNormally: boolean
}

/** A server request of the transcript (an approval, a question, ...), with its thread if it names one. */
export interface ServerRequestPlan {
  readonly proc: number
  readonly id: string | number
  readonly method: string
  readonly params: unknown
  readonly threadId: string | undefined
}

/**
 * What `plan` makes of a transcript.
 *
 * Each process's script, the threads it started (the work items a harness should submit), its
 * server requests, and the actions a Warden client skips.
 */
export interface Plan {
  readonly name: string
  readonly procs: ReadonlyArray<ProcPlan>
  readonly threads: ReadonlyArray<ThreadPlan>
  readonly serverRequests: ReadonlyArray<ServerRequestPlan>
  /** The client actions a Warden client does not make, with the reason: the reduced part of the replay. */
  readonly skipped: ReadonlyArray<{
    readonly proc: number
    readonly index: number
    readonly what: string
    readonly why: string
  }>
}

export const describeFrame = (frame: Frame): string => {
  if (isRaw(frame)) return `raw ${JSON.stringify(String(frame["__raw"] ?? frame["__unparsed"])).slice(0, 60)}`
  const method = str(frame["method"])
  if (method !== undefined)
    return frame["id"] !== undefined ? `${method} #${idKey(frame["id"])}` : `${method} (notification)`
  return `answer #${idKey(frame["id"])}`
}

/** The capturing client's answer in Warden's vocabulary, if it has a word for it. */
export const transcriptDecision = (answer: Frame): DecisionNs.Decision | undefined => {
  if (!("result" in answer)) return undefined
  const result = answer["result"]
  if (isRecord(result) && "decision" in result) return Decision.fromJson(result["decision"])
  return Decision.fromJson(result)
}

export const planProc = (proc: number, lines: ReadonlyArray<Line>) => {
  const prelude: Array<Line> = []
  const actions: Array<Omit<Action, "emits"> & { emits: Array<Line> }> = []
  let initialized = false
  let sawInitializedNote = false
  const outRequests = new Map<string, { method: string; params: unknown }>()
  const requested = new Map<string, { id: string | number; method: string; params: unknown }>()
  const answered = new Set<string>()
  const activeTurns = new Map<string, string>() // turn id -> thread id
  const loadedThreads = new Set<string>()
  const started: Array<{ threadId: string; params: Record<string, unknown> }> = []
  const turns: Array<{ threadId: string; prompt: string; requestKey: string; turnId?: string }> = []
  const completed = new Map<string, string>() // turn id -> status
  const serverRequests: Array<ServerRequestPlan> = []

  for (const line of lines) {
    const frame = line.frame
    if (line.dir === "in") {
      const target = actions.length > 0 ? actions[actions.length - 1]!.emits : prelude
      target.push(line)
      const method = str(frame["method"])
      const id = frame["id"]
      if (method !== undefined && id !== undefined) {
        const params = frame["params"]
        requested.set(idKey(id), { id: id as string | number, method, params })
        serverRequests.push({
          proc,
          id: id as string | number,
          method,
          params,
          threadId: isRecord(params) ? str(params["threadId"]) : undefined
        })
      } else if (method === undefined && id !== undefined && "result" in frame) {
        const request = outRequests.get(idKey(id))
        const result = frame["result"]
        if (request && isRecord(result)) {
          const threadId = isRecord(result["thread"]) ? str(result["thread"]["id"]) : undefined
          if ((request.method === "thread/start" || request.method === "thread/resume") && threadId) {
            loadedThreads.add(threadId)
            if (request.method === "thread/start")
              started.push({ threadId, params: isRecord(request.params) ? request.params : {} })
          }
          const turnId =
            request.method === "turn/start" && isRecord(result["turn"]) ? str(result["turn"]["id"]) : undefined
          const threadOfTurn = isRecord(request.params) ? str(request.params["threadId"]) : undefined
          if (turnId && threadOfTurn) {
            activeTurns.set(turnId, threadOfTurn)
            const turn = turns.find((t) => t.requestKey === idKey(id) && t.turnId === undefined)
            if (turn) turn.turnId = turnId
          }
        }
      } else if (method === "turn/started" && isRecord(frame["params"])) {
        const turnId = isRecord(frame["params"]["turn"]) ? str(frame["params"]["turn"]["id"]) : undefined
        const threadId = str(frame["params"]["threadId"])
        if (turnId && threadId && !completed.has(turnId)) activeTurns.set(turnId, threadId)
      } else if (method === "turn/completed" && isRecord(frame["params"])) {
        const turn = frame["params"]["turn"]
        const turnId = isRecord(turn) ? str(turn["id"]) : undefined
        if (turnId) {
          activeTurns.delete(turnId)
          completed.set(turnId, isRecord(turn) ? (str(turn["status"]) ?? "unknown") : "unknown")
        }
      }
      continue
    }

    // A client action.
    const index = actions.length
    const base = { proc, index, t: line.t, frame, emits: [] as Array<Line> }
    const skip = (why: string) => actions.push({ ...base, kind: "skip", key: undefined, why, cue: undefined })
    const auto = () => actions.push({ ...base, kind: "auto", key: keyOf(frame), why: undefined, cue: undefined })
    const cue = (c: Cue) => actions.push({ ...base, kind: "cue", key: keyOf(frame), why: undefined, cue: c })

    if (isRaw(frame)) {
      skip("raw bytes: Warden writes only whole JSON-RPC frames")
      continue
    }
    const method = str(frame["method"])
    const id = frame["id"]
    const params = frame["params"]
    const p = isRecord(params) ? params : {}
    if (method !== undefined && id !== undefined) {
      outRequests.set(idKey(id), { method, params })
      if (method === "initialize") {
        if (initialized) skip("a second initialize")
        else {
          initialized = true
          auto()
        }
        continue
      }
      if (!initialized) {
        skip("a request before initialize")
        continue
      }
      switch (method) {
        case "thread/start":
          auto()
          break
        case "turn/start": {
          const threadId = str(p["threadId"]) ?? ""
          turns.push({ threadId, prompt: textOf(params), requestKey: idKey(id) })
          auto()
          break
        }
        case "thread/resume": {
          const threadId = str(p["threadId"])
          if (threadId !== undefined && loadedThreads.has(threadId))
            skip("resumes a thread already loaded in this process")
          else auto()
          break
        }
        case "turn/steer":
        case "turn/interrupt": {
          const threadId = str(p["threadId"])
          const turnId = str(p[method === "turn/steer" ? "expectedTurnId" : "turnId"])
          if (threadId === undefined || turnId === undefined || activeTurns.get(turnId) !== threadId) {
            skip(
              `${method === "turn/steer" ? "steers" : "interrupts"} a turn that is not running (Warden only names its running turn)`
            )
          } else if (method === "turn/steer") {
            cue({ _tag: "Steer", proc, threadId, turnId, text: textOf(params) })
          } else {
            cue({ _tag: "Interrupt", proc, threadId, turnId })
          }
          break
        }
        default:
          skip(`Warden's work items never call ${method}`)
      }
      continue
    }
    if (method !== undefined) {
      if (method === "initialized" && !sawInitializedNote && initialized) {
        sawInitializedNote = true
        auto()
      } else skip(`Warden does not send the notification ${method}${method === "initialized" ? " again" : ""}`)
      continue
    }
    if (id !== undefined) {
      const request = requested.get(idKey(id))
      if (request === undefined) skip("an answer to a request id the server never used")
      else if (answered.has(idKey(id))) skip("a second answer to the same request")
      else {
        answered.add(idKey(id))
        cue({
          _tag: "Answer",
          proc,
          requestId: request.id,
          method: request.method,
          params: request.params,
          answer: frame,
          decision: transcriptDecision(frame)
        })
      }
      continue
    }
    skip("a frame with neither method nor id")
  }
  return {
    proc: { proc, prelude, actions } as ProcPlan,
    started,
    turns: turns.map((t) => ({ ...t, status: t.turnId !== undefined ? completed.get(t.turnId) : undefined })),
    serverRequests
  }
}

/** Split a transcript into per-process scripts, threads (work items) and server requests. */
export const plan = (transcript: Transcript): Plan => {
  const procNumbers = [...new Set(transcript.lines.map((l) => l.proc))].sort((a, b) => a - b)
  const planned = procNumbers.map((proc) =>
    planProc(
      proc,
      transcript.lines.filter((l) => l.proc === proc)
    )
  )
  const threads = new Map<string, { startParams: Record<string, unknown>; turns: Array<TurnPlan> }>()
  for (const p of planned) {
    for (const s of p.started) threads.set(s.threadId, { startParams: s.params, turns: [] })
    for (const t of p.turns) {
      threads.get(t.threadId)?.turns.push({ proc: p.proc.proc, prompt: t.prompt, turnId: t.turnId, status: t.status })
    }
  }
  return {
    name: transcript.name,
    procs: planned.map((p) => p.proc),
    threads: Array.from(threads, ([threadId, t]) => ({
      threadId,
      startParams: t.startParams,
      turns: t.turns,
      endsNormally: t.turns.length > 0 && t.turns.every((turn) => turn.status !== undefined)
    })),
    serverRequests: planned.flatMap((p) => p.serverRequests),
    skipped: planned.flatMap((p) =>
      p.proc.actions
        .filter((a) => a.kind === "skip")
        .map((a) => ({ proc: a.proc, index: a.index, what: describeFrame(a.frame), why: a.why ?? "" }))
    )
  }
}
