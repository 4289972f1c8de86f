/**
 * `warden run --state`: the run is recorded in the ledger (SQLite), read back here through the
 * Ledger API. The fake app-server asks one command approval per `|`-separated part of each
 * PROMPT, and completes the turn once all are answered.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { ProcessTree } from "@warden/testkit"
import * as CliProcess from "./support/CliProcess.js"
import { readLedger, recordedRunArgs, ruledRunArgs, writeFakeCodex } from "./support/LedgerCodex.js"

describe("warden run --state", () => {
  it.scopedLive(
    "records the run: its work items, every card and its one settlement",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const rules = Path.join(dir, "rules.yaml")
        Fs.writeFileSync(
          rules,
          "rules:\n  - id: echo-ok\n    effect: allow\n    match: { command: { argvPrefix: [echo] } }\n  - id: no-rm\n    effect: deny\n    match: { command: { argvPrefix: [rm] } }\n"
        )
        const db = Path.join(dir, "state", "ledger.db")
        const audit = Path.join(dir, "audit.jsonl")
        const result = yield* CliProcess.runToEnd([
          ...recordedRunArgs(codex, db, "rules"),
          "--rules",
          rules,
          "--audit",
          audit,
          "echo hi|rm -rf /tmp/x",
          "echo two"
        ])
        assert.deepStrictEqual(result.exited, { code: 0, signal: null }, result.stderr)
        const { runs, cards, items, accounting } = yield* readLedger(db, (ledger) =>
          Effect.gen(function* () {
            const runs = yield* ledger.runs()
            const cards = yield* ledger.cards({ runId: runs[0]!.runId })
            const items = yield* ledger.workItems(runs[0]!.runId)
            const accounting = yield* ledger.accounting(runs[0]!.runId)
            return { runs, cards, items, accounting }
          })
        )
        assert.strictEqual(runs.length, 1)
        assert.strictEqual(runs[0]!.status, "ended")
        assert.strictEqual(runs[0]!.label, "warden run")
        assert.deepStrictEqual(items.map((i) => [i.item, i.prompt, i.status]).sort(), [
          ["0", "echo hi|rm -rf /tmp/x", "finished"],
          ["1", "echo two", "finished"]
        ])
        assert.strictEqual(cards.length, 3)
        const byCommand = new Map(cards.map((c) => [c.facts.command, c]))
        assert.deepStrictEqual(
          [byCommand.get("echo hi")?.settlement?.outcome, byCommand.get("echo hi")?.settlement?.source],
          ["accepted", "rule:echo-ok"]
        )
        assert.deepStrictEqual(
          [byCommand.get("rm -rf /tmp/x")?.settlement?.outcome, byCommand.get("rm -rf /tmp/x")?.settlement?.source],
          ["declined", "rule:no-rm"]
        )
        assert.deepStrictEqual(
          [byCommand.get("echo two")?.settlement?.outcome, byCommand.get("echo two")?.workItem],
          ["accepted", "1"]
        )
        assert.strictEqual(accounting.cards, 3)
        assert.strictEqual(accounting.settled, 3)
        assert.strictEqual(accounting.open, 0)
        // The JSON lines say the same.
        const settled = result.json().filter((l) => l.type === "card.settled")
        assert.strictEqual(settled.length, 3)
        // The audit trail (written by the ledger) is a rendering of the same records.
        const trail = Fs.readFileSync(audit, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
        assert.deepStrictEqual(trail.map((l) => l.type).sort(), [
          "card.opened",
          "card.opened",
          "card.opened",
          "card.settled",
          "card.settled",
          "card.settled"
        ])
        for (const line of trail.filter((l) => l.type === "card.settled")) {
          const card = cards.find((c) => c.cardId === line.cardId)!
          assert.deepStrictEqual(
            [
              line.summary,
              line.method,
              line.workItem,
              line.outcome,
              line.source,
              line.decision,
              line.written,
              line.latencyMs,
              line.ts
            ],
            [
              card.title,
              card.method,
              Number(card.workItem),
              card.settlement!.outcome,
              card.settlement!.source,
              card.settlement!.decision,
              card.settlement!.written,
              card.settlement!.latencyMs,
              new Date(card.settlement!.settledAt).toISOString()
            ]
          )
        }
      }),
    60_000
  )

  it.scopedLive(
    "an audit file that cannot take its lines (/dev/full), with the ledger and without: the run goes on, is recorded whole, and says how many lines are missing and why (exit 4)",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const rules = Path.join(dir, "rules.yaml")
        Fs.writeFileSync(
          rules,
          "rules:\n  - id: echo-ok\n    effect: allow\n    match: { command: { argvPrefix: [echo] } }\n"
        )
        const db = Path.join(dir, "state", "ledger.db")
        const result = yield* CliProcess.runToEnd([
          ...recordedRunArgs(codex, db, "rules"),
          "--rules",
          rules,
          "--audit",
          "/dev/full",
          "echo hi"
        ])
        assert.deepStrictEqual(result.exited, { code: 4, signal: null }, result.stderr)
        assert.match(
          result.stderr,
          /warden: the audit file \/dev\/full is missing 2 lines of this run \(the audit file \/dev\/full could not be written: .*ENOSPC.*\): their card events are in the ledger/
        )
        // Not a loss of the ledger's: its records are whole.
        assert.notMatch(result.stderr, /the ledger lost/)
        const cards = yield* readLedger(db, (ledger) =>
          Effect.flatMap(ledger.runs(), (runs) => ledger.cards({ runId: runs[0]!.runId }))
        )
        assert.deepStrictEqual(
          cards.map((c) => [c.facts.command, c.settlement?.outcome, c.settlement?.source]),
          [["echo hi", "accepted", "rule:echo-ok"]]
        )

        // Without the ledger (`--no-state`: the approvals' own JSONL sink writes the file), the same.
        const bare = yield* CliProcess.runToEnd([...ruledRunArgs(codex, rules), "--audit", "/dev/full", "echo hi"])
        assert.deepStrictEqual(bare.exited, { code: 4, signal: null }, bare.stderr)
        assert.match(
          bare.stderr,
          /warden: the audit file \/dev\/full is missing 2 lines of this run \(the audit file \/dev\/full could not be written: .*ENOSPC.*\)/
        )
        assert.deepStrictEqual(
          bare
            .json()
            .filter((l) => l.type === "card.settled")
            .map((l) => [l.outcome, l.source]),
          [["accepted", "rule:echo-ok"]]
        )
      }),
    60_000
  )

  it.scopedLive(
    "records in $XDG_STATE_HOME/warden/ledger.db by default; --no-state records nothing; a ledger that cannot be opened runs nothing",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const env = { XDG_STATE_HOME: Path.join(dir, "xdg") }
        const off = yield* CliProcess.runToEnd(
          ["run", "--codex", codex, "--json", "--approvals", "deny", "--no-state", "--restarts", "0", "echo hi"],
          { env }
        )
        assert.strictEqual(off.exited.code, 0, off.stderr)
        assert.isFalse(Fs.existsSync(Path.join(dir, "xdg")), "--no-state made no state directory")
        const on = yield* CliProcess.runToEnd(
          ["run", "--codex", codex, "--json", "--approvals", "deny", "--restarts", "0", "echo hi"],
          { env }
        )
        assert.strictEqual(on.exited.code, 0, on.stderr)
        const db = Path.join(dir, "xdg", "warden", "ledger.db")
        const cards = yield* readLedger(db, (ledger) => ledger.cards())
        assert.deepStrictEqual(
          cards.map((c) => [c.facts.command, c.settlement?.outcome]),
          [["echo hi", "declined"]]
        )
        // A ledger that cannot be opened: nothing runs (exit 1, nothing on stdout, no item started, and
        // the app-server, spawned while the ledger opened, is not left running).
        const notDb = Path.join(dir, "not.db")
        Fs.writeFileSync(
          notDb,
          "this is not a SQLite database, and it is long enough to be read as one ............................................\n"
        )
        const spawned = Path.join(dir, "spawned")
        const asked = Path.join(dir, "asked.jsonl")
        const probe = Path.join(dir, "probe-codex")
        Fs.writeFileSync(probe, `#!/bin/sh\necho $$ > ${spawned}\nexec ${codex}\n`, { mode: 0o755 })
        const unopenable = yield* CliProcess.runToEnd(
          ["run", "--codex", probe, "--json", "--approvals", "deny", "--state", notDb, "echo hi"],
          { env: { ...env, LEDGER_FAKE_ANSWERS: asked } }
        )
        assert.strictEqual(unopenable.exited.code, 1, unopenable.stderr)
        assert.include(unopenable.stderr, `--state ${notDb}`)
        assert.deepStrictEqual(unopenable.stdout, [])
        assert.isFalse(Fs.existsSync(asked), "no item ran (no card was asked, nothing answered)")
        // The ledger opens once codex was spawned (beside its start-up): it was, and it was stopped.
        const pid = Number(Fs.readFileSync(spawned, "utf8").trim())
        assert.isFalse(ProcessTree.isAlive(pid), "the app-server was stopped")
        const both = yield* CliProcess.runToEnd(["run", "--codex", codex, "--no-state", "--state", db, "echo hi"], {
          env
        })
        assert.strictEqual(both.exited.code, 2)
        assert.include(both.stderr, "--state and --no-state")
      }),
    180_000
  )
})
