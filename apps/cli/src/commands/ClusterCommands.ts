/**
 * The fleet's commands (`@warden/cluster`), their options only: what they do is in ClusterHandlers.ts,
 * loaded when one of them runs, so that the other commands do not load the cluster engine, the
 * SQL drivers and their dependencies at start-up.
 *
 * - `warden runner --cluster URL --listen HOST:PORT [--codex ...]`: one runner process, its own
 *   supervisor over codex app-servers, hosting the work items its shards hold. Prints JSON lines:
 *   `runner.ready { runId, address, pid }`, then `runner.shards { count }` whenever the number of
 *   shards it holds changes. SIGTERM/Ctrl-C stops it gracefully (its items move on).
 * - `warden steer|interrupt --cluster URL ITEM [TEXT]`: a fleet item's running turn, on its runner;
 * - `warden submit --cluster URL [--json] [--approvals deny|stdin] PROMPT...`: submit work items
 *   to the fleet and follow them; cards are answered through the one inbox (`--approvals stdin`:
 *   `{"cardId": "<runId>:<card>", "decision": ...}` lines, the card ids `card.opened` prints). Exit
 *   codes as `warden run`'s.
 * - `warden fleet --cluster URL [--json]`: runners (address, heartbeat), items by status and
 *   runner, open cards.
 */
import { Args, Command, Options } from "@effect/cli"
import { Effect } from "effect"
import * as Opts from "../contract/Options.js"

const cluster = Options.text("cluster").pipe(
  Options.withPseudoName("URL"),
  Options.withDescription(
    "the fleet's database: PostgreSQL (postgres://USER@HOST/DB; a unix socket: postgres://USER@/DB?host=DIR&port=N), or sqlite:PATH for one host"
  )
)

const shardingOption = Options.text("sharding").pipe(
  Options.withPseudoName("KEY=VALUE"),
  Options.withDescription(
    "override a ShardingConfig key of the engine (repeatable; e.g. shardLockExpiration=10s); give a submitter the runners' timings so it notices a dead runner as soon as they do"
  ),
  Options.repeated
)

/** `warden runner`. */
export const runner = Command.make(
  "runner",
  {
    cluster,
    listen: Options.text("listen").pipe(
      Options.withPseudoName("HOST:PORT"),
      Options.withDefault("127.0.0.1:34431"),
      Options.withDescription(
        "the address this runner listens on and other runners reach it at (default 127.0.0.1:34431)"
      )
    ),
    codex: Opts.codex,
    config: Opts.config,
    enable: Opts.enable,
    disable: Opts.disable,
    concurrency: Options.integer("concurrency").pipe(
      Options.withDefault(4),
      Options.withDescription("work items running at once on this runner (default 4)")
    ),
    pool: Options.integer("pool").pipe(
      Options.withDefault(1),
      Options.withDescription("app-server processes of this runner (default 1)")
    ),
    rules: Opts.rules,
    approvalTimeout: Opts.approvalTimeout,
    noThreadState: Options.boolean("no-thread-state").pipe(
      Options.withDescription(
        "keep no thread state (codex rollouts: the conversations, unmasked) in the fleet's database; an item that moves to another host then fails thread-unreachable"
      )
    ),
    deadAfter: Opts.durationOption(
      "dead-after",
      "5m",
      "a runner whose heartbeat is older than this has its ledger run recorded crashed by the live runners (above the shard lock expiry); this runner exits if it finds its own so"
    ),
    sharding: shardingOption
  },
  (o) =>
    Effect.flatMap(
      Effect.promise(() => import("./ClusterHandlers.js")),
      (run) => run.runner(o)
    )
).pipe(Command.withDescription("run one runner of a fleet: a supervisor hosting the work items its shards hold"))

/** `warden submit`. */
export const submit = Command.make(
  "submit",
  {
    cluster,
    json: Options.boolean("json").pipe(Options.withDescription("print events as JSON lines")),
    approvals: Options.choice("approvals", ["deny", "stdin", "inbox"]).pipe(
      Options.withDefault("deny" as const),
      Options.withDescription(
        'how cards are answered: deny (decline every card), stdin (JSON lines {"cardId", "decision"}) or inbox (none here: the fleet\'s inbox, warden fleet --inbox, the runners\' rules or their deadlines decide)'
      )
    ),
    cwd: Opts.cwd,
    model: Opts.model,
    sandbox: Opts.sandbox,
    approvalPolicy: Opts.approvalPolicy,
    sharding: shardingOption,
    allowSecrets: Options.boolean("allow-secrets-in-storage").pipe(
      Options.withDescription(
        "submit a PROMPT that holds something secret-looking anyway (the fleet's database stores prompts verbatim)"
      )
    ),
    submission: Options.text("submission").pipe(
      Options.withPseudoName("ID"),
      Options.optional,
      Options.withDescription(
        "name the submission (letters, digits, . _ -; up to 64): its items are ID-1, ID-2, ... Submitting again with the same ID runs nothing twice: a finished item gives its stored result, an item in flight is followed (its open cards can be answered). Without it, a new ID is made and printed"
      )
    ),
    prompts: Args.text({ name: "PROMPT" }).pipe(Args.atLeast(1))
  },
  (o) =>
    Effect.flatMap(
      Effect.promise(() => import("./ClusterHandlers.js")),
      (run) => run.submit(o)
    )
).pipe(Command.withDescription("submit work items to a fleet and follow them (exit codes as `warden run`)"))

/** `warden fleet`. */
export const fleet = Command.make(
  "fleet",
  {
    cluster,
    json: Options.boolean("json").pipe(Options.withDescription("print one JSON object")),
    sharding: shardingOption,
    inbox: Opts.inbox,
    inboxAllowRemote: Opts.inboxAllowRemote,
    inboxPublicUrl: Opts.inboxPublicUrl,
    notify: Opts.notify,
    notifySecret: Opts.notifySecret
  },
  (o) =>
    Effect.flatMap(
      Effect.promise(() => import("./ClusterHandlers.js")),
      (run) => run.fleet(o)
    )
).pipe(
  Command.withDescription(
    "the fleet: runners (live while their heartbeat is younger than shardLockExpiration; shards held), items by status and runner, open cards; " +
      "with --inbox, the fleet's one web inbox over every runner's open cards until it is stopped"
  )
)

const itemArg = Args.text({ name: "ITEM" }).pipe(
  Args.withDescription("the fleet item id (ID-1, as `warden submit` names it)")
)

/** `warden steer --cluster URL ITEM TEXT`. */
export const steer = Command.make(
  "steer",
  { cluster, sharding: shardingOption, item: itemArg, text: Args.text({ name: "TEXT" }) },
  (o) =>
    Effect.flatMap(
      Effect.promise(() => import("./ClusterHandlers.js")),
      (run) => run.turnControl({ ...o, action: "steer" })
    )
).pipe(
  Command.withDescription(
    "add TEXT to a fleet item's running turn, on whichever runner drives it (exit 1 when it has no running turn)"
  )
)

/** `warden interrupt --cluster URL ITEM`. */
export const interrupt = Command.make("interrupt", { cluster, sharding: shardingOption, item: itemArg }, (o) =>
  Effect.flatMap(
    Effect.promise(() => import("./ClusterHandlers.js")),
    (run) => run.turnControl({ ...o, text: "", action: "interrupt" })
  )
).pipe(
  Command.withDescription(
    "interrupt a fleet item's running turn, on whichever runner drives it (exit 1 when it has no running turn)"
  )
)
