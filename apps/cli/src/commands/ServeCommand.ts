/**
 * `warden serve --inbox [HOST:]PORT [run's options]`: a standing supervisor with the web inbox.
 * It starts with no work item; items are submitted through the inbox's API (`POST /api/items`
 * `{"prompt": ...}` with the token; 202 `{"item": N}`), each on its own thread with the command
 * line's options (cwd, model, sandbox, approval policy, worktree, budgets), and their cards are
 * answered like `warden run`'s (rules, the inbox, stdin, the terminal, deadlines). It runs until it
 * is stopped (SIGINT/SIGTERM): open cards are refused, running items interrupted and reported, the
 * ledger closed, and the exit code is 0. Everything else (the `--json` lines, the ledger, `warden
 * resume` after a crash) is as for `warden run`.
 */
import { Command } from "@effect/cli"
import { Effect } from "effect"
import * as RunCommand from "./RunCommand.js"

const { prompts: _prompts, ...serveOptions } = RunCommand.options

export const options = serveOptions

export const command = Command.make("serve", options, (args) =>
  Effect.scoped(RunCommand.startRun(args, [], { title: "warden serve", serve: true }))
).pipe(
  Command.withDescription(
    "a standing supervisor with the web inbox (--inbox): work items are submitted there (POST /api/items) until it is stopped"
  )
)
