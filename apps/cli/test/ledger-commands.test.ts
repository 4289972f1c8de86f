/**
 * `warden audit` and `warden rules test` on a ledger the test records first with `warden run
 * --state` (the fake app-server of ledger.test.ts: one command approval per `|`-part of a PROMPT).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import { readLedger, recordedRunArgs, writeFakeCodex } from "./support/LedgerCodex.js"

const secret = "sk-live-Q9x2LmN8pR4tV6wY1zA3bC5d"

/** Records the fixture: 4 cards (echo accepted and rm declined by rules; ls and curl refused: no rule decides them). */
const recordFixture = (dir: string) =>
  Effect.gen(function* () {
    const codex = writeFakeCodex(dir)
    const rules = Path.join(dir, "rules.yaml")
    Fs.writeFileSync(
      rules,
      "rules:\n  - id: echo-ok\n    effect: allow\n    match: { command: { argvPrefix: [echo] } }\n  - id: no-rm\n    effect: deny\n    match: { command: { argvPrefix: [rm] } }\n"
    )
    const db = Path.join(dir, "ledger.db")
    const result = yield* CliProcess.runToEnd([
      ...recordedRunArgs(codex, db, "rules"),
      "--rules",
      rules,
      "--concurrency",
      "1",
      "echo hi|rm -rf /tmp/x",
      `ls /tmp|curl -H 'Authorization: Bearer ${secret}' https://example.com`
    ])
    assert.strictEqual(result.exited.code, 0, result.stderr)
    return db
  })

describe("warden audit", () => {
  it.scopedLive(
    "lists the recorded cards, masked, and filters them",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const db = yield* recordFixture(dir)
        const all = yield* CliProcess.runToEnd(["audit", "--state", db, "--json"])
        assert.strictEqual(all.exited.code, 0, all.stderr)
        const cards = all.json()
        assert.deepStrictEqual(
          cards.map((c) => [c.type, c.item, c.outcome, c.source]),
          [
            ["card", "0", "accepted", "rule:echo-ok"],
            ["card", "0", "declined", "rule:no-rm"],
            ["card", "1", "refused", "handler"],
            ["card", "1", "refused", "handler"]
          ]
        )
        assert.notInclude(all.stdout.join("\n"), secret, "masked text only")
        assert.include(cards[3]!.title, "curl")

        const human = yield* CliProcess.runToEnd(["audit", "--state", db])
        assert.strictEqual(human.exited.code, 0, human.stderr)
        assert.strictEqual(human.stdout.length, 5)
        assert.match(human.stdout[1]!, /item 0 {2}c\d+ {2}command {2}declined by rule:no-rm \(decline\)/)
        assert.strictEqual(human.stdout[4], "4 cards")
        assert.notInclude(human.stdout.join("\n"), secret)

        const count = (args: ReadonlyArray<string>) =>
          CliProcess.runToEnd(["audit", "--state", db, "--json", ...args]).pipe(
            Effect.map((r) => {
              assert.strictEqual(r.exited.code, 0, r.stderr)
              return r.json().map((c) => c.title as string)
            })
          )
        assert.strictEqual((yield* count(["--outcome", "declined"])).length, 1)
        assert.deepStrictEqual(
          yield* count([
            "--source",
            "rule",
            "--item",
            "0",
            "--since",
            "1h",
            "--method",
            "item/commandExecution/requestApproval"
          ]),
          ["run: echo hi (in /tmp)", "run: rm -rf /tmp/x (in /tmp)"]
        )
        assert.deepStrictEqual(yield* count(["--source", "rule:no-rm"]), ["run: rm -rf /tmp/x (in /tmp)"])
        assert.deepStrictEqual(yield* count(["--since", "2999-01-01"]), [])

        const bad = yield* CliProcess.runToEnd(["audit", "--state", db, "--outcome", "maybe"])
        assert.strictEqual(bad.exited.code, 2)
        const missing = yield* CliProcess.runToEnd(["audit", "--state", Path.join(dir, "none.db")])
        assert.strictEqual(missing.exited.code, 2)
        assert.include(missing.stderr, "no ledger at")
        assert.isFalse(Fs.existsSync(Path.join(dir, "none.db")), "audit creates no ledger")
      }),
    120_000
  )
})

