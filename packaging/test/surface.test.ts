/**
 * The public surface, deliberately (issue 13): each library's `src/index.ts` names its public
 * modules; implementation lives under `src/internal/` and is not exported by the published
 * package; every public export carries TSDoc; docs/api.md is generated from the same sources and
 * must not be stale (`pnpm api` rewrites it).
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Outside from "./support/Outside.js"

const { repoRoot } = Outside
const libraries = [
  "packages/json",
  "packages/transport",
  "packages/protocol",
  "packages/approvals",
  "packages/supervisor",
  "packages/ledger",
  "packages/inbox",
  "packages/observability",
  "packages/cluster",
  "packages/testkit"
]

describe("the public surface", () => {
  it("docs/api.md is current and every public export has TSDoc (scripts/api.mjs --check)", async () => {
    // Waited for asynchronously: the worker must keep answering vitest's RPC meanwhile.
    const run = await new Promise<{ status: number | null; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [Path.join(repoRoot, "scripts", "api.mjs"), "--check"],
        { cwd: repoRoot, encoding: "utf8" },
        (error, _stdout, stderr) =>
          resolve({ status: error === null ? 0 : typeof error.code === "number" ? error.code : null, stderr })
      )
    )
    assert.strictEqual(run.status, 0, run.stderr)
  })

  for (const dir of libraries) {
    it(`${dir}: the published manifest exports no internal module, and index.ts names none`, () => {
      const manifest = JSON.parse(Fs.readFileSync(Path.join(repoRoot, dir, "package.json"), "utf8"))
      const published = JSON.stringify(manifest.publishConfig?.exports ?? {})
      assert.notInclude(published, "internal", `${manifest.name} publishes an internal path: ${published}`)
      const index = Fs.readFileSync(Path.join(repoRoot, dir, "src", "index.ts"), "utf8")
      const fromInternal = index.split("\n").filter((l) => /^export\s/.test(l) && l.includes("/internal/"))
      assert.deepStrictEqual(fromInternal, [], `${manifest.name}'s index.ts exports internal modules`)
    })
  }

  it("apps/cli is an app: it exports nothing but its package.json, in the workspace and as published", () => {
    const manifest = JSON.parse(Fs.readFileSync(Path.join(repoRoot, "apps/cli", "package.json"), "utf8"))
    const only = { "./package.json": "./package.json" }
    assert.deepStrictEqual(manifest.exports, only)
    assert.deepStrictEqual(manifest.publishConfig?.exports, only)
    for (const key of ["main", "types", "module"]) {
      assert.isUndefined(manifest[key], key)
      assert.isUndefined(manifest.publishConfig?.[key], `publishConfig.${key}`)
    }
    assert.isFalse(
      Fs.existsSync(Path.join(repoRoot, "apps/cli", "src", "index.ts")),
      "apps/cli/src/index.ts would be read as a public surface"
    )
  })

  it("the test kit exports what embedders test with; the repository's own test harnesses are not published", () => {
    const index = Fs.readFileSync(Path.join(repoRoot, "packages/testkit/src/index.ts"), "utf8")
    const modules = [...index.matchAll(/^export \* as (\w+) from/gm)].map((m) => m[1]).sort()
    // Removing one of these is a breaking change (CHANGELOG.md); a harness only Warden's own tests
    // use (a throwaway PostgreSQL, an OTLP receiver) belongs in @warden/test-support instead.
    assert.deepStrictEqual(modules, [
      "Adversarial",
      "FakeAppServer",
      "McpServer",
      "PinnedSchema",
      "ProcessTree",
      "RealCodex",
      "ScriptedModel",
      "Step",
      "TestProcess",
      "TranscriptReplay",
      "WokenWait"
    ])
    const support = JSON.parse(Fs.readFileSync(Path.join(repoRoot, "packages/test-support/package.json"), "utf8"))
    assert.strictEqual(support.name, "@warden/test-support")
    assert.isTrue(support.private, "@warden/test-support must stay private")
    assert.notInclude(libraries, "packages/test-support")
    // Built and packed are the packages scripts/build.mjs lists as published; no published manifest names it.
    const published = /export const published = (\[[^\]]*\])/.exec(
      Fs.readFileSync(Path.join(repoRoot, "scripts/build.mjs"), "utf8")
    )
    assert.isNotNull(published, "scripts/build.mjs: the published list")
    const dirs = JSON.parse(published![1]!) as ReadonlyArray<string>
    assert.notInclude(dirs, "packages/test-support")
    for (const dir of dirs) {
      const manifest = JSON.parse(Fs.readFileSync(Path.join(repoRoot, dir, "package.json"), "utf8"))
      for (const field of ["dependencies", "peerDependencies", "optionalDependencies", "devDependencies"]) {
        assert.notProperty(manifest[field] ?? {}, "@warden/test-support", `${manifest.name} ${field}`)
      }
    }
  })

  it("the public modules of a library import nothing from another package's internals", () => {
    const offenders: Array<string> = []
    for (const dir of [...libraries, "apps/cli"]) {
      const src = Path.join(repoRoot, dir, "src")
      for (const entry of Fs.readdirSync(src, { recursive: true, withFileTypes: true })) {
        if (!entry.isFile() || !entry.name.endsWith(".ts")) continue
        const file = Path.join(entry.parentPath, entry.name)
        const text = Fs.readFileSync(file, "utf8")
        if (/from\s+["']@warden\/[a-z]+\/internal\//.test(text)) offenders.push(Path.relative(repoRoot, file))
      }
    }
    assert.deepStrictEqual(offenders, [], "published code must not use the workspace-only ./internal/* subpaths")
  })
})
