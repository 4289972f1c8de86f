#!/usr/bin/env node
/**
 * `pnpm build`: compiles every published package (packages/* and apps/cli) to ESM JavaScript,
 * `.d.ts` and source maps in its `dist/` with the workspace's TypeScript (`tsc -b
 * tsconfig.build.json`), then copies the runtime files tsc does not emit (`.mjs`, `.cjs`, `.json`
 * under `src/`, e.g. the test kit's MCP server script) beside the compiled modules. When the CLI is
 * built, it also makes its executable, `apps/cli/dist/bin.cjs`, and `warden run` as one
 * tree-shaken file with its V8 code cache (`dist/warden-run.cjs` and `.v8cache`): see bundleCli
 * below and apps/cli/src/bin.ts.
 *
 *   node scripts/build.mjs            the whole workspace (tsconfig.build.json at the root)
 *   node scripts/build.mjs DIR...     these packages (and, through project references, what they use)
 *   node scripts/build.mjs --clean    remove every published package's dist/
 *
 * Development needs none of this: tests, `pnpm warden` and `tsc -b` read the TypeScript sources.
 */
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import { builtinModules, createRequire } from "node:module"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")

/** The packages `pnpm build` produces (each has a tsconfig.build.json). */
export const published = [
  "packages/json",
  "packages/transport",
  "packages/protocol",
  "packages/approvals",
  "packages/supervisor",
  "packages/testkit",
  "packages/ledger",
  "packages/inbox",
  "packages/observability",
  "packages/cluster",
  "apps/cli"
]

const assetExtensions = new Set([".mjs", ".cjs", ".json"])

const copyAssets = (dir) => {
  const src = Path.join(root, dir, "src")
  const dist = Path.join(root, dir, "dist")
  if (!Fs.existsSync(dist)) return
  for (const entry of Fs.readdirSync(src, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !assetExtensions.has(Path.extname(entry.name))) continue
    const from = Path.join(entry.parentPath ?? entry.path, entry.name)
    const to = Path.join(dist, Path.relative(src, from))
    Fs.mkdirSync(Path.dirname(to), { recursive: true })
    Fs.copyFileSync(from, to)
    Fs.chmodSync(to, Fs.statSync(from).mode)
  }
}

const cliDir = Path.join(root, "apps", "cli")

const stripComments = (text) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/[^\n]*/g, "")

/**
 * What a barrel module (`index.js` of effect, @effect/cli, the Warden packages) re-exports, by
 * name: `export * as Name from "./Name.js"` (a namespace) and `export { a, b as c } from "./F.js"`
 * (named). Undefined when the file has anything else (then imports from it are left alone).
 */
const barrelExports = (file) => {
  const text = stripComments(Fs.readFileSync(file, "utf8"))
  const names = new Map()
  let rest = text
  rest = rest.replace(/export\s*\*\s*as\s+([\w$]+)\s+from\s*["']([^"']+)["']\s*;?/g, (_, name, from) => {
    names.set(name, { from, kind: "namespace" })
    return ""
  })
  rest = rest.replace(/export\s*\{([^}]*)\}\s*from\s*["']([^"']+)["']\s*;?/g, (_, list, from) => {
    for (const spec of list
      .split(",")
      .map((x) => x.trim())
      .filter((x) => x.length > 0)) {
      const [name, alias] = spec.split(/\s+as\s+/)
      names.set(alias ?? name, { from, kind: "named", name })
    }
    return ""
  })
  return rest.trim() === "" ? names : undefined
}

/**
 * An esbuild plugin: in Warden's own sources, `import { Effect, Schema } from "effect"` (and the
 * same from @effect/cli or a Warden package) becomes `import * as Effect from ".../Effect.js"`,
 * one deep import per name. The same bindings, but esbuild can tree-shake a namespace import that
 * is only read by property, and not one reached through a barrel's `export * as`: through the
 * barrels the bundle kept every export of Schema, Effect, ... and ran their whole top level.
 */
/**
 * An esbuild plugin: @effect/cli's prompt modules each render the terminal bell at their top level
 * (`Doc.render(Doc.beep, { style: "pretty" })`, a document layout run through Effect: six of them
 * at every start of `warden run`, which prompts for nothing through them). The result is a
 * constant string: the build renders it once with the same @effect/printer-ansi and writes it in.
 * A prompt module that renders the bell in another way (another @effect/cli) fails the build, so
 * the fold is never silently wrong.
 */
