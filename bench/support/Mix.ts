/**
 * A realistic server→client byte stream, built from the golden transcripts of codex 0.171.0.
 *
 * Every frame is a real frame of the fixtures (`dir:"in"`), cloned and re-addressed (thread, turn,
 * item and request ids, delta text). Per turn of a thread, in the server's order: turn/started,
 * thread/status/changed, the user message item, an agent message streamed as deltas, a command
 * item with its approval request (`item/commandExecution/requestApproval`, a server request) and
 * `serverRequest/resolved`, output deltas, small `turn/diff/updated` frames, token usage and rate
 * limits, a final agent message streamed as deltas, turn/completed, thread/status/changed.
 * Every `largeDiffEvery`-th turn also carries a large `turn/diff/updated` (~100 KiB, synthesized:
 * the fixtures' diffs are a few hundred bytes). Threads are interleaved in bursts of 1..8 frames,
 * as concurrent threads are on one connection; a thread that sent an approval request waits (its
 * frames resume more than a chunk later, as after a round trip). One word in 40 of the delta text
 * is typographic or non-Latin (multi-byte UTF-8), so some chunk boundaries split characters.
 *
 * Deterministic: a seeded PRNG, so every run measures the same bytes.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

export const FixturesDir =
  process.env["WARDEN_FIXTURES"] ?? fileURLToPath(new URL("../../fixtures/codex-0.171.0", import.meta.url))

/** What a pipe hands to a `data` callback at most (Linux pipe reads, libuv's 64 KiB buffer). */
export const CHUNK_BYTES = 64 * 1024

type Json = Record<string, any>

export interface MixOptions {
  readonly threads: number
  readonly turnsPerThread: number
  /** One ~100 KiB turn/diff/updated every this many turns (per thread). */
  readonly largeDiffEvery?: number
  readonly largeDiffBytes?: number
  readonly chunkBytes?: number
  readonly seed?: number
  /** Leave out the approval requests and their resolutions (the same turns, to isolate what cards cost). */
  readonly withoutRequests?: boolean
}

export interface KindStats {
  frames: number
  bytes: number
}

export interface Mix {
  readonly threadIds: ReadonlyArray<string>
  /** The whole stream, and the same bytes cut into pipe-sized chunks. */
  readonly bytes: Uint8Array
  readonly chunks: ReadonlyArray<Uint8Array>
  readonly frames: number
  /** Server requests (cards) in the stream: each wants one answer. */
  readonly requests: number
  /** Notifications that name one of `threadIds` (routed to a thread). */
  readonly threadNotifications: number
  /** Notifications that name no thread (connection-level). */
  readonly connectionNotifications: number
  readonly byKind: Readonly<Record<string, KindStats>>
}

/** mulberry32: small, fast, good enough to shuffle a benchmark deterministically. */
export const prng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const loaded = new Map<string, ReadonlyMap<string, Json>>()

/**
 * One template per kind (method, or method + item type), from the `in` frames of every fixture.
 * Read once per directory; callers clone what they change.
 */
export const loadTemplates = (dir: string = FixturesDir): ReadonlyMap<string, Json> => {
  const cached = loaded.get(dir)
  if (cached !== undefined) return cached
  const templates = new Map<string, Json>()
  let files: Array<string>
  try {
    files = readdirSync(dir)
      .filter((f) => f.endsWith(".jsonl"))
      .sort()
  } catch (error) {
    throw new Error(
      `cannot read the codex 0.171.0 transcripts in ${dir} (set WARDEN_FIXTURES to their directory): ${String(error)}`
    )
  }
  for (const file of files) {
    for (const line of readFileSync(join(dir, file), "utf8").split("\n")) {
      if (line.length === 0) continue
      let entry: Json
      try {
        entry = JSON.parse(line)
      } catch {
        continue
      }
      const frame = entry["frame"]
      if (entry["dir"] !== "in" || typeof frame !== "object" || frame === null || typeof frame.method !== "string")
        continue
      const itemType = frame.params?.item?.type
      const key = typeof itemType === "string" ? `${frame.method}:${itemType}` : frame.method
      if (!templates.has(key)) templates.set(key, frame)
    }
  }
  loaded.set(dir, templates)
  return templates
}

const REQUIRED = [
  "turn/started",
  "turn/completed",
  "thread/status/changed",
  "item/started:userMessage",
  "item/completed:userMessage",
  "item/started:agentMessage",
  "item/completed:agentMessage",
  "item/started:commandExecution",
  "item/completed:commandExecution",
  "item/agentMessage/delta",
  "item/commandExecution/outputDelta",
  "item/commandExecution/requestApproval",
  "serverRequest/resolved",
  "turn/diff/updated",
  "thread/tokenUsage/updated",
  "account/rateLimits/updated"
] as const

