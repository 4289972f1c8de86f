/**
 * The writer thread's start with the code cache the build writes beside a CommonJS bundle
 * (`WorkerScript.Loader`, scripts/worker-code-cache.mjs): the script compiled with the cache when
 * V8 takes it, from its source when it does not, and run either way.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"
import * as WorkerScript from "../src/internal/WorkerScript.js"
import { tempDir } from "./support.js"

const root = fileURLToPath(new URL("../../../", import.meta.url))

/** A CommonJS script that says, from its thread, whether the loader compiled it from the cache. */
const probe = `"use strict";
const { parentPort, isMainThread } = require("node:worker_threads");
const sum = (n) => { let s = 0; for (let i = 1; i <= n; i++) s += i; return s };
if (!isMainThread) parentPort.postMessage({ cached: globalThis.__wardenCodeCache, file: __filename, dir: __dirname, sum: sum(10) });
`

/** What the probe says when the loader starts it. */
const started = (script: string, cache: string) =>
  Effect.async<{ readonly cached: boolean; readonly file: string; readonly dir: string; readonly sum: number }, Error>(
    (resume) => {
      const worker = new Worker(WorkerScript.Loader, { eval: true, argv: [script, cache], stdout: true })
      worker.on("message", (message) => {
        resume(Effect.succeed(message))
        void worker.terminate()
      })
      worker.on("error", (error) => resume(Effect.fail(error)))
      return Effect.promise(() => worker.terminate())
    }
  )

/** The build's step: the cache of `script` beside it, written by a plain `node` (this process's V8 flags). */
const writeCache = (script: string) => {
  const env = { ...process.env }
  delete env["NODE_OPTIONS"]
  const ran = spawnSync(
    process.execPath,
    [...process.execArgv, Path.join(root, "scripts", "worker-code-cache.mjs"), script],
    { env, encoding: "utf8" }
  )
  assert.strictEqual(ran.status, 0, ran.stderr)
}

describe("the writer thread's loader and code cache", () => {
  it.scoped("a CommonJS script with the cache beside it is compiled from it, and runs as a module", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const script = Path.join(dir, "probe.cjs")
      Fs.writeFileSync(script, probe)
      assert.isUndefined(WorkerScript.cacheOf(script), "no cache yet")
      writeCache(script)
      const cache = WorkerScript.cacheOf(script)
      assert.strictEqual(cache, `${script}.v8cache`)
      const said = yield* started(script, cache!)
      assert.deepStrictEqual(said, { cached: true, file: script, dir, sum: 55 })
    })
  )

  it.scoped("a cache V8 does not take (another script's) is ignored: the script runs from its source", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const script = Path.join(dir, "probe.cjs")
      const other = Path.join(dir, "other.cjs")
      Fs.writeFileSync(script, probe)
      Fs.writeFileSync(other, `${probe}\n// another script, another cache\n`)
      writeCache(other)
      const said = yield* started(script, `${other}.v8cache`)
      assert.deepStrictEqual(said, { cached: false, file: script, dir, sum: 55 })
      // And no cache file at all: the same.
      const none = yield* started(script, Path.join(dir, "missing.v8cache"))
      assert.strictEqual(none.cached, false)
      assert.strictEqual(none.sum, 55)
    })
  )

  it.scoped("a script that is not there ends the thread with an error (the ledger's main thread takes over)", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const ended = yield* Effect.either(started(Path.join(dir, "gone.cjs"), Path.join(dir, "gone.cjs.v8cache")))
      assert.isTrue(ended._tag === "Left" && /ENOENT/.test(ended.left.message), String(ended))
    })
  )

  it("only a CommonJS bundle is started through the loader (an ES module is started as it is)", () => {
    const dir = Fs.mkdtempSync(Path.join(Fs.realpathSync(process.env["TMPDIR"] ?? "/tmp"), "warden-loader-"))
    try {
      const esm = Path.join(dir, "writer.mjs")
      Fs.writeFileSync(esm, "export {}\n")
      Fs.writeFileSync(`${esm}.v8cache`, "not for it")
      assert.isUndefined(WorkerScript.cacheOf(esm))
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
