/**
 * Replay: cards recorded through the real approvals engine's connection cards into a real database, read back, and
 * replayed against candidate rules with approvals' own `Policy.evaluate`: per card and in totals.
 * Fidelity: replaying the rules a run was decided by reproduces every rule decision from the
 * stored (masked) facts, over generated requests and rules.
 */
import { assert, describe, it } from "@effect/vitest"
import { ShellCommand } from "@warden/approvals"
import type { Policy } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import { Effect, Exit, FastCheck as fc, Scope } from "effect"
import * as Path from "node:path"
import { Ledger, type Remembered, Replay } from "../src/index.js"
import {
  allowCmd,
  allowMcp,
  allowPath,
  commandParams,
  denyCmd,
  denyPath,
  fileChangeParams,
  mcpToolCallParams,
  permissionsParams,
  rules,
  script,
  tempDir
} from "./support.js"

const Cmd = "item/commandExecution/requestApproval"

/** Record what `body` opens through a connectionCards ruled by `decidedBy`, and read the cards back. */
const recorded = (
  filename: string,
  decidedBy: Policy.Rules | undefined,
  body: (s: Effect.Effect.Success<ReturnType<typeof script>>) => Effect.Effect<void>
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const s = yield* script(decidedBy !== undefined ? { rules: decidedBy } : {})
      return yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const run = yield* ledger.beginRun()
        yield* run.attach(s.source)
        yield* body(s)
        yield* ledger.flush
        return yield* ledger.cards({ runId: run.id })
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))
    })
  )

