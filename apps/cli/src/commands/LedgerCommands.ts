/**
 * The commands that read (and, for `rules revoke`, change) the ledger `warden run --state` keeps:
 *
 * - `warden audit [--state PATH] [--run ID] [--item ID] [--outcome O] [--source S] [--method M]
 *   [--since T] [--json]`: the recorded cards with their settlements, oldest first (masked text
 *   only: the ledger never stored anything else); `warden audit --prune-before T`: retention
 *   (`Ledger.prune`); `warden audit --cluster URL [filters]`: every card of a fleet, from the
 *   fleet's table (`ClusterHandlers.auditFleet`);
 * - `warden rules list [--all] [--json]`, `warden rules revoke ID [--by NAME]`: remembered rules;
 * - `warden rules suggest [--rules CURRENT] [--min N] [--out FILE] [filters] [--json]`: rules
 *   proposed from the recorded decisions, each proven by replay (`Suggest.suggest`);
 * - `warden rules test --rules CANDIDATE [--state PATH] [filters] [--json]`: the recorded cards
 *   replayed against a candidate rules file (`Replay.replay`), card by card and in totals.
 *
 * None of them creates a ledger: a missing file is a usage error (exit 2). Those that only read
 * (`audit`, `rules list`, `rules test`) open it read-only and never migrate it, so a user who may
 * only read the ledger can use them; `rules revoke` and `audit --prune-before` write it. A
 * `--state` that cannot be used (missing, not a file, not readable or, for those that write, not
 * writable) is exit 2, as in every command (`StatePath.check`).
 */
import { Args, Command, Options } from "@effect/cli"
import { CardText } from "@warden/approvals"
import { Duration, Effect, Either, Option } from "effect"
import type { Scope } from "effect"
import * as Fs from "node:fs"
import * as Durations from "../contract/Durations.js"
import * as ExitCodes from "../contract/ExitCodes.js"
import * as Opts from "../contract/Options.js"
import * as StatePath from "../state/StatePath.js"

type StateLedger = typeof import("../state/StateLedger.js")
type LedgerShape = import("../state/StateLedger.js").Ledger.LedgerShape
type ReaderShape = import("../state/StateLedger.js").LedgerReader.LedgerReaderShape

/** `--limit`'s default: the ledger's own default read. */
const CardsRead = 10_000

const json = Options.boolean("json").pipe(Options.withDescription("one JSON object per line on stdout"))

const filterOptions = {
  run: Options.text("run").pipe(
    Options.withPseudoName("ID"),
    Options.withDescription("only this run's cards"),
    Options.optional
  ),
  item: Options.text("item").pipe(
    Options.withPseudoName("ID"),
    Options.withDescription("only this work item's cards (the PROMPT index of `warden run`)"),
    Options.optional
  ),
  outcome: Options.text("outcome").pipe(
    Options.withPseudoName("O"),
    Options.withDescription(
      "only cards that ended so: accepted, declined, cancelled, refused, timeout, withdrawn, connection-lost, shutdown, stranded, or open"
    ),
    Options.optional
  ),
  source: Options.text("source").pipe(
    Options.withPseudoName("S"),
    Options.withDescription(
      "only cards settled by this source (rule:no-rm, person, remembered:ID) or kind of source (rule, remembered, person, handler, deadline)"
    ),
    Options.optional
  ),
  method: Options.text("method").pipe(
    Options.withPseudoName("M"),
    Options.withDescription("only cards of this method (e.g. item/commandExecution/requestApproval)"),
    Options.optional
  ),
  since: Options.text("since").pipe(
    Options.withPseudoName("T"),
    Options.withDescription(
      "only cards opened since T: a duration ago (30m, 2h) or a date/time (2026-12-01, 2026-12-01T10:00:00Z)"
    ),
    Options.optional
  ),
  limit: Options.integer("limit").pipe(
    Options.withPseudoName("N"),
    Options.withDescription(
      "at most N cards (default 10000): audit lists the oldest N, rules test and rules suggest read the newest N; when more match, stderr says so"
    ),
    Options.withDefault(CardsRead)
  )
}

const Outcomes = [
  "accepted",
  "declined",
  "cancelled",
  "refused",
  "timeout",
  "withdrawn",
  "connection-lost",
  "shutdown",
  "stranded",
  "open"
] as const

/** `--since`: a duration ago, or a date that `Date.parse` reads. */
export const parseSince = (text: string, now: number): Either.Either<number, string> => {
  const duration = Durations.parse(text)
  if (Either.isRight(duration)) return Either.right(now - Duration.toMillis(duration.right))
  const at = Date.parse(text)
  return Number.isNaN(at)
    ? Either.left(`--since ${text}: neither a duration (30m, 2h) nor a date (2026-12-01T10:00:00Z)`)
    : Either.right(at)
}

type Filters = {
  readonly run: Option.Option<string>
  readonly item: Option.Option<string>
  readonly outcome: Option.Option<string>
  readonly source: Option.Option<string>
  readonly method: Option.Option<string>
  readonly since: Option.Option<string>
  readonly limit: number
}

const cardFilter = (f: Filters) =>
  Effect.gen(function* () {
    if (!Number.isSafeInteger(f.limit) || f.limit < 1)
      return yield* ExitCodes.usage(`--limit ${f.limit}: a number of cards, 1 or more`)
    if (Option.isSome(f.outcome) && !(Outcomes as ReadonlyArray<string>).includes(f.outcome.value)) {
      return yield* ExitCodes.usage(`--outcome ${f.outcome.value}: one of ${Outcomes.join(", ")}`)
    }
    let from: number | undefined
    if (Option.isSome(f.since)) {
      const since = parseSince(f.since.value, Date.now())
      if (Either.isLeft(since)) return yield* ExitCodes.usage(since.left)
      from = since.right
    }
    return {
      ...(Option.isSome(f.run) ? { runId: f.run.value } : {}),
      ...(Option.isSome(f.item) ? { item: f.item.value } : {}),
      ...(Option.isSome(f.outcome) ? { outcome: f.outcome.value as (typeof Outcomes)[number] } : {}),
      ...(Option.isSome(f.source) ? { source: f.source.value } : {}),
      ...(Option.isSome(f.method) ? { method: f.method.value } : {}),
      ...(from !== undefined ? { from } : {}),
      limit: f.limit
    }
  })

/**
 * The cards of `filter`, at most its `limit`: the oldest (a listing) or the newest (what rules
 * are proposed from and tested on). When more match, stderr says so: a large ledger is never
 * read in part without a word.
 */
const readCards = (
  ledger: Pick<ReaderShape, "cards">,
  filter: Effect.Effect.Success<ReturnType<typeof cardFilter>>,
  which: "oldest" | "newest"
) =>
  Effect.gen(function* () {
    const read = yield* ledger
      .cards({ ...filter, limit: filter.limit + 1, ...(which === "newest" ? { newest: true } : {}) })
      .pipe(Effect.mapError(ledgerFailure))
    if (read.length <= filter.limit) return read
    process.stderr.write(
      `warden: more than ${filter.limit} cards match: the ${which} ${filter.limit} were read (narrow with --since, --run or --item, or raise --limit)\n`
    )
    return which === "newest" ? read.slice(read.length - filter.limit) : read.slice(0, filter.limit)
  })

/**
 * The existing ledger at `--state` (or the default), opened read-only in the current scope (never
 * created, migrated or written: a user who may only read it can). A `--state` that cannot be used
 * (no ledger there, not a file, not readable) is exit 2 (`StatePath.check`).
 */
const readLedger = (
  state: Option.Option<string>
): Effect.Effect<{ readonly ledger: ReaderShape; readonly StateLedger: StateLedger }, ExitCodes.CliExit, Scope.Scope> =>
  Effect.gen(function* () {
    const path = yield* StatePath.check(state, { access: "read", create: false })
    const StateLedger = yield* StatePath.loadStateLedger
    const ledger = yield* StateLedger.openReader(path)
    return { ledger, StateLedger }
  })

/**
 * The existing ledger at `--state`, opened to be changed (`rules revoke`, `audit --prune-before`);
 * never creates one. Not writable by this user: exit 2 (`StatePath.check`).
 */
const writeLedger = (
  state: Option.Option<string>
): Effect.Effect<{ readonly ledger: LedgerShape; readonly StateLedger: StateLedger }, ExitCodes.CliExit, Scope.Scope> =>
  Effect.gen(function* () {
    const path = yield* StatePath.check(state, { access: "write", create: false })
    const StateLedger = yield* StatePath.loadStateLedger
    const ledger = yield* StateLedger.openLedger(path)
    return { ledger, StateLedger }
  })

/** `--by NAME`: who changes the remembered rules (`byName` reads it, $USER by default). */
const byOption = (description: string) =>
  Options.text("by").pipe(Options.withPseudoName("NAME"), Options.withDescription(description), Options.optional)

const byName = (by: Option.Option<string>): string => Option.getOrElse(by, () => process.env["USER"] ?? "cli")

const ledgerFailure = (error: { readonly message: string }) =>
  new ExitCodes.CliExit({ code: ExitCodes.Failed, message: error.message })

const iso = (ms: number) => new Date(ms).toISOString()

const out = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))
const say = (line: string, asJson: boolean) => (asJson ? Effect.void : out(CardText.escapeControls(line)))

type CardRecord = import("../state/StateLedger.js").Ledger.CardRecord

/** One card as `warden audit --json` prints it. */
export const cardJson = (c: CardRecord) => ({
  type: "card",
  runId: c.runId,
  cardId: c.cardId,
  item: c.workItem ?? null,
  threadId: c.threadId ?? null,
  turnId: c.turnId ?? null,
  method: c.method,
  kind: c.kind,
  title: c.title,
  openedAt: iso(c.openedAt),
  outcome: c.settlement?.outcome ?? "open",
  source: c.settlement?.source ?? null,
  decision: c.settlement?.decision ?? null,
  written: c.settlement?.written ?? null,
  detail: c.settlement?.detail ?? null,
  settledAt: c.settlement !== undefined ? iso(c.settlement.settledAt) : null,
  latencyMs: c.settlement?.latencyMs ?? null
})

/** One card as `warden audit` prints it for a person. */
export const cardLine = (c: CardRecord) => {
  const s = c.settlement
  const how =
    s === undefined
      ? "open"
      : `${s.outcome} by ${s.source}${s.decision !== undefined ? ` (${s.decision})` : ""}${s.latencyMs !== undefined ? ` in ${Durations.short(s.latencyMs)}` : ""}`
  return `${iso(c.openedAt)}  run ${c.runId}  item ${c.workItem ?? "-"}  ${c.cardId}  ${c.kind}  ${how}  ${c.title}`
}

const pruneBefore = Options.text("prune-before").pipe(
  Options.withPseudoName("T"),
  Options.withDescription(
    "instead of listing: delete the cards settled before T (a duration ago, e.g. 720h, or a date) of runs no longer running, and the runs left without cards; open cards and remembered rules are kept"
  ),
  Options.optional
)

/** `warden audit --prune-before T`: retention. No filters: what is older than T goes, whatever it was. */
const prune = (
  args: Filters & {
    readonly state: Option.Option<string>
    readonly pruneBefore: Option.Option<string>
    readonly json: boolean
  },
  at: string
) =>
  Effect.gen(function* () {
    const given = (["run", "item", "outcome", "source", "method", "since"] as const).filter((k) =>
      Option.isSome(args[k])
    )
    if (given.length > 0) return yield* ExitCodes.usage(`--prune-before takes no filters (got --${given.join(", --")})`)
    const before = parseSince(at, Date.now())
    if (Either.isLeft(before)) return yield* ExitCodes.usage(before.left.replace("--since", "--prune-before"))
    const { ledger } = yield* writeLedger(args.state)
    const pruned = yield* ledger.prune(before.right).pipe(Effect.mapError(ledgerFailure))
    yield* args.json
      ? out(JSON.stringify({ type: "pruned", before: iso(before.right), cards: pruned.cards, runs: pruned.runs }))
      : out(
          `pruned ${pruned.cards} card${pruned.cards === 1 ? "" : "s"} settled before ${iso(before.right)} and ${pruned.runs} run${pruned.runs === 1 ? "" : "s"} left without cards`
        )
  })

