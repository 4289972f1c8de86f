/**
 * The command-line options of `warden run` (and the ones `demo`/`doctor` share), with their
 * defaults and validation. A value that does not validate is a usage error (exit 2).
 */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import { Policy } from "@warden/approvals"
import { ChildEnv } from "@warden/transport"
import { Effect, Either, Option } from "effect"
import * as Durations from "./Durations.js"
import * as ExitCodes from "./ExitCodes.js"

const invalid = (message: string) => ValidationError.invalidValue(HelpDoc.p(message))

export const durationOption = (name: string, fallback: string, description: string) =>
  Options.text(name).pipe(
    Options.withDefault(fallback),
    Options.withPseudoName("DURATION"),
    Options.withDescription(`${description} (e.g. 300ms, 5s, 2m, 15m, 1h; default ${fallback})`),
    Options.mapEffect((text) =>
      Either.match(Durations.parse(text), {
        onLeft: (e) => Effect.fail(invalid(`--${name}: ${e}`)),
        onRight: Effect.succeed
      })
    )
  )

const positiveInteger = (name: string, fallback: number, description: string, min = 1) =>
  Options.integer(name).pipe(
    Options.withDefault(fallback),
    Options.withPseudoName("N"),
    Options.withDescription(`${description} (default ${fallback})`),
    Options.mapEffect((n) =>
      n >= min ? Effect.succeed(n) : Effect.fail(invalid(`--${name} must be at least ${min}, got ${n}`))
    )
  )

export const codex = Options.text("codex").pipe(
  Options.withDefault("codex"),
  Options.withPseudoName("PATH"),
  Options.withDescription(
    "the codex executable (default: `codex` on PATH; tested with 0.171.0: npm i -g @openai/codex@0.171.0)"
  )
)

export const cwd = Options.text("cwd").pipe(
  Options.withDefault("."),
  Options.withPseudoName("DIR"),
  Options.withDescription("the working directory of every thread (default .)")
)

export const config = Options.text("config").pipe(
  Options.withAlias("c"),
  Options.withPseudoName("key=value"),
  Options.withDescription("a codex config override, passed to `codex app-server -c` (repeatable); the value is TOML"),
  Options.repeated,
  Options.mapEffect((pairs) => {
    const bad = pairs.find((kv) => !/^[^=\s]+=/.test(kv))
    return bad === undefined
      ? Effect.succeed(pairs)
      : Effect.fail(invalid(`-c/--config expects key=value, got ${JSON.stringify(bad)}`))
  })
)

export const enable = Options.text("enable").pipe(
  Options.withPseudoName("FEATURE"),
  Options.withDescription("enable a codex feature flag, passed to `codex app-server --enable` (repeatable)"),
  Options.repeated
)

export const disable = Options.text("disable").pipe(
  Options.withPseudoName("FEATURE"),
  Options.withDescription("disable a codex feature flag, passed to `codex app-server --disable` (repeatable)"),
  Options.repeated
)

export const model = Options.text("model").pipe(Options.withDescription("the model of every thread"), Options.optional)

export const sandbox = Options.choice("sandbox", ["read-only", "workspace-write", "danger-full-access"]).pipe(
  Options.withDescription("the sandbox of every thread (default: codex's configuration)"),
  Options.optional
)

export const approvalPolicy = Options.choice("approval-policy", [
  "untrusted",
  "on-failure",
  "on-request",
  "never"
]).pipe(
  Options.withDefault("on-request" as const),
  Options.withDescription("when codex asks for approval (default on-request)")
)

export const approvals = Options.choice("approvals", ["prompt", "deny", "rules", "stdin", "inbox"]).pipe(
  Options.withDescription(
    "who answers the cards: prompt (a person on this terminal), deny (decline every card), rules (--rules decide, the rest is refused), " +
      'stdin (JSON lines {"cardId","decision"}; "decision": "always" also remembers an allow in the ledger), inbox (only the web inbox, --inbox); ' +
      "default prompt when stdin is a terminal, otherwise inbox with --inbox, otherwise deny"
  ),
  Options.optional
)

