#!/usr/bin/env node
/**
 * The `warden` executable. It loads as little as the command line needs, because every module
 * loaded is start-up time paid before anything happens (docs/performance.md, "Start-up"):
 *
 * - `warden --version` is answered here, from package.json, without loading Effect;
 * - `warden run ...` runs RunCli.ts: the command tree with `run` alone, which loads nothing that
 *   `demo` and `doctor` need;
 * - anything else (`demo`, `doctor`, `--help`, `--completions`, ...) runs the whole command tree
 *   (Cli.ts) on Main.ts.
 *
 * No top-level await, and the modules above are loaded with `import()`.
 */
import { version } from "./Version.js"

const args = process.argv.slice(2)

if (args.length === 1 && args[0] === "--version") {
  process.stdout.write(`${version}\n`)
} else if (args[0] === "run") {
  void import("./RunCli.js").then((RunCli) => RunCli.start(process.argv))
} else {
  void Promise.all([import("./Main.js"), import("./Cli.js")]).then(([Main, Cli]) => Main.main(Cli.run, process.argv))
}