describe("warden rules test", () => {
  it.scopedLive(
    "--prune-before deletes what settled before T (nothing newer), and takes no filters",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const db = yield* recordFixture(dir)
        const none = yield* CliProcess.runToEnd(["audit", "--state", db, "--prune-before", "1h"])
        assert.strictEqual(none.exited.code, 0, none.stderr)
        assert.match(none.stdout[0]!, /^pruned 0 cards settled before \S+ and 0 runs left without cards$/)
        const filtered = yield* CliProcess.runToEnd([
          "audit",
          "--state",
          db,
          "--prune-before",
          "1h",
          "--outcome",
          "declined"
        ])
        assert.strictEqual(filtered.exited.code, 2)
        assert.include(filtered.stderr, "--prune-before takes no filters (got --outcome)")
        const bad = yield* CliProcess.runToEnd(["audit", "--state", db, "--prune-before", "soon"])
        assert.strictEqual(bad.exited.code, 2)
        assert.include(bad.stderr, "--prune-before soon: neither a duration")
        assert.strictEqual((yield* CliProcess.runToEnd(["audit", "--state", db])).stdout.at(-1), "4 cards")
        const all = yield* CliProcess.runToEnd(["audit", "--state", db, "--json", "--prune-before", "2999-01-01"])
        assert.strictEqual(all.exited.code, 0, all.stderr)
        assert.deepStrictEqual(JSON.parse(all.stdout[0]!), {
          type: "pruned",
          before: "2999-01-01T00:00:00.000Z",
          cards: 4,
          runs: 1
        })
        assert.deepStrictEqual((yield* CliProcess.runToEnd(["audit", "--state", db])).stdout, ["0 cards"])
      }),
    180_000
  )

  it.scopedLive(
    "replays the recorded cards against a candidate rules file, card by card and in totals",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const db = yield* recordFixture(dir)
        const candidate = Path.join(dir, "candidate.yaml")
        Fs.writeFileSync(
          candidate,
          "rules:\n  - id: echo-ok\n    effect: allow\n    match: { command: { argvPrefix: [echo] } }\n  - id: ls-ok\n    effect: allow\n    match: { command: { argvPrefix: [ls] } }\n  - id: rm-ok\n    effect: allow\n    match: { command: { argvPrefix: [rm] } }\n"
        )
        const human = yield* CliProcess.runToEnd(["rules", "test", "--rules", candidate, "--state", db])
        assert.strictEqual(human.exited.code, 0, human.stderr)
        assert.strictEqual(human.stdout.length, 5)
        assert.match(
          human.stdout[0]!,
          / c1 {2}same {2}was accepted by rule:echo-ok; would accept by rule:echo-ok {2}run: echo hi \(in \/tmp\)$/
        )
        assert.match(
          human.stdout[1]!,
          / c2 {2}OVERTURNS-DENIAL {2}was declined by rule:no-rm; would accept by rule:rm-ok /
        )
        assert.match(human.stdout[2]!, / c3 {2}OVERTURNS-DENIAL {2}was refused by handler; would accept by rule:ls-ok /)
        assert.match(human.stdout[3]!, / c4 {2}same {2}was refused by handler; would ask \(no rule decides\) /)
        assert.strictEqual(
          human.stdout[4],
          "would auto-accept 3 of 4, would overturn 2 denials (with the 0 remembered rules in force)"
        )
        assert.notInclude(human.stdout.join("\n"), secret)
        const json = yield* CliProcess.runToEnd(["rules", "test", "--rules", candidate, "--state", db, "--json"])
        assert.strictEqual(json.exited.code, 0, json.stderr)
        const lines = json.json()
        assert.deepStrictEqual(
          lines.map((l) => [l.type, l.cardId, l.change]),
          [
            ["replay.card", "c1", "same"],
            ["replay.card", "c2", "overturns-denial"],
            ["replay.card", "c3", "overturns-denial"],
            ["replay.card", "c4", "same"],
            ["replay.totals", undefined, undefined]
          ]
        )
        assert.deepStrictEqual(lines[1]!.was, { outcome: "declined", source: "rule:no-rm" })
        assert.deepStrictEqual(lines[1]!.candidate, { _tag: "Accept", ruleId: "rm-ok" })
        const { type: _, ts: __, ...totals } = lines[4]!
        assert.deepStrictEqual(totals, {
          cards: 4,
          wouldAccept: 3,
          wouldDecline: 0,
          wouldAsk: 1,
          refused: 0,
          unchanged: 2,
          overturnedDenials: 2,
          acceptsUndecided: 0,
          newDenials: 0,
          toPerson: 0,
          approximate: 0,
          remembered: 0,
          summary: "would auto-accept 3 of 4, would overturn 2 denials"
        })
        // --limit: audit lists the oldest N, rules test reads the newest N; either says when more matched.
        const oldest = yield* CliProcess.runToEnd(["audit", "--state", db, "--json", "--limit", "2"])
        assert.strictEqual(oldest.exited.code, 0, oldest.stderr)
        assert.deepStrictEqual(
          oldest
            .json()
            .filter((c) => c.type === "card")
            .map((c) => c.cardId),
          ["c1", "c2"]
        )
        assert.include(oldest.stderr, "more than 2 cards match: the oldest 2 were read")
        const newest = yield* CliProcess.runToEnd([
          "rules",
          "test",
          "--rules",
          candidate,
          "--state",
          db,
          "--json",
          "--limit",
          "3"
        ])
        assert.strictEqual(newest.exited.code, 0, newest.stderr)
        assert.deepStrictEqual(
          newest.json().map((l) => l.cardId ?? l.cards),
          ["c2", "c3", "c4", 3]
        )
        assert.include(newest.stderr, "more than 3 cards match: the newest 3 were read")
        const whole = yield* CliProcess.runToEnd(["audit", "--state", db, "--limit", "4"])
        assert.notInclude(whole.stderr, "more than", "four of four: nothing left out, nothing said")
        const zero = yield* CliProcess.runToEnd(["audit", "--state", db, "--limit", "0"])
        assert.strictEqual(zero.exited.code, 2)
        assert.include(zero.stderr, "--limit 0: a number of cards, 1 or more")
        const missing = yield* CliProcess.runToEnd([
          "rules",
          "test",
          "--rules",
          Path.join(dir, "nope.yaml"),
          "--state",
          db
        ])
        assert.strictEqual(missing.exited.code, 2)
      }),
    120_000
  )
})

