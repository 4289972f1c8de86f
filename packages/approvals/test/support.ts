import { ServerRequests } from "@warden/protocol"
import * as ChildProcess from "node:child_process"
import { readFileSync, readdirSync } from "node:fs"
import { join, resolve } from "node:path"
import { Effect, Scope } from "effect"
import type { ApprovalEvent } from "../src/ApprovalEvent.js"
import { Approvals } from "../src/index.js"

const fixtures = process.env["WARDEN_FIXTURES"] ?? join(__dirname, "../../../fixtures/codex-0.171.0")

/** Server request frames the real binary sent, from the shared transcripts. */
export const capturedRequests: ReadonlyArray<{ file: string; frame: { id: number; method: string; params: any } }> =
  readdirSync(fixtures)
    .filter((f) => f.endsWith(".jsonl"))
    .flatMap((f) =>
      readFileSync(join(fixtures, f), "utf8")
        .split("\n")
        .filter((l) => l.trim().length > 0)
        .map((l) => JSON.parse(l))
        .filter((r) => r.dir === "in" && r.frame && r.frame.method !== undefined && r.frame.id !== undefined)
        .map((r) => ({ file: f, frame: r.frame }))
    )

export const captured = (method: string, pick: (params: any) => boolean = () => true, id: number | string = 0) => {
  const hit = capturedRequests.find((c) => c.frame.method === method && pick(c.frame.params))
  if (!hit) throw new Error(`no captured ${method}`)
  return ServerRequests.decode(id, method, hit.frame.params)
}

/** A line that records what was written and can be cut. */
export const recordingLine = () => {
  const written: Array<Record<string, unknown>> = []
  let open = true
  const line: Approvals.Line = {
    write: (frame) => {
      if (!open) return false
      written.push(frame)
      return true
    },
    isOpen: () => open
  }
  return {
    line,
    written,
    cut: () => {
      open = false
    }
  }
}

/** An approvals engine, a connection's open cards (`approvals.cardsFor`) on a recording line, and a thread scope, in the test's scope. */
export const deskSetup = (config: Approvals.ApprovalsConfig = {}) =>
  Effect.gen(function* () {
    const approvals = yield* Approvals.make(config)
    const events = yield* approvals.subscribe
    const wire = recordingLine()
    const connectionCards = approvals.cardsFor(wire.line)
    const thread = yield* Scope.make()
    const drained = () => Effect.map(events.takeAll, (c) => Array.from(c) as Array<ApprovalEvent>)
    return { approvals, connectionCards, wire, thread, drained }
  })

/** How a fixture's process ended, and what it printed. */
export interface FixtureRun {
  readonly code: number | null
  readonly out: string
  readonly err: string
}

/**
 * A fixture script of this package (`test/fixtures/NAME`) run to its end in a child process
 * (`node [flags] --import tsx`, from the repository's root); SIGKILLed if interrupted.
 */
export const runFixture = (name: string, flags: ReadonlyArray<string> = []): Effect.Effect<FixtureRun> =>
  Effect.async<FixtureRun>((resume) => {
    const child = ChildProcess.spawn(
      process.execPath,
      [...flags, "--import", "tsx", join(__dirname, "fixtures", name)],
      {
        cwd: resolve(__dirname, "../../.."),
        stdio: ["ignore", "pipe", "pipe"]
      }
    )
    let out = ""
    let err = ""
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8")
    })
    child.stderr.on("data", (chunk: Buffer) => {
      err += chunk.toString("utf8")
    })
    child.on("error", (error) => resume(Effect.succeed({ code: null, out, err: `${err}${String(error)}` })))
    child.on("close", (code) => resume(Effect.succeed({ code, out, err })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })
