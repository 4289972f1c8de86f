/**
 * Rules proposed from what people decided: the allow rules (and deny rules) that the recorded
 * cards show people keep making by hand, each proven by replay against the whole record before it
 * is shown. Pure: cards in (what `Ledger.cards` returns), proposals out; nothing is applied.
 *
 * How a proposal is made:
 *
 * - **From decisions, at least `min` of them** (default 3): accepted cards (or declined ones, for a
 *   deny), grouped by what a rule can match: a command's words (`argvPrefix`), the directory a
 *   file change writes under (`path.under`), an MCP server and tool (`mcp`).
 * - **As narrow as the evidence**: a command group is its cards' whole argv; only where the
 *   accepted cards of one program and sub-command differ in their later words is the common
 *   prefix proposed (at least two words), and the proposal says so (`generalized`). A file-change
 *   group is the deepest directory holding every changed file of its cards: a directory instead
 *   of files, said so too. (An `argvPrefix` also matches the same words with more arguments after
 *   them: the rules format has no exact match. An allow never matches a compound command.)
 * - **Never for what must stay asked** (`Excluded`, each with its reason): a compound or nested
 *   shell command (an allow cannot match one, and its parts were not each accepted), a command of
 *   a dangerous class (`DangerousPrograms`: privilege, deletion, permissions, network, shells and
 *   interpreters, publishing, history rewriting; only as an allow: a deny of one is proposed as
 *   any other), a card whose facts were cut or masked (a rule
 *   could not be replayed on it exactly), a file change that deletes files or asks a session-wide
 *   write grant, a directory less than two levels deep, permissions asking network access or a
 *   root-level path, an MCP form that asks for content, and anything a current deny rule decides.
 * - **Proven by replay** (`Replay.replay` with the current rules plus the proposal): an allow is
 *   dropped if it would have accepted any card that a person, a handler, a rule or the safety
 *   filter declined, cancelled or refused; a deny is dropped if it would have declined any card
 *   that was accepted. What is left says how many asks it would have saved (cards that went to a
 *   person or nobody decided), over which period, by whom, and which cards are its evidence.
 *
 * @example
 * ```ts
 * import { Ledger, Suggest } from "@warden/ledger"
 * import { Effect } from "effect"
 *
 * const proposals = Effect.gen(function*() {
 *   const ledger = yield* Ledger.Ledger
 *   const cards = yield* ledger.cards({})
 *   const found = Suggest.suggest(cards, { rules: [] }, { min: 3 })
 *   return Suggest.rulesFile(found) // YAML that --rules reads, a comment per rule
 * })
 * ```
 */
import { CardText, Policy } from "@warden/approvals"
import { Either } from "effect"
import type { Effect } from "effect"
import * as Steps from "./internal/Steps.js"
import * as Replay from "./Replay.js"
import type * as Remembered from "./Remembered.js"

/** A card as `suggest` reads it: a replayable card, with when it opened if known (`Ledger.cards` gives it). */
export interface SuggestCard extends Replay.RecordedCard {
  readonly openedAt?: number
}

/** One proposed rule, with its evidence and its replay. */
export interface Proposal {
  /** The rule, as a rules file holds it (`Policy.Rule`); its id starts with `suggested-`. */
  readonly rule: Policy.Rule
  /** The cards that are its evidence: accepted (an allow) or declined (a deny) at least `min` times. */
  readonly evidence: ReadonlyArray<{ readonly runId: string; readonly cardId: string }>
  /** Who decided the evidence: their sources (`person`, `handler`, `rule:<id>`...), each with a count. */
  readonly deciders: Readonly<Record<string, number>>
  /** The evidence's first and last opening (epoch ms), when the cards say. */
  readonly period: { readonly from: number; readonly to: number } | undefined
  /** Where the rule is wider than any one card, what varied (else undefined). */
  readonly generalized: string | undefined
  /** The whole record replayed with the current rules and this one. */
  readonly replay: {
    /** Cards replayed. */
    readonly cards: number
    /** Cards this rule would decide. */
    readonly decides: number
    /** Of those, cards that went to a person (or nobody decided): the asks it would have saved. */
    readonly savedAsks: number
    /** Recorded declines, cancels, refusals and deny decisions it would flip (always 0 in a proposal). */
    readonly flippedDenials: number
    /** Recorded acceptances it would flip (a deny's; always 0 in a proposal). */
    readonly flippedAcceptances: number
  }
  /** One line: what it allows or denies, its evidence and what it would have saved. */
  readonly summary: string
}

/** A group of decisions that was not proposed, and why. */
export interface Excluded {
  /** What the group is (a command line, a directory, an MCP tool). */
  readonly what: string
  /** Why it is not proposed (dangerous, compound, would flip a decline, ...). */
  readonly reason: string
  /** The cards in the group. */
  readonly cards: number
}

/** What `suggest` returns. */
export interface Suggestions {
  readonly proposals: ReadonlyArray<Proposal>
  readonly excluded: ReadonlyArray<Excluded>
  /** The cards read. */
  readonly cards: number
}

/** Options of `suggest`. */
export interface SuggestOptions {
  /** Decisions needed for a proposal (default 3). */
  readonly min?: number
  /** The remembered rules in force, consulted in the replay as in a run (`Ledger.rememberedRules()`). */
  readonly remembered?: ReadonlyArray<Remembered.RememberedRule>
  /** When the remembered rules are read as in force (epoch ms; default now). */
  readonly now?: number
  /**
   * Only the allow proposals this card is evidence of (an acceptance's offer, `Offers`): the
   * other groups are not replayed, and are neither proposed nor listed as excluded. Each
   * proposal made is the one the whole suggestion makes for that card, with the same replay over
   * every card read (its id may take another suffix when two proposals would share a name).
   */
  readonly evidenceOf?: { readonly runId: string; readonly cardId: string }
}

/**
 * Programs whose commands are never proposed, by class: what they can do is not what a card's
 * words show (privilege, deletion, permissions, the network, a shell or an interpreter running
 * code given inline, publishing, rewriting history, stopping processes).
 */
export const DangerousPrograms: Readonly<Record<string, string>> = {
  sudo: "privilege",
  su: "privilege",
  doas: "privilege",
  pkexec: "privilege",
  rm: "deletion",
  rmdir: "deletion",
  shred: "deletion",
  dd: "deletion",
  mkfs: "deletion",
  truncate: "deletion",
  find: "deletion (find -delete, -exec)",
  chmod: "permissions",
  chown: "permissions",
  chgrp: "permissions",
  curl: "network",
  wget: "network",
  ssh: "network",
  scp: "network",
  rsync: "network",
  nc: "network",
  ncat: "network",
  telnet: "network",
  ftp: "network",
  bash: "shell",
  sh: "shell",
  zsh: "shell",
  dash: "shell",
  fish: "shell",
  eval: "shell",
  exec: "shell",
  env: "shell (runs any program)",
  xargs: "shell (runs any program)",
  python: "interpreter",
  python3: "interpreter",
  node: "interpreter",
  perl: "interpreter",
  ruby: "interpreter",
  php: "interpreter",
  kill: "processes",
  pkill: "processes",
  killall: "processes"
}

/** Sub-commands of otherwise ordinary programs that are never proposed. */
const DangerousSubcommands: ReadonlyArray<{ readonly prefix: ReadonlyArray<string>; readonly why: string }> = [
  { prefix: ["git", "push"], why: "publishing" },
  { prefix: ["git", "reset"], why: "rewriting history" },
  { prefix: ["git", "clean"], why: "deletion" },
  { prefix: ["git", "rebase"], why: "rewriting history" },
  { prefix: ["git", "filter-branch"], why: "rewriting history" },
  { prefix: ["npm", "publish"], why: "publishing" },
  { prefix: ["pnpm", "publish"], why: "publishing" },
  { prefix: ["yarn", "publish"], why: "publishing" },
  { prefix: ["cargo", "publish"], why: "publishing" },
  { prefix: ["docker", "push"], why: "publishing" },
  { prefix: ["npx"], why: "runs a downloaded program" },
  { prefix: ["pnpx"], why: "runs a downloaded program" }
]

const basename = (word: string) => word.slice(word.lastIndexOf("/") + 1)

/** Why a command's words must stay asked, or undefined. */
export const dangerOf = (argv: ReadonlyArray<string>): string | undefined => {
  const program = basename(argv[0] ?? "")
  const cls = DangerousPrograms[program] ?? (program.startsWith("mkfs") ? "deletion" : undefined)
  if (cls !== undefined) return `dangerous: ${program} (${cls})`
  for (const d of DangerousSubcommands) {
    if (d.prefix.every((w, i) => (i === 0 ? basename(argv[0] ?? "") === w : argv[i] === w)))
      return `dangerous: ${d.prefix.join(" ")} (${d.why})`
  }
  return undefined
}

const Denied = new Set(["declined", "cancelled", "refused"])
/** Sources whose decline is a decision (a deadline's or a closing scope's refusal is not). */
const Deciders = new Set(["rule", "remembered", "person", "handler", "safety-filter"])
/** Sources that mean a person (or nobody) was asked: what an allow saves. */
const Asked = new Set(["person", "deadline", "withdrawn", "stranded", "connection-lost", "shutdown"])

const accepted = (c: SuggestCard) => c.settlement?.outcome === "accepted"
const declinedByDecider = (c: SuggestCard) =>
  c.settlement !== undefined && Denied.has(c.settlement.outcome) && Deciders.has(c.settlement.sourceKind)

const CommandMethods = new Set(["item/commandExecution/requestApproval", "execCommandApproval"])
const FileMethods = new Set(["item/fileChange/requestApproval", "applyPatchApproval"])
const PermissionsMethod = "item/permissions/requestApproval"
const McpMethod = "mcpServer/elicitation/request"

type Matcher =
  | { readonly _tag: "command"; readonly argv: ReadonlyArray<string> }
  | { readonly _tag: "path"; readonly under: string; readonly method: string }
  | { readonly _tag: "mcp"; readonly server: string; readonly tool: string }

/** What a card can be matched by, or why it cannot be proposed. */
const matcherOf = (
  card: SuggestCard,
  effect: "allow" | "deny"
): { readonly matcher: Matcher } | { readonly excluded: string; readonly what: string } => {
  const f = card.facts
  if (CommandMethods.has(card.method)) {
    const what = f.command ?? card.title
    if (f.argv === undefined || f.argv.length === 0) return { excluded: "its words could not be read", what }
    if (f.simple !== true) return { excluded: "a compound or nested shell command (an allow never matches one)", what }
    if (!f.complete || f.masked) return { excluded: "its facts were cut or masked (not replayable exactly)", what }
    // A dangerous command is never allowed; denying it is what a deny is for.
    const danger = effect === "allow" ? dangerOf(f.argv) : undefined
    if (danger !== undefined) return { excluded: danger, what }
    return { matcher: { _tag: "command", argv: f.argv } }
  }
  if (FileMethods.has(card.method)) {
    const paths = f.paths ?? []
    const what = paths.map((p) => p.path).join(", ") || card.title
    if (!f.complete || f.masked || paths.length === 0)
      return { excluded: "its changes were cut or masked (not replayable exactly)", what }
    if (f.grantRoot !== undefined) return { excluded: "it asks a session-wide write grant", what }
    if (paths.some((p) => p.kind === "delete")) return { excluded: "it deletes files", what }
    const dir = commonDirectory(paths.map((p) => p.path))
    if (dir === undefined || depth(dir) < 2)
      return { excluded: "its files share no directory two levels deep or more", what }
    return { matcher: { _tag: "path", under: dir, method: card.method } }
  }
  if (card.method === PermissionsMethod) {
    const asked = f.asked ?? []
    const what = asked.join(", ") || card.title
    if (!f.complete || f.masked || asked.length === 0) return { excluded: "its permissions were cut or masked", what }
    if (asked.some((a) => /network/i.test(a))) return { excluded: "dangerous: it asks network access", what }
    const paths = asked.map((a) => a.slice(a.indexOf(" ") + 1)).filter((p) => p.startsWith("/"))
    if (paths.length !== asked.length) return { excluded: "it asks something other than paths", what }
    const dir = commonDirectory(paths.map((p) => `${p.replace(/\/+$/, "")}/x`))
    if (dir === undefined || depth(dir) < 2)
      return { excluded: "dangerous: it asks a root-level (or whole-disk) path", what }
    return { matcher: { _tag: "path", under: dir, method: PermissionsMethod } }
  }
  if (card.method === McpMethod) {
    const m = f.mcp
    const what = m === undefined ? card.title : `${m.server}${m.tool !== undefined ? ` ${m.tool}` : ""}`
    if (m === undefined || m.tool === undefined) return { excluded: "it names no MCP tool", what }
    if (!m.toolCall || !m.noFields || m.mode !== "form")
      return { excluded: "an MCP form that asks for content (a rule would send none)", what }
    return { matcher: { _tag: "mcp", server: m.server, tool: m.tool } }
  }
  return { excluded: "no rule matches this kind of card", what: card.title }
}