const foldedBell = {
  name: "folded-bell",
  setup(build) {
    const rendered = /const renderBeep = \/\*#__PURE__\*\/Doc\.render\(Doc\.beep, \{\s*style: "pretty"\s*\}\);/
    let bell
    build.onLoad(
      { filter: /[\\/]@effect[\\/]cli[\\/]dist[\\/]esm[\\/]internal[\\/]prompt[\\/][^\\/]+\.js$/, namespace: "file" },
      async (args) => {
        const text = Fs.readFileSync(args.path, "utf8")
        if (!text.includes("renderBeep")) return undefined
        if (!rendered.test(text))
          throw new Error(
            `${args.path}: renders the bell in a way the folded-bell plugin (scripts/build.mjs) does not know`
          )
        if (bell === undefined) {
          const Doc = await import(pathToFileURL(createRequire(args.path).resolve("@effect/printer-ansi/AnsiDoc")).href)
          bell = Doc.render(Doc.beep, { style: "pretty" })
          if (typeof bell !== "string") throw new Error("folded-bell: the rendered bell is not a string")
        }
        return {
          contents: text.replace(rendered, `const renderBeep = ${JSON.stringify(bell)};`),
          loader: "js",
          resolveDir: Path.dirname(args.path)
        }
      }
    )
  }
}

const deepImports = {
  name: "deep-imports",
  setup(build) {
    const barrels = new Map()
    const barrelOf = async (spec, resolveDir) => {
      const resolved = await build.resolve(spec, { resolveDir, kind: "import-statement" })
      if (resolved.errors.length > 0 || resolved.external || resolved.path === "" || resolved.namespace !== "file")
        return undefined
      if (!barrels.has(resolved.path)) barrels.set(resolved.path, barrelExports(resolved.path))
      const exports = barrels.get(resolved.path)
      return exports === undefined ? undefined : { file: resolved.path, exports }
    }
    build.onLoad({ filter: /\.ts$/, namespace: "file" }, async (args) => {
      if (args.path.includes(`${Path.sep}node_modules${Path.sep}`)) return undefined
      const source = await Fs.promises.readFile(args.path, "utf8")
      const resolveDir = Path.dirname(args.path)
      const pattern = /^import\s*\{([^}]*)\}\s*from\s*"([^".][^"]*)"\s*;?[ \t]*$/gm
      const replacements = []
      for (const match of source.matchAll(pattern)) {
        const [statement, list, spec] = match
        const barrel = await barrelOf(spec, resolveDir)
        if (barrel === undefined) continue
        const imports = []
        let ok = true
        for (const item of list
          .split(",")
          .map((x) => x.trim())
          .filter((x) => x.length > 0)) {
          if (item.startsWith("type ")) continue
          const [name, alias] = item.split(/\s+as\s+/)
          const target = barrel.exports.get(name)
          if (target === undefined) {
            ok = false
            break
          }
          const file = (
            await build.resolve(target.from, { resolveDir: Path.dirname(barrel.file), kind: "import-statement" })
          ).path
          imports.push(
            target.kind === "namespace"
              ? `import * as ${alias ?? name} from ${JSON.stringify(file)};`
              : `import { ${target.name} as ${alias ?? name} } from ${JSON.stringify(file)};`
          )
        }
        if (ok) replacements.push([statement, imports.join(" ")])
      }
      let contents = source
      for (const [from, to] of replacements) contents = contents.replace(from, () => to)
      return { contents, loader: "ts", resolveDir }
    })
  }
}

/**
 * An esbuild plugin: these modules are loaded on first use instead of where they are imported.
 * Each import of one gets a stand-in whose exports (the same names, read from the real module
 * here) are getters that require the real module when first read. For modules the start-up of
 * `warden run` imports but does not use: YAML for `--rules` files (and @effect/cli's config
 * files, with TOML and INI), node:crypto for @effect/platform's temporary file names.
 */
