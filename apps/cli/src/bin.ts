#!/usr/bin/env node
/**
 * The `warden` executable. It loads as little as the command line needs, because every module
 * loaded is start-up time paid before anything happens (docs/performance.md, "Start-up"):
 *
 * - `warden --version` is answered here, from package.json, without loading Effect;
 * - `warden run ...` runs RunCli.ts: the published CLI has it as one bundled, tree-shaken file
 *   beside this one (`warden-run.cjs` and its V8 code cache, made by `pnpm build`; CodeCache.ts);
 *   from the sources (tsx), or in a build without the bundle, the module itself;
 * - anything else (`demo`, `doctor`, `--help`, `--completions`, ...) runs the whole command tree
 *   (Cli.ts) on Main.ts, from the modules.
 *
 * The published executable is this file built as CommonJS (`dist/bin.cjs`, scripts/build.mjs):
 * Node starts a CommonJS entry ~10 ms sooner than an ES module one. So: no top-level await, and
 * the modules above are loaded with `import()`.
 */
import { fileURLToPath } from "node:url"
import * as CodeCache from "./startup/CodeCache.js"
import { version } from "./startup/Version.js"

type RunCli = typeof import("./startup/RunCli.js")

const args = process.argv.slice(2)

if (args.length === 1 && args[0] === "--version") {
  process.stdout.write(`${version}\n`)
} else if (args[0] === "run") {
  const bundled = CodeCache.load(fileURLToPath(new URL("./warden-run.cjs", import.meta.url)))
  if (bundled !== undefined) (bundled.exports as RunCli).start(process.argv)
  else void import("./startup/RunCli.js").then((RunCli) => RunCli.start(process.argv))
} else {
  void Promise.all([import("./startup/Main.js"), import("./startup/Cli.js")]).then(([Main, Cli]) =>
    Main.main(Cli.run, process.argv)
  )
}