const depth = (dir: string) => dir.split("/").filter(Boolean).length

/** How many leading words every list of `lists` (at least one) shares with the first. */
const commonPrefixLength = (lists: ReadonlyArray<ReadonlyArray<string>>): number => {
  const first = lists[0]!
  let n = first.length
  for (const l of lists) {
    let i = 0
    while (i < n && i < l.length && l[i] === first[i]) i++
    n = i
  }
  return n
}

/** The deepest directory holding every path (absolute paths only), or undefined. */
const commonDirectory = (paths: ReadonlyArray<string>): string | undefined => {
  if (paths.length === 0 || paths.some((p) => !p.startsWith("/") || p.includes("\u0000"))) return undefined
  const dirs = paths.map((p) => p.split("/").filter(Boolean).slice(0, -1))
  return `/${dirs[0]!.slice(0, commonPrefixLength(dirs)).join("/")}`
}

const keyOf = (m: Matcher) =>
  m._tag === "command"
    ? `command\u0000${m.argv.join("\u0000")}`
    : m._tag === "path"
      ? `path\u0000${m.method}\u0000${m.under}`
      : `mcp\u0000${m.server}\u0000${m.tool}`

const describe = (m: Matcher) =>
  m._tag === "command"
    ? m.argv.join(" ")
    : m._tag === "path"
      ? `${m.method === PermissionsMethod ? "permissions" : "file changes"} under ${m.under}`
      : `MCP ${m.server} ${m.tool}`

const slug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40) || "rule"

const ruleOf = (id: string, effect: "allow" | "deny", m: Matcher, description: string): Policy.Rule => ({
  id,
  effect,
  description,
  match:
    m._tag === "command"
      ? { command: { argvPrefix: m.argv as [string, ...Array<string>] } }
      : m._tag === "path"
        ? { path: { under: m.under }, method: m.method as Policy.Rule["match"]["method"] & string }
        : { mcp: { server: m.server, tool: m.tool }, method: McpMethod }
})

interface Group {
  readonly matcher: Matcher
  readonly cards: Array<SuggestCard>
  generalized: string | undefined
}

const cardKey = (c: SuggestCard) => `${c.runId}\u0000${c.cardId}`

/**
 * Propose rules from `cards` (see the module comment), against the `current` rules in force.
 * Linear in the cards for each proposal tried (each is replayed over the whole record): with
 * `evidenceOf`, only the proposals of the card's own group are tried. Synchronous: over many
 * cards it holds the event loop (~0.2 s for 10,000 cards); `suggestPaced` does not.
 */
