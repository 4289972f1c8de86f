/**
 * The environment of the child `SchemaDump.generate` starts. The protocol applies no rule of its
 * own to it (the rule for every child of Warden is `ChildEnv` of `@warden/transport`, which the
 * protocol does not import): a caller passes the environment, and without one the child gets an
 * environment built from nothing but this process's PATH and HOME and a private CODEX_HOME, so no
 * variable of Warden's can reach it by default. A fake binary writes the environment it got to a
 * file, and a dump small enough to load.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as SchemaDump from "../src/SchemaDump.js"

/** A directory with a fake codex that records its environment in `env.json` beside it. */
const fakeCodex = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-schema-env-"))
    const binary = Path.join(dir, "codex")
    const envFile = Path.join(dir, "env.json")
    const bundle = {
      definitions: {
        ClientRequest: { oneOf: [] },
        ClientNotification: { oneOf: [] },
        ServerRequest: { oneOf: [] },
        ServerNotification: { oneOf: [] }
      }
    }
    Fs.writeFileSync(
      binary,
      `#!${process.execPath}
const fs = require("node:fs")
const path = require("node:path")
fs.writeFileSync(${JSON.stringify(envFile)}, JSON.stringify(process.env))
const out = process.argv[process.argv.indexOf("--out") + 1]
fs.mkdirSync(out, { recursive: true })
fs.writeFileSync(path.join(out, ${JSON.stringify(SchemaDump.BundleFile)}), ${JSON.stringify(JSON.stringify(bundle))})
`,
      { mode: 0o755 }
    )
    Fs.writeFileSync(Path.join(dir, "package.json"), JSON.stringify({ type: "commonjs" }))
    return { dir, binary, env: () => JSON.parse(Fs.readFileSync(envFile, "utf8")) as Record<string, string> }
  }),
  ({ dir }) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** These variables set in this process's environment while the scope is open. */
const parentEnv = (vars: Readonly<Record<string, string>>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const before = Object.fromEntries(Object.keys(vars).map((name) => [name, process.env[name]]))
      Object.assign(process.env, vars)
      return before
    }),
    (before) =>
      Effect.sync(() => {
        for (const [name, value] of Object.entries(before)) {
          if (value === undefined) delete process.env[name]
          else process.env[name] = value
        }
      })
  )

describe("SchemaDump.generate: the child's environment", () => {
  it.scopedLive(
    "by default: PATH, HOME and a private CODEX_HOME, nothing else of ours (no WARDEN_* variable, no secret)",
    () =>
      Effect.gen(function* () {
        const fake = yield* fakeCodex
        const secret = "schema-env-secret-0123456789"
        const other = "schema-env-other-value-9876543210"
        yield* parentEnv({
          WARDEN_NOTIFY_SECRET: secret,
          warden_lower: secret,
          HOOK_KEY: secret,
          SCHEMA_ENV_OTHER: other,
          CODEX_HOME: "/parent/codex-home"
        })

        const dump = yield* SchemaDump.generate(fake.binary)
        assert.deepStrictEqual(dump.clientRequestMethods, [])

        const env = fake.env()
        const expected = ["CODEX_HOME", ...["HOME", "PATH"].filter((name) => process.env[name] !== undefined)].sort()
        assert.deepStrictEqual(Object.keys(env).sort(), expected)
        assert.deepStrictEqual(
          Object.keys(env).filter((name) => name.toUpperCase().startsWith("WARDEN_")),
          []
        )
        if (process.env["PATH"] !== undefined) assert.strictEqual(env["PATH"], process.env["PATH"])
        if (process.env["HOME"] !== undefined) assert.strictEqual(env["HOME"], process.env["HOME"])
        // The private CODEX_HOME, not the parent's: a fresh directory under the temp directory.
        assert.notStrictEqual(env["CODEX_HOME"], "/parent/codex-home")
        assert.isTrue(env["CODEX_HOME"]!.startsWith(Path.join(Os.tmpdir(), "warden-codex-schema-")), env["CODEX_HOME"])
        // No value of the parent's environment beyond PATH and HOME, under any name.
        const parentValues = Object.entries(process.env)
          .filter(([name, value]) => name !== "PATH" && name !== "HOME" && value !== undefined && value !== "")
          .map(([, value]) => value!)
        for (const [name, value] of Object.entries(env)) {
          if (name === "PATH" || name === "HOME") continue
          assert.notInclude(parentValues, value, `${name} carries a value of the parent's environment`)
        }
        for (const value of Object.values(env)) {
          assert.notInclude(value, secret)
          assert.notInclude(value, other)
        }
      })
  )

  it.scopedLive("with env: that environment, as given, except CODEX_HOME (the private one) and undefined values", () =>
    Effect.gen(function* () {
      const fake = yield* fakeCodex
      yield* parentEnv({ SCHEMA_ENV_NOT_PASSED: "x" })
      yield* SchemaDump.generate(fake.binary, {
        env: { PATH: "/usr/bin:/bin", PASSED: "yes", CODEX_HOME: "/caller/codex-home", GONE: undefined }
      })
      const env = fake.env()
      assert.deepStrictEqual(Object.keys(env).sort(), ["CODEX_HOME", "PASSED", "PATH"])
      assert.deepStrictEqual({ PATH: env["PATH"], PASSED: env["PASSED"] }, { PATH: "/usr/bin:/bin", PASSED: "yes" })
      assert.notStrictEqual(env["CODEX_HOME"], "/caller/codex-home")
    })
  )
})
