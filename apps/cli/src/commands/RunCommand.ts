/**
 * `warden run [options] PROMPT...`: each PROMPT is one work item on its own thread, all on one
 * app-server (or `--pool N`), at most `--concurrency` at once; exits when all have ended.
 */
import { Args, Command } from "@effect/cli"
import { CodexCommand, Config as SupervisorConfig, RunId, Worktree } from "@warden/supervisor"
import type { Supervisor, WorkItem } from "@warden/supervisor"
import { Effect, Either, Option, Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ApprovalModes from "../answering/ApprovalModes.js"
import * as CodexBinary from "../codex/CodexBinary.js"
import * as ExitCodes from "../contract/ExitCodes.js"
import * as Opts from "../contract/Options.js"
import * as Screen from "../terminal/Screen.js"
import * as SupervisedRun from "./SupervisedRun.js"
import * as StatePath from "../state/StatePath.js"
import * as Summary from "../terminal/Summary.js"
import { version } from "../startup/Version.js"

const prompts = Args.text({ name: "PROMPT" }).pipe(
  Args.withDescription("one work item per PROMPT, each on its own thread"),
  Args.atLeast(1)
)

export const options = {
  cwd: Opts.cwd,
  codex: Opts.codex,
  config: Opts.config,
  enable: Opts.enable,
  disable: Opts.disable,
  model: Opts.model,
  sandbox: Opts.sandbox,
  approvalPolicy: Opts.approvalPolicy,
  approvals: Opts.approvals,
  rules: Opts.rules,
  approvalTimeout: Opts.approvalTimeout,
  requestTimeout: Opts.requestTimeout,
  stallTimeout: Opts.stallTimeout,
  json: Opts.json,
  audit: Opts.audit,
  otlp: Opts.otlp,
  concurrency: Opts.concurrency,
  maxTokens: Opts.maxTokens,
  maxTurnTime: Opts.maxTurnTime,
  runMaxTokens: Opts.runMaxTokens,
  fixedConcurrency: Opts.fixedConcurrency,
  admissionRecovery: Opts.admissionRecovery,
  pool: Opts.pool,
  restarts: Opts.restarts,
  worktree: Opts.worktree,
  base: Opts.base,
  keepWorktrees: Opts.keepWorktrees,
  state: Opts.state,
  noState: Opts.noState,
  inbox: Opts.inbox,
  inboxAllowRemote: Opts.inboxAllowRemote,
  inboxPublicUrl: Opts.inboxPublicUrl,
  notify: Opts.notify,
  notifySecret: Opts.notifySecret,
  prompts
}

/** What the `run` handler is given: each option's value and the PROMPTs. */
export type Parsed = Command.Command.ParseConfig<typeof options>

/** The directory, absolute, or a usage error. */
export const directory = (dir: string) =>
  Effect.suspend(() => {
    const path = Path.resolve(dir)
    try {
      if (Fs.statSync(path).isDirectory()) return Effect.succeed(path)
    } catch {
      // reported below
    }
    return Effect.fail(ExitCodes.usage(`--cwd ${dir}: no such directory`))
  })

/** The audit file can be appended to (checked before anything starts), or a usage error. */
export const writable = (path: string) =>
  Effect.try({
    try: () => Fs.closeSync(Fs.openSync(path, "a")),
    catch: (e) =>
      ExitCodes.usage(`--audit ${path}: cannot append to it (${e instanceof Error ? e.message : String(e)})`)
  })

/**
 * @effect/cli takes an unknown `--flag` for a PROMPT; a misspelt option must not start a work
 * item. A PROMPT that really starts with `-` goes after `--`.
 */
export const checkPrompts = (prompts: ReadonlyArray<string>, argv: ReadonlyArray<string>) => {
  const flagLike = prompts.find((p) => /^--?[A-Za-z]/.test(p))
  return flagLike !== undefined && !argv.includes("--")
    ? Effect.fail(
        ExitCodes.usage(`unknown option ${flagLike.split(/\s/)[0]}; a PROMPT that starts with - goes after --`)
      )
    : Effect.void
}

/** Opens the ledger and begins a run in it (in the caller's scope), or nothing without a path. */
const recorderFor = (
  path: string | undefined,
  runId: string,
  info: unknown,
  audit: string | undefined,
  label: string
): Effect.Effect<import("../state/StateLedger.js").Recorder | undefined, ExitCodes.CliExit, Scope.Scope> =>
  path === undefined
    ? Effect.succeed(undefined)
    : Effect.flatMap(StatePath.loadStateLedger, (StateLedger) =>
        StateLedger.record(path, { id: runId, label, info }, audit)
      )

export const handler = (args: Parsed) => Effect.scoped(handlerScoped(args))

/** The options `warden run` and `warden resume` share (everything but the PROMPTs and the ledger's). */
export type Common = Omit<Parsed, "prompts" | "state" | "noState">

/** What to run, decided once the options were checked (so that a usage error changes nothing in the ledger). */
export interface Plan {
  readonly title: string
  /** `warden serve`: work items are also submitted through the inbox until the process is stopped. */
  readonly serve?: boolean
  /**
   * Opens the ledger (in the command's scope, which encloses the supervisor's) and says what to
   * run. `items` empty: nothing is started, `message` says why.
   */
  readonly open: (context: { readonly cwd: string; readonly mode: string }) => Effect.Effect<
    {
      /** The ledger's recorder, opened when SupervisedRun.run asks (once codex was spawned), or none. */
      readonly recorder: Effect.Effect<import("../state/StateLedger.js").Recorder | undefined, ExitCodes.CliExit>
      /** Whether there is a ledger (`recorder` yields one). */
      readonly recording: boolean
      readonly items: ReadonlyArray<WorkItem.WorkItem>
      readonly message?: string
      /** The run's id when it is decided before the ledger opens (`warden run`): worktree branches are named by it. */
      readonly runId?: string
      /**
       * Work that was asked and will not run (`warden resume`'s not-resumed items): the exit code is
       * 1 at best, and `why` is said when nothing else runs.
       */
      readonly notRun?: { readonly count: number; readonly why: string }
      /** How to start codex instead of the command line's `-c`/`--enable`/`--disable` (a resumed run's). */
      readonly codexFlags?: {
        readonly config: ReadonlyArray<string>
        readonly enable: ReadonlyArray<string>
        readonly disable: ReadonlyArray<string>
      }
    },
    ExitCodes.CliExit,
    Scope.Scope
  >
}

/** Checks the options, opens the plan, and runs its items under one supervisor. */
export const execute = (args: Common, plan: Plan) =>
  Effect.gen(function* () {
    const cwd = yield* directory(args.cwd)
    if (!args.worktree && (Option.isSome(args.base) || args.keepWorktrees)) {
      return yield* ExitCodes.usage(`${Option.isSome(args.base) ? "--base" : "--keep-worktrees"} needs --worktree`)
    }
    if (args.worktree) {
      yield* Worktree.repositoryOf(cwd).pipe(
        Effect.mapError((e) => ExitCodes.usage(`--worktree needs a git repository: ${e.detail}`))
      )
    }
    const binary = yield* CodexBinary.resolve(args.codex)
    const stdinIsTerminal = process.stdin.isTTY === true
    if (plan.serve === true && Option.isNone(args.inbox)) {
      return yield* ExitCodes.usage(
        "warden serve needs --inbox [HOST:]PORT (work items are submitted there: POST /api/items)"
      )
    }
    const mode = Option.getOrElse(args.approvals, () =>
      ApprovalModes.defaultMode(stdinIsTerminal, Option.isSome(args.inbox))
    )
    if (mode === "inbox" && Option.isNone(args.inbox)) {
      return yield* ExitCodes.usage("--approvals inbox needs --inbox [HOST:]PORT")
    }
    // warden serve's inbox takes work items, so it has a use even when every card is decided at once.
    if (Option.isSome(args.inbox) && (mode === "deny" || mode === "rules") && plan.serve !== true) {
      return yield* ExitCodes.usage(
        `--inbox has nothing to answer with --approvals ${mode} (every card is decided at once); use --approvals inbox, prompt or stdin`
      )
    }
    const inbox = yield* Opts.inboxSetting(args)
    if (mode === "prompt" && !stdinIsTerminal) {
      return yield* ExitCodes.usage(
        "--approvals prompt needs a terminal on stdin; use --approvals deny, rules or stdin"
      )
    }
    if (mode === "rules" && Option.isNone(args.rules)) {
      return yield* ExitCodes.usage("--approvals rules needs --rules FILE")
    }
    if (Option.isSome(args.audit)) yield* writable(args.audit.value)
    const rules = Option.isSome(args.rules) ? yield* Opts.loadRules(args.rules.value) : undefined
    const handler = ApprovalModes.handlerFor(mode)
    // The connection cards' remembered lookup, through the recorder once it is open (no card opens before).
    const opened: { current?: import("../state/StateLedger.js").Recorder } = {}
    const config = (recording: boolean, runId?: string): Supervisor.SupervisorConfig => ({
      connection: { clientInfo: { name: "warden", title: "Warden", version }, requestTimeout: args.requestTimeout },
      approvals: {
        deadlines: { default: args.approvalTimeout },
        ...(rules ? { rules } : {}),
        ...(handler ? { handler } : {}),
        ...(recording ? { remembered: (request, context) => opened.current?.remembered(request, context) } : {})
      },
      stallTimeout: args.stallTimeout,
      concurrency: args.concurrency,
      admission: { adaptive: !args.fixedConcurrency, recoverAfter: args.admissionRecovery },
      ...(Option.isSome(args.runMaxTokens) ? { runBudget: { maxTokens: args.runMaxTokens.value } } : {}),
      pool: args.pool,
      restart: { maxAttempts: args.restarts },
      ...(runId !== undefined ? { runId } : {})
    })
    // Decoded before anything starts: a bad value is a usage error (exit 2), with nothing on stdout.
    const checked = SupervisorConfig.decode(config(false))
    if (Either.isLeft(checked)) return yield* ExitCodes.usage(checked.left.message)
    // The ledger is opened by SupervisedRun.run once codex was spawned, in this handler's scope, which
    // encloses SupervisedRun.run's: it closes after the supervisor.
    const planned = yield* plan.open({ cwd, mode })
    const { recorder, recording, message, codexFlags, runId, notRun } = planned
    const worktree: Worktree.WorktreeOptions | undefined = args.worktree
      ? {
          ...(Option.isSome(args.base) ? { base: args.base.value } : {}),
          ...(args.keepWorktrees ? { keep: "always" as const } : {})
        }
      : undefined
    const budget = {
      ...(Option.isSome(args.maxTokens) ? { maxTokens: args.maxTokens.value } : {}),
      ...(Option.isSome(args.maxTurnTime) ? { maxTurnTime: args.maxTurnTime.value } : {})
    }
    const decorate = (item: WorkItem.WorkItem): WorkItem.WorkItem => ({
      ...item,
      // A resumed item keeps the worktree it ran in (taken up again); the others get --worktree's.
      ...(worktree !== undefined && item.worktree === undefined ? { worktree } : {}),
      ...(Object.keys(budget).length > 0 ? { budget } : {})
    })
    const items = planned.items.map(decorate)
    const flags = codexFlags ?? { config: args.config, enable: args.enable, disable: args.disable }
    const screen = Screen.make()
    if (items.length === 0 && plan.serve !== true) {
      screen.err(`warden: ${message ?? "nothing to run"}`)
      if (notRun !== undefined) return yield* new ExitCodes.CliExit({ code: ExitCodes.Failed, message: notRun.why })
      return
    }
    const telemetry = yield* telemetryFor(Option.getOrUndefined(args.otlp), screen)
    const result = yield* SupervisedRun.run({
      transport: CodexCommand.transportLayer({
        command: binary,
        config: flags.config,
        enable: flags.enable,
        disable: flags.disable,
        cwd
      }),
      supervisor: config(recording, runId),
      items,
      answering: ApprovalModes.answeringFor(mode),
      json: args.json,
      audit: Option.getOrUndefined(args.audit),
      title: plan.title,
      screen,
      ...(notRun !== undefined ? { notRun: notRun.count } : {}),
      ...(recording
        ? {
            recorder: Effect.tap(recorder, (r) =>
              Effect.sync(() => {
                if (r !== undefined) opened.current = r
              })
            )
          }
        : {}),
      ...(inbox !== undefined ? { inbox } : {}),
      ...(telemetry ? { telemetry } : {}),
      ...(plan.serve === true ? { serve: { item: (prompt: string) => decorate(itemFor(args, cwd, prompt)) } } : {})
    })
    if (!args.json) for (const line of Summary.lines(result.tally, result.exitCode)) screen.out(line)
    if (result.exitCode !== ExitCodes.Ok) return yield* new ExitCodes.CliExit({ code: result.exitCode })
  })

/**
 * `--otlp URL` (else `OTEL_EXPORTER_OTLP_ENDPOINT`, with `OTEL_SERVICE_NAME`): the exporters'
 * layer, or undefined. `@warden/observability` is imported only then: a run without it loads (and,
 * in the bundle, evaluates) none of it. An export failure is said once on stderr, masked.
 */
const telemetryFor = (flag: string | undefined, screen: Screen.Screen) => {
  const endpoint = flag ?? process.env["OTEL_EXPORTER_OTLP_ENDPOINT"]?.trim()
  if (endpoint === undefined || endpoint.length === 0) return Effect.succeed(undefined)
  const serviceName = process.env["OTEL_SERVICE_NAME"]?.trim()
  return Effect.map(
    Effect.promise(() => import("@warden/observability")),
    ({ Observability }) =>
      Observability.layer({
        endpoint,
        serviceName: serviceName !== undefined && serviceName.length > 0 ? serviceName : "warden",
        serviceVersion: version,
        onExportError: (message) => Effect.sync(() => screen.err(message))
      })
  )
}

/** A work item of this command line (`warden run`'s PROMPTs, `warden serve`'s submissions). */
const itemFor = (args: Common, cwd: string, prompt: string): WorkItem.WorkItem => ({
  prompt,
  cwd,
  approvalPolicy: args.approvalPolicy,
  ...(Option.isSome(args.model) ? { model: args.model.value } : {}),
  ...(Option.isSome(args.sandbox) ? { sandbox: args.sandbox.value } : {})
})

const handlerScoped = (args: Parsed) =>
  Effect.flatMap(checkPrompts(args.prompts, process.argv), () =>
    startRun(args, args.prompts, { title: "warden run", serve: false })
  )

/**
 * A new run of this command line's items (`warden run`: its PROMPTs; `warden serve`: none, then
 * whatever is submitted), recorded in the ledger unless `--no-state`.
 */
export const startRun = (
  args: Omit<Parsed, "prompts">,
  prompts: ReadonlyArray<string>,
  how: { readonly title: string; readonly serve: boolean }
) =>
  Effect.gen(function* () {
    const state = yield* StatePath.forRun(args.state, args.noState)
    // Made here, in the ledger's format: known before the ledger opens (after codex was spawned).
    const runId = RunId.make()
    return yield* execute(args, {
      title: how.title,
      serve: how.serve,
      open: ({ cwd, mode }) =>
        Effect.map(
          // Not opened here: SupervisedRun.run opens it once codex was spawned (in this handler's scope).
          Effect.map(Effect.scope, (scope) =>
            Scope.extend(
              recorderFor(
                state,
                runId,
                {
                  prompts: prompts.length,
                  ...(how.serve ? { serve: true } : {}),
                  cwd,
                  approvals: mode,
                  rules: Option.getOrUndefined(args.rules),
                  pool: args.pool,
                  concurrency: args.concurrency,
                  // How codex was started, for `warden resume` (stored masked: a secret in a -c value is not kept).
                  codex: { config: args.config, enable: args.enable, disable: args.disable }
                },
                Option.getOrUndefined(args.audit),
                how.title
              ),
              scope
            )
          ),
          (recorder) => ({
            recorder,
            recording: state !== undefined,
            runId,
            items: prompts.map((prompt) => itemFor(args, cwd, prompt))
          })
        )
    })
  })

export const command = Command.make("run", options, handler).pipe(
  Command.withDescription("run each PROMPT as a work item on its own thread of a supervised codex app-server")
)