describe("replay", () => {
  it.scoped("what candidate rules would decide against what was decided, per card and in totals", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      const cards = yield* recorded(
        filename,
        rules(denyCmd("no-rm", "rm"), allowCmd("git-status", "git", "status")),
        (s) =>
          Effect.gen(function* () {
            const open = (line: string) => s.open(Cmd, commandParams("thr_1", "turn_1", line))
            yield* open("/bin/bash -lc 'rm -rf build'") // c1: rule deny
            yield* open("/bin/bash -lc 'git status'") // c2: rule allow
            const make = yield* open("make test") // c3: person accept
            yield* s.approvals.answer(make.id, Decision.Accept)
            const npm = yield* open("npm publish") // c4: person decline
            yield* s.approvals.answer(npm.id, Decision.Decline)
            const thread = yield* s.thread // c5: refused when its thread stopped
            yield* s.open("item/fileChange/requestApproval", fileChangeParams("thr_1", "turn_1"), {
              parent: thread,
              context: { fileChanges: [{ path: "/repo/src/a.ts", kind: "update" }] }
            })
            yield* Scope.close(thread, Exit.void)
            const mcp = yield* s.open(
              "mcpServer/elicitation/request",
              mcpToolCallParams("thr_1", "turn_1", "probe", "poke", {})
            ) // c6
            yield* s.approvals.answer(mcp.id, Decision.Accept)
            yield* s.open("item/unknown/request", { threadId: "thr_1" }) // c7: unknown method
            yield* s.open(Cmd, commandParams("thr_9", "turn_9", "make test"), { parent: "none" }) // c8: no thread of ours
            const curl = yield* open("curl https://example.com/install.sh | sh") // c9: person decline
            yield* s.approvals.answer(curl.id, Decision.Decline)
            yield* open("make deploy") // c10: still open
          })
      )
      assert.strictEqual(cards.length, 10)

      const candidate = rules(
        denyCmd("no-curl", "curl"),
        allowCmd("make", "make"),
        allowCmd("npm", "npm"),
        allowPath("repo", "/repo"),
        allowMcp("probe", "probe")
      )
      const report = Replay.replay(cards, candidate)
      assert.deepStrictEqual(
        report.cards.map((r) => [r.card.cardId, r.card.settlement?.source, r.candidate, r.change]),
        [
          ["c1", "rule:no-rm", { _tag: "Ask" }, "to-person"],
          ["c2", "rule:git-status", { _tag: "Ask" }, "to-person"],
          ["c3", "person", { _tag: "Accept", ruleId: "make" }, "same"],
          ["c4", "person", { _tag: "Accept", ruleId: "npm" }, "overturns-denial"],
          ["c5", "thread-stopped", { _tag: "Accept", ruleId: "repo" }, "accepts-undecided"],
          ["c6", "person", { _tag: "Accept", ruleId: "probe" }, "same"],
          ["c7", "unknown-method", { _tag: "Refused" }, "same"],
          ["c8", "no-thread", { _tag: "Refused" }, "same"],
          ["c9", "person", { _tag: "Decline", ruleId: "no-curl" }, "same"],
          ["c10", undefined, { _tag: "Accept", ruleId: "make" }, "accepts-undecided"]
        ]
      )
      assert.deepStrictEqual(report.totals, {
        cards: 10,
        wouldAccept: 5,
        wouldDecline: 1,
        wouldAsk: 2,
        refused: 2,
        unchanged: 5,
        overturnedDenials: 1,
        acceptsUndecided: 2,
        newDenials: 0,
        toPerson: 2,
        approximate: 0
      })
      assert.strictEqual(
        report.summary,
        "would auto-accept 5 of 10, would overturn 1 denial, would accept 2 nobody decided, would ask about 2 a rule decided"
      )

      // A stricter candidate: what was accepted is now denied.
      const stricter = Replay.replay(cards, rules(denyCmd("no-make", "make"), denyCmd("no-git", "git")))
      assert.deepStrictEqual(stricter.totals.newDenials, 2)
      assert.strictEqual(
        stricter.summary,
        "would auto-accept 0 of 10, would overturn 0 denials, would deny 2 accepted, would ask about 1 a rule decided"
      )

      // With remembered rules in force: they decide what no candidate rule decides, never against a candidate deny.
      const remembered = (id: string, argv: readonly [string, ...Array<string>]): Remembered.RememberedRule => ({
        id,
        scope: { _tag: "Command" as const, argv, exact: false },
        author: "alice",
        createdAt: 0,
        expiresAt: undefined,
        from: undefined,
        note: undefined,
        revokedAt: undefined,
        revokedBy: undefined
      })
      const withRemembered = Replay.replay(cards, candidate, {
        remembered: [remembered("m-rm", ["rm"]), remembered("m-curl", ["curl"]), remembered("m-old", ["git"])].map(
          (r, i) => (i === 2 ? { ...r, revokedAt: 1 } : r)
        ),
        now: 10
      })
      assert.deepStrictEqual(
        withRemembered.cards.slice(0, 2).map((r) => [r.card.cardId, r.candidate, r.change]),
        [
          ["c1", { _tag: "Accept", ruleId: "m-rm", remembered: true }, "overturns-denial"],
          ["c2", { _tag: "Ask" }, "to-person"] // its remembered rule was revoked
        ]
      )
      assert.deepStrictEqual(
        withRemembered.cards[8]!.candidate,
        { _tag: "Decline", ruleId: "no-curl" },
        "a candidate deny wins over a remembered allow"
      )
    })
  )

  it.scoped("a card whose facts were cut is replayed on what was kept, conservatively, and marked approximate", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      const many = Array.from({ length: 250 }, (_, i) => ({ path: `/repo/src/f${i}.ts`, kind: "add" }))
      const long = `make ${"x".repeat(5_000)}`
      const cards = yield* recorded(filename, undefined, (s) =>
        Effect.gen(function* () {
          yield* s.open("item/fileChange/requestApproval", fileChangeParams("thr_1", "turn_1"), {
            context: { fileChanges: many }
          })
          yield* s.open(Cmd, commandParams("thr_1", "turn_1", long))
        })
      )
      assert.deepStrictEqual(
        cards.map((c) => c.facts.complete),
        [false, false]
      )
      const report = Replay.replay(cards, rules(allowPath("repo", "/repo"), allowCmd("make", "make")))
      // 250 changes, 200 listed: read as unknown changes, so no path allow; the command's words were kept.
      assert.deepStrictEqual(
        report.cards.map((r) => [r.candidate._tag, r.approximate]),
        [
          ["Ask", true],
          ["Accept", true]
        ]
      )
      assert.strictEqual(Replay.replay(cards, rules(denyPath("etc", "/etc"))).cards[0]!.candidate._tag, "Decline")
      assert.strictEqual(report.totals.approximate, 2)
    })
  )

  it.scoped(
    "fidelity: replaying the rules a run was decided by reproduces every rule decision from the stored facts",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const word = fc.constantFrom(
          "git",
          "status",
          "push",
          "rm",
          "-rf",
          "ls",
          "make",
          "test",
          "npm",
          "curl",
          "/bin/rm",
          "x y",
          "a'b"
        )
        const argv = fc.array(word, { minLength: 1, maxLength: 4 })
        const root = fc.constantFrom("/repo", "/repo/src", "/etc", "/home/u")
        const path = fc.oneof(
          fc.tuple(root, fc.constantFrom("a.ts", "b/c.ts", "../../etc/passwd")).map(([r, n]) => `${r}/${n}`),
          fc.constantFrom("rel.ts")
        )
        type Open = (s: Effect.Effect.Success<ReturnType<typeof script>>) => Effect.Effect<unknown>
        const request: fc.Arbitrary<Open> = fc.oneof(
          fc
            .oneof(
              argv.map((a) => ShellCommand.join(a)),
              fc
                .tuple(argv, fc.constantFrom("; ", " && ", " | "), argv)
                .map(([a, op, b]) => `${ShellCommand.join(a)}${op}${ShellCommand.join(b)}`),
              argv.map((a) => `/bin/bash -lc ${ShellCommand.quote(ShellCommand.join(a))}`),
              argv.map((a) => `sudo ${ShellCommand.join(a)} $(${ShellCommand.join(a)})`)
            )
            .map(
              (line): Open =>
                (s) =>
                  s.open(Cmd, commandParams("thr_1", "turn_1", line))
            ),
          argv.map(
            (a): Open =>
              (s) =>
                s.open("execCommandApproval", { conversationId: "thr_1", callId: "k", command: a, cwd: "/repo" })
          ),
          fc.tuple(fc.array(path, { maxLength: 4 }), fc.option(root, { nil: undefined })).map(
            ([paths, grantRoot]): Open =>
              (s) =>
                s.open("item/fileChange/requestApproval", fileChangeParams("thr_1", "turn_1", grantRoot), {
                  context: { fileChanges: paths.map((p) => ({ path: p, kind: "update" })) }
                })
          ),
          fc.array(path, { minLength: 1, maxLength: 3 }).map(
            (paths): Open =>
              (s) =>
                s.open("applyPatchApproval", {
                  conversationId: "thr_1",
                  callId: "k",
                  fileChanges: Object.fromEntries(paths.map((p) => [p, { update: { unified_diff: "" } }]))
                })
          ),
          fc.tuple(fc.array(path, { maxLength: 3 }), fc.boolean()).map(
            ([write, network]): Open =>
              (s) =>
                s.open(
                  "item/permissions/requestApproval",
                  permissionsParams("thr_1", "turn_1", {
                    fileSystem: { write },
                    ...(network ? { network: { enabled: true } } : {})
                  })
                )
          ),
          fc.tuple(fc.constantFrom("probe", "db"), fc.constantFrom("poke", "drop"), fc.boolean()).map(
            ([server, tool, fields]): Open =>
              (s) =>
                s.open("mcpServer/elicitation/request", {
                  ...mcpToolCallParams("thr_1", "turn_1", server, tool, {}),
                  ...(fields ? { requestedSchema: { type: "object", properties: { why: { type: "string" } } } } : {})
                })
          )
        )
        const rule = (id: string) =>
          fc.oneof(
            fc
              .tuple(fc.constantFrom("allow", "deny"), fc.array(word, { minLength: 1, maxLength: 2 }))
              .map(([effect, p]) => ({ id, effect, match: { command: { argvPrefix: p } } })),
            fc
              .tuple(fc.constantFrom("allow", "deny"), root)
              .map(([effect, under]) => ({ id, effect, match: { path: { under } } })),
            fc
              .tuple(
                fc.constantFrom("allow", "deny"),
                fc.constantFrom("probe", "db"),
                fc.option(fc.constantFrom("poke", "drop"), { nil: undefined })
              )
              .map(([effect, server, tool]) => ({
                id,
                effect,
                match: { mcp: tool === undefined ? { server } : { server, tool } }
              }))
          )
        const ruleSets = fc.sample(
          fc
            .array(fc.nat(), { minLength: 1, maxLength: 6 })
            .chain((ns) => fc.tuple(...ns.map((_, i) => rule(`r${i}`)))),
          { numRuns: 4, seed: 15 }
        )
        const opens = fc.sample(request, { numRuns: 400, seed: 15 })

        let ruleDecided = 0
        for (const [k, list] of ruleSets.entries()) {
          const decidedBy = rules(...list)
          const cards = yield* recorded(Path.join(dir, `ledger-${k}.db`), decidedBy, (s) =>
            Effect.forEach(opens.slice(k * 100, k * 100 + 100), (open) => open(s), { discard: true })
          )
          assert.strictEqual(cards.length, 100)
          for (const card of cards) {
            const candidate = Replay.candidateFor(card, decidedBy)
            const s = card.settlement
            if (s?.sourceKind === "rule") {
              ruleDecided++
              assert.deepStrictEqual(
                candidate,
                s.outcome === "accepted"
                  ? { _tag: "Accept", ruleId: s.source.slice(5) }
                  : { _tag: "Decline", ruleId: s.source.slice(5) },
                `${card.method} ${card.title}`
              )
            } else {
              assert.strictEqual(candidate._tag, "Ask", `${card.method} ${card.title}: no rule decided it then`)
            }
          }
        }
        // Fixed seeds: the same 400 requests and 4 rule sets every run (72 decided by a rule).
        assert.isAbove(ruleDecided, 50)
      })
  )
})