/**
 * A `--rules` option naming a policy rules file (.json, .yaml, .yml); `pseudo` and `description`
 * say which rules the command means. Loaded with `loadRules`.
 */
export const rulesFile = (pseudo: string, description: string): Options.Options<string> =>
  Options.text("rules").pipe(Options.withPseudoName(pseudo), Options.withDescription(description))

/** The rules file of a `--rules` option, or a usage error (exit 2) saying what is wrong with it. */
export const loadRules = (path: string): Effect.Effect<Policy.Rules, ExitCodes.CliExit> =>
  Policy.load(path).pipe(Effect.mapError((e) => ExitCodes.usage(e.message)))

export const rules = rulesFile(
  "FILE",
  "policy rules (.json, .yaml, .yml), applied first in every --approvals mode"
).pipe(Options.optional)

export const approvalTimeout = durationOption(
  "approval-timeout",
  "15m",
  "how long a card waits for a decision before it refuses by itself"
)
export const requestTimeout = durationOption("request-timeout", "2m", "how long a request to the app-server may take")
export const stallTimeout = durationOption(
  "stall-timeout",
  "10m",
  "no event for this long (no card open, no command running): the turn is stalled"
)

export const json = Options.boolean("json").pipe(
  Options.withDescription("one JSON object per line on stdout (nothing else on stdout; human output goes to stderr)")
)

export const otlp = Options.text("otlp").pipe(
  Options.withPseudoName("URL"),
  Options.withDescription(
    "export traces, metrics and logs to this OTLP/HTTP collector (e.g. http://localhost:4318); default $OTEL_EXPORTER_OTLP_ENDPOINT, else off"
  ),
  Options.optional
)

export const audit = Options.text("audit").pipe(
  Options.withPseudoName("FILE"),
  Options.withDescription("append the approvals audit trail to FILE as JSON lines"),
  Options.optional
)

export const concurrency = positiveInteger(
  "concurrency",
  4,
  "work items running at once (at most; adaptive admission may run fewer)"
)

const optionalCount = (name: string, description: string) =>
  Options.integer(name).pipe(
    Options.withPseudoName("N"),
    Options.withDescription(description),
    Options.mapEffect((n) =>
      n >= 1 ? Effect.succeed(n) : Effect.fail(invalid(`--${name} must be at least 1, got ${n}`))
    ),
    Options.optional
  )

export const maxTokens = optionalCount(
  "max-tokens",
  "each item's token budget: once its thread used N tokens, a card asks whether to continue for another N (no: the turn is interrupted, the item ends budget-exhausted)"
)

export const maxTurnTime = Options.text("max-turn-time").pipe(
  Options.withPseudoName("DURATION"),
  Options.withDescription(
    "each turn's time budget: once a turn ran this long, a card asks whether to continue for as long again (no: interrupted, budget-exhausted)"
  ),
  Options.mapEffect((text) =>
    Either.match(Durations.parse(text), {
      onLeft: (e) => Effect.fail(invalid(`--max-turn-time: ${e}`)),
      onRight: Effect.succeed
    })
  ),
  Options.optional
)

export const runMaxTokens = optionalCount(
  "run-max-tokens",
  "the run's token budget (all items together): once reached, no item is admitted while a card asks whether to continue for another N (no: the items not yet started end budget-exhausted)"
)

export const fixedConcurrency = Options.boolean("fixed-concurrency").pipe(
  Options.withDescription(
    "keep --concurrency fixed: no adaptive admission (by default, when codex reports overload or rate limits, fewer items are admitted until it clears)"
  )
)

export const admissionRecovery = durationOption(
  "admission-recovery",
  "30s",
  "adaptive admission: how long without overload or rate limits before one more item is admitted again"
)
export const pool = positiveInteger("pool", 1, "app-server processes; threads spread across them")
export const restarts = positiveInteger(
  "restarts",
  3,
  "app-server restarts in a row before giving up (0: never restart)",
  0
)

export const worktree = Options.boolean("worktree").pipe(
  Options.withDescription(
    "run each work item in its own git worktree on branch warden/<run>/<item>, made from --cwd's HEAD (or --base); " +
      "kept when the item changed something (its changes committed on the branch), removed when it did not"
  )
)

