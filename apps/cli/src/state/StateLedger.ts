/**
 * The ledger behind `warden run --state PATH` (and `warden audit`, `warden rules`): opening the
 * SQLite file, recording a run, and the remembered rules the connection's cards consult. This is the only CLI
 * module that imports `@warden/ledger`; the others load it with `import()` when a command needs
 * it, so `warden --version` and a `--no-state` run never load SQLite.
 *
 * The ledger is opened in the caller's scope, which must enclose the supervisor's (the ledger is
 * built first and closed last: it records the refusals the supervisor writes while it stops).
 */
import { CardFacts, Ledger, LedgerEvent, LedgerReader, Offers, Remembered, Remembering } from "@warden/ledger"
import type { Card, Policy } from "@warden/approvals"
import { SecretMask } from "@warden/approvals"
import type { ServerRequests } from "@warden/protocol"
import type { Supervisor, WorkItem } from "@warden/supervisor"
import { Chunk, Context, Duration, Effect, Either, Exit, Layer, Queue, Scope } from "effect"
import * as Os from "node:os"
import * as Durations from "../contract/Durations.js"
import * as ExitCodes from "../contract/ExitCodes.js"
import type * as CardPrompt from "../answering/CardPrompt.js"
import type * as StdinDecisions from "../answering/StdinDecisions.js"

export { CardFacts, Ledger, LedgerReader, Remembered }
export { Replay, Suggest } from "@warden/ledger"

/**
 * How long the ledger waits while another process holds its lock before records are given up:
 * `WARDEN_LEDGER_LOCK_TIMEOUT` (a duration: `30s`, `10m`), else the ledger's default (5 minutes).
 */
export const lockTimeout = (
  env: NodeJS.ProcessEnv = process.env
): Effect.Effect<Duration.Duration | undefined, ExitCodes.CliExit> => {
  const value = env["WARDEN_LEDGER_LOCK_TIMEOUT"]
  if (value === undefined || value.trim() === "") return Effect.succeed(undefined)
  const parsed = Durations.parse(value)
  return Either.isRight(parsed)
    ? Effect.succeed(parsed.right)
    : Effect.fail(ExitCodes.usage(`WARDEN_LEDGER_LOCK_TIMEOUT: ${parsed.left}`))
}

/** What the ledger's write failures say, in one line: how many records, and why. */
export const lostMessage = (
  filename: string,
  lost: number,
  failures: ReadonlyArray<Ledger.LedgerWriteFailed>,
  timeout: Duration.Duration | undefined
): string => {
  const locked = failures.filter((f) => f.reason === "Locked").reduce((n, f) => n + f.events, 0)
  const other = failures.find((f) => f.reason === "Failed")
  const why = [
    locked > 0
      ? `${locked} because another process held the database's lock for longer than ${Duration.format(timeout ?? Duration.minutes(5))} (WARDEN_LEDGER_LOCK_TIMEOUT)`
      : "",
    other !== undefined ? `${lost - locked} because a write failed: ${other.detail}` : ""
  ]
    .filter((s) => s !== "")
    .join("; ")
  return `the ledger lost ${lost} record${lost === 1 ? "" : "s"} of this run (${why}): the run's record in ${filename} has gaps; \`warden audit\` lists the runs with lost records`
}

/**
 * Opens the ledger in the current scope (closed, and flushed, when the scope closes); a failure is
 * exit 1 with why. With `audit`, the ledger also writes the JSONL audit trail there (`--audit FILE`):
 * each card event's line is the record its rows were written from.
 *
 * Once the ledger has closed, records it could not write (another process held its lock for
 * longer than `WARDEN_LEDGER_LOCK_TIMEOUT`, or a write failed), and card events whose line the
 * audit file could not take, are said on stderr, how many and why, and the process exits 4 where
 * it would have exited 0 (`ExitCodes.ledgerLost`).
 */
