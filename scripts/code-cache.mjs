#!/usr/bin/env node
/**
 * Writes the V8 code cache of the bundled `warden run` (`BUNDLE.v8cache`); scripts/build.mjs runs
 * it in a plain `node` without NODE_OPTIONS (V8 rejects a cache made under other flags).
 *
 *   node scripts/code-cache.mjs apps/cli/dist/warden-run.cjs
 *
 * It compiles the bundle as bin.cjs loads it (apps/cli/src/startup/CodeCache.ts) and runs `warden
 * run` up to the spawn of codex, then writes what V8 has compiled by then: the modules' top level
 * and every function start-up runs (a cache of the top level alone left those to be compiled at
 * every start, ~15 % of the time to the spawn). Nothing is spawned: the process exits there.
 */
import { ChildProcess } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"

const bundle = Path.resolve(process.argv[2] ?? "")
const CodeCache = await import(pathToFileURL(Path.join(Path.dirname(bundle), "startup", "CodeCache.js")).href)
// The script is named by the bare file name (a cache holds its script's name, and the package must
// not carry the build's path), copied into a string of its own: `basename` returns a slice of the
// whole path, and V8 would serialize the string it slices.
const name = Buffer.from(Path.basename(bundle)).toString()
const script = CodeCache.compile(CodeCache.read(bundle), name)
const RunCli = CodeCache.evaluate(script, bundle)
const cwd = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-code-cache-"))

let written = false
let refused = false
ChildProcess.prototype.spawn = () => {
  const early = globalThis.__wardenLazyLoaded ?? []
  if (early.length > 0) {
    process.stderr.write(
      `code-cache: ${early.join(", ")} ran before codex was spawned, but the build loads it on first use to spare the start-up (scripts/build.mjs, lazyWorkspace): use it later, or take it off that list\n`
    )
    refused = true
    process.exit(1)
  }
  const file = CodeCache.cacheFile(bundle)
  const partial = `${file}.${process.pid}.partial`
  Fs.writeFileSync(partial, script.createCachedData())
  Fs.renameSync(partial, file)
  written = true
  Fs.rmSync(cwd, { recursive: true, force: true })
  process.exit(0)
}
process.on("exit", () => {
  Fs.rmSync(cwd, { recursive: true, force: true })
  if (written || refused) return
  process.stderr.write(`code-cache: warden run ended before it spawned codex; no cache written for ${bundle}\n`)
  process.exitCode = 1
})
// Any executable passes for codex (it is never started): this node.
RunCli.start([
  "node",
  "warden",
  "run",
  "--codex",
  process.execPath,
  "--cwd",
  cwd,
  "--restarts",
  "0",
  "--approvals",
  "deny",
  "warm-up"
])