export const base = Options.text("base").pipe(
  Options.withPseudoName("REF"),
  Options.withDescription("with --worktree: the branch, tag or commit each worktree starts from (default: HEAD)"),
  Options.optional
)

export const keepWorktrees = Options.boolean("keep-worktrees").pipe(
  Options.withDescription("with --worktree: keep every worktree and branch, also of items that changed nothing")
)

export const state = Options.text("state").pipe(
  Options.withPseudoName("PATH"),
  Options.withDescription(
    "the ledger (SQLite) that records the run: cards, settlements, work items (default $XDG_STATE_HOME/warden/ledger.db, else ~/.local/state/warden/ledger.db)"
  ),
  Options.optional
)

export const noState = Options.boolean("no-state").pipe(
  Options.withDescription("record nothing: no ledger, no remembered decisions")
)

/** Where `--inbox [HOST:]PORT` binds. */
export interface InboxAddress {
  readonly host: string
  readonly port: number
}

/** `PORT`, `HOST:PORT` or `[IPV6]:PORT`; the host defaults to 127.0.0.1. */
export const parseInboxAddress = (text: string): Either.Either<InboxAddress, string> => {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]:|([^:\s[\]]+):)?(\d{1,5})$/.exec(text.trim())
  const port = match ? Number(match[3]) : NaN
  if (!match || !(port >= 0 && port <= 65535))
    return Either.left(
      `--inbox expects [HOST:]PORT (e.g. 8420, 127.0.0.1:8420, [::1]:8420), got ${JSON.stringify(text)}`
    )
  return Either.right({ host: match[1] ?? match[2] ?? "127.0.0.1", port })
}

export const inbox = Options.text("inbox").pipe(
  Options.withPseudoName("[HOST:]PORT"),
  Options.withDescription(
    "serve the web inbox (the board, open cards, decisions, an event stream) on this address (default host 127.0.0.1; port 0: any free one); " +
      "its URL with a fresh access token is printed once on stderr"
  ),
  Options.mapEffect((text) =>
    Either.match(parseInboxAddress(text), { onLeft: (e) => Effect.fail(invalid(e)), onRight: Effect.succeed })
  ),
  Options.optional
)

export const inboxAllowRemote = Options.boolean("inbox-allow-remote").pipe(
  Options.withDescription(
    "let --inbox bind to an address other than loopback (anyone who reaches it with the token decides cards; prefer an SSH tunnel)"
  )
)

export const inboxPublicUrl = Options.text("inbox-public-url").pipe(
  Options.withPseudoName("URL"),
  Options.withDescription(
    "with --inbox: the inbox's address as people reach it (a TLS reverse proxy or a tunnel, e.g. https://ci.example/warden): " +
      "the printed link and the --notify links use it; the inbox still listens on --inbox's address"
  ),
  Options.optional
)

export const notify = Options.text("notify").pipe(
  Options.withPseudoName("URL"),
  Options.withDescription(
    "with --inbox: POST a JSON message to URL when a card opens (repeatable), signed with HMAC-SHA256 over the body " +
      "(header X-Warden-Signature: sha256=HEX), with single-use accept/decline links that expire with the card; a failed delivery is retried, never a decision"
  ),
  Options.repeated,
  Options.mapEffect((urls) => {
    for (const url of urls) {
      const problem = notifyUrlProblem(url)
      if (problem !== undefined) return Effect.fail(invalid(problem))
    }
    return Effect.succeed(urls)
  })
)

/**
 * Why `--notify URL` cannot be delivered to, or undefined. A URL with credentials (`user:pass@`)
 * is refused (fetch refuses them, so every delivery would fail until the card's deadline); the
 * message does not repeat the URL, which would print the password.
 */