export const openLedger = (
  filename: string,
  audit?: string
): Effect.Effect<Ledger.LedgerShape, ExitCodes.CliExit, Scope.Scope> =>
  Effect.gen(function* () {
    const timeout = yield* lockTimeout()
    // Holds the failures' subscription until the ledger has closed (its finalizer runs after the ledger's).
    const subscription = yield* Scope.make()
    const opened: { ledger?: Ledger.LedgerShape; failures?: Queue.Dequeue<Ledger.LedgerWriteFailed> } = {}
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        const { ledger, failures } = opened
        if (ledger !== undefined && failures !== undefined) {
          const stats = yield* ledger.stats
          const reported = Chunk.toReadonlyArray(yield* Queue.takeAll(failures))
          if (stats.failed > 0) {
            ExitCodes.ledgerLost()
            process.stderr.write(
              `warden: ${SecretMask.maskText(lostMessage(filename, stats.failed, reported, timeout))}\n`
            )
          }
          if (stats.auditFailed > 0 && audit !== undefined) {
            ExitCodes.ledgerLost()
            const why = reported.find((f) => f.reason === "Audit")?.detail ?? "a write failed"
            const message = ExitCodes.auditLinesMissing(
              audit,
              stats.auditFailed,
              why,
              ": their card events are in the ledger; `warden audit` reads them from there"
            )
            process.stderr.write(`warden: ${SecretMask.maskText(message)}\n`)
          }
        }
        yield* Scope.close(subscription, Exit.void)
      })
    )
    const context = yield* Layer.build(
      Ledger.layerSqlite({
        filename,
        ...(audit !== undefined ? { audit } : {}),
        ...(timeout !== undefined ? { lockTimeout: timeout } : {})
      })
    ).pipe(
      Effect.mapError(
        (error) => new ExitCodes.CliExit({ code: ExitCodes.Failed, message: `--state ${filename}: ${error.message}` })
      )
    )
    const ledger = Context.get(context, Ledger.Ledger)
    opened.failures = yield* Scope.extend(ledger.subscribeFailures, subscription)
    opened.ledger = ledger
    return ledger
  })

/**
 * Opens the ledger at `filename` read-only in the current scope (`LedgerReader`: never created,
 * migrated or written), for the commands that only read it. This user may not read it, or there is
 * none: exit 2 (the one rule for a `--state` that cannot be used, `StatePath.check`); any other
 * failure (not a database, a schema too old to read without migrating): exit 1 with why.
 */
export const openReader = (
  filename: string
): Effect.Effect<LedgerReader.LedgerReaderShape, ExitCodes.CliExit, Scope.Scope> =>
  Layer.build(LedgerReader.layerSqlite({ filename })).pipe(
    Effect.map((context) => Context.get(context, LedgerReader.LedgerReader)),
    Effect.mapError((error) =>
      error.reason === "Permission" || error.reason === "NotFound"
        ? ExitCodes.usage(`--state ${filename}: ${error.detail}`)
        : new ExitCodes.CliExit({ code: ExitCodes.Failed, message: `--state ${filename}: ${error.message}` })
    )
  )

/** What `SupervisedRun.run` and `warden run` need of a recorded run. */
export interface Recorder {
  readonly runId: string
  /** The ledger writes the `--audit` trail (so the CLI's own sink is not started). */
  readonly writesAudit: boolean
  readonly ledger: Ledger.LedgerShape
  /** Records everything the supervisor and its approvals engine publish from now on. */
  readonly attach: (supervisor: Supervisor.SupervisorShape) => Effect.Effect<void>
  /** Records a work item as submitted (the one event no stream publishes). */
  readonly submitted: (item: WorkItem.WorkItem) => void
  /**
   * The connection cards' `remembered` lookup: the remembered rules in force, as loaded at start and
   * updated by `rememberAlways` (an in-memory snapshot: the lookup does no I/O).
   */
  readonly remembered: (
    request: ServerRequests.DecodedRequest,
    context: Card.CardContext
  ) => { readonly ruleId: string } | undefined
  /**
   * Stores a remembered rule scoped to what `card` asked (`Remembered.scopeFor` of the card's
   * facts), authored by `author`, and adds it to the snapshot. Left: why none can be stored.
   */
  readonly rememberAlways: (
    card: Card.CardView,
    author: string
  ) => Effect.Effect<Either.Either<Remembered.RememberedRule, string>>
  /** `rememberAlways` as `--approvals stdin` uses it (author `stdin`). */
  readonly always: StdinDecisions.RememberAlways
  /** "always" as the terminal prompt offers it (author `prompt`). */
  readonly prompt: CardPrompt.Always
  /** `rememberAlways` as another channel uses it (author `web` for the web inbox). */
  readonly alwaysAs: (author: string) => StdinDecisions.RememberAlways
  /** Rules offered at a person's acceptance (`Offers`), replayed with the run's `rules`. */
  readonly offers: (rules: Policy.Rules | undefined) => RunOffers
}