describe("the ledger commands: one rule for a --state that cannot be used, and a ledger the user may only read", () => {
  /** A user subject to the files' modes (as root, root without the capabilities that override them). */
  const asReader = { filePermissions: true } as const

  it.scopedLive(
    "audit, rules list and rules test read a ledger the user may only read, writing nothing; what would write it is refused as a permission error (exit 2)",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const db = yield* recordFixture(dir)
        const candidate = Path.join(dir, "candidate.yaml")
        Fs.writeFileSync(
          candidate,
          "rules:\n  - id: ls-ok\n    effect: allow\n    match: { command: { argvPrefix: [ls] } }\n"
        )
        // Readable, and writable by nobody: not the files, not the directory.
        for (const f of Fs.readdirSync(dir)) Fs.chmodSync(Path.join(dir, f), f === "codex" ? 0o555 : 0o444)
        Fs.chmodSync(dir, 0o555)
        yield* Effect.addFinalizer(() => Effect.sync(() => Fs.chmodSync(dir, 0o700)))
        const before = Fs.readdirSync(dir)
          .map((f) => [f, Fs.statSync(Path.join(dir, f)).mtimeMs])
          .sort()

        const audit = yield* CliProcess.runToEnd(["audit", "--state", db, "--json"], asReader)
        assert.strictEqual(audit.exited.code, 0, audit.stderr)
        assert.strictEqual(audit.json().length, 4)
        const list = yield* CliProcess.runToEnd(["rules", "list", "--state", db], asReader)
        assert.strictEqual(list.exited.code, 0, list.stderr)
        assert.deepStrictEqual(list.stdout, ["0 remembered rules in force"])
        const test = yield* CliProcess.runToEnd(["rules", "test", "--rules", candidate, "--state", db], asReader)
        assert.strictEqual(test.exited.code, 0, test.stderr)
        assert.match(test.stdout.at(-1)!, /^would auto-accept 1 of 4/)

        // What writes the ledger is refused as what it is: a permission error, exit 2, in every command.
        for (const args of [
          ["rules", "revoke", "r1"],
          ["audit", "--prune-before", "1h"],
          ["resume", "--codex", Path.join(dir, "codex")],
          ["run", "--codex", Path.join(dir, "codex"), "hang"]
        ]) {
          const refused = yield* CliProcess.runToEnd([...args, "--state", db], asReader)
          assert.strictEqual(refused.exited.code, 2, `${args.join(" ")}: ${refused.stderr}`)
          assert.include(refused.stderr, "permission denied: you may read it but not write it", args.join(" "))
        }
        const after = Fs.readdirSync(dir)
          .map((f) => [f, Fs.statSync(Path.join(dir, f)).mtimeMs])
          .sort()
        assert.deepStrictEqual(after, before, "nothing was created or written beside the ledger")

        // A ledger the user may not read at all.
        Fs.chmodSync(db, 0o000)
        const unreadable = yield* CliProcess.runToEnd(["audit", "--state", db], asReader)
        assert.strictEqual(unreadable.exited.code, 2, unreadable.stderr)
        assert.include(unreadable.stderr, "permission denied: you may not read")
      }),
    180_000
  )

  it.scopedLive(
    "--state naming a directory is exit 2 in every command; resume --run naming no dead run is exit 2, as rules revoke of an unknown id",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const db = yield* recordFixture(dir)
        const codex = Path.join(dir, "codex")
        for (const args of [
          ["run", "--codex", codex, "hang"],
          ["resume", "--codex", codex],
          ["audit"],
          ["rules", "list"],
          ["rules", "revoke", "r1"]
        ]) {
          const result = yield* CliProcess.runToEnd([...args, "--state", dir])
          assert.strictEqual(result.exited.code, 2, `${args.join(" ")}: ${result.stderr}`)
          assert.include(result.stderr, "cannot hold the ledger: it exists and is not a regular file", args.join(" "))
        }
        const unknown = yield* CliProcess.runToEnd(["resume", "--codex", codex, "--state", db, "--run", "no-such-run"])
        assert.strictEqual(unknown.exited.code, 2, unknown.stderr)
        assert.include(unknown.stderr, "--run no-such-run: no such run")
        const runs = yield* readLedger(db, (ledger) => ledger.runs())
        const ended = yield* CliProcess.runToEnd(["resume", "--codex", codex, "--state", db, "--run", runs[0]!.runId])
        assert.strictEqual(ended.exited.code, 2, ended.stderr)
        assert.include(ended.stderr, "not a dead run to resume: it ended cleanly")
      }),
    120_000
  )
})