const WORDS = [
  "the",
  "build",
  "passes",
  "now",
  "I",
  "will",
  "run",
  "tests",
  "and",
  "check",
  "the",
  "output",
  "of",
  "pnpm",
  "vitest",
  "fix",
  "imports",
  "in",
  "src/",
  "Transport.ts",
  "so",
  "that",
  "it",
  "compiles",
  "with",
  "strict",
  "mode",
  ".",
  "let",
  "me",
  "look",
  "at",
  "error",
  "first",
  "then",
  "update",
  "docs",
  "`tsc`"
]
/** Typographic and non-Latin text, as model output has now and then (one word in 40). */
const NON_ASCII = ["—", "’", "“quoted”", "naïve", "café", "→", "résumé", "日本語", "🙂", "…"]
const NON_ASCII_RATE = 1 / 40

/** A unified diff of about `bytes` bytes: hunks of added, removed and context lines of code. */
export const largeDiff = (bytes: number, random: () => number): string => {
  const parts = [
    "diff --git a/packages/app/src/generated/Schema.ts b/packages/app/src/generated/Schema.ts\n",
    "index 3b18e512dba79e4c8300dd08aeb37f8e728d8a00..8d2c5f3a6b7e91d4c2a0f1e3b5d7c9a1e3f5b7d9 100644\n",
    "--- a/packages/app/src/generated/Schema.ts\n",
    "+++ b/packages/app/src/generated/Schema.ts\n"
  ]
  let size = parts.reduce((n, p) => n + p.length, 0)
  let line = 1
  while (size < bytes) {
    const hunk = [`@@ -${line},40 +${line},44 @@ export namespace Generated {\n`]
    for (let i = 0; i < 44; i++) {
      const r = random()
      const prefix = r < 0.2 ? "+" : r < 0.3 ? "-" : " "
      hunk.push(
        `${prefix}  export const field${line + i} = Schema.optional(Schema.String).annotations({ title: "field ${line + i}" })\n`
      )
    }
    line += 44
    for (const h of hunk) {
      parts.push(h)
      size += h.length
    }
  }
  return parts.join("")
}

