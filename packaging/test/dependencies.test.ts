/**
 * The dependency check (`pnpm deps`, scripts/dependencies.mjs, rules in .dependency-cruiser.cjs)
 * passes on this repository, and fails when a rule is broken on purpose.
 *
 * The broken trees are copies: every package's package.json and src (and the CLI's), linked as
 * pnpm links the workspace (`node_modules/@warden/NAME` -> the copy's package), so that a workspace
 * import resolves inside the copy the way it does here. The real tree is never touched. Third-party
 * imports (effect, ...) do not resolve in the copy; no rule reads them.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Outside from "./support/Outside.js"

const { repoRoot } = Outside
const script = Path.join(repoRoot, "scripts", "dependencies.mjs")
/** One check reads ~150 modules: a few seconds of CPU, longer on a busy 2-core machine. */
const timeout = 180_000

/**
 * The checker as a child process, waited for asynchronously: a synchronous wait would hold this
 * worker's event loop for the whole check (a minute or more beside another suite), and vitest
 * fails a run whose worker cannot answer its RPC (`Timeout calling "onTaskUpdate"`).
 */
const check = (root?: string) =>
  new Promise<{ status: number | null; output: string }>((resolve) => {
    execFile(
      process.execPath,
      [script, ...(root === undefined ? [] : ["--root", root])],
      { cwd: repoRoot, encoding: "utf8", timeout: timeout - 10_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const status = error === null ? 0 : typeof error.code === "number" ? error.code : null
        resolve({ status, output: `${stdout}${stderr}` })
      }
    )
  })

/** A copy of the layered sources, with `files` (path -> text) added to it. */
const brokenCopy = (files: Readonly<Record<string, string>>) => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-deps-"))
  const links = Path.join(dir, "node_modules", "@warden")
  Fs.mkdirSync(links, { recursive: true })
  const packages = Fs.readdirSync(Path.join(repoRoot, "packages")).map((name) => `packages/${name}`)
  for (const pkg of [...packages, "apps/cli"]) {
    const manifest = Path.join(repoRoot, pkg, "package.json")
    if (!Fs.existsSync(manifest) || !Fs.existsSync(Path.join(repoRoot, pkg, "src"))) continue
    Fs.mkdirSync(Path.join(dir, pkg), { recursive: true })
    Fs.copyFileSync(manifest, Path.join(dir, pkg, "package.json"))
    Fs.cpSync(Path.join(repoRoot, pkg, "src"), Path.join(dir, pkg, "src"), { recursive: true })
    const name = (JSON.parse(Fs.readFileSync(manifest, "utf8")) as { name: string }).name
    Fs.symlinkSync(Path.relative(links, Path.join(dir, pkg)), Path.join(links, name.replace(/^@warden\//, "")))
  }
  Fs.writeFileSync(Path.join(dir, "package.json"), JSON.stringify({ name: "warden-copy", private: true }))
  for (const [file, text] of Object.entries(files)) {
    Fs.mkdirSync(Path.dirname(Path.join(dir, file)), { recursive: true })
    Fs.writeFileSync(Path.join(dir, file), text)
  }
  return { dir, remove: () => Fs.rmSync(dir, { recursive: true, force: true }) }
}

describe("the dependency check", () => {
  it(
    "passes on this repository",
    async () => {
      const { output, status } = await check()
      assert.strictEqual(status, 0, output)
      assert.match(output, /no dependency violations found/)
    },
    timeout
  )

  it(
    "fails when a layering rule is broken, a runtime cycle is made, a foreign internal or test folder is imported, or a source imports the test helpers",
    async () => {
      const copy = brokenCopy({
        // approvals never imports the supervisor
        "packages/approvals/src/Broken.ts":
          'import { Supervisor } from "@warden/supervisor"\nexport const broken = Supervisor\n',
        // the protocol never imports the transport, not even a type
        "packages/protocol/src/Broken.ts":
          'import type { Transport } from "@warden/transport"\nexport type Broken = Transport.Transport\n',
        // the JSON helpers import no other Warden package, the protocol included (a relative path too)
        "packages/json/src/Broken.ts": 'import "../../protocol/src/Json.js"\n',
        // the inbox never imports the CLI, by a relative path either
        "packages/inbox/src/Broken.ts": 'import "../../../apps/cli/src/bin.js"\n',
        // a runtime cycle
        "packages/supervisor/src/CycleA.ts": 'import { b } from "./CycleB.js"\nexport const a = () => b\n',
        "packages/supervisor/src/CycleB.ts": 'import { a } from "./CycleA.js"\nexport const b = () => a\n',
        // a cycle closed by a type-only import is no runtime cycle: allowed
        "packages/supervisor/src/TypeCycleA.ts":
          'import type { d } from "./TypeCycleB.js"\nexport const c = 1 as unknown as typeof d\n',
        "packages/supervisor/src/TypeCycleB.ts": 'import { c } from "./TypeCycleA.js"\nexport const d = c\n',
        // another package's src/internal
        "packages/ledger/src/Broken.ts":
          'import * as PendingCard from "@warden/approvals/internal/PendingCard"\nexport const broken = PendingCard\n',
        // another package's test folder, from a test
        "packages/approvals/test/Helper.ts": "export const helper = 1\n",
        "packages/ledger/test/Broken.test.ts":
          'import { helper } from "../../approvals/test/Helper.js"\nexport const broken = helper\n',
        // a test's own test folder and the test helpers: allowed
        "packages/ledger/test/Fine.test.ts":
          'import { helper } from "./Local.js"\nimport { yieldNow } from "@warden/test-support/EventLoop"\nexport const fine = [helper, yieldNow]\n',
        "packages/ledger/test/Local.ts": "export const helper = 2\n",
        // the test helpers, from a package's sources
        "packages/supervisor/src/Broken.ts":
          'import { yieldNow } from "@warden/test-support/EventLoop"\nexport const broken = yieldNow\n'
      })
      try {
        const { output, status } = await check(copy.dir)
        assert.strictEqual(status, 1, output)
        const violations = output
          .split("\n")
          .filter((line) => /^\s*error /.test(line))
          .map((line) => line.trim())
        for (const expected of [
          "error approvals-below-the-engine: packages/approvals/src/Broken.ts → packages/supervisor/src/index.ts",
          "error inbox-without-the-cli: packages/inbox/src/Broken.ts → apps/cli/src/bin.ts",
          "error no-foreign-internal: packages/ledger/src/Broken.ts → packages/approvals/src/internal/PendingCard.ts",
          "error json-is-the-bottom: packages/json/src/Broken.ts → packages/protocol/src/Json.ts",
          "error protocol-is-pure-data: packages/protocol/src/Broken.ts → packages/transport/src/index.ts",
          "error no-test-folder-imports: packages/ledger/test/Broken.test.ts → packages/approvals/test/Helper.ts",
          "error no-test-support-in-src: packages/supervisor/src/Broken.ts → packages/test-support/src/EventLoop.ts"
        ])
          assert.include(violations, expected, output)
        assert.isTrue(
          violations.some((line) => /^error no-runtime-cycle: packages\/supervisor\/src\/Cycle[AB]\.ts/.test(line)),
          output
        )
        assert.strictEqual(violations.length, 8, output)
        assert.notInclude(output, "TypeCycle")
        assert.notInclude(output, "Fine.test.ts")
      } finally {
        copy.remove()
      }
    },
    timeout
  )
})
