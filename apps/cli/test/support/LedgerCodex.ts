/**
 * A fake app-server for the ledger's CLI tests: each PROMPT's turn asks one command approval per
 * `|`-separated part of the PROMPT (all at once), and completes once all are answered; with
 * LEDGER_FAKE_ANSWERS=FILE it appends each answer it gets to FILE (`{command, result, error}`), and
 * each `thread/resume` (`{method, threadId, params}`); with LEDGER_FAKE_ARGV=FILE it appends its argv (a JSON array); it resumes any thread but LEDGER_FAKE_LOST's (answered as
 * codex answers for a thread it never saved; new threads are then named `fresh_N`). The PROMPT `hang` asks
 * nothing and completes at once, or never with LEDGER_FAKE_HANG=1. And
 * `readLedger`, which reads a ledger file through the Ledger API.
 */
import { Ledger } from "@warden/ledger"
import type { TestProcess } from "@warden/testkit"
import * as CliProcess from "./CliProcess.js"
import { Context, Effect, Layer, Schedule } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

export const fakeCodex = `#!${process.execPath}
const out = (f) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...f }) + "\\n")
let threads = 0
let requests = 100
const pending = new Map()
const asked = new Map()
const answers = process.env.LEDGER_FAKE_ANSWERS
if (process.env.LEDGER_FAKE_ARGV) require("node:fs").appendFileSync(process.env.LEDGER_FAKE_ARGV, JSON.stringify(process.argv.slice(2)) + "\\n")
require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const m = JSON.parse(line)
  if (m.method === undefined && m.id !== undefined) {
    const turn = pending.get(m.id)
    if (turn === undefined) return
    if (answers) require("node:fs").appendFileSync(answers, JSON.stringify({ command: asked.get(m.id), result: m.result ?? null, error: m.error ?? null }) + "\\n")
    pending.delete(m.id)
    if (--turn.left === 0) out({ method: "turn/completed", params: { threadId: turn.threadId, turn: { id: turn.turnId, status: "completed", items: [], error: null } } })
    return
  }
  if (m.method === "initialize") out({ id: m.id, result: { userAgent: "ledger-test/0.171.0", codexHome: "/tmp" } })
  if (m.method === "thread/start") out({ id: m.id, result: { thread: { id: (process.env.LEDGER_FAKE_LOST ? "fresh_" : "thr_") + ++threads } } })
  if (m.method === "thread/unsubscribe") out({ id: m.id, result: { status: "unsubscribed" } })
  if (m.method === "thread/resume") {
    if (answers) require("node:fs").appendFileSync(answers, JSON.stringify({ method: m.method, threadId: m.params.threadId, params: m.params }) + "\\n")
    // codex 0.171.0's answer for a thread it never saved
    if (m.params.threadId === process.env.LEDGER_FAKE_LOST) out({ id: m.id, error: { code: -32600, message: "no rollout found for thread id " + m.params.threadId } })
    else out({ id: m.id, result: { thread: { id: m.params.threadId } } })
  }
  if (m.method === "turn/start") {
    const threadId = m.params.threadId
    const turnId = "turn_" + threadId
    out({ id: m.id, result: { turn: { id: turnId, status: "inProgress", items: [] } } })
    const text = m.params.input.map((i) => i.text ?? "").join("")
    if (text === "hang") {
      if (!process.env.LEDGER_FAKE_HANG) out({ method: "turn/completed", params: { threadId, turn: { id: turnId, status: "completed", items: [], error: null } } })
      return
    }
    const commands = text.split("|")
    const turn = { threadId, turnId, left: commands.length }
    commands.forEach((command, i) => {
      const id = requests++
      pending.set(id, turn)
      asked.set(id, command)
      out({ id, method: "item/commandExecution/requestApproval", params: { threadId, turnId, itemId: "cmd" + i, startedAtMs: 0, command, cwd: "/tmp" } })
    })
  }
})
`

/** Writes the fake codex into `dir`; its path. */
export const writeFakeCodex = (dir: string): string => {
  const script = Path.join(dir, "codex")
  Fs.writeFileSync(script, fakeCodex, { mode: 0o755 })
  return script
}

/** Reads the ledger at `filename` through the Ledger API, then closes it. */
export const readLedger = <A, E>(filename: string, f: (ledger: Ledger.LedgerShape) => Effect.Effect<A, E>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const context = yield* Layer.build(Ledger.layerSqlite({ filename }))
      return yield* f(Context.get(context, Ledger.Ledger))
    })
  )

/**
 * Waits until the ledger at `filename` holds a running run with at least `cards` cards and `turns`
 * turns (written off the read loop, soon after the CLI reports them), then SIGKILLs the CLI's
 * process group, as a crash would; the dead run's id.
 */