/** `Offers` as the run's answering channels use them: the card, and the rule taken as its id and what it allows. */
export interface RunOffers {
  /** The rule offered after a person accepted `card`, if any. Never fails. */
  readonly after: (card: Card.CardView) => Effect.Effect<Offers.Offer | undefined>
  /** Remember an offered rule as `author`; Left: why not. */
  readonly take: (
    id: string,
    author: string
  ) => Effect.Effect<Either.Either<{ readonly ruleId: string; readonly describe: string }, string>>
}

/** Opens the ledger at `filename` and begins a run in it. */
export const record = (
  filename: string,
  info: { readonly id?: string; readonly label: string; readonly info: unknown },
  audit?: string
): Effect.Effect<Recorder, ExitCodes.CliExit, Scope.Scope> =>
  Effect.flatMap(openLedger(filename, audit), (ledger) =>
    recordIn(ledger, filename, info, undefined, audit !== undefined)
  )

/** Begins a run in an open ledger. `origins`: the dead run's item each submitted item continues (by item id). */
export const recordIn = (
  ledger: Ledger.LedgerShape,
  filename: string,
  info: { readonly id?: string; readonly label: string; readonly info: unknown; readonly resumedFrom?: string },
  origins?: ReadonlyMap<string, LedgerEvent.ItemOrigin>,
  writesAudit: boolean = false
): Effect.Effect<Recorder, ExitCodes.CliExit> =>
  Effect.gen(function* () {
    const run = yield* ledger.beginRun({
      label: info.label,
      info: info.info,
      ...(info.id !== undefined ? { id: info.id } : {}),
      ...(info.resumedFrom !== undefined ? { resumedFrom: info.resumedFrom } : {})
    })
    const remembering = yield* Remembering.make(ledger, run.id).pipe(
      Effect.mapError(
        (error) => new ExitCodes.CliExit({ code: ExitCodes.Failed, message: `--state ${filename}: ${error.message}` })
      )
    )
    const rememberAlways = (
      card: Card.CardView,
      author: string
    ): Effect.Effect<Either.Either<Remembered.RememberedRule, string>> =>
      remembering.always(card, { author }).pipe(
        Effect.mapError((error) => error.detail),
        Effect.either
      )
    const alwaysAs =
      (author: string): StdinDecisions.RememberAlways =>
      (card) =>
        rememberAlways(card, author).pipe(
          Effect.map(Either.map((rule) => ({ id: rule.id, describe: Remembered.describeScope(rule.scope) })))
        )
    return {
      runId: run.id,
      writesAudit,
      ledger,
      attach: (supervisor) => run.attach(supervisor),
      submitted: (item) => {
        run.record(LedgerEvent.itemSubmitted(item, origins?.get(String(item.id))))
      },
      remembered: remembering.lookup,
      rememberAlways,
      always: alwaysAs("stdin"),
      alwaysAs,
      prompt: {
        // Offered on the prompt: a card that cannot be read back is offered no "always", never a crash.
        scopeOf: (card) => {
          try {
            return Either.map(Remembering.scopeForCard(card), Remembered.describeScope)
          } catch {
            return Either.left("its request cannot be read back")
          }
        },
        remember: alwaysAs("prompt")
      },
      offers: (rules) => {
        const offers = Offers.make(ledger, remembering, run.id, { rules: rules ?? { rules: [] } })
        return {
          after: (card) => offers.after(card.id),
          take: (id, author) =>
            Effect.map(
              offers.take(id, author),
              Either.map((rule) => ({ ruleId: rule.id, describe: Remembered.describeScope(rule.scope) }))
            )
        }
      }
    } satisfies Recorder
  })

/**
 * The runs of this host still `running` whose process is gone (it was killed, or the machine
 * rebooted), newest first. A run of another host is never taken for dead here.
 */
export const deadRuns = (ledger: Ledger.LedgerShape, host: string = Os.hostname()) =>
  ledger
    .runs("running")
    .pipe(
      Effect.map((runs) =>
        runs
          .filter((r) => r.host === host && r.pid !== undefined && r.pid !== process.pid && !Ledger.processAlive(r.pid))
          .sort((a, b) => b.startedAt - a.startedAt)
      )
    )

