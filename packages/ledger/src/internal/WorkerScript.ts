/**
 * Where the ledger's writer thread (`WriterWorker`) is started from, if anywhere:
 *
 * - `WARDEN_LEDGER_WORKER` in the environment: a script's path, or `off` (the writer then runs on
 *   the main thread: what `Ledger.make` on any `SqlClient` does);
 * - else `ledger-writer.cjs` beside the running module: the CLI's bundle (`scripts/build.mjs`
 *   writes it next to `warden-run.cjs`);
 * - else `WriterWorker.js` beside this module: the built package (`dist/internal/`).
 *
 * Run from the TypeScript sources (tests, `pnpm warden`) neither file is there, so the writer runs
 * on the main thread unless the environment names a script (the test suite's set-up bundles one:
 * scripts/test-bundle.mjs).
 *
 * A CommonJS script with a V8 code cache beside it (`<script>.v8cache`, written by the build:
 * scripts/code-cache.mjs) is started through `Loader`, which compiles it with the cache (the
 * writer's bundle took ~30 ms of each thread's start to compile); any other script is started
 * as it is.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { besideModule } from "./Beside.js"

export const locate = (): string | undefined => {
  const named = process.env["WARDEN_LEDGER_WORKER"]
  if (named !== undefined && named !== "") return named === "off" ? undefined : Path.resolve(named)
  return besideModule(["./ledger-writer.cjs", "./WriterWorker.js"])[0]
}

/** The code cache beside `script`, if it is a CommonJS bundle that has one. */
export const cacheOf = (script: string): string | undefined => {
  if (!script.endsWith(".cjs")) return undefined
  const cache = `${script}.v8cache`
  return Fs.existsSync(cache) ? cache : undefined
}

/**
 * The worker's code when its script has a code cache (`new Worker(Loader, { eval: true, argv:
 * [script, cache] })`): the script compiled as Node compiles a CommonJS module, with the cache,
 * under its bare file name (the name the cache was written under: scripts/code-cache.mjs), then
 * run. A cache V8 rejects (another Node, other flags) is ignored: the script is compiled from its
 * source, as without one. The bundle is ASCII (the build checks it): read as Latin-1.
 */
export const Loader = `"use strict";
const Fs = require("node:fs");
const Path = require("node:path");
const Vm = require("node:vm");
const { createRequire } = require("node:module");
const [script, cache] = process.argv.slice(-2);
let cachedData;
try { cachedData = Fs.readFileSync(cache); } catch {}
const compiled = new Vm.Script(
  "(function (exports, require, module, __filename, __dirname) {" + Fs.readFileSync(script, "latin1") + "\\n})",
  { filename: Path.basename(script), cachedData }
);
globalThis.__wardenCodeCache = cachedData !== undefined && compiled.cachedDataRejected !== true;
const module = { exports: {} };
compiled.runInThisContext().call(module.exports, module.exports, createRequire(script), module, script, Path.dirname(script));
`
