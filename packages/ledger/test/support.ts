/**
 * Test support: a temporary directory per test (removed by its scope), a scripted event source
 * (the real approvals engine for cards, a PubSub for supervisor events), request builders.
 */
import { Approvals } from "@warden/approvals"
import type { ApprovalEvent, Card } from "@warden/approvals"
import { Decision, ServerRequests } from "@warden/protocol"
import type { Supervisor, WorkItem } from "@warden/supervisor"
import { Effect, Exit, PubSub, Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Ledger } from "../src/index.js"
import * as AnswerJournal from "../src/internal/AnswerJournal.js"
import * as JournalFile from "../src/internal/JournalFile.js"

/** A fresh directory under the OS temp directory, removed when the scope closes. */
export const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.sync(() => Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-ledger-")))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/**
 * Every byte of the database and its side files (-wal, -shm, -journal, the answer journal's
 * directory `.answers`), as one string: each file read as latin1, and as UTF-16 from its first and
 * its second byte (the answer journal keeps its strings in UTF-16 units), so that a text is found
 * however it was written.
 */
export const fileBytes = (filename: string): string => {
  const bytesOf = (path: string): string => {
    if (Fs.statSync(path).isDirectory())
      return Fs.readdirSync(path)
        .map((f) => bytesOf(Path.join(path, f)))
        .join("\n")
    const bytes = Fs.readFileSync(path)
    return [bytes.toString("latin1"), bytes.toString("utf16le"), bytes.subarray(1).toString("utf16le")].join("\n")
  }
  return Fs.readdirSync(Path.dirname(filename))
    .filter((f) => f.startsWith(Path.basename(filename)))
    .map((f) => bytesOf(Path.join(Path.dirname(filename), f)))
    .join("\n")
}

/**
 * The ledger in context with one run begun and `source` attached to it: how most ledger tests
 * start recording.
 */
export const attachedRun = (source: Ledger.EventSource) =>
  Effect.gen(function* () {
    const ledger = yield* Ledger.Ledger
    const run = yield* ledger.beginRun()
    yield* run.attach(source)
    return { ledger, run }
  })

/** A file's lines (a mapped file's zeros after them cut off): what `JournalFile` appended as text. */
export const journalText = (file: string): string => JournalFile.contentOf(Fs.readFileSync(file, "utf8"))

/** A run's answer journal file in the ledger's journal directory `dir`. */
export const journalFile = (dir: string, runId: string): string => AnswerJournal.fileOf(dir, runId)

/** The answers an answer journal file holds (`AnswerJournal`'s reader). */
export const journalEntries = (file: string): ReadonlyArray<AnswerJournal.Entry> =>
  AnswerJournal.entriesOf(Fs.readFileSync(file))

/** The bytes of an answer journal file's records (a mapped file's zeros after them not counted); -1 without a file. */
export const journalSize = (file: string): number => {
  if (!Fs.existsSync(file)) return -1
  const bytes = Fs.readFileSync(file)
  let end = bytes.length
  while (end > 0 && bytes[end - 1] === 0) end--
  return end
}

/**
 * The answer journals opened in this scope are `mapped` (the native module must load: a test of
 * the mapped file fails where it is not built, `node packages/ledger/native/build.mjs`) or
 * `appended` (`WARDEN_JOURNAL_NATIVE=off`); the environment is restored when the scope closes.
 */
export const journalKind = (kind: "mapped" | "appended"): Effect.Effect<void, never, Scope.Scope> =>
  Effect.asVoid(
    Effect.acquireRelease(
      Effect.sync(() => {
        const before = process.env["WARDEN_JOURNAL_NATIVE"]
        if (kind === "appended") process.env["WARDEN_JOURNAL_NATIVE"] = "off"
        else {
          delete process.env["WARDEN_JOURNAL_NATIVE"]
          if (JournalFile.loadNative() === undefined)
            throw new Error("the answer journal's native module is not built: node packages/ledger/native/build.mjs")
        }
        return before
      }),
      (before) =>
        Effect.sync(() => {
          if (before === undefined) delete process.env["WARDEN_JOURNAL_NATIVE"]
          else process.env["WARDEN_JOURNAL_NATIVE"] = before
        })
    )
  )

/** The policy-rule builders the approvals' tests use too. */
export { allowCmd, allowMcp, allowPath, denyCmd, denyPath, rules } from "@warden/test-support/PolicyRules"

// ---------------------------------------------------------------------------------------------
// Requests (params as codex 0.171.0 sends them)

export const commandParams = (threadId: string, turnId: string, command: string, cwd = "/repo") => ({
  threadId,
  turnId,
  itemId: "call_1",
  reason: "needs to run outside the sandbox",
  command,
  cwd,
  availableDecisions: ["accept", "acceptForSession", "decline", "cancel"]
})

export const fileChangeParams = (threadId: string, turnId: string, grantRoot?: string) => ({
  threadId,
  turnId,
  itemId: "patch_1",
  reason: "write the fix",
  ...(grantRoot !== undefined ? { grantRoot } : {})
})

export const mcpToolCallParams = (
  threadId: string,
  turnId: string,
  server: string,
  tool: string,
  args: Record<string, unknown>
) => ({
  threadId,
  turnId,
  serverName: server,
  mode: "form",
  message: `Allow ${server} to run ${tool}?`,
  requestedSchema: { type: "object", properties: {} },
  _meta: { codex_approval_kind: "mcp_tool_call", tool_name: tool, tool_params: args }
})

export const permissionsParams = (threadId: string, turnId: string, permissions: unknown) => ({
  threadId,
  turnId,
  itemId: "perm_1",
  cwd: "/repo",
  reason: "needs more access",
  permissions
})

// ---------------------------------------------------------------------------------------------
// A scripted source: the real approvals engine for cards, a PubSub for supervisor events

export interface Script {
  readonly source: Ledger.EventSource
  readonly approvals: Approvals.ApprovalsShape
  /** Publish a supervisor event, as the supervisor does (synchronously). */
  readonly publish: (event: Supervisor.SupervisorEvent) => void
  readonly work: (event: WorkItem.WorkEvent) => void
  readonly finished: (
    item: string | number,
    result: Partial<WorkItem.WorkResult> & { readonly threadId: string }
  ) => void
  /** Open a card through a connectionCards, as a connection's read loop does. */
  readonly open: (
    method: string,
    params: unknown,
    options?: {
      readonly parent?: Scope.Scope | "none"
      readonly context?: Card.CardContext
      readonly id?: number | string
    }
  ) => Effect.Effect<Card.CardView>
  /** A thread's scope: closing it refuses its open cards (thread-stopped). */
  readonly thread: Effect.Effect<Scope.CloseableScope>
  readonly written: ReadonlyArray<Record<string, unknown>>
}

export const script = (config: Approvals.ApprovalsConfig = {}): Effect.Effect<Script, never, Scope.Scope> =>
  Effect.gen(function* () {
    const approvals = yield* Approvals.make(config).pipe(Effect.orDie)
    const events = yield* PubSub.unbounded<Supervisor.SupervisorEvent>()
    const written: Array<Record<string, unknown>> = []
    const line: Approvals.Line = { write: (frame) => (written.push(frame), true), isOpen: () => true }
    const connectionCards = approvals.cardsFor(line)
    const defaultParent = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(defaultParent, Exit.void))
    let nextId = 0
    const publish = (event: Supervisor.SupervisorEvent) => {
      events.unsafeOffer(event)
    }
    return {
      source: { subscribe: PubSub.subscribe(events), subscribeApprovals: approvals.subscribe, approvals },
      approvals,
      publish,
      work: (event) => publish({ _tag: "Work", event }),
      finished: (item, result) =>
        publish({
          _tag: "ItemFinished",
          item,
          exit: Exit.succeed({
            id: item,
            status: "completed",
            finalMessage: "done",
            items: [],
            usage: undefined,
            errors: [],
            turns: [],
            resumes: 0,
            ...result
          })
        }),
      open: (method, params, options = {}) =>
        Effect.flatMap(
          connectionCards.open(ServerRequests.decode(options.id ?? nextId++, method, params), {
            parent: options.parent === "none" ? undefined : (options.parent ?? defaultParent),
            context: { workItem: "1", ...options.context }
          }),
          (result) =>
            result._tag === "Opened"
              ? Effect.succeed(result.card)
              : result._tag === "Settled"
                ? Effect.succeed(result.settlement.card)
                : Effect.dieMessage(`duplicate request id ${String(result.requestId)}`)
        ),
      thread: Scope.make(),
      written
    }
  })

/** Events an ApprovalEvent dequeue holds now (for asserting what was published). */
export type { ApprovalEvent }

/**
 * A command card of `line` opened on `s` (thread `thr_1`, turn `turnId`) and accepted by a person
 * on the web: what a rule offer counts as evidence. Its id.
 */
export const acceptCommand = (s: Script, line: string, turnId = "turn_1"): Effect.Effect<string> =>
  Effect.gen(function* () {
    const card = yield* s.open("item/commandExecution/requestApproval", commandParams("thr_1", turnId, line))
    yield* s.approvals.answer(card.id, Decision.Accept, "web")
    return card.id
  })
