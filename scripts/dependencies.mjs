/**
 * `pnpm deps` (and the second step of `pnpm test`): the dependency check. dependency-cruiser reads
 * every module under packages/<name>/src and apps/cli/src, and under the tests, benchmarks and
 * examples, follows its imports (workspace packages through their `exports`, `./X.js` to `./X.ts`)
 * and fails on what .dependency-cruiser.cjs forbids: a runtime import cycle, a break of the
 * layering of docs/architecture.md ("Layering"), a source importing the test helpers
 * (@warden/test-support), and a test importing another package's test folder.
 *
 *   node scripts/dependencies.mjs              check this repository
 *   node scripts/dependencies.mjs --root DIR   check the tree at DIR with this repository's rules
 *                                              (packaging/test/dependencies.test.ts breaks a rule
 *                                              on purpose in a copy and checks that this fails)
 *
 * Exits 0 when nothing is forbidden, 1 with one line per violation (rule, from, to) otherwise.
 */
import { cruise } from "dependency-cruiser"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const repoRoot = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const config = createRequire(import.meta.url)(Path.join(repoRoot, ".dependency-cruiser.cjs"))

const args = process.argv.slice(2)
const rootAt = args.indexOf("--root")
const root = rootAt >= 0 && args[rootAt + 1] !== undefined ? Path.resolve(args[rootAt + 1]) : repoRoot

const packages = Fs.readdirSync(Path.join(root, "packages"), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => `packages/${entry.name}`)
  .sort()
/** The layered sources (every package's src and the CLI's), then the tests, benchmarks and examples (not layered). */
const inputs = [
  ...packages.map((dir) => `${dir}/src`),
  "apps/cli/src",
  ...packages.map((dir) => `${dir}/test`),
  "apps/cli/test",
  "bench",
  "examples",
  "packaging/test"
].filter((dir) => Fs.existsSync(Path.join(root, dir)))

// dependency-cruiser names modules relative to the working directory.
process.chdir(root)
const started = performance.now()
const result = await cruise(inputs, {
  ...config.options,
  ruleSet: { forbidden: config.forbidden },
  validate: true,
  outputType: "err"
})
const output = typeof result.output === "string" ? result.output.trim() : ""
const seconds = ((performance.now() - started) / 1000).toFixed(1)
if (result.exitCode === 0) {
  console.log(`dependency check: ${output.replace(/^✔\s*/, "")} in ${seconds} s`)
} else {
  console.error(output)
  console.error(
    `\ndependency check failed: the rules are in .dependency-cruiser.cjs, the layering in docs/architecture.md ("Layering")`
  )
  process.exitCode = 1
}