export const suggest = (
  cards: ReadonlyArray<SuggestCard>,
  current: Policy.Rules,
  options: SuggestOptions = {}
): Suggestions => Steps.run(suggestion(cards, current, options))

/**
 * `suggest`, the same proposals, worked out a slice of the event loop's time at a time (about
 * `sliceMs`, 10 by default), the event loop turning between slices: for a process that also
 * serves something (a live run reading codex's frames, an inbox). What `Offers` uses. `cards` must
 * not change meanwhile.
 */
export const suggestPaced = (
  cards: ReadonlyArray<SuggestCard>,
  current: Policy.Rules,
  options: SuggestOptions = {},
  sliceMs?: number
): Effect.Effect<Suggestions> => Steps.paced(suggestion(cards, current, options), sliceMs)

/** The suggestion, pausing every `Steps.Every` cards read, checked or replayed. */
function* suggestion(
  cards: ReadonlyArray<SuggestCard>,
  current: Policy.Rules,
  options: SuggestOptions
): Steps.Steps<Suggestions> {
  const min = Math.max(1, options.min ?? 3)
  const excludedByWhat = new Map<string, { reason: string; cards: number }>()
  const exclude = (what: string, reason: string, n = 1) => {
    const key = `${what}\u0000${reason}`
    const seen = excludedByWhat.get(key)
    excludedByWhat.set(key, { reason, cards: (seen?.cards ?? 0) + n })
  }
  const allowGroups = new Map<string, Group>()
  const denyGroups = new Map<string, Group>()
  const acceptedKeys = new Set<string>()
  let read = 0
  for (const card of cards) {
    if (++read % Steps.Every === 0) yield
    const isAccept = accepted(card)
    const isDecline = declinedByDecider(card)
    if (!isAccept && !isDecline) continue
    const m = matcherOf(card, isAccept ? "allow" : "deny")
    if ("excluded" in m) {
      exclude(m.what, m.excluded)
      continue
    }
    const key = keyOf(m.matcher)
    const groups = isAccept ? allowGroups : denyGroups
    const group = groups.get(key) ?? { matcher: m.matcher, cards: [], generalized: undefined }
    group.cards.push(card)
    groups.set(key, group)
    if (isAccept) acceptedKeys.add(key)
  }

  // Commands of one program and sub-command whose later words varied: their common prefix, when
  // no exact group of theirs reaches `min` on its own but together they do.
  const byPrefix = new Map<string, Array<Group>>()
  for (const g of allowGroups.values()) {
    if (g.matcher._tag !== "command" || g.matcher.argv.length < 3) continue
    const prefix = g.matcher.argv.slice(0, 2).join("\u0000")
    const siblings = byPrefix.get(prefix)
    if (siblings === undefined) byPrefix.set(prefix, [g])
    else siblings.push(g)
  }
  for (const groups of byPrefix.values()) {
    if (groups.length < 2) continue
    const small = groups.filter((g) => g.cards.length < min)
    const total = small.reduce((n, g) => n + g.cards.length, 0)
    if (small.length < 2 || total < min) continue
    const argvs = small.map((g) => (g.matcher as { argv: ReadonlyArray<string> }).argv)
    const n = commonPrefixLength(argvs)
    if (n < 2) continue
    const matcher: Matcher = { _tag: "command", argv: argvs[0]!.slice(0, n) }
    const key = keyOf(matcher)
    const merged: Group = allowGroups.get(key) ?? { matcher, cards: [], generalized: undefined }
    for (const g of small) {
      merged.cards.push(...g.cards)
      allowGroups.delete(keyOf(g.matcher))
    }
    merged.generalized = `the words after \`${matcher._tag === "command" ? matcher.argv.join(" ") : ""}\` varied: ${small.length} forms seen (${argvs
      .slice(0, 3)
      .map((a) => a.slice(n).join(" "))
      .join("; ")}${small.length > 3 ? "; ..." : ""})`
    allowGroups.set(key, merged)
  }
  // File changes (and permissions) in sibling directories, too few in each: the deepest common
  // directory (two levels or more) where together they reach `min`.
  const smallPaths = [...allowGroups.values()].filter((g) => g.matcher._tag === "path" && g.cards.length < min)
  const ancestors = new Map<string, Array<Group>>()
  for (const g of smallPaths) {
    const m = g.matcher as Extract<Matcher, { _tag: "path" }>
    const parts = m.under.split("/").filter(Boolean)
    for (let d = parts.length; d >= 2; d--) {
      const key = `${m.method}\u0000/${parts.slice(0, d).join("/")}`
      const under = ancestors.get(key)
      if (under === undefined) ancestors.set(key, [g])
      else under.push(g)
    }
  }
  const merged = new Set<Group>()
  for (const [key, groups] of [...ancestors].sort((a, b) => b[0].length - a[0].length)) {
    const free = groups.filter((g) => !merged.has(g))
    if (free.length < 2 || free.reduce((n, g) => n + g.cards.length, 0) < min) continue
    const [method, under] = key.split("\u0000") as [string, string]
    const matcher: Matcher = { _tag: "path", under, method }
    const target: Group = allowGroups.get(keyOf(matcher)) ?? { matcher, cards: [], generalized: undefined }
    for (const g of free) {
      merged.add(g)
      if (g === target) continue
      target.cards.push(...g.cards)
      allowGroups.delete(keyOf(g.matcher))
    }
    merged.add(target)
    allowGroups.set(keyOf(matcher), target)
  }
  for (const g of allowGroups.values()) {
    if (g.matcher._tag === "path" && g.generalized === undefined) {
      const files = new Set(g.cards.flatMap((c) => (c.facts.paths ?? []).map((p) => p.path)))
      if (files.size > 1 || g.cards.some((c) => (c.facts.paths?.length ?? 0) > 1))
        g.generalized = `a directory instead of files: ${files.size} file${files.size === 1 ? "" : "s"} seen under ${g.matcher.under}`
    }
  }

  const proposals: Array<Proposal> = []
  const ids = new Set(current.rules.map((r) => r.id))
  const idFor = (effect: "allow" | "deny", m: Matcher) => {
    const base = `suggested-${effect === "deny" ? "deny-" : ""}${slug(describe(m))}`
    let id = base
    for (let i = 2; ids.has(id); i++) id = `${base}-${i}`
    ids.add(id)
    return id
  }
  const consider = function* (group: Group, effect: "allow" | "deny"): Steps.Steps<void> {
    const what = describe(group.matcher)
    if (group.cards.length < min) return
    // A deny where people also accepted the same thing, or an allow also declined: no evidence either way.
    if (effect === "deny" && acceptedKeys.has(keyOf(group.matcher))) {
      exclude(what, "declined and accepted both", group.cards.length)
      return
    }
    // What the current rules already decide is not proposed again; a current deny always wins.
    const verdicts: Array<Replay.Candidate> = []
    for (const c of group.cards) {
      verdicts.push(Replay.candidateFor(c, current, options))
      if (verdicts.length % Steps.Every === 0) yield
    }
    if (effect === "allow" && verdicts.some((v) => v._tag === "Decline")) {
      exclude(what, "a current deny rule covers it", group.cards.length)
      return
    }
    if (verdicts.every((v) => v._tag === (effect === "allow" ? "Accept" : "Decline"))) {
      exclude(what, `the current rules already ${effect === "allow" ? "accept" : "decline"} it`, group.cards.length)
      return
    }
    const id = idFor(effect, group.matcher)
    const description = `${effect === "allow" ? "accepted" : "declined"} ${group.cards.length} times`
    const rule = ruleOf(id, effect, group.matcher, description)
    const decoded = Policy.decodeRules({ rules: [...current.rules, rule] })
    if (decoded._tag === "Left") {
      exclude(what, `not a valid rule: ${decoded.left}`, group.cards.length)
      return
    }
    const replayed: Array<Replay.ReplayedCard> = []
    for (const c of cards) {
      replayed.push(Replay.replayCard(c, decoded.right, options))
      if (replayed.length % Steps.Every === 0) yield
    }
    const report = Replay.reportOf(replayed)
    const mine = report.cards.filter(
      (r) => (r.candidate._tag === "Accept" || r.candidate._tag === "Decline") && r.candidate.ruleId === id
    )
    const flippedDenials = mine.filter((r) => r.change === "overturns-denial").length
    const flippedAcceptances = mine.filter((r) => r.change === "new-denial").length
    // Every evidence card must be decided by the proposal as it was (else the rule is not what the
    // cards show). A set of what it decides: comparing each card with each was quadratic (~0.7 s of
    // the event loop for 3,000 cards of one group, at each acceptance's offer).
    const decided = new Set(mine.map((r) => cardKey(r.card)))
    const coversEvidence = group.cards.every((c) => decided.has(cardKey(c)))
    if (flippedDenials > 0) {
      exclude(
        what,
        `replay: it would accept ${flippedDenials} card(s) that were declined or refused`,
        group.cards.length
      )
      return
    }
    if (flippedAcceptances > 0) {
      exclude(what, `replay: it would decline ${flippedAcceptances} card(s) that were accepted`, group.cards.length)
      return
    }
    if (!coversEvidence) {
      exclude(what, "replay: the rule would not decide its own evidence (facts read differently)", group.cards.length)
      return
    }
    const savedAsks = mine.filter(
      (r) => r.card.settlement === undefined || Asked.has(r.card.settlement.sourceKind)
    ).length
    const deciders: Record<string, number> = {}
    for (const c of group.cards) {
      const source = c.settlement?.source ?? "unknown"
      deciders[source] = (deciders[source] ?? 0) + 1
    }
    const times = group.cards.map((c) => c.openedAt).filter((t): t is number => t !== undefined)
    const period = times.length === 0 ? undefined : { from: Math.min(...times), to: Math.max(...times) }
    proposals.push({
      rule,
      evidence: group.cards.map((c) => ({ runId: c.runId, cardId: c.cardId })),
      deciders,
      period,
      generalized: group.generalized,
      replay: {
        cards: report.totals.cards,
        decides: mine.length,
        savedAsks,
        flippedDenials,
        flippedAcceptances
      },
      summary:
        `${effect} ${what}: ${description} (${Object.entries(deciders)
          .map(([s, n]) => `${s} ${n}`)
          .join(", ")}); replay over ${report.totals.cards} cards: decides ${mine.length}, ` +
        `${effect === "allow" ? `saves ${savedAsks} ask${savedAsks === 1 ? "" : "s"}, flips no decline` : "flips no acceptance"}`
    })
  }
  const only = options.evidenceOf
  for (const g of allowGroups.values()) {
    if (only === undefined || g.cards.some((c) => c.runId === only.runId && c.cardId === only.cardId))
      yield* consider(g, "allow")
  }
  if (only === undefined) for (const g of denyGroups.values()) yield* consider(g, "deny")
  proposals.sort((a, b) => b.replay.savedAsks - a.replay.savedAsks || a.rule.id.localeCompare(b.rule.id))
  return {
    proposals,
    excluded: [...excludedByWhat].map(([key, v]) => ({
      what: key.split("\u0000")[0]!,
      reason: v.reason,
      cards: v.cards
    })),
    cards: cards.length
  }
}

