/**
 * `warden resume [--state PATH] [--run ID] [run's options]`: after a `warden run` died (SIGKILL,
 * OOM, a reboot), resume its unfinished work items on a new app-server. The dead run is the newest
 * run of this host the ledger still has `running` whose process is gone (or `--run ID`). Its open
 * cards are recorded `stranded` (never answered by this process, counted once), its unfinished
 * items are handed to a new run (once: a second `warden resume` finds none), and each runs again on
 * its thread (`thread/resume`), from the turn that had not completed. Items that had ended are not
 * run again; an item whose prompt or config was stored masked is not run: the ledger records it
 * `not-resumed` with its reason, stderr (and `--json`: `item.not_resumed`) says so, and the exit
 * code is 1 even if every item run completes. Each item keeps
 * what it was started with (cwd, model, approval policy, sandbox, config, thread params); codex is
 * started with the dead run's `-c`/`--enable`/`--disable` unless the resume command line gives its
 * own (a `-c` value stored masked is refused: exit 2, nothing recovered).
 */
import { Command, Options } from "@effect/cli"
import { Effect, Either, Option } from "effect"
import * as JsonOutput from "../contract/JsonOutput.js"
import * as Opts from "../contract/Options.js"
import * as RunCommand from "./RunCommand.js"
import * as StatePath from "../state/StatePath.js"

const { prompts: _prompts, noState: _noState, ...runOptions } = RunCommand.options

export const options = {
  ...runOptions,
  state: Opts.state,
  run: Options.text("run").pipe(
    Options.withPseudoName("ID"),
    Options.withDescription("the dead run to resume (default: the newest dead run of this host)"),
    Options.optional
  )
}

export const command = Command.make("resume", options, (args) =>
  Effect.scoped(
    Effect.gen(function* () {
      // The one rule for a --state that cannot be used (exit 2); resume writes the ledger it finds.
      const path = yield* StatePath.check(args.state, { access: "write", create: false })
      yield* RunCommand.execute(args, {
        title: "warden resume",
        open: ({ cwd, mode }) =>
          Effect.gen(function* () {
            const StateLedger = yield* StatePath.loadStateLedger
            const resumed = yield* StateLedger.resume(path, {
              runId: Option.getOrUndefined(args.run),
              info: { resume: true, cwd, approvals: mode, rules: Option.getOrUndefined(args.rules) },
              flags: { config: args.config, enable: args.enable, disable: args.disable },
              ...(Option.isSome(args.audit) ? { audit: args.audit.value } : {})
            })
            if (Either.isLeft(resumed))
              return { recorder: Effect.succeed(undefined), recording: false, items: [], message: resumed.left }
            const r = resumed.right
            process.stderr.write(
              `warden: resuming run ${r.deadRunId} as ${r.recorder.runId}: ${r.items.length} item(s) to run again, ${r.stranded} open card(s) recorded stranded\n`
            )
            for (const n of r.notResumed) {
              process.stderr.write(
                `warden: item ${n.item} of run ${r.deadRunId} not resumed (${n.reason}): ${n.detail}\n`
              )
              if (args.json) {
                process.stdout.write(
                  JsonOutput.render(
                    {
                      type: "item.not_resumed",
                      fromRunId: r.deadRunId,
                      fromItem: n.item,
                      reason: n.reason,
                      detail: n.detail
                    },
                    new Date()
                  ) + "\n"
                )
              }
            }
            const undone = r.notResumed.filter((n) => StateLedger.leavesWorkUndone(n.reason)).length
            return {
              recorder: Effect.succeed(r.recorder),
              recording: true,
              items: r.items,
              message: `nothing to run again from run ${r.deadRunId}`,
              codexFlags: r.codexFlags,
              ...(undone > 0
                ? { notRun: { count: undone, why: `${undone} item(s) of run ${r.deadRunId} not resumed (see above)` } }
                : {})
            }
          })
      })
    })
  )
).pipe(Command.withDescription("resume the unfinished work items of a warden run that died, on a new app-server"))
