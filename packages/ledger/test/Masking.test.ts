/**
 * No secret value reaches the database: secrets carried in a prompt, a follow-up, a work item's
 * config and env, a command line (env assignment, header, a program's password flag), an MCP tool
 * argument, a final message, a turn error, a connection's message, a failure's detail, the run's
 * own info and label, a remembered rule's note, are all recorded, and the bytes of the database
 * file and its side files hold none of them, while the ordinary words around them are there.
 */
import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import { Errors } from "@warden/supervisor"
import { Effect, Exit } from "effect"
import { readdirSync } from "node:fs"
import * as Path from "node:path"
import { Ledger, LedgerEvent } from "../src/index.js"
import { commandParams, fileBytes, journalEntries, mcpToolCallParams, script, tempDir } from "./support.js"

const secrets = {
  openai: "sk-proj-Q7vT2mX9pL4kR8nW3yH6bJ1cF5dG0sAeZu",
  github: "ghp_Xr4Tq9Lm2Vz7Kp1Wn8Yb3Hc6Jd0Fs5Ga2Qe7R",
  aws: "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEY9",
  jwt: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ3YXJkZW4tdGVzdCJ9.Xq3vR7tY1uI9oP2aS5dF8gH0jK4lZ6",
  mysql: "Hunter2Secret9x",
  toolPassword: "correct-horse-battery-staple-91",
  configKey: "plain-but-secret-value-73",
  stderr: "xoxb-123456789012-AbCdEfGhIjKlMnOpQr",
  note: "glpat-Zx8Cv7Bn6Mm5Qw4Er3Ty2U"
} as const

describe("masking", () => {
  it.scoped("a secret in a command, an env, a config, a tool argument or a text never reaches the database file", () =>
    Effect.gen(function* () {
      const filename = Path.join(yield* tempDir, "ledger.db")
      const s = yield* script()
      yield* Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        const run = yield* ledger.beginRun({
          label: `nightly with token=${secrets.github}`,
          info: { argv: ["warden", "run", "--api-key", secrets.openai, "deploy the service"] }
        })
        yield* run.attach(s.source)
        run.record(
          LedgerEvent.itemSubmitted({
            id: 1,
            prompt: `deploy the service with OPENAI_API_KEY=${secrets.openai} please`,
            followUps: [`then push using ${secrets.github}`],
            cwd: "/repo",
            config: {
              shell_environment_policy: { set: { AWS_SECRET_ACCESS_KEY: secrets.aws } },
              apiKey: secrets.configKey
            }
          })
        )
        s.work({ _tag: "ThreadReady", item: 1, threadId: "thr_1", resumed: false })
        s.work({
          _tag: "TurnStarted",
          item: 1,
          threadId: "thr_1",
          turnId: "turn_1",
          prompt: `deploy the service with OPENAI_API_KEY=${secrets.openai} please`
        })

        const curl = yield* s.open(
          "item/commandExecution/requestApproval",
          commandParams(
            "thr_1",
            "turn_1",
            `/bin/bash -lc 'curl -H "Authorization: Bearer ${secrets.jwt}" https://api.example.com/deploy'`
          )
        )
        const mysql = yield* s.open(
          "item/commandExecution/requestApproval",
          commandParams("thr_1", "turn_1", `mysql -uroot -p${secrets.mysql} shop`)
        )
        const env = yield* s.open(
          "item/commandExecution/requestApproval",
          commandParams("thr_1", "turn_1", `AWS_SECRET_ACCESS_KEY=${secrets.aws} aws s3 ls`)
        )
        const tool = yield* s.open(
          "mcpServer/elicitation/request",
          mcpToolCallParams("thr_1", "turn_1", "db", "login", {
            user: "admin",
            password: secrets.toolPassword,
            note: `bearer ${secrets.jwt}`
          })
        )
        for (const card of [curl, mysql, env, tool]) yield* s.approvals.answer(card.id, Decision.Decline)
        yield* s.approvals.answer(curl.id, Decision.Accept) // late
        // The answers are in the answer journal before anything is committed: masked there too.
        const journaled = fileBytes(filename)
        assert.include(
          readdirSync(`${filename}.answers`).flatMap((f) =>
            journalEntries(Path.join(`${filename}.answers`, f)).map((e) => e.cardId)
          ),
          curl.id
        )
        for (const [name, secret] of Object.entries(secrets)) {
          assert.notInclude(journaled, secret, `the ${name} secret reached the answer journal`)
        }

        s.work({
          _tag: "TurnCompleted",
          item: 1,
          threadId: "thr_1",
          turn: {
            turnId: "turn_1",
            status: "failed",
            finalMessage: `I used ${secrets.openai} to deploy`,
            items: [],
            error: { message: `auth failed for ${secrets.github}` },
            errors: []
          }
        })
        s.publish({
          _tag: "ConnectionLost",
          slot: 0,
          connection: 1,
          reason: { _tag: "Exited", code: 1, signal: null },
          message: `app-server exited: token ${secrets.stderr}`,
          stderrTail: secrets.stderr
        })
        s.publish({
          _tag: "ItemFinished",
          item: 1,
          exit: Exit.fail(
            new Errors.WorkItemFailed({
              reason: "connection-lost",
              detail: `lost while sending Authorization: Bearer ${secrets.jwt}`,
              threadId: "thr_1"
            })
          )
        })
        yield* ledger.remember({
          scope: { _tag: "Command", argv: ["git", "status"], exact: true },
          author: "alice",
          note: `because ${secrets.note}`
        })
        const stats = yield* ledger.flush
        assert.strictEqual(stats.failed, 0)

        // Recorded: the records are there, masked.
        const [item] = yield* ledger.workItems(run.id)
        assert.include(item!.prompt, "deploy the service")
        assert.notInclude(item!.prompt, secrets.openai)
        assert.isTrue(item!.promptsMasked)
        assert.strictEqual(item!.failureReason, "connection-lost")
        const cards = yield* ledger.cards({ runId: run.id })
        assert.strictEqual(cards.length, 4)
        assert.include(cards[0]!.title, "curl")
        assert.deepStrictEqual(cards[3]!.facts.mcp?.tool, "login")
        // The command facts say masking changed them (a rule naming a masked word cannot be replayed exactly).
        assert.deepStrictEqual(
          cards.map((c) => c.facts.masked),
          [true, true, true, false]
        )
      }).pipe(Effect.provide(Ledger.layerSqlite({ filename })))

      // The ledger is closed: every byte it left on disk.
      const bytes = fileBytes(filename)
      for (const [name, secret] of Object.entries(secrets)) {
        assert.notInclude(bytes, secret, `the ${name} secret reached the database file`)
      }
      // ...and the ordinary words around them did (the test would pass on an empty file otherwise).
      for (const word of [
        "deploy the service",
        "then push using",
        "api.example.com",
        "mysql",
        "aws s3 ls",
        "admin",
        "auth failed for",
        "app-server exited",
        "because",
        "nightly with"
      ]) {
        assert.include(bytes, word)
      }
    })
  )
})