const fleet = Options.text("cluster").pipe(
  Options.withPseudoName("URL"),
  Options.withDescription(
    "instead of a ledger: every card of the fleet on this store (postgres://... or sqlite:PATH), the stranded ones too, with the runner that opened it and who settled it; --run is a runner's run id, --item a fleet item id (ID-1)"
  ),
  Options.optional
)

export const audit = Command.make("audit", { state: Opts.state, ...filterOptions, json, pruneBefore, fleet }, (args) =>
  Effect.scoped(
    Effect.gen(function* () {
      if (Option.isSome(args.fleet)) {
        if (Option.isSome(args.state) || Option.isSome(args.pruneBefore))
          return yield* ExitCodes.usage(
            "--cluster reads the fleet's table: --state and --prune-before are for one ledger (each runner keeps its own)"
          )
        const filter = yield* cardFilter(args)
        const { auditFleet } = yield* Effect.promise(() => import("./ClusterHandlers.js"))
        return yield* auditFleet({ cluster: args.fleet.value, filter, json: args.json })
      }
      if (Option.isSome(args.pruneBefore)) return yield* prune(args, args.pruneBefore.value)
      const filter = yield* cardFilter(args)
      const { ledger } = yield* readLedger(args.state)
      const cards = yield* readCards(ledger, filter, "oldest")
      for (const card of cards) yield* args.json ? out(JSON.stringify(cardJson(card))) : say(cardLine(card), false)
      const late = yield* ledger
        .lateDecisions(Option.isSome(args.run) ? { runId: args.run.value } : {})
        .pipe(Effect.mapError(ledgerFailure))
      const shown = new Set(cards.map((c) => `${c.runId}\u0000${c.cardId}`))
      for (const l of late.filter((l) => shown.has(`${l.runId}\u0000${l.cardId}`))) {
        yield* args.json
          ? out(
              JSON.stringify({
                type: "card.late",
                runId: l.runId,
                cardId: l.cardId,
                decision: l.decision,
                source: l.source,
                outcome: l.outcome,
                at: iso(l.at)
              })
            )
          : say(
              `${iso(l.at)}  run ${l.runId}  ${l.cardId}  late ${l.decision} by ${l.source} (dropped: the card had ${l.outcome})`,
              false
            )
      }
      // Runs whose record has gaps: records the ledger lost (locked, a failed write) or dropped,
      // answers its journal could not hold.
      const runs = yield* ledger.runs().pipe(Effect.mapError(ledgerFailure))
      for (const r of runs
        .filter(
          (r) =>
            (r.lostEvents > 0 || r.droppedEvents > 0 || r.unjournaledAnswers > 0) &&
            (Option.isNone(args.run) || r.runId === args.run.value)
        )
        .reverse()) {
        yield* args.json
          ? out(JSON.stringify(gapsJson(r)))
          : say(
              `run ${r.runId} (${r.label ?? "no label"}, started ${iso(r.startedAt)}): ${gapsText(r)}: its record has gaps`,
              false
            )
      }
      yield* say(`${cards.length} card${cards.length === 1 ? "" : "s"}`, args.json)
    })
  )
).pipe(Command.withDescription("list the recorded approval cards and how each was decided (masked), filtered"))

type RunRecord = import("../state/StateLedger.js").Ledger.RunRecord

/** A run with gaps as `warden audit --json` prints it. */
export const gapsJson = (r: RunRecord) => ({
  type: "run.gaps",
  runId: r.runId,
  label: r.label ?? null,
  startedAt: iso(r.startedAt),
  lostEvents: r.lostEvents,
  droppedEvents: r.droppedEvents,
  unjournaledAnswers: r.unjournaledAnswers
})