export const crashOnceRecorded = (
  cli: CliProcess.Cli,
  filename: string,
  want: { readonly cards: number; readonly turns: number }
): Effect.Effect<{ readonly runId: string; readonly signal: NodeJS.Signals | null }, TestProcess.TestProcessError> =>
  Effect.gen(function* () {
    const runId = yield* readLedger(filename, (ledger) =>
      Effect.gen(function* () {
        const run = (yield* ledger.runs("running"))[0]
        if (run === undefined) return yield* Effect.fail("no run yet")
        const cards = yield* ledger.cards({ runId: run.runId })
        const turns = yield* ledger.turns(run.runId)
        if (cards.length < want.cards || turns.length < want.turns) return yield* Effect.fail("not written yet")
        return run.runId
      })
    ).pipe(Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.compose(Schedule.recurs(100)))), Effect.orDie)
    process.kill(-cli.pid, "SIGKILL")
    const exited = yield* cli.exited()
    return { runId, signal: exited.signal }
  })

/**
 * `warden run` recording into the ledger `db`, answering as `approvals` says (default: from
 * stdin), never restarting its app-server: the start of every "run, then crash it" test and of
 * every test that reads a recorded ledger. `codex` is `--codex PATH` (a fake) or the flags of a
 * real codex (`Codex.setup`'s `flags`).
 */
export const recordedRunArgs = (
  codex: string | ReadonlyArray<string>,
  db: string,
  approvals: "stdin" | "deny" | "rules" = "stdin"
): ReadonlyArray<string> => ledgerCommandArgs("run", codex, db, approvals)

/** `warden resume` of the dead run in the ledger `db`, as `recordedRunArgs` runs it (default: denying every card). */
export const resumeArgs = (
  codex: string | ReadonlyArray<string>,
  db: string,
  approvals: "stdin" | "deny" | "rules" = "deny"
): ReadonlyArray<string> => ledgerCommandArgs("resume", codex, db, approvals)

const ledgerCommandArgs = (
  command: "run" | "resume",
  codex: string | ReadonlyArray<string>,
  db: string,
  approvals: "stdin" | "deny" | "rules"
): ReadonlyArray<string> => [
  command,
  ...(typeof codex === "string" ? ["--codex", codex] : codex),
  "--json",
  "--approvals",
  approvals,
  "--state",
  db,
  "--restarts",
  "0"
]

/**
 * A person on `run`'s stdin (`--approvals stdin --json`): each card is answered once as it opens,
 * with `decide(its card.opened line)`, until `run.finished`. Returns the cards answered.
 */
export const answerEveryCard = (
  run: CliProcess.Cli,
  decide: (opened: CliProcess.JsonLine) => "accept" | "decline",
  timeout: `${number} seconds` = "180 seconds"
) =>
  Effect.gen(function* () {
    const answered = new Set<string>()
    yield* run.waitUntil(
      "every card answered and the run finished",
      () => {
        const lines = run.json()
        for (const l of lines) {
          if (l.type !== "card.opened" || answered.has(String(l["cardId"]))) continue
          answered.add(String(l["cardId"]))
          Effect.runFork(run.write(`${JSON.stringify({ cardId: l["cardId"], decision: decide(l) })}\n`))
        }
        return lines.some((l) => l.type === "run.finished") ? true : undefined
      },
      timeout
    )
    return answered
  })

/** `warden run` of `codex` with JSON lines out, its cards decided by the rules file `rules` alone, recording nothing. */
export const ruledRunArgs = (codex: string, rules: string): ReadonlyArray<string> => [
  "run",
  "--codex",
  codex,
  "--json",
  "--approvals",
  "rules",
  "--rules",
  rules,
  "--restarts",
  "0",
  "--no-state"
]

/**
 * Start `warden` with `args`, run `until` against it (wait for what the test needs to have
 * happened: a card, a turn), then crash it once the ledger `db` holds what `recorded` asks
 * (`crashOnceRecorded`), in a scope of its own. Returns the dead run's id, the signal it died of
 * (SIGKILL) and what `until` returned.
 */
export const crashedRun = <A>(options: {
  readonly args: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>>
  readonly db: string
  readonly recorded: { readonly cards: number; readonly turns: number }
  readonly until: (cli: CliProcess.Cli) => Effect.Effect<A, TestProcess.TestProcessError>
}): Effect.Effect<
  { readonly runId: string; readonly signal: NodeJS.Signals | null; readonly value: A },
  TestProcess.TestProcessError
> =>
  Effect.scoped(
    Effect.gen(function* () {
      const cli = yield* CliProcess.spawn(options.args, options.env === undefined ? undefined : { env: options.env })
      const value = yield* options.until(cli)
      const { runId, signal } = yield* crashOnceRecorded(cli, options.db, options.recorded)
      return { runId, signal, value }
    })
  )