/**
 * A YAML double-quoted string: JSON's escapes (C0 controls, quotes, backslashes), and `\uXXXX`
 * for what JSON leaves raw and a reviewer's editor could hide or break a line at (DEL and C1
 * controls, line and paragraph separators, bidirectional overrides).
 */
const yamlString = (s: string) =>
  JSON.stringify(s).replace(
    /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`
  )

/**
 * Text from the record (commands a model wrote, paths) made one comment line: control characters
 * escaped, and newlines and the line and paragraph separators too, so that nothing in it can end
 * the comment and be read as YAML (a rule of its own).
 */
const commentText = (text: string) =>
  CardText.escapeControls(text).replace(/[\n\u2028\u2029]/g, (c) =>
    c === "\n" ? "\\n" : `\\u${c.charCodeAt(0).toString(16)}`
  )

/**
 * The proposals as a rules file (YAML) that `--rules` reads as it is, with a comment per rule
 * naming its evidence and its replay. Only the proposals: merge them with your own rules file by
 * hand (nothing is applied silently).
 */
export const rulesFile = (found: Suggestions): string => {
  const lines = [
    `# Proposed by warden rules suggest from ${found.cards} recorded cards; each rule proven by replay.`,
    "# Review each one; nothing here is in force until you pass it with --rules.",
    "rules:"
  ]
  if (found.proposals.length === 0) return `${lines.join("\n")} []\n`
  for (const p of found.proposals) {
    lines.push(`  # ${commentText(p.summary)}`)
    if (p.generalized !== undefined) lines.push(`  # generalized: ${commentText(p.generalized)}`)
    if (p.period !== undefined)
      lines.push(`  # evidence from ${new Date(p.period.from).toISOString()} to ${new Date(p.period.to).toISOString()}`)
    const shown = p.evidence.slice(0, 5).map((e) => commentText(`${e.runId}/${e.cardId}`))
    lines.push(
      `  # evidence: ${shown.join(", ")}${p.evidence.length > shown.length ? `, and ${p.evidence.length - shown.length} more` : ""}`
    )
    const r = p.rule
    lines.push(`  - id: ${yamlString(r.id)}`, `    effect: ${r.effect}`)
    if (r.description !== undefined) lines.push(`    description: ${yamlString(r.description)}`)
    lines.push("    match:")
    if (r.match.command !== undefined)
      lines.push(`      command: { argvPrefix: [${r.match.command.argvPrefix.map(yamlString).join(", ")}] }`)
    if (r.match.path !== undefined) lines.push(`      path: { under: ${yamlString(r.match.path.under)} }`)
    if (r.match.mcp !== undefined)
      lines.push(
        `      mcp: { server: ${yamlString(r.match.mcp.server)}${r.match.mcp.tool !== undefined ? `, tool: ${yamlString(r.match.mcp.tool)}` : ""} }`
      )
    if (r.match.method !== undefined) lines.push(`      method: ${yamlString(r.match.method)}`)
  }
  return `${lines.join("\n")}\n`
}