const gapsText = (r: RunRecord) =>
  [
    r.lostEvents > 0
      ? `${r.lostEvents} record${r.lostEvents === 1 ? "" : "s"} lost (never written: the database stayed locked, or a write failed)`
      : "",
    r.droppedEvents > 0
      ? `${r.droppedEvents} record${r.droppedEvents === 1 ? "" : "s"} dropped (the ledger's queue was full)`
      : "",
    r.unjournaledAnswers > 0
      ? `${r.unjournaledAnswers} answer${r.unjournaledAnswers === 1 ? "" : "s"} not in the answer journal (its file could not be written: had Warden died before one's settlement was written, it would read as never answered)`
      : ""
  ]
    .filter((s) => s !== "")
    .join(", ")

type RememberedRule = import("../state/StateLedger.js").Remembered.RememberedRule

export const ruleJson = (rule: RememberedRule, describe: (r: RememberedRule) => string): Record<string, unknown> => ({
  type: "rule",
  id: rule.id,
  scope: rule.scope,
  describe: describe(rule),
  author: rule.author,
  createdAt: iso(rule.createdAt),
  expiresAt: rule.expiresAt !== undefined ? iso(rule.expiresAt) : null,
  from: rule.from ?? null,
  note: rule.note ?? null,
  revokedAt: rule.revokedAt !== undefined ? iso(rule.revokedAt) : null,
  revokedBy: rule.revokedBy ?? null
})

const ruleLine = (rule: RememberedRule, describe: string) =>
  [
    `${rule.id}  allow ${describe}  by ${rule.author} at ${iso(rule.createdAt)}`,
    rule.expiresAt !== undefined ? `  expires ${iso(rule.expiresAt)}` : "",
    rule.from !== undefined ? `  from card ${rule.from.cardId} of run ${rule.from.runId}` : "",
    rule.revokedAt !== undefined ? `  REVOKED by ${rule.revokedBy ?? "?"} at ${iso(rule.revokedAt)}` : ""
  ].join("")

const list = Command.make(
  "list",
  {
    state: Opts.state,
    all: Options.boolean("all").pipe(Options.withDescription("also the revoked and expired rules")),
    json
  },
  (args) =>
    Effect.scoped(
      Effect.gen(function* () {
        const { ledger, StateLedger } = yield* readLedger(args.state)
        const rules = yield* ledger.rememberedRules(args.all ? { all: true } : {}).pipe(Effect.mapError(ledgerFailure))
        const describe = (r: RememberedRule) => StateLedger.Remembered.describeScope(r.scope)
        for (const rule of rules)
          yield* args.json ? out(JSON.stringify(ruleJson(rule, describe))) : say(ruleLine(rule, describe(rule)), false)
        yield* say(
          `${rules.length} remembered rule${rules.length === 1 ? "" : "s"}${args.all ? "" : " in force"}`,
          args.json
        )
      })
    )
).pipe(Command.withDescription('list the remembered rules ("always" answers) in force'))

const revoke = Command.make(
  "revoke",
  {
    state: Opts.state,
    by: byOption("who revokes it (default: $USER)"),
    id: Args.text({ name: "ID" }).pipe(Args.withDescription("the remembered rule's id (`warden rules list`)"))
  },
  (args) =>
    Effect.scoped(
      Effect.gen(function* () {
        const { ledger, StateLedger } = yield* writeLedger(args.state)
        const by = byName(args.by)
        const rule = yield* ledger
          .revoke(args.id, by)
          .pipe(
            Effect.mapError((e) =>
              e.reason === "NotFound" ? ExitCodes.usage(`no remembered rule ${args.id}`) : ledgerFailure(e)
            )
          )
        yield* out(
          CardText.escapeControls(
            `revoked ${rule.id} (allow ${StateLedger.Remembered.describeScope(rule.scope)}); it decides no card from now on (a running \`warden run\` keeps it until it ends)`
          )
        )
      })
    )
).pipe(Command.withDescription("revoke a remembered rule (it is kept, marked revoked)"))