const lazyModules = (specifiers) => ({
  name: "lazy-modules",
  setup(build) {
    const filter = new RegExp(`^(${specifiers.map((s) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")).join("|")})$`)
    build.onResolve({ filter }, (args) =>
      args.namespace === "lazy"
        ? undefined
        : { path: args.path, namespace: "lazy", pluginData: { resolveDir: args.resolveDir } }
    )
    build.onLoad({ filter: /.*/, namespace: "lazy" }, async (args) => {
      const resolveDir = args.pluginData.resolveDir
      const real = args.path.startsWith("node:")
        ? args.path
        : (await build.resolve(args.path, { resolveDir, kind: "require-call" })).path
      const names = Object.keys(createRequire(Path.join(resolveDir, "noop.js"))(real)).filter(
        (n) => n !== "default" && n !== "__esModule"
      )
      return {
        resolveDir,
        loader: "js",
        contents: [
          "let real",
          `const load = () => real ??= require(${JSON.stringify(args.path)})`,
          `for (const name of ${JSON.stringify(names)}) Object.defineProperty(exports, name, { enumerable: true, get: () => load()[name] })`
        ].join("\n")
      }
    })
  }
})

/** The value exports of a TypeScript module of ours (`export const|let|function|class NAME`, `export { a, b as c }`); types are left out. */
const valueExports = (file) => {
  const text = stripComments(Fs.readFileSync(file, "utf8"))
  const names = new Set()
  for (const m of text.matchAll(
    /^export\s+(?:declare\s+)?(?:const|let|var|async\s+function\*?|function\*?|class|abstract\s+class)\s+([\w$]+)/gm
  ))
    names.add(m[1])
  for (const m of text.matchAll(/^export\s*\{([^}]*)\}/gm)) {
    for (const spec of m[1]
      .split(",")
      .map((x) => x.trim())
      .filter((x) => x.length > 0 && !x.startsWith("type ")))
      names.add(spec.split(/\s+as\s+/).pop())
  }
  if (/^export\s+(?:\*|default|enum|namespace)/m.test(text))
    throw new Error(`build: ${Path.relative(root, file)} has an export the lazy stand-in does not know`)
  return [...names]
}

/**
 * An esbuild plugin: Warden's own modules whose top level builds much (Schema definitions) and that
 * `warden run` does not use before codex is spawned are evaluated on first use. An import of one
 * gets a stand-in whose exports (the same names, read from tsc's output of the module) are getters
 * that require the real module, bundled as usual, when first read. Only for modules whose top level
 * has no effect beyond defining their exports.
 */
const lazyWorkspaceModules = (files) => ({
  name: "lazy-workspace-modules",
  setup(build) {
    const lazy = new Set(files.map((f) => Path.join(root, f)))
    build.onResolve({ filter: /^\.{0,2}\// }, async (args) => {
      if (args.kind !== "import-statement" || args.namespace !== "file" || args.pluginData?.lazyReal === true)
        return undefined
      const resolved = await build.resolve(args.path, {
        resolveDir: args.resolveDir,
        kind: args.kind,
        importer: args.importer,
        pluginData: { lazyReal: true }
      })
      if (resolved.errors.length > 0 || !lazy.has(resolved.path)) return undefined
      return { path: resolved.path, namespace: "lazy-workspace" }
    })
    build.onLoad({ filter: /.*/, namespace: "lazy-workspace" }, async (args) => {
      const names = valueExports(args.path)
      return {
        resolveDir: Path.dirname(args.path),
        loader: "js",
        contents: [
          "let real",
          // Which ran, for scripts/code-cache.mjs: it fails the build if one ran before the spawn.
          `const load = () => real ??= ((globalThis.__wardenLazyLoaded ??= []).push(${JSON.stringify(Path.relative(root, args.path))}), require(${JSON.stringify(args.path)}))`,
          `for (const name of ${JSON.stringify(names)}) Object.defineProperty(exports, name, { enumerable: true, get: () => load()[name] })`
        ].join("\n")
      }
    })
  }
})

/**
 * An esbuild plugin: the CLI's version (apps/cli/src/startup/Version.ts reads it from package.json
 * at run time) written into the bundles as a constant, read from package.json at the build, which
 * runs whenever the package is packed: no file read and no node:fs namespace at start-up. The web
 * inbox's (packages/inbox/src/internal/Version.ts, its OpenAPI document's) likewise: in a bundle
 * its own URL is the bundle's, where its package.json is not.
 */