export const notifyUrlProblem = (text: string): string | undefined => {
  let url: URL | undefined
  try {
    url = /^https?:\/\/\S+$/.test(text) ? new URL(text) : undefined
  } catch {
    url = undefined
  }
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
    return text.includes("@")
      ? "--notify expects an http(s) URL (not repeated here: it may hold credentials)"
      : `--notify expects an http(s) URL, got ${JSON.stringify(text)}`
  }
  if (url.username !== "" || url.password !== "") {
    return `--notify ${url.protocol}//…@${url.host}: a URL with credentials (user:password@) can never be delivered (fetch refuses them); the receiver verifies the X-Warden-Signature header instead (or put a token in the path)`
  }
  return undefined
}

export const notifySecret = Options.text("notify-secret").pipe(
  Options.withPseudoName("SECRET"),
  Options.withDescription(
    "the HMAC secret of --notify (default: the environment variable WARDEN_NOTIFY_SECRET, which keeps it out of the process list)"
  ),
  Options.optional
)

/** The web inbox as `--inbox` and its companions ask for it, checked (`inboxSetting`). */
export interface InboxSetting extends InboxAddress {
  readonly allowRemote: boolean
  readonly publicUrl?: string
  readonly notify?: { readonly urls: ReadonlyArray<string>; readonly secret: string }
}

/**
 * Checks `--inbox`, `--inbox-allow-remote`, `--inbox-public-url`, `--notify` and `--notify-secret`
 * together (the same rules for `warden run`, `serve` and `fleet`): a companion without `--inbox`,
 * `--notify` without a secret (the option, or `WARDEN_NOTIFY_SECRET`), a public URL that is not
 * one, a non-loopback address without `--inbox-allow-remote` are usage errors. The secret is
 * withheld from every child (whatever name it is also exported under). Undefined without `--inbox`.
 */
export const inboxSetting = (args: {
  readonly inbox: Option.Option<InboxAddress>
  readonly inboxAllowRemote: boolean
  readonly inboxPublicUrl: Option.Option<string>
  readonly notify: ReadonlyArray<string>
  readonly notifySecret: Option.Option<string>
}): Effect.Effect<InboxSetting | undefined, ExitCodes.CliExit> =>
  Effect.gen(function* () {
    const notifySecret = Option.getOrElse(args.notifySecret, () => process.env["WARDEN_NOTIFY_SECRET"] ?? "")
    // No child gets it, under whatever name it is also exported (ChildEnv: WARDEN_* never reach one).
    ChildEnv.withhold(notifySecret)
    if (args.notify.length > 0 && Option.isNone(args.inbox))
      return yield* ExitCodes.usage("--notify needs --inbox [HOST:]PORT (its links are answered there)")
    if (args.notify.length > 0 && notifySecret === "")
      return yield* ExitCodes.usage(
        "--notify needs a secret to sign with: --notify-secret SECRET or the environment variable WARDEN_NOTIFY_SECRET"
      )
    if (Option.isSome(args.inboxPublicUrl) && Option.isNone(args.inbox))
      return yield* ExitCodes.usage("--inbox-public-url needs --inbox [HOST:]PORT")
    if (Option.isNone(args.inbox)) return undefined
    // Loaded only when asked for: a command without --inbox never loads the HTTP server.
    const { WebInbox } = yield* Effect.promise(() => import("@warden/inbox"))
    if (Option.isSome(args.inboxPublicUrl)) {
      const checked = WebInbox.publicOrigin(args.inboxPublicUrl.value)
      if (Either.isLeft(checked)) return yield* ExitCodes.usage(`--inbox-public-url: ${checked.left}`)
    }
    if (!args.inboxAllowRemote && !WebInbox.isLoopback(args.inbox.value.host))
      return yield* ExitCodes.usage(
        `--inbox ${args.inbox.value.host}: not a loopback address; add --inbox-allow-remote to bind it anyway, or reach a loopback inbox through an SSH tunnel (docs/inbox.md)`
      )
    return {
      ...args.inbox.value,
      allowRemote: args.inboxAllowRemote,
      ...(Option.isSome(args.inboxPublicUrl) ? { publicUrl: args.inboxPublicUrl.value } : {}),
      ...(args.notify.length > 0 ? { notify: { urls: args.notify, secret: notifySecret } } : {})
    }
  })