const test = Command.make(
  "test",
  {
    state: Opts.state,
    rules: Opts.rulesFile("CANDIDATE", "the candidate policy rules (.json, .yaml, .yml)"),
    ...filterOptions,
    json
  },
  (args) =>
    Effect.scoped(
      Effect.gen(function* () {
        const filter = yield* cardFilter(args)
        const candidate = yield* Opts.loadRules(args.rules)
        const { ledger, StateLedger } = yield* readLedger(args.state)
        const cards = yield* readCards(ledger, filter, "newest")
        // As in a run: the remembered rules in force decide what no candidate rule decides (a deny still wins).
        const remembered = yield* ledger.rememberedRules().pipe(Effect.mapError(ledgerFailure))
        const report = StateLedger.Replay.replay(cards, candidate, { remembered, now: Date.now() })
        for (const r of report.cards) {
          const was =
            r.card.settlement === undefined ? "open" : `${r.card.settlement.outcome} by ${r.card.settlement.source}`
          const would =
            r.candidate._tag === "Accept" || r.candidate._tag === "Decline"
              ? `${r.candidate._tag === "Accept" ? "accept" : "decline"} by ${r.candidate._tag === "Accept" && r.candidate.remembered === true ? "remembered" : "rule"}:${r.candidate.ruleId}`
              : r.candidate._tag === "Ask"
                ? "ask (no rule decides)"
                : "refused (never reaches the rules)"
          if (args.json) {
            yield* out(
              JSON.stringify({
                type: "replay.card",
                runId: r.card.runId,
                cardId: r.card.cardId,
                item: r.card.workItem ?? null,
                method: r.card.method,
                title: r.card.title,
                was:
                  r.card.settlement === undefined
                    ? { outcome: "open", source: null }
                    : { outcome: r.card.settlement.outcome, source: r.card.settlement.source },
                candidate: r.candidate,
                change: r.change,
                approximate: r.approximate
              })
            )
          } else {
            yield* say(
              `${r.card.runId} ${r.card.cardId}  ${r.change === "same" ? "same" : r.change.toUpperCase()}  was ${was}; would ${would}${r.approximate ? " (approximate: facts cut)" : ""}  ${r.card.title}`,
              false
            )
          }
        }
        const inForce = `${remembered.length} remembered rule${remembered.length === 1 ? "" : "s"} in force`
        yield* args.json
          ? out(
              JSON.stringify({
                type: "replay.totals",
                ...report.totals,
                remembered: remembered.length,
                summary: report.summary
              })
            )
          : say(`${report.summary} (with the ${inForce}${remembered.length > 0 ? ": `warden rules list`" : ""})`, false)
      })
    )
).pipe(
  Command.withDescription(
    "replay the recorded cards against candidate rules, with the remembered rules in force: what they would have decided, against what was decided"
  )
)

/**
 * `warden rules suggest`: rules proposed from the recorded decisions (`Suggest.suggest`), each
 * proven by replay, printed as a rules file (or `--json` lines), written to `--out` only when
 * asked. Nothing is applied: the file is passed with `--rules` by whoever reviewed it.
 */