const inlineVersion = {
  name: "inline-version",
  setup(build) {
    const versionOf = (dir) => () => {
      const { version } = JSON.parse(Fs.readFileSync(Path.join(dir, "package.json"), "utf8"))
      return { contents: `export const version = ${JSON.stringify(version)}`, loader: "ts" }
    }
    build.onLoad(
      { filter: /[\\/]apps[\\/]cli[\\/]src[\\/]startup[\\/]Version\.ts$/, namespace: "file" },
      versionOf(cliDir)
    )
    build.onLoad(
      { filter: /[\\/]packages[\\/]inbox[\\/]src[\\/]internal[\\/]Version\.ts$/, namespace: "file" },
      versionOf(Path.join(root, "packages", "inbox"))
    )
  }
}

// Version.ts and bin.ts find files from their own URL: in a CommonJS output, the output file's.
const commonJs = {
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  write: false,
  define: { "import.meta.url": "__warden_import_meta_url" },
  banner: { js: '"use strict"; var __warden_import_meta_url = require("node:url").pathToFileURL(__filename).href;' },
  metafile: true,
  logLevel: "warning"
}

/** Writes esbuild's output by renames (a build that runs while another packs never shows a half-written file), after checks. */
const writeOutput = (result, outfile, { external = [], mode = 0o644 } = {}) => {
  const outside = Object.values(result.metafile.outputs)
    .flatMap((o) => o.imports)
    .filter(
      (i) => i.external && !i.path.startsWith("node:") && !builtinModules.includes(i.path) && !external.includes(i.path)
    )
    .map((i) => i.path)
  if (outside.length > 0) {
    process.stderr.write(
      `build: ${Path.relative(root, outfile)} must be self-contained, but it imports ${outside.join(", ")}\n`
    )
    process.exit(1)
  }
  const output = result.outputFiles.find((f) => f.path === outfile)
  if (output.contents.some((byte) => byte > 0x7f)) {
    process.stderr.write(
      `build: ${Path.relative(root, outfile)} is not ASCII (CodeCache.ts reads the bundle as Latin-1)\n`
    )
    process.exit(1)
  }
  const partial = `${outfile}.${process.pid}.partial`
  Fs.writeFileSync(partial, output.contents, { mode })
  Fs.renameSync(partial, outfile)
}

/**
 * The published CLI's start-up (docs/performance.md, "Start-up"), two files beside tsc's output:
 *
 * - `dist/bin.cjs`, the `warden` executable: bin.ts (with startup/Version.ts and
 *   startup/CodeCache.ts) as CommonJS, which Node starts ~10 ms sooner than an ES module; the rest
 *   of the CLI stays in the compiled modules it imports on demand (startup/Main.js,
 *   startup/Cli.js, startup/RunCli.js).
 * - `dist/warden-run.cjs`, `warden run` as one file: startup/RunCli.ts with everything it imports
 *   (Effect, @effect/cli, the Warden libraries), tree-shaken (deepImports above) and minified,
 *   YAML and crypto loaded on first use (lazyModules above), as CommonJS so that bin.ts can load
 *   it through `vm.Script` with a V8 code cache (CodeCache.ts), which Node's module loader does
 *   not offer before Node 22. Only Node's built-in modules stay outside, and the output is ASCII
 *   (CodeCache reads it as Latin-1). Then scripts/code-cache.mjs writes the cache,
 *   `warden-run.cjs.v8cache` (again at every build: it belongs to the Node that built it).
 */
/**
 * Warden's modules `warden run` evaluates on first use (lazyWorkspaceModules above): the protocol's
 * schemas of client methods, server requests, events and items, about a tenth of the start-up's
 * work, are first needed after codex is spawned (the handshake, the first frame); the approvals'
 * rules (read before the spawn only when a configuration has rules) and their evaluation, the
 * secret masking (first needed by a log line or a card) and the safety filter (a card) likewise:
 * the public modules and the internal ones the card path imports directly. The code-cache step
 * fails the build if one of them runs before the spawn (on `warden run` without rules).
 */
