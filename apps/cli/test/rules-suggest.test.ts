/**
 * `warden rules suggest` on a ledger recorded by `warden run --state` (the fake app-server of the
 * ledger tests: one command approval per `|`-part of a PROMPT), with a person answering on stdin.
 * The proposed rules file is written with `--out`, read by `warden run --rules` as it is, and a run
 * with it decides what the record decided; the dangerous command stays asked.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import { answerEveryCard, recordedRunArgs, ruledRunArgs, writeFakeCodex } from "./support/LedgerCodex.js"

describe("warden rules suggest", () => {
  it.scopedLive(
    "proposes an allow and a deny from a person's decisions, never the dangerous command; the file runs as --rules unchanged",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "ledger.db")
        const parts = ["npm test", "npm publish", "rm -rf dist"]
        // Three items, each asking the three commands; the person accepts npm test and rm -rf, declines npm publish.
        const run = yield* CliProcess.spawn([
          ...recordedRunArgs(codex, db),
          "--concurrency",
          "1",
          ...[1, 2, 3].map(() => parts.join("|"))
        ])
        const answered = yield* answerEveryCard(
          run,
          (l) => (String(l["summary"]).includes("npm publish") ? "decline" : "accept"),
          "120 seconds"
        )
        yield* run.endStdin
        assert.deepStrictEqual(yield* run.exited("60 seconds"), { code: 0, signal: null }, run.stderr())
        assert.strictEqual(answered.size, 9)

        const file = Path.join(dir, "suggested.yaml")
        const suggested = yield* CliProcess.runToEnd(["rules", "suggest", "--state", db, "--out", file])
        assert.deepStrictEqual(suggested.exited, { code: 0, signal: null }, suggested.stderr)
        assert.match(suggested.stdout.join("\n"), /2 rules proposed from 9 cards, written to .*suggested\.yaml/)
        const text = Fs.readFileSync(file, "utf8")
        assert.include(text, "# allow npm test: accepted 3 times (person 3)")
        assert.include(text, "# deny npm publish: declined 3 times (person 3)")
        assert.notInclude(text, "rm")

        // --json: the proposals with their replay, and why rm -rf was not proposed.
        const json = yield* CliProcess.runToEnd(["rules", "suggest", "--state", db, "--json"])
        const lines = json.json()
        const proposed = lines.filter((l) => l.type === "rule.proposed")
        assert.sameMembers(
          proposed.map((p) => p["rule"]["id"]),
          ["suggested-npm-test", "suggested-deny-npm-publish"]
        )
        for (const p of proposed) {
          assert.strictEqual(p["replay"]["flippedDenials"], 0)
          assert.strictEqual(p["replay"]["flippedAcceptances"], 0)
          assert.lengthOf(p["evidence"], 3)
        }
        const rm = lines.find((l) => l.type === "rule.excluded" && l["what"] === "rm -rf dist")
        assert.match(String(rm?.["reason"]), /dangerous: rm \(deletion\)/)

        // --out never overwrites.
        const again = yield* CliProcess.runToEnd(["rules", "suggest", "--state", db, "--out", file])
        assert.strictEqual(again.exited.code, 2, again.stderr)

        // A run with the file as it is: npm test accepted and npm publish declined by the proposed
        // rules, nobody asked; rm -rf is still asked (here: refused, no rule decides it).
        const ruled = yield* CliProcess.runToEnd([...ruledRunArgs(codex, file), parts.join("|")])
        const settled = ruled.json().filter((l) => l.type === "card.settled")
        assert.lengthOf(settled, 3, JSON.stringify(settled))
        const sources = settled.map((l) => `${l["outcome"]}:${l["source"]}`).sort()
        assert.includeMembers(sources, ["accepted:rule:suggested-npm-test", "declined:rule:suggested-deny-npm-publish"])
        assert.notInclude(sources.join(" "), "rule:suggested-rm")

        // Taking a proposal: a remembered rule in the ledger, recorded with who took it and from
        // which card, applied by a later run with no rules file, ended by `rules revoke`.
        const refusedDeny = yield* CliProcess.runToEnd([
          "rules",
          "suggest",
          "--state",
          db,
          "--remember",
          "suggested-deny-npm-publish"
        ])
        assert.strictEqual(refusedDeny.exited.code, 2, refusedDeny.stderr)
        assert.include(refusedDeny.stderr, "only an allow can be remembered")
        const unknown = yield* CliProcess.runToEnd(["rules", "suggest", "--state", db, "--remember", "no-such-rule"])
        assert.strictEqual(unknown.exited.code, 2, unknown.stderr)
        assert.include(unknown.stderr, "no such proposal now (proposed: ")
        for (const id of ["suggested-npm-test", "suggested-deny-npm-publish"]) assert.include(unknown.stderr, id)
        const taken = yield* CliProcess.runToEnd([
          "rules",
          "suggest",
          "--state",
          db,
          "--remember",
          "suggested-npm-test",
          "--by",
          "alice",
          "--json"
        ])
        assert.deepStrictEqual(taken.exited, { code: 0, signal: null }, taken.stderr)
        const line = taken.json().find((l) => l.type === "rule.remembered")
        assert.deepStrictEqual(line?.["scope"], { _tag: "Command", argv: ["npm", "test"], exact: false })
        const ruleId = String(line?.["id"])
        const listed = yield* CliProcess.runToEnd(["rules", "list", "--json", "--state", db])
        const rule = listed.json().find((r) => r["id"] === ruleId)
        assert.strictEqual(rule?.["author"], "alice")
        assert.include(String(rule?.["note"]), "taken from warden rules suggest (suggested-npm-test)")
        const byRemembered = yield* CliProcess.runToEnd([...recordedRunArgs(codex, db, "deny"), "npm test --watch"])
        assert.deepStrictEqual(
          byRemembered
            .json()
            .filter((l) => l.type === "card.settled")
            .map((l) => `${l["outcome"]}:${l["source"]}`),
          [`accepted:remembered:${ruleId}`]
        )
        const revoked = yield* CliProcess.runToEnd(["rules", "revoke", ruleId, "--state", db])
        assert.strictEqual(revoked.exited.code, 0, revoked.stderr)
        const afterRevoke = yield* CliProcess.runToEnd([...recordedRunArgs(codex, db, "deny"), "npm test"])
        assert.deepStrictEqual(
          afterRevoke
            .json()
            .filter((l) => l.type === "card.settled")
            .map((l) => l["outcome"]),
          ["declined"]
        )
      }),
    180_000
  )

  it.scopedLive(
    "on a record of 200+ cards: every proposal has its evidence and replay, the file runs unchanged, and a run with it asks only what no proposal could cover",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "ledger.db")
        // 24 items of 9 commands each (216 cards, +2 for `pnpm lint` asked twice only): accepted
        // every time, declined every time (`npm publish`), accepted but dangerous (`rm -rf`),
        // compound, accepted but declined once (`make deploy`, item 5's), asked below the minimum.
        const base = [
          "npm test",
          "make check",
          "git status",
          "npm publish",
          "rm -rf dist",
          "make deploy",
          "echo a && echo b",
          "cargo build",
          "go vet"
        ]
        const items = Array.from({ length: 24 }, (_, i) => (i < 2 ? [...base, "pnpm lint"] : base).join("|"))
        const run = yield* CliProcess.spawn([...recordedRunArgs(codex, db), "--concurrency", "4", ...items])
        const answered = yield* answerEveryCard(run, (l) => {
          const summary = String(l["summary"])
          return summary.includes("npm publish") || (summary.includes("make deploy") && l["item"] === 5)
            ? "decline"
            : "accept"
        })
        yield* run.endStdin
        assert.deepStrictEqual(yield* run.exited("60 seconds"), { code: 0, signal: null }, run.stderr())
        assert.strictEqual(answered.size, 24 * base.length + 2)

        const file = Path.join(dir, "suggested.yaml")
        const suggested = yield* CliProcess.runToEnd(["rules", "suggest", "--state", db, "--out", file])
        assert.deepStrictEqual(suggested.exited, { code: 0, signal: null }, suggested.stderr)
        const json = (yield* CliProcess.runToEnd(["rules", "suggest", "--state", db, "--json"])).json()
        const proposed = json.filter((l) => l.type === "rule.proposed")
        assert.sameMembers(
          proposed.map((p) => p["rule"]["id"]),
          [
            "suggested-npm-test",
            "suggested-make-check",
            "suggested-git-status",
            "suggested-cargo-build",
            "suggested-go-vet",
            "suggested-deny-npm-publish"
          ]
        )
        for (const p of proposed) {
          assert.lengthOf(p["evidence"], 24, p["rule"]["id"])
          assert.deepStrictEqual(p["deciders"], { person: 24 }, p["rule"]["id"])
          assert.deepInclude(p["replay"], {
            cards: 218,
            decides: 24,
            savedAsks: 24,
            flippedDenials: 0,
            flippedAcceptances: 0
          })
        }
        const excluded = json.filter((l) => l.type === "rule.excluded").map((l) => `${l["what"]}: ${l["reason"]}`)
        for (const what of ["rm -rf dist", "make deploy", "echo a && echo b"])
          assert.isTrue(
            excluded.some((e) => e.startsWith(what)),
            `${what} not proposed, with a reason: ${JSON.stringify(excluded)}`
          )
        const text = Fs.readFileSync(file, "utf8")
        assert.strictEqual((text.match(/^ {2}- id: /gm) ?? []).length, 6, text)

        // The file as it is, on the same work: a rule decides every card a proposal covers; the
        // rest (never proposed) is still asked (here, with no one to ask: refused).
        const ruled = yield* CliProcess.runToEnd([...ruledRunArgs(codex, file), [...base, "pnpm lint"].join("|")])
        assert.strictEqual(ruled.exited.code, 0, ruled.stderr)
        const settled = ruled.json().filter((l) => l.type === "card.settled")
        const opened = new Map(
          ruled
            .json()
            .filter((l) => l.type === "card.opened")
            .map((l) => [l["cardId"], String(l["summary"])])
        )
        const byRule = settled.filter((l) => String(l["source"]).startsWith("rule:suggested-"))
        const asked = settled.filter((l) => !String(l["source"]).startsWith("rule:"))
        assert.sameMembers(
          byRule.map((l) => `${l["outcome"]}:${l["source"]}`),
          [
            "accepted:rule:suggested-npm-test",
            "accepted:rule:suggested-make-check",
            "accepted:rule:suggested-git-status",
            "accepted:rule:suggested-cargo-build",
            "accepted:rule:suggested-go-vet",
            "declined:rule:suggested-deny-npm-publish"
          ]
        )
        assert.sameMembers(
          asked.map((l) => {
            const summary = opened.get(l["cardId"]) ?? ""
            return ["rm -rf dist", "make deploy", "echo a && echo b", "pnpm lint"].find((c) => summary.includes(c))
          }),
          ["rm -rf dist", "make deploy", "echo a && echo b", "pnpm lint"]
        )
      }),
    240_000
  )
})
