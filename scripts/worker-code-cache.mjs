#!/usr/bin/env node
/**
 * Writes the V8 code cache of a worker's CommonJS bundle (`BUNDLE.v8cache`), for the ledger's
 * writer thread (`dist/ledger-writer.cjs`): packages/ledger/src/internal/WorkerScript.ts's
 * `Loader` compiles the bundle with it when it starts the thread (~30 ms of compiling less per
 * start). scripts/build.mjs runs it in a plain `node` without NODE_OPTIONS (V8 rejects a cache
 * made under other flags; then the thread compiles the bundle from its source, as without one).
 *
 *   node scripts/worker-code-cache.mjs apps/cli/dist/ledger-writer.cjs
 *
 * The bundle is compiled as the `Loader` compiles it (the same wrapper, its bare file name) and its
 * top level run here, on the main thread, where the writer starts nothing: what its top level
 * defines is compiled with it.
 */
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as Vm from "node:vm"

const script = Path.resolve(process.argv[2] ?? "")
// A string of its own (`basename` slices the whole path, and V8 would serialize what it slices).
const name = Buffer.from(Path.basename(script)).toString()
const compiled = new Vm.Script(
  `(function (exports, require, module, __filename, __dirname) {${Fs.readFileSync(script, "latin1")}\n})`,
  { filename: name }
)
const module = { exports: {} }
compiled
  .runInThisContext()
  .call(module.exports, module.exports, createRequire(script), module, script, Path.dirname(script))
const file = `${script}.v8cache`
const partial = `${file}.${process.pid}.partial`
Fs.writeFileSync(partial, compiled.createCachedData())
Fs.renameSync(partial, file)