export const build = (options: MixOptions): Mix => {
  const templates = loadTemplates()
  for (const key of REQUIRED) {
    if (!templates.has(key))
      throw new Error(`the transcripts in ${FixturesDir} have no "${key}" frame to build the mix from`)
  }
  const random = prng(options.seed ?? 0x5eed)
  const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1))
  const clone = (key: string): Json => JSON.parse(JSON.stringify(templates.get(key)))
  const word = () =>
    random() < NON_ASCII_RATE ? NON_ASCII[int(0, NON_ASCII.length - 1)]! : WORDS[int(0, WORDS.length - 1)]!
  const words = (n: number) => Array.from({ length: n }, word).join(" ")
  const largeDiffEvery = options.largeDiffEvery ?? 8
  const bigDiff = largeDiff(options.largeDiffBytes ?? 100 * 1024, random)

  const threadIds = Array.from(
    { length: options.threads },
    (_, i) => `019a${(0x1000 + i).toString(16)}-bench-7000-8000-thread${String(i).padStart(6, "0")}`
  )
  let nextRequestId = 0

  const turnFrames = (threadId: string, turn: number): Array<[string, Json]> => {
    const turnId = `${threadId}-turn${turn}`
    const out: Array<[string, Json]> = []
    const push = (kind: string, frame: Json) => out.push([kind, frame])
    const addressed = (key: string): Json => {
      const f = clone(key)
      f.params.threadId = threadId
      if ("turnId" in f.params) f.params.turnId = turnId
      return f
    }
    const item = (key: string, id: string, patch: Json = {}): Json => {
      const f = addressed(key)
      f.params.turnId = turnId
      Object.assign(f.params.item, { id }, patch)
      return f
    }
    const status = (type: string, flags: Array<string> = []) => {
      const f = addressed("thread/status/changed")
      f.params.status = type === "idle" ? { type } : { type, activeFlags: flags }
      return f
    }
    const streamMessage = (id: string, deltas: number) => {
      push("item/started", item("item/started:agentMessage", id, { text: "" }))
      let text = ""
      for (let i = 0; i < deltas; i++) {
        const d = addressed("item/agentMessage/delta")
        d.params.itemId = id
        d.params.delta = (i === 0 ? "" : " ") + words(int(1, 3))
        text += d.params.delta
        push("item/agentMessage/delta", d)
      }
      push("item/completed", item("item/completed:agentMessage", id, { text }))
    }

    const started = addressed("turn/started")
    started.params.turn.id = turnId
    started.params.turn.rootTurnId = turnId
    push("turn/started", started)
    push("thread/status/changed", status("active"))
    push("item/started", item("item/started:userMessage", `${turnId}-user`))
    push("item/completed", item("item/completed:userMessage", `${turnId}-user`))
    streamMessage(`${turnId}-msg1`, int(40, 120))

    // A command that needs approval: the request, its resolution, its output.
    const callId = `${turnId}-call1`
    push("item/started", item("item/started:commandExecution", callId))
    push("thread/status/changed", status("active", ["waitingOnApproval"]))
    if (options.withoutRequests !== true) {
      const requestId = nextRequestId++
      const request = addressed("item/commandExecution/requestApproval")
      request.id = requestId
      request.params.itemId = callId
      push("item/commandExecution/requestApproval", request)
      const resolved = addressed("serverRequest/resolved")
      resolved.params.requestId = requestId
      push("serverRequest/resolved", resolved)
    }
    push("thread/status/changed", status("active"))
    let output = ""
    for (let i = 0, n = int(10, 40); i < n; i++) {
      const d = addressed("item/commandExecution/outputDelta")
      d.params.itemId = callId
      d.params.delta = `${words(int(3, 12))}\n`
      output += d.params.delta
      push("item/commandExecution/outputDelta", d)
    }
    push(
      "item/completed",
      item("item/completed:commandExecution", callId, { aggregatedOutput: output, status: "completed", exitCode: 0 })
    )

    for (let i = 0, n = int(1, 2); i < n; i++) push("turn/diff/updated", addressed("turn/diff/updated"))
    if (turn % largeDiffEvery === largeDiffEvery - 1) {
      const d = addressed("turn/diff/updated")
      d.params.diff = bigDiff
      push("turn/diff/updated (large)", d)
    }
    push("thread/tokenUsage/updated", addressed("thread/tokenUsage/updated"))
    push("account/rateLimits/updated", clone("account/rateLimits/updated"))
    streamMessage(`${turnId}-msg2`, int(20, 60))

    const completed = addressed("turn/completed")
    completed.params.turn.id = turnId
    completed.params.turn.rootTurnId = turnId
    completed.params.turn.items = []
    push("turn/completed", completed)
    push("thread/status/changed", status("idle"))
    return out
  }

  // Each thread's frames in order; threads interleaved in bursts. A thread that sent an approval
  // request waits for the answer: the server sends nothing more for it (its serverRequest/resolved
  // included) until more than one chunk of other threads' traffic went by, as a round trip would.
  const queues = threadIds.map((threadId) => {
    const frames: Array<[string, Json]> = []
    for (let turn = 0; turn < options.turnsPerThread; turn++) frames.push(...turnFrames(threadId, turn))
    return { frames, next: 0, blockedUntil: 0 }
  })
  const chunkBytes = options.chunkBytes ?? CHUNK_BYTES
  const ordered: Array<[string, Json]> = []
  /** Frame indexes before which the server paused (waiting for us): a chunk ends there. */
  const pauses = new Set<number>()
  let sent = 0
  let live = queues.filter((q) => q.frames.length > 0)
  while (live.length > 0) {
    const ready = live.filter((q) => q.blockedUntil <= sent)
    if (ready.length === 0) {
      // Every thread waits for an answer: the server has nothing to write, the pipe delivers what
      // it has (a short chunk), and the stream resumes once the answer arrived.
      pauses.add(ordered.length)
      for (const x of live) x.blockedUntil = 0
      continue
    }
    const q = ready[int(0, ready.length - 1)]!
    for (let burst = int(1, 8); burst > 0 && q.next < q.frames.length; burst--) {
      const entry = q.frames[q.next++]!
      ordered.push(entry)
      sent += JSON.stringify(entry[1]).length + 1
      if (entry[0] === "item/commandExecution/requestApproval") {
        q.blockedUntil = sent + chunkBytes + 8 * 1024
        break
      }
    }
    live = live.filter((x) => x.next < x.frames.length)
  }
  // Request ids in wire order (the server numbers them as it sends them).
  const renumber = new Map<number, number>()
  let wireId = 0
  for (const [kind, frame] of ordered) {
    if (kind === "item/commandExecution/requestApproval") {
      renumber.set(frame.id, wireId)
      frame.id = wireId++
    }
  }
  for (const [kind, frame] of ordered) {
    if (kind === "serverRequest/resolved") frame.params.requestId = renumber.get(frame.params.requestId)
  }

  const byKind: Record<string, KindStats> = {}
  const lines: Array<string> = []
  const segments: Array<Array<string>> = [[]]
  let requests = 0
  let threadNotifications = 0
  let connectionNotifications = 0
  for (let i = 0; i < ordered.length; i++) {
    const [kind, frame] = ordered[i]!
    const line = JSON.stringify(frame) + "\n"
    lines.push(line)
    if (pauses.has(i) && segments[segments.length - 1]!.length > 0) segments.push([])
    segments[segments.length - 1]!.push(line)
    const stats = (byKind[kind] ??= { frames: 0, bytes: 0 })
    stats.frames++
    stats.bytes += Buffer.byteLength(line, "utf8")
    if (frame.id !== undefined) requests++
    else if (typeof frame.params?.threadId === "string") threadNotifications++
    else connectionNotifications++
  }
  const bytes = new Uint8Array(Buffer.from(lines.join(""), "utf8"))
  // Pipe-sized chunks, cut anywhere (mid-frame, mid-character), and short where the server paused.
  const chunks: Array<Uint8Array> = []
  let offset = 0
  for (const segment of segments) {
    const end = offset + segment.reduce((n, line) => n + Buffer.byteLength(line, "utf8"), 0)
    for (let at = offset; at < end; at += chunkBytes) chunks.push(bytes.subarray(at, Math.min(end, at + chunkBytes)))
    offset = end
  }
  return {
    threadIds,
    bytes,
    chunks,
    frames: ordered.length,
    requests,
    threadNotifications,
    connectionNotifications,
    byKind
  }
}
