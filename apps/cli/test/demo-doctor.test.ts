/**
 * `warden demo` without a terminal (the demo policy answers) and `warden doctor` on the pinned
 * codex and on a codex whose schema drifted. The demo runs as `pnpm demo` runs it, from the
 * sources through tsx (`node --import tsx apps/cli/src/bin.ts demo`); the other CLI tests start
 * the same sources compiled for the run (support/CliProcess.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { RealCodex } from "@warden/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"

const tempDir = CliProcess.tempDir

describe("warden demo and doctor", () => {
  it.live(
    "demo without a terminal: one card accepted, one declined, one timed out; summary; exit 0",
    () =>
      Effect.gen(function* () {
        const result = yield* CliProcess.runToEnd(["demo"], { via: "tsx" })
        assert.deepStrictEqual(result.exited, { code: 0, signal: null }, result.stderr)
        const stdout = result.stdout.join("\n")
        assert.match(stdout, /^ITEM +STATUS +CARDS +TOKENS +ELAPSED +RESULT$/m)
        for (const i of [0, 1, 2])
          assert.match(stdout, new RegExp(`^${i} +completed +1 (accepted|declined|timeout) `, "m"))
        assert.match(stdout, /^c\d +0 +command +accepted +handler +run: echo 'hello from the warden demo'/m)
        assert.match(stdout, /^c\d +1 +file change +declined +handler +write 1 file: .*note\.txt$/m)
        assert.match(stdout, /^c\d +2 +mcp tool +timeout +deadline +mcp demo\.poke/m)
        assert.include(stdout, "The note outside the workspace was not written.")
        assert.include(result.stderr, "No terminal: the demo policy answers")
        assert.include(result.stderr, "hello from the warden demo")
        assert.include(result.stderr, "no decision within 2s")
      }),
    60_000
  )

  it.scopedLive(
    "doctor on the pinned codex: the tested version, no drift, the answer journal mapped, exit 0",
    () =>
      Effect.gen(function* () {
        const binary = yield* RealCodex.binaryPath
        const dir = yield* tempDir
        const state = Path.join(dir, "state", "ledger.db")
        const result = yield* CliProcess.runToEnd(["doctor", "--codex", binary, "--state", state])
        assert.deepStrictEqual(result.exited, { code: 0, signal: null }, result.stderr)
        const stdout = result.stdout.join("\n")
        assert.include(stdout, `codex:    ${binary}`)
        assert.include(stdout, "version:  codex-cli 0.171.0 (the tested version)")
        assert.match(stdout, /answers and refusals checked against this codex's schema: \d+, 0 do not validate/)
        assert.include(stdout, "drift: none")
        // The suite's set-up names the journal's module for every warden it starts (scripts/test-bundle.mjs).
        const module = process.env["WARDEN_JOURNAL_NATIVE"]
        assert.isDefined(module)
        assert.match(
          stdout,
          new RegExp(
            `^answer journal: a mapped file \\(the module loads and ${dir} is on (ext4|xfs|tmpfs); module ${module}\\)$`,
            "m"
          )
        )
        assert.include(stdout, `  where:  ${state}.answers`)
        assert.isFalse(Fs.existsSync(Path.join(dir, "state")), "doctor makes nothing")
      }),
    60_000
  )

  it.scopedLive(
    "doctor with a codex path and a --state path that hold a secret: every line prints them masked",
    () =>
      Effect.gen(function* () {
        const real = yield* RealCodex.binaryPath
        const dir = yield* tempDir
        const secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
        const state = Path.join(dir, `token=${secret}`, "ledger.db")
        // The pinned codex, reached through a directory whose name holds the secret.
        const secretDir = Path.join(dir, `bin-token=${secret}`)
        Fs.mkdirSync(secretDir)
        const binary = Path.join(secretDir, "codex")
        Fs.symlinkSync(real, binary)
        for (const json of [false, true]) {
          const result = yield* CliProcess.runToEnd([
            "doctor",
            "--codex",
            binary,
            "--state",
            state,
            ...(json ? ["--json"] : [])
          ])
          assert.deepStrictEqual(result.exited, { code: 0, signal: null }, result.stderr)
          const stdout = result.stdout.join("\n")
          assert.include(stdout, json ? '"answerJournal"' : "answer journal: a mapped file")
          assert.include(stdout, json ? '"versionText":"codex-cli 0.171.0"' : "version:  codex-cli 0.171.0")
          assert.include(stdout, json ? "bin-token=" : "codex:    ")
          assert.notInclude(stdout, secret)
          assert.notInclude(result.stderr, secret)
        }
      }),
    60_000
  )

  it.scopedLive(
    "doctor on a codex whose answer schema drifted: not the tested version, BREAKING, exit 1; its children get ChildEnv's environment",
    () =>
      Effect.gen(function* () {
        const real = yield* RealCodex.binaryPath
        const dir = yield* tempDir
        const fake = Path.join(dir, "codex")
        // A codex 0.172.0 whose file-change approval answer became {verdict: string}.
        Fs.writeFileSync(
          fake,
          `#!${process.execPath}
const { execFileSync } = require("node:child_process")
const fs = require("node:fs")
const path = require("node:path")
const args = process.argv.slice(2)
fs.writeFileSync(path.join(__dirname, args[0] === "--version" ? "version-env.json" : "generate-env.json"), JSON.stringify(process.env))
if (args[0] === "--version") { console.log("codex-cli 0.172.0"); process.exit(0) }
execFileSync(${JSON.stringify(real)}, args, { stdio: "inherit" })
const file = path.join(args[args.indexOf("--out") + 1], "codex_app_server_protocol.schemas.json")
const bundle = JSON.parse(fs.readFileSync(file, "utf8"))
bundle.definitions.FileChangeRequestApprovalResponse = { type: "object", required: ["verdict"], properties: { verdict: { type: "string" } } }
fs.writeFileSync(file, JSON.stringify(bundle))
`,
          { mode: 0o755 }
        )
        Fs.writeFileSync(Path.join(dir, "package.json"), JSON.stringify({ type: "commonjs" }))
        const result = yield* CliProcess.runToEnd(
          ["doctor", "--codex", fake, "--json", "--state", `${dir}/ledger.db`],
          {
            env: {
              WARDEN_DOCTOR_PROBE: "doctor-probe-secret",
              DOCTOR_PROBE_PASSED: "passed",
              WARDEN_JOURNAL_NATIVE: "off"
            }
          }
        )
        assert.deepStrictEqual(result.exited, { code: 1, signal: null }, result.stderr)
        assert.strictEqual(result.stdout.length, 1, "one JSON object")
        const report = JSON.parse(result.stdout[0]!)
        assert.deepInclude(report, { version: "0.172.0", tested: false, testedVersion: "0.171.0", breaking: true })
        // The answer journal without its module: write(2), and why.
        assert.deepInclude(report.answerJournal, {
          directory: `${dir}/ledger.db.answers`,
          mode: "write(2)",
          reason: "WARDEN_JOURNAL_NATIVE=off"
        })
        const broken = (report.answers as ReadonlyArray<{ method: string; answer: string; verdict: string }>).filter(
          (a) => a.verdict !== "valid"
        )
        assert.isAbove(broken.length, 0)
        assert.deepStrictEqual([...new Set(broken.map((a) => a.method))], ["item/fileChange/requestApproval"])
        assert.include(
          broken.map((a) => a.answer),
          "refusal"
        )
        // Both children got our environment through ChildEnv.make: the rest of it, no WARDEN_* variable.
        for (const file of ["version-env.json", "generate-env.json"]) {
          const env = JSON.parse(Fs.readFileSync(Path.join(dir, file), "utf8")) as Record<string, string>
          assert.strictEqual(env["DOCTOR_PROBE_PASSED"], "passed", file)
          assert.deepStrictEqual(
            Object.keys(env).filter((name) => name.toUpperCase().startsWith("WARDEN_")),
            [],
            file
          )
        }
      }),
    60_000
  )
})