const suggest = Command.make(
  "suggest",
  {
    state: Opts.state,
    rules: Opts.rulesFile(
      "CURRENT",
      "the rules in force now (.json, .yaml, .yml): what they decide is not proposed again, a deny of theirs always wins"
    ).pipe(Options.optional),
    min: Options.integer("min").pipe(
      Options.withDefault(3),
      Options.withDescription("decisions needed for a proposal (default 3)")
    ),
    out: Options.text("out").pipe(
      Options.withPseudoName("FILE"),
      Options.withDescription("write the proposed rules file there (refused if it exists)"),
      Options.optional
    ),
    remember: Options.text("remember").pipe(
      Options.withPseudoName("RULE-ID"),
      Options.withDescription(
        "take the proposed allow of this id as a remembered rule in the ledger (recorded with --by and its first card; `warden rules revoke` ends it)"
      ),
      Options.optional
    ),
    by: byOption("with --remember: who takes it (default: $USER)"),
    ...filterOptions,
    json
  },
  (args) =>
    Effect.scoped(
      Effect.gen(function* () {
        if (args.min < 1) return yield* ExitCodes.usage("--min takes a number of decisions, 1 or more")
        const filter = yield* cardFilter(args)
        const current = Option.isSome(args.rules) ? yield* Opts.loadRules(args.rules.value) : { rules: [] }
        // Taking a proposal writes the ledger; only proposing reads it (a user who may only read it can).
        const { ledger, StateLedger } = Option.isSome(args.remember)
          ? yield* writeLedger(args.state)
          : yield* readLedger(args.state)
        const cards = yield* readCards(ledger, filter, "newest")
        const remembered = yield* ledger.rememberedRules().pipe(Effect.mapError(ledgerFailure))
        const found = StateLedger.Suggest.suggest(cards, current, { min: args.min, remembered, now: Date.now() })
        if (Option.isSome(args.remember)) {
          const id = args.remember.value
          const proposal = found.proposals.find((p) => p.rule.id === id)
          if (proposal === undefined)
            return yield* ExitCodes.usage(
              `--remember ${JSON.stringify(CardText.escapeControls(id))}: no such proposal now (proposed: ${found.proposals.map((p) => p.rule.id).join(", ") || "none"})`
            )
          const scope = StateLedger.Suggest.rememberedScope(proposal)
          if (scope._tag === "Left") return yield* ExitCodes.usage(`--remember ${id}: ${scope.left}`)
          const first = proposal.evidence[0]
          const rule = yield* (ledger as LedgerShape)
            .remember({
              scope: scope.right,
              author: byName(args.by),
              ...(first !== undefined ? { from: { runId: first.runId, cardId: first.cardId } } : {}),
              note: `taken from warden rules suggest (${id}): ${proposal.summary}`
            })
            .pipe(
              Effect.mapError((e) =>
                e.reason === "Invalid" ? ExitCodes.usage(`--remember ${id}: ${e.message}`) : ledgerFailure(e)
              )
            )
          const what = StateLedger.Remembered.describeScope(rule.scope)
          return yield* args.json
            ? out(JSON.stringify({ type: "rule.remembered", id: rule.id, proposal: id, scope: rule.scope }))
            : out(
                CardText.escapeControls(
                  `remembered ${rule.id} (allow ${what}) from proposal ${id}; every later run applies it; \`warden rules revoke ${rule.id}\` ends it`
                )
              )
        }
        const text = StateLedger.Suggest.rulesFile(found)
        if (Option.isSome(args.out)) {
          const path = args.out.value
          yield* Effect.try({
            try: () => Fs.writeFileSync(path, text, { flag: "wx", mode: 0o644 }),
            catch: (e) => ExitCodes.usage(`--out ${path}: ${e instanceof Error ? e.message : String(e)}`)
          })
        }
        if (args.json) {
          for (const p of found.proposals)
            yield* out(
              JSON.stringify({
                type: "rule.proposed",
                rule: p.rule,
                evidence: p.evidence,
                deciders: p.deciders,
                period: p.period === undefined ? null : { from: iso(p.period.from), to: iso(p.period.to) },
                generalized: p.generalized ?? null,
                replay: p.replay,
                summary: p.summary
              })
            )
          for (const e of found.excluded) yield* out(JSON.stringify({ type: "rule.excluded", ...e }))
          return
        }
        if (Option.isNone(args.out)) yield* out(CardText.escapeControls(text).trimEnd())
        yield* say(
          `${found.proposals.length} rule${found.proposals.length === 1 ? "" : "s"} proposed from ${found.cards} card${found.cards === 1 ? "" : "s"}${Option.isSome(args.out) ? `, written to ${args.out.value}` : ""}; ${found.excluded.length} group${found.excluded.length === 1 ? "" : "s"} not proposed (--json lists them with why)`,
          false
        )
      })
    )
).pipe(
  Command.withDescription(
    "propose rules from the recorded decisions, each proven by replay (a rules file; nothing is applied)"
  )
)

export const rules = Command.make("rules", {}, () =>
  Effect.fail(
    ExitCodes.usage("warden rules: list, revoke ID, test --rules CANDIDATE or suggest (`warden rules --help`)")
  )
).pipe(
  Command.withDescription(
    "remembered rules (list, revoke), replaying candidate rules against the ledger (test), proposing rules from it (suggest)"
  ),
  Command.withSubcommands([list, revoke, test, suggest])
)