const lazyWorkspace = [
  "packages/protocol/src/ClientMethods.ts",
  "packages/protocol/src/Events.ts",
  "packages/protocol/src/ServerRequests.ts",
  "packages/protocol/src/Thread.ts",
  "packages/protocol/src/ThreadItem.ts",
  "packages/protocol/src/Turn.ts",
  "packages/approvals/src/Policy.ts",
  "packages/approvals/src/SecretMask.ts",
  "packages/approvals/src/internal/MaskedCopy.ts",
  "packages/approvals/src/internal/Masking.ts",
  "packages/approvals/src/internal/RuleEvaluation.ts",
  "packages/approvals/src/internal/SafetyFilter.ts"
]

/**
 * What the last bundling read and wrote (`apps/cli/node_modules/.cache/warden-build/cli-bundle.json`,
 * outside `dist/`, so it is never packed): a digest of every input esbuild read (its metafile), of
 * the build scripts, of the Node that made the code cache and of WARDEN_UNMINIFIED, and of the three
 * outputs. When nothing changed, bundleCli keeps the outputs instead of bundling again and
 * re-making the code cache (~5 s): `pnpm pack:all` after `pnpm build`, every prepack of a
 * `pnpm -r pack`, and the benchmarks' start-up build each bundled the same sources again.
 */
const bundleStamp = Path.join(cliDir, "node_modules", ".cache", "warden-build", "cli-bundle.json")
const bundleOutputs = [
  "bin.cjs",
  "warden-run.cjs",
  "warden-run.cjs.v8cache",
  "ledger-writer.cjs",
  "ledger-writer.cjs.v8cache"
].map((f) => Path.join(cliDir, "dist", f))

const digestFiles = (files) => {
  const hash = createHash("sha256")
  hash.update(`${process.execPath}\0${process.version}\0${process.env.WARDEN_UNMINIFIED === "1"}\0`)
  for (const file of files) {
    hash.update(`${Path.relative(root, file)}\0`)
    hash.update(Fs.existsSync(file) ? Fs.readFileSync(file) : "(missing)")
    hash.update("\0")
  }
  return hash.digest("hex")
}

const stampInputs = (inputs) =>
  [
    ...new Set([
      Path.join(root, "scripts", "build.mjs"),
      Path.join(root, "scripts", "code-cache.mjs"),
      Path.join(root, "pnpm-lock.yaml"),
      Path.join(cliDir, "package.json"),
      Path.join(root, "packages", "inbox", "package.json"),
      ...inputs
    ])
  ].sort()

/** Whether the outputs of the last bundling are there, unchanged, and were made from the same inputs. */
const bundleIsCurrent = () => {
  try {
    const stamp = JSON.parse(Fs.readFileSync(bundleStamp, "utf8"))
    return (
      stamp.inputsDigest === digestFiles(stamp.inputs.map((f) => Path.join(root, f))) &&
      stamp.outputsDigest === digestFiles(bundleOutputs)
    )
  } catch {
    return false
  }
}

const writeBundleStamp = (metafiles) => {
  const inputs = stampInputs(
    metafiles
      .flatMap((m) => Object.keys(m.inputs))
      .map((f) => Path.resolve(f))
      .filter((f) => Fs.existsSync(f))
  )
  Fs.mkdirSync(Path.dirname(bundleStamp), { recursive: true })
  const partial = `${bundleStamp}.${process.pid}.partial`
  Fs.writeFileSync(
    partial,
    JSON.stringify({
      inputs: inputs.map((f) => Path.relative(root, f)),
      inputsDigest: digestFiles(inputs),
      outputsDigest: digestFiles(bundleOutputs)
    })
  )
  Fs.renameSync(partial, bundleStamp)
}