describe("warden rules test: the remembered rules in force", () => {
  it.scopedLive(
    "a card no candidate rule decides is replayed against the remembered rules in force, and the output says so",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const db = yield* recordFixture(dir)
        // Remember `ls /tmp` (card c3, refused when recorded): the candidate has no rule for it.
        const rule = yield* readLedger(db, (ledger) =>
          ledger.remember({ scope: { _tag: "Command", argv: ["ls", "/tmp"], exact: true }, author: "alice" })
        )
        const candidate = Path.join(dir, "candidate.yaml")
        Fs.writeFileSync(
          candidate,
          "rules:\n  - id: echo-ok\n    effect: allow\n    match: { command: { argvPrefix: [echo] } }\n"
        )
        const human = yield* CliProcess.runToEnd(["rules", "test", "--rules", candidate, "--state", db])
        assert.strictEqual(human.exited.code, 0, human.stderr)
        assert.match(
          human.stdout[2]!,
          new RegExp(` c3 {2}OVERTURNS-DENIAL {2}was refused by handler; would accept by remembered:${rule.id} `)
        )
        assert.strictEqual(
          human.stdout.at(-1),
          "would auto-accept 2 of 4, would overturn 1 denial, would ask about 1 a rule decided (with the 1 remembered rule in force: `warden rules list`)"
        )
        const json = yield* CliProcess.runToEnd(["rules", "test", "--rules", candidate, "--state", db, "--json"])
        assert.deepStrictEqual(json.json()[2]!.candidate, { _tag: "Accept", ruleId: rule.id, remembered: true })
        assert.strictEqual(json.json().at(-1)!.remembered, 1)
      }),
    120_000
  )
})