/**
 * A proposal as a remembered rule's scope (`Ledger.remember`): taken, it is recorded in the ledger
 * with who took it and from which card, applies to every later run, and is revoked as any
 * remembered rule is (`warden rules revoke`). Only an allow can be remembered. A command's prefix
 * becomes a `Command` scope of these words first (as `argvPrefix`), a directory a `Path` scope
 * (`files` for file changes: it covers both kinds of file-change approval; `permissions` for
 * grants), an MCP tool an `Mcp` scope. Left: why this proposal cannot be remembered.
 */
export const rememberedScope = (proposal: Proposal): Either.Either<Remembered.RememberedScope, string> => {
  const { rule } = proposal
  if (rule.effect !== "allow") return Either.left("only an allow can be remembered: put a deny in your rules file")
  const { command, mcp, path, method } = rule.match
  if (command !== undefined && command.argvPrefix.length > 0)
    return Either.right({
      _tag: "Command",
      argv: command.argvPrefix as unknown as readonly [string, ...Array<string>],
      exact: false
    })
  if (path !== undefined)
    return Either.right({
      _tag: "Path",
      root: path.under,
      target: method === PermissionsMethod ? "permissions" : "files"
    })
  if (mcp !== undefined && mcp.tool !== undefined)
    return Either.right({ _tag: "Mcp", server: mcp.server, tool: mcp.tool })
  return Either.left("this proposal has no scope a remembered rule can hold")
}