export const bundleCli = async () => {
  if (bundleIsCurrent()) return
  Fs.rmSync(bundleStamp, { force: true })
  const esbuild = createRequire(Path.join(cliDir, "package.json"))("esbuild")
  const metafiles = []
  // As bin.ts writes them: esbuild leaves these imports as they are, resolved beside dist/bin.cjs.
  const lazy = ["./startup/Main.js", "./startup/Cli.js", "./startup/RunCli.js"]
  const binfile = Path.join(cliDir, "dist", "bin.cjs")
  const binBuild = await esbuild.build({
    ...commonJs,
    entryPoints: [Path.join(cliDir, "src", "bin.ts")],
    outfile: binfile,
    external: lazy,
    plugins: [inlineVersion]
  })
  metafiles.push(binBuild.metafile)
  writeOutput(binBuild, binfile, { external: lazy, mode: 0o755 })

  // The ledger (`--state`) is reached by import() and evaluated only when used; its SQLite driver
  // is a native addon, loaded from node_modules (a dependency of @warden/cli).
  // `ws` (under @effect/platform-node's HTTP server, which the web inbox uses: `--inbox`, reached by
  // import() too) tries its optional native helpers inside a try/catch: left outside, never required.
  const native = ["better-sqlite3", "bufferutil", "utf-8-validate"]
  const outfile = Path.join(cliDir, "dist", "warden-run.cjs")
  const runBuild = await esbuild.build({
    ...commonJs,
    entryPoints: [Path.join(cliDir, "src", "startup", "RunCli.ts")],
    outfile,
    // WARDEN_UNMINIFIED=1: readable, with a `// path` comment before each module (for profiling
    // the start-up by module); the published bundle is always minified.
    minify: process.env.WARDEN_UNMINIFIED !== "1",
    keepNames: true,
    legalComments: "eof",
    plugins: [
      inlineVersion,
      deepImports,
      foldedBell,
      lazyWorkspaceModules(lazyWorkspace),
      lazyModules(["yaml", "toml", "ini", "node:crypto"])
    ],
    external: native
  })
  metafiles.push(runBuild.metafile)
  writeOutput(runBuild, outfile, { external: native })

  // The ledger's writer thread (packages/ledger/src/internal/WriterWorker.ts), beside warden-run.cjs,
  // where the ledger's WorkerScript.ts looks for it: a worker is a file of its own.
  const writerfile = Path.join(cliDir, "dist", "ledger-writer.cjs")
  const writerBuild = await esbuild.build({
    ...commonJs,
    entryPoints: [Path.join(root, "packages", "ledger", "src", "internal", "WriterWorker.ts")],
    outfile: writerfile,
    minify: process.env.WARDEN_UNMINIFIED !== "1",
    keepNames: true,
    legalComments: "eof",
    plugins: [deepImports],
    external: native
  })
  metafiles.push(writerBuild.metafile)
  writeOutput(writerBuild, writerfile, { external: native })
  // The code caches, beside their bundles: warden-run.cjs's (bin.cjs loads it with it), and the
  // writer thread's (the ledger's WorkerScript.ts, `Loader`, compiles the thread with it).
  writeCodeCache("worker-code-cache.mjs", writerfile)
  writeCodeCache("code-cache.mjs", outfile)
  writeBundleStamp(metafiles)
}

/**
 * Runs scripts/`script` on `bundle` in a plain `node` without NODE_OPTIONS (V8 rejects a cache made
 * under other flags): it writes `bundle`'s code cache beside it. The build fails if it cannot.
 */
const writeCodeCache = (script, bundle) => {
  const env = { ...process.env }
  delete env["NODE_OPTIONS"]
  const wrote = spawnSync(process.execPath, [Path.join(root, "scripts", script), bundle], {
    cwd: root,
    env,
    stdio: ["ignore", "ignore", "inherit"]
  })
  if (wrote.status !== 0) {
    process.stderr.write(`build: writing the code cache of ${Path.relative(root, bundle)} failed\n`)
    process.exit(wrote.status ?? 1)
  }
}

/**
 * One build at a time in a checkout: `pnpm -r pack` runs a prepack per package, the benchmarks
 * build the CLI, and tests pack while others run; two `tsc -b` writing the same `dist/` at once
 * could leave a file half-written. The lock is a directory (mkdir is atomic) holding the owner's
 * pid; a lock whose owner is gone is taken over.
 */
const buildLock = Path.join(root, "node_modules", ".cache", "warden-build.lock")

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const isAlive = (pid) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return error.code === "EPERM"
  }
}