/** Whether a stored value had something masked in it (it cannot be sent again as given). */
const isMasked = (value: unknown): boolean =>
  value !== undefined && (JSON.stringify(value) ?? "").includes(SecretMask.Mask)

/** How `warden run` started codex, as recorded in its run's info (`codex`) and reused by `warden resume`. */
export interface CodexFlags {
  readonly config: ReadonlyArray<string>
  readonly enable: ReadonlyArray<string>
  readonly disable: ReadonlyArray<string>
}

const strings = (value: unknown): ReadonlyArray<string> | undefined =>
  Array.isArray(value) && value.every((v) => typeof v === "string") ? value : undefined

/** The codex flags a run's info recorded; Left: they were stored masked (a secret in a `-c` value). */
export const recordedFlags = (info: unknown): Either.Either<CodexFlags | undefined, string> => {
  const codex = typeof info === "object" && info !== null ? (info as Record<string, unknown>)["codex"] : undefined
  if (typeof codex !== "object" || codex === null) return Either.right(undefined)
  if (isMasked(codex))
    return Either.left(
      "its codex flags (-c, --enable, --disable) held a secret and were stored masked; give them again on the command line"
    )
  const c = codex as Record<string, unknown>
  return Either.right({
    config: strings(c["config"]) ?? [],
    enable: strings(c["enable"]) ?? [],
    disable: strings(c["disable"]) ?? []
  })
}

/** What `warden resume` runs: the dead run's unfinished items, recovered into a new run. */
export interface Resumed {
  /**
   * The codex flags this resume starts codex with, as its run's info records them (`codex`): the
   * command line's, or, when it gave none, the dead run's (so a resumed run that dies is resumed
   * again with the same flags).
   */
  readonly codexFlags: CodexFlags
  readonly recorder: Recorder
  readonly deadRunId: string
  readonly stranded: number
  readonly items: ReadonlyArray<WorkItem.WorkItem>
  /**
   * The dead run's unfinished items not run again (recorded `not-resumed` in the ledger, not handed
   * over), and why: `reason` as the ledger records it, `detail` in words.
   */
  readonly notResumed: ReadonlyArray<{ readonly item: string; readonly reason: string; readonly detail: string }>
}

/** Not resumed for a reason that leaves asked work undone (a masked prompt or config): the resume then exits 1. */
export const leavesWorkUndone = (reason: string): boolean => reason !== "nothing-left"

/**
 * Recovers a dead run (`runId`, or the newest dead run of this host) into a new run: its open
 * cards are recorded `stranded`, its unfinished items handed over (once: a second resume finds
 * none), and each becomes a work item on its thread (`thread/resume`) with the prompts that had not
 * completed. An item whose prompts or config were masked when recorded is not run (it would not
 * send what was asked), nor one whose turns all completed: the ledger records those `not-resumed`,
 * with their reason, instead of handing them over. Left: nothing to resume.
 */
