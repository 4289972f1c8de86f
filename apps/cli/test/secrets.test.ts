/**
 * No secret leaves `warden run`: a hostile app-server puts secrets of several shapes into every
 * carrier it controls (stderr, a malformed request, a command to approve, an error notification,
 * an unreadable frame), and none of them reaches stdout (`--json`), stderr (the
 * human log), the audit file or the ledger (`--state`: the database file and its side files).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"

const tempDir = CliProcess.tempDir

/** The secret value of each shape, and how it is written in a carrier. */
const shapes: ReadonlyArray<readonly [secret: string, written: string]> = [
  ["sk-proj-Zq8xW3vT6yU1iO9pA2sD5fG7hJ4kL0", "OPENAI_API_KEY=sk-proj-Zq8xW3vT6yU1iO9pA2sD5fG7hJ4kL0"],
  [
    "eyJhbGciOi.Jzd1YiI6IjEyMzQ1.Njc4OTAiLCJuYW1l",
    "Authorization: Bearer eyJhbGciOi.Jzd1YiI6IjEyMzQ1.Njc4OTAiLCJuYW1l"
  ],
  ["s3cr3t-Pa55w0rd-xyz", "https://deploy:s3cr3t-Pa55w0rd-xyz@git.example.com/repo.git"],
  ["ghp_4f8Gk2Lm9Qz1Xw7Vb3Nc6Rt0Ys5Hu8Jp2Ke1", "token ghp_4f8Gk2Lm9Qz1Xw7Vb3Nc6Rt0Ys5Hu8Jp2Ke1"],
  ["hunter2-very-secret-value", "--password hunter2-very-secret-value"],
  ["AbCdEfGhIjKlMnOpQrStUvWxYz012345", '{"api_key": "AbCdEfGhIjKlMnOpQrStUvWxYz012345"}'],
  ["S3cretMy5qlPw", "mysql -uroot -pS3cretMy5qlPw appdb"],
  ["Curl-P4ss-9xyz", "curl -u admin:Curl-P4ss-9xyz https://api.example.com"],
  ["Ssh-P4ss-77abc", "sshpass -p Ssh-P4ss-77abc ssh deploy@host"],
  ["D0cker-Pw-123x", "docker login -u me -p D0cker-Pw-123x registry.example.com"],
  ["Red1s-Pw-456xy", "redis-cli -a Red1s-Pw-456xy ping"],
  ["Ossl-Pw-789xyz", "openssl enc -aes-256-cbc -k Ossl-Pw-789xyz -in notes.txt"],
  ["AwsSecretKey123456789xyz", "aws configure set aws_secret_access_key AwsSecretKey123456789xyz"],
  ["User-Pw-654xyz", "curl --user me:User-Pw-654xyz https://api.example.com"]
]

const fakeCodex = (all: string) => `#!${process.execPath}
const all = ${JSON.stringify(all)}
const out = (f) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...f }) + "\\n")
process.stderr.write("starting\\n" + all + "\\n")
require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const m = JSON.parse(line)
  if (m.method === "initialize") out({ id: m.id, result: { userAgent: "leaky/0.171.0", codexHome: "/tmp" } })
  if (m.method === "thread/start") out({ id: m.id, result: { thread: { id: "thr_1" } } })
  if (m.method === "thread/unsubscribe") out({ id: m.id, result: { status: "unsubscribed" } })
  if (m.method === "turn/start") {
    out({ id: m.id, result: { turn: { id: "turn_1", status: "inProgress", items: [] } } })
    // malformed: command must be a string
    out({ id: 100, method: "item/commandExecution/requestApproval", params: { threadId: "thr_1", turnId: "turn_1", itemId: "a", startedAtMs: 0, command: { leak: all } } })
    out({ id: 101, method: "item/commandExecution/requestApproval", params: { threadId: "thr_1", turnId: "turn_1", itemId: "b", startedAtMs: 0, command: "curl -H '" + all.split("\\n")[1] + "' https://x " + all.replace(/\\n/g, " "), cwd: "/tmp", reason: all } })
    out({ method: "error", params: { threadId: "thr_1", turnId: "turn_1", willRetry: false, error: { message: "upstream said: " + all } } })
    setTimeout(() => process.stdout.write("not json at all: " + all.replace(/\\n/g, " ") + "\\n"), 200)
  }
})
setInterval(() => {}, 60000)
`

describe("warden run: no secret leaves through any exit", () => {
  it.scopedLive(
    "stdout (--json), stderr, the audit file and the ledger hold none of the secrets the app-server wrote",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const script = Path.join(dir, "codex")
        const audit = Path.join(dir, "audit.jsonl")
        const db = Path.join(dir, "ledger.db")
        Fs.writeFileSync(script, fakeCodex(shapes.map(([, written]) => written).join("\n")), { mode: 0o755 })
        const result = yield* CliProcess.runToEnd([
          "run",
          "--codex",
          script,
          "--json",
          "--approvals",
          "deny",
          "--restarts",
          "0",
          "--audit",
          audit,
          "--state",
          db,
          "hello"
        ])
        assert.deepStrictEqual(result.exited, { code: 3, signal: null }, result.stderr)
        const stdout = result.stdout.join("\n")
        const stderr = result.stderr
        const auditText = Fs.readFileSync(audit, "utf8")
        // Every carrier was exercised: the lines exist, with the secrets masked out.
        const lines = result.json()
        assert.isDefined(lines.find((l) => l.type === "card.opened" && String(l.summary).includes("curl")))
        assert.isDefined(
          lines.find((l) => l.type === "card.settled" && l.outcome === "refused"),
          "the malformed request"
        )
        assert.isDefined(lines.find((l) => l.type === "connection.lost" && String(l.stderrTail).includes("starting")))
        assert.include(auditText, "card.settled")
        // The database, its side files and the answer journal's directory (ledger.db.answers).
        const ledgerBytes = (Fs.readdirSync(dir, { recursive: true }) as Array<string>)
          .filter((f) => f.startsWith("ledger.db") && Fs.statSync(Path.join(dir, f)).isFile())
          .map((f) => Fs.readFileSync(Path.join(dir, f)).toString("latin1"))
          .join("\n")
        assert.include(ledgerBytes, "curl", "the ledger recorded the card")
        for (const [secret] of shapes) {
          assert.notInclude(stdout, secret, `--json leaks ${secret}`)
          assert.notInclude(stderr, secret, `stderr leaks ${secret}`)
          assert.notInclude(auditText, secret, `the audit leaks ${secret}`)
          assert.notInclude(ledgerBytes, secret, `the ledger leaks ${secret}`)
        }
      }),
    60_000
  )
})