const withBuildLock = async (body) => {
  Fs.mkdirSync(Path.dirname(buildLock), { recursive: true })
  const ownerFile = Path.join(buildLock, "pid")
  const deadline = Date.now() + 15 * 60_000
  const started = Date.now()
  let said = false
  for (;;) {
    try {
      Fs.mkdirSync(buildLock)
      Fs.writeFileSync(ownerFile, String(process.pid))
      break
    } catch (error) {
      if (error.code !== "EEXIST") throw error
      let owner = Number.NaN
      try {
        owner = Number(Fs.readFileSync(ownerFile, "utf8"))
      } catch {
        // the owner is between mkdir and writing its pid, or just released it
      }
      if (Number.isInteger(owner) && owner > 0 && !isAlive(owner)) {
        Fs.rmSync(buildLock, { recursive: true, force: true })
        continue
      }
      if (Date.now() > deadline) {
        process.stderr.write(
          `build: ${buildLock} has been held for 15 minutes (pid ${owner}); remove it if no build runs\n`
        )
        process.exit(1)
      }
      if (!said && Date.now() - started > 3000) {
        process.stderr.write(`build: waiting for another build in this checkout (pid ${owner})\n`)
        said = true
      }
      await sleep(250)
    }
  }
  try {
    return await body()
  } finally {
    Fs.rmSync(buildLock, { recursive: true, force: true })
  }
}

export const build = (dirs = []) => withBuildLock(() => buildUnlocked(dirs))

const buildUnlocked = async (dirs) => {
  const projects =
    dirs.length === 0
      ? [Path.join(root, "tsconfig.build.json")]
      : dirs.map((d) => Path.join(Path.resolve(d), "tsconfig.build.json"))
  const tsc = Path.join(
    Path.dirname(createRequire(Path.join(root, "package.json")).resolve("typescript/package.json")),
    "bin",
    "tsc"
  )
  const result = spawnSync(process.execPath, [tsc, "-b", ...projects], { cwd: root, stdio: "inherit" })
  if (result.status !== 0) {
    process.stderr.write(`build: tsc -b ${projects.map((p) => Path.relative(root, p)).join(" ")} failed\n`)
    process.exit(result.status ?? 1)
  }
  for (const dir of published) {
    copyAssets(dir)
    pruneStale(dir)
  }
  if (dirs.length === 0 || dirs.some((d) => Path.resolve(d) === cliDir)) await bundleCli()
  copyNativeJournal()
}

/**
 * The answer journal's native module (packages/ledger/native, built first if it is not: nothing
 * happens where it cannot be) beside what loads it (the ledger's JournalFile.ts looks beside its
 * own module): the built package's `dist/internal/` and the CLI's `dist/` (its bundle). Where it
 * could not be built, no stale copy is left: the journal then appends with write(2).
 */
const copyNativeJournal = () => {
  spawnSync(process.execPath, [Path.join(root, "packages", "ledger", "native", "build.mjs")], { stdio: "inherit" })
  const built = Path.join(root, "packages", "ledger", "build", "warden-journal.node")
  for (const dir of [Path.join(root, "packages", "ledger", "dist", "internal"), Path.join(cliDir, "dist")]) {
    if (!Fs.existsSync(dir)) continue
    const to = Path.join(dir, "warden-journal.node")
    if (!Fs.existsSync(built)) Fs.rmSync(to, { force: true })
    else if (!Fs.existsSync(to) || !Fs.readFileSync(to).equals(Fs.readFileSync(built))) {
      // Written beside it, then renamed over it: a process that has the old one loaded keeps its
      // file, and one loading it now never reads half of one.
      const partial = `${to}.${process.pid}.partial`
      Fs.copyFileSync(built, partial)
      Fs.renameSync(partial, to)
    }
  }
}

/** What tsc emitted for a source file that no longer exists (moved or deleted) must not ship. */
const emitted = /(\.d\.ts\.map|\.d\.ts|\.js\.map|\.js)$/

const pruneStale = (dir) => {
  const src = Path.join(root, dir, "src")
  const dist = Path.join(root, dir, "dist")
  if (!Fs.existsSync(dist)) return
  for (const entry of Fs.readdirSync(dist, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const file = Path.join(entry.parentPath ?? entry.path, entry.name)
    const rel = Path.relative(dist, file)
    if (Fs.existsSync(Path.join(src, rel))) continue // an asset copied as is
    const match = emitted.exec(rel)
    if (match === null) continue
    const base = rel.slice(0, -match[1].length)
    if (!Fs.existsSync(Path.join(src, `${base}.ts`))) Fs.rmSync(file)
  }
}

export const clean = () => {
  for (const dir of published) Fs.rmSync(Path.join(root, dir, "dist"), { recursive: true, force: true })
}

if (process.argv[1] !== undefined && Path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2)
  if (args[0] === "--clean") clean()
  else await build(args)
}