export const resume = (
  filename: string,
  options: {
    readonly runId: string | undefined
    /** What the new run records about itself (an object; `codex` is added: the flags used). */
    readonly info: Readonly<Record<string, unknown>>
    /** The resume command line's `-c`/`--enable`/`--disable`; when it gave none, the dead run's are used. */
    readonly flags: CodexFlags
    /** `--audit FILE`: written by the ledger. */
    readonly audit?: string
  }
): Effect.Effect<Either.Either<Resumed, string>, ExitCodes.CliExit, Scope.Scope> =>
  Effect.gen(function* () {
    const ledger = yield* openLedger(filename, options.audit)
    const failed = (error: { readonly message: string }) =>
      new ExitCodes.CliExit({ code: ExitCodes.Failed, message: error.message })
    const dead = yield* deadRuns(ledger).pipe(Effect.mapError(failed))
    const target = options.runId === undefined ? dead[0] : dead.find((r) => r.runId === options.runId)
    if (target === undefined && options.runId === undefined) {
      return Either.left(
        `no dead run to resume in ${filename} (a run still marked running whose process is gone, on this host)`
      )
    }
    if (target === undefined) {
      // Named on the command line and not resumable: a usage error, as `rules revoke` of an unknown id.
      const named = (yield* ledger.runs().pipe(Effect.mapError(failed))).find((r) => r.runId === options.runId)
      if (named === undefined) return yield* ExitCodes.usage(`--run ${options.runId}: no such run in ${filename}`)
      const why =
        named.status === "crashed"
          ? "it was already recovered (crashed, its items handed over or recorded not-resumed)"
          : named.status === "ended"
            ? "it ended cleanly"
            : named.host !== Os.hostname()
              ? `it runs on another host (${named.host ?? "unknown"}); only a run of this host is taken for dead`
              : `its process (${named.pid ?? "?"}) is still alive`
      return yield* ExitCodes.usage(`--run ${options.runId}: not a dead run to resume: ${why}`)
    }
    // Checked before anything is recovered: a resume that cannot start changes nothing.
    const given = options.flags
    const inherit = given.config.length === 0 && given.enable.length === 0 && given.disable.length === 0
    const flags = inherit ? recordedFlags(target.info) : Either.right(given)
    if (Either.isLeft(flags)) return yield* ExitCodes.usage(`run ${target.runId}: ${flags.left}`)
    // Recorded as used: the next resume of this run (if it dies too) inherits what it really ran with.
    const codexFlags: CodexFlags = flags.right ?? given
    const recovered = new Map<string, LedgerEvent.ItemOrigin>()
    const items: Array<WorkItem.WorkItem> = []
    // The recorder (and its run) first: the dead run's items are handed to it.
    let index = 0
    const recorder = yield* recordIn(
      ledger,
      filename,
      { label: "warden resume", info: { ...options.info, codex: codexFlags }, resumedFrom: target.runId },
      recovered,
      options.audit !== undefined
    )
    const recovery = yield* ledger.recover(target.runId, recorder.runId).pipe(Effect.mapError(failed))
    // The ledger hands over only what can run again as asked; the rest it records `not-resumed`.
    for (const item of recovery.items) {
      const o = item.options as Record<string, unknown>
      const str = (k: string) => (typeof o[k] === "string" ? { [k]: o[k] as string } : {})
      const obj = (k: "config" | "threadParams") =>
        typeof o[k] === "object" && o[k] !== null && !Array.isArray(o[k])
          ? { [k]: o[k] as Readonly<Record<string, unknown>> }
          : {}
      // Its worktree: the one it ran in (the same branch and path: taken up as it is, with its work),
      // else as it was asked for (a new branch of this run). Its budget, as it was given.
      const asked =
        typeof o["worktree"] === "object" && o["worktree"] !== null
          ? (o["worktree"] as Record<string, unknown>)
          : undefined
      const worktreeOptions =
        asked === undefined
          ? undefined
          : {
              ...(typeof asked["base"] === "string" && !isMasked(asked["base"]) ? { base: asked["base"] } : {}),
              ...(asked["keep"] === "always" ? { keep: "always" as const } : {}),
              ...(item.worktree !== undefined && !isMasked(item.worktree)
                ? { branch: item.worktree.branch, path: item.worktree.path }
                : {})
            }
      const budgetAsked =
        typeof o["budget"] === "object" && o["budget"] !== null ? (o["budget"] as Record<string, unknown>) : undefined
      const budget =
        budgetAsked === undefined
          ? undefined
          : {
              ...(typeof budgetAsked["maxTokens"] === "number" ? { maxTokens: budgetAsked["maxTokens"] } : {}),
              ...(typeof budgetAsked["maxTurnTimeMs"] === "number"
                ? { maxTurnTime: Duration.millis(budgetAsked["maxTurnTimeMs"]) }
                : {})
            }
      const [prompt, ...followUps] = item.remainingPrompts
      const id = index++
      recovered.set(String(id), { runId: target.runId, item: item.item })
      items.push({
        prompt: prompt!,
        ...(followUps.length > 0 ? { followUps } : {}),
        // A thread codex never saved (Warden died before its first turn was written) starts anew.
        ...(item.threadId !== undefined ? { threadId: item.threadId, ifThreadMissing: "start" as const } : {}),
        ...str("cwd"),
        ...str("model"),
        ...str("approvalPolicy"),
        ...str("sandbox"),
        ...obj("config"),
        ...obj("threadParams"),
        ...(worktreeOptions !== undefined ? { worktree: worktreeOptions } : {}),
        ...(budget !== undefined ? { budget } : {})
      })
    }
    return Either.right({
      recorder,
      deadRunId: target.runId,
      stranded: recovery.stranded,
      items,
      notResumed: recovery.notResumed.map((i) => ({ item: i.item, reason: i.reason, detail: i.detail })),
      codexFlags
    })
  })
