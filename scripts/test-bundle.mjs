/**
 * Vitest's global set-up (vitest.config.ts): before any test file runs, the `warden` CLI is
 * compiled from its TypeScript sources into one ES module,
 * `apps/cli/node_modules/.cache/warden-test/bin.mjs`, which the CLI tests start with plain `node`
 * (apps/cli/test/support/CliProcess.ts) instead of `tsx apps/cli/src/bin.ts`.
 *
 * Why: through tsx every start of `warden` resolves and loads its ~1,400 modules through tsx's
 * loader hooks, about 3.4 s of CPU on the 2-core machine, and the suite starts `warden` well over a
 * hundred times; the same sources as one file start in about 0.3 s (docs/testing.md, "The CLI
 * under test").
 *
 * What stays the same: the sources are the working tree's, compiled by esbuild (the compiler tsx
 * runs on each file) at the start of every vitest run, so the bundle is never older than the
 * sources. `import.meta.url` in Warden's own sources is replaced by the URL of the source file it
 * appears in, so files found relative to a module (package.json, the test kit's MCP server
 * script, fixtures, `warden-run.cjs`) are found where tsx finds them. Dependencies resolve from
 * the workspace's node_modules as they do for tsx; the native SQLite driver and ws's optional
 * helpers stay outside, loaded from node_modules. The demo's test still starts `warden` through
 * tsx, as `pnpm demo` and `pnpm warden` do (apps/cli/test/demo-doctor.test.ts).
 */
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const cliDir = Path.join(root, "apps", "cli")

/** Where the bundle is written (inside apps/cli, so `better-sqlite3` resolves from its node_modules). */
export const bundlePath = Path.join(cliDir, "node_modules", ".cache", "warden-test", "bin.mjs")

/** `import.meta.url` in a workspace source: the URL of that source, as under tsx. */
const sourceUrls = {
  name: "source-urls",
  setup(build) {
    build.onLoad({ filter: /\.ts$/, namespace: "file" }, async (args) => {
      if (args.path.includes(`${Path.sep}node_modules${Path.sep}`)) return undefined
      const source = await Fs.promises.readFile(args.path, "utf8")
      if (!source.includes("import.meta.url")) return undefined
      return {
        contents: source.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)),
        loader: "ts"
      }
    })
  }
}

/**
 * Compiles a source entry and what it imports into one ES module at `outfile`, atomically: the
 * native SQLite driver and ws's optional helpers stay outside, loaded from node_modules.
 */
const bundleSources = async (entry, outfile, format = "esm") => {
  const esbuild = createRequire(Path.join(cliDir, "package.json"))("esbuild")
  Fs.mkdirSync(Path.dirname(outfile), { recursive: true })
  const temp = `${outfile}.${process.pid}.tmp`
  await esbuild.build({
    entryPoints: [entry],
    outfile: temp,
    bundle: true,
    platform: "node",
    format,
    target: "node20",
    // CommonJS dependencies call require(): give an ES module one.
    ...(format === "esm"
      ? {
          banner: {
            js: "import { createRequire as __wardenRequire } from 'node:module'; const require = __wardenRequire(import.meta.url);"
          }
        }
      : {}),
    external: ["better-sqlite3", "bufferutil", "utf-8-validate"],
    plugins: [sourceUrls],
    logLevel: "error"
  })
  Fs.renameSync(temp, outfile)
  return outfile
}

/** Compiles the CLI (apps/cli/src/bin.ts) into `bundlePath`; returns the path. */
export const bundleCli = () => bundleSources(Path.join(cliDir, "src", "bin.ts"), bundlePath)

/** The answer journal's native module, as packages/ledger/native/build.mjs writes it. */
export const nativeJournalPath = Path.join(root, "packages", "ledger", "build", "warden-journal.node")

/**
 * The ledger's writer thread (packages/ledger/src/internal/WriterWorker.ts) as one file: a worker
 * cannot load the TypeScript sources (tsx's hooks do not reach a worker on Node 20), so the suite
 * names this bundle in `WARDEN_LEDGER_WORKER` (read by the ledger's WorkerScript.ts) for every test
 * and every `warden` it starts: the ledgers of the tests write on a thread, as a built Warden's do.
 * CommonJS with its code cache beside it, as the CLI's build makes `dist/ledger-writer.cjs`: each
 * thread starts through the ledger's `Loader`, as a built Warden's does (a process whose V8 flags
 * differ from this one's compiles it from its source instead).
 */
export const workerBundlePath = Path.join(cliDir, "node_modules", ".cache", "warden-test", "ledger-writer.cjs")

/** Compiles the ledger's writer thread into `workerBundlePath` and writes its code cache; returns the path. */
export const bundleLedgerWorker = async () => {
  const bundle = await bundleSources(
    Path.join(root, "packages", "ledger", "src", "internal", "WriterWorker.ts"),
    workerBundlePath,
    "cjs"
  )
  const env = { ...process.env }
  delete env["NODE_OPTIONS"]
  // A child of its own, waited for without holding this process's event loop (the CLI's bundle is
  // made meanwhile).
  await new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [Path.join(root, "scripts", "worker-code-cache.mjs"), bundle],
      { env },
      (error, _, stderr) =>
        error ? reject(new Error(`writing the code cache of ${bundle} failed: ${stderr || error.message}`)) : resolve()
    )
  })
  return bundle
}

/** Vitest global set-up. */
export const setup = async () => {
  await Promise.all([bundleCli(), bundleLedgerWorker()])
  process.env["WARDEN_LEDGER_WORKER"] = workerBundlePath
  // The answer journal's mapped file (packages/ledger/native, built by `pnpm install` and `pnpm
  // test`): the bundles above are not beside it, so every test and every `warden` they start is
  // told where it is, as a built Warden finds it beside its bundle. Not built: the journals append
  // with write(2), and the ledger's JournalFile tests say it is missing.
  if (Fs.existsSync(nativeJournalPath)) process.env["WARDEN_JOURNAL_NATIVE"] = nativeJournalPath
}
