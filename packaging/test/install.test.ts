/**
 * Warden as its users get it (issue 13). Every published package is packed (`pnpm pack:all`, as
 * the README's install line does; each package's prepack builds it); the tarballs are installed
 * with plain `npm install` into a fresh project under the OS temp directory, outside the
 * workspace. There, with a clean environment (no workspace `node_modules/.bin` on PATH, no pnpm):
 * `npx warden --version`, `npx warden doctor --codex <the pinned binary>`, `npx warden demo`
 * without a terminal, `warden run` (its bundled start-up path) against the pinned codex, a plain JavaScript program on the promise facade
 * (consumer/facade.mjs), one serving a card from the web inbox on its own supervisor
 * (consumer/inbox.mjs), one recording a supervisor's card in the ledger (consumer/ledger.mjs: its
 * writer thread from the installed dist/), and `tsc --noEmit` of a TypeScript program on the Effect API and the
 * facade (consumer/typed.ts) against the installed `.d.ts`.
 *
 * Every module those Node processes resolve is recorded (consumer/trace.mjs): none may come from
 * the workspace, none may be TypeScript, and Warden's own come from the installed `dist/`.
 *
 * npm needs the registry for the third-party dependencies (effect, @effect/*, @openai/codex, ...)
 * unless its cache already holds them. Set WARDEN_KEEP_INSTALL=1 to keep the temporary project.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { RealCodex, ScriptedModel, Step } from "@warden/testkit"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import type { Duration } from "effect"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Outside from "./support/Outside.js"

const { repoRoot } = Outside

/** What `pnpm build` produces and `pnpm pack` packs: every workspace package that is not private. */
const expectedPackages = [
  "@warden/approvals",
  "@warden/cli",
  "@warden/cluster",
  "@warden/inbox",
  "@warden/json",
  "@warden/ledger",
  "@warden/observability",
  "@warden/protocol",
  "@warden/supervisor",
  "@warden/testkit",
  "@warden/transport"
]

/** Test-only tools that must never reach a user's node_modules. */
const testOnly = [
  "vitest",
  "@effect/vitest",
  "tsx",
  "typescript",
  "esbuild",
  "@vitest/runner",
  "vite",
  "playwright-core"
]

interface Manifest {
  readonly name: string
  readonly version: string
  readonly private?: boolean
  readonly bin?: Record<string, string>
  readonly exports?: Record<string, unknown>
  readonly main?: string
  readonly types?: string
  readonly dependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
}

const readManifest = (dir: string): Manifest =>
  JSON.parse(Fs.readFileSync(Path.join(dir, "package.json"), "utf8")) as Manifest

const workspacePackages = (): ReadonlyArray<{ readonly dir: string; readonly manifest: Manifest }> =>
  ["packages", "apps"].flatMap((group) =>
    Fs.readdirSync(Path.join(repoRoot, group))
      .map((name) => Path.join(repoRoot, group, name))
      .filter((dir) => Fs.existsSync(Path.join(dir, "package.json")))
      .map((dir) => ({ dir, manifest: readManifest(dir) }))
  )

/** Every package installed under `nodeModules`, nested ones included: name → directories. */
const installedPackages = (nodeModules: string): Map<string, Array<string>> => {
  const found = new Map<string, Array<string>>()
  const visit = (dir: string) => {
    if (!Fs.existsSync(dir)) return
    for (const entry of Fs.readdirSync(dir)) {
      if (entry.startsWith(".")) continue
      const dirs = entry.startsWith("@")
        ? Fs.readdirSync(Path.join(dir, entry)).map((n) => Path.join(dir, entry, n))
        : [Path.join(dir, entry)]
      for (const pkg of dirs) {
        if (!Fs.existsSync(Path.join(pkg, "package.json"))) continue
        const name = readManifest(pkg).name
        found.set(name, [...(found.get(name) ?? []), pkg])
        visit(Path.join(pkg, "node_modules"))
      }
    }
  }
  visit(nodeModules)
  return found
}

/** The workspace's absolute path as a whole path (not `/var/tmp/x` for a workspace at `/tmp/x`), or as a file URL. */
const namesWorkspace = (() => {
  const root = repoRoot.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
  return new RegExp(`(?:file://${root}|(?:^|[^\\w./-])${root})(?![\\w.-])`)
})()

const filesUnder = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => Path.join(e.parentPath, e.name))

/**
 * better-sqlite3's native addon as a local prebuild (the tarball prebuild-install would download:
 * `build/Release/better_sqlite3.node`, named for the version, ABI, platform and arch), made from
 * the workspace's own compiled copy. The npm install below points prebuild-install at it
 * (`npm_config_better_sqlite3_local_prebuilds`), as a machine that can download prebuilds gets
 * one, instead of compiling it from source again (~90 s of the test's 2-core time). When npm picks
 * another version than the workspace's, nothing matches and it compiles, as a user's install would.
 */
const localPrebuild = (dir: string): { readonly version: string } => {
  const packageDir = Path.dirname(
    createRequire(Path.join(repoRoot, "apps", "cli", "package.json")).resolve("better-sqlite3/package.json")
  )
  const { version } = readManifest(packageDir)
  Fs.mkdirSync(dir, { recursive: true })
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`
  const made = spawnSync("tar", ["-czf", Path.join(dir, name), "-C", packageDir, "build/Release/better_sqlite3.node"], {
    encoding: "utf8"
  })
  assert.strictEqual(made.status, 0, `tar of the workspace's better_sqlite3.node: ${made.stderr}`)
  return { version }
}

class Installed extends Context.Tag("packaging/Installed")<
  Installed,
  {
    /** The temporary project (a realpath) with the tarballs installed. */
    readonly project: string
    readonly tarballs: ReadonlyArray<string>
    /** The published packages, as the workspace has them. */
    readonly packages: ReadonlyArray<{ readonly dir: string; readonly manifest: Manifest }>
    /** A clean environment for the project (plus a trace file when asked). */
    readonly env: (trace?: string) => Outside.Env
    /** A fresh trace file in the temp directory. */
    readonly traceFile: (name: string) => string
    readonly timings: Record<string, number>
  }
>() {}

const timed = <A, E, R>(timings: Record<string, number>, label: string, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const started = Date.now()
    const a = yield* effect
    timings[label] = Date.now() - started
    return a
  })

const pnpm = (args: ReadonlyArray<string>, timeout: Duration.DurationInput) => {
  const version = (
    JSON.parse(Fs.readFileSync(Path.join(repoRoot, "package.json"), "utf8")) as { packageManager: string }
  ).packageManager.split("@")[1]!
  // Under `pnpm test` the running pnpm is at npm_execpath; otherwise the pinned one through npx.
  const execpath = process.env["npm_execpath"]
  const [command, prefix] =
    execpath !== undefined && /pnpm/.test(execpath)
      ? [process.execPath, [execpath]]
      : ["npx", ["--yes", `pnpm@${version}`]]
  return Outside.runOk(command, [...prefix, ...args], {
    cwd: repoRoot,
    env: { ...process.env } as Outside.Env,
    timeout
  })
}

const InstalledLive = Layer.scoped(
  Installed,
  Effect.gen(function* () {
    const timings: Record<string, number> = {}
    const packages = workspacePackages().filter((p) => p.manifest.private !== true)
    assert.deepStrictEqual(packages.map((p) => p.manifest.name).sort(), expectedPackages)

    const root = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-install-")))),
      (dir) =>
        Effect.gen(function* () {
          // Anything the installed warden left running is stopped before its files go.
          for (const pid of Outside.processesMentioning(dir)) {
            try {
              process.kill(pid, "SIGKILL")
            } catch {
              // gone
            }
          }
          // Removed asynchronously: the installed project is tens of thousands of files, and a
          // synchronous removal held this worker's event loop for minutes on a busy machine (the
          // worker then misses vitest's calls, and the next file in it runs late).
          if (process.env["WARDEN_KEEP_INSTALL"] === undefined)
            yield* Effect.promise(() => Fs.promises.rm(dir, { recursive: true, force: true, maxRetries: 3 }))
          yield* Effect.logInfo(`outside-install timings (ms): ${JSON.stringify(timings)}`)
        })
    )
    assert.isFalse(
      Outside.isInside(root, repoRoot),
      `the temporary directory ${root} must be outside the workspace ${repoRoot}`
    )
    const tarballDir = Path.join(root, "tarballs")
    const project = Path.join(root, "project")
    Fs.mkdirSync(tarballDir)
    Fs.mkdirSync(project)

    // 1. pnpm pack of every published package, as the README's install line does (pack:all runs
    // `pnpm -r pack`, whose prepack builds each package and checks what its manifest points at).
    yield* timed(timings, "pack", pnpm(["pack:all", tarballDir], "5 minutes"))
    const tarballs = Fs.readdirSync(tarballDir)
      .filter((f) => f.endsWith(".tgz"))
      .map((f) => Path.join(tarballDir, f))
      .sort()
    assert.strictEqual(tarballs.length, packages.length, `one tarball per package: ${tarballs.join(", ")}`)

    // 2. A new project outside the workspace, and plain npm.
    Fs.writeFileSync(
      Path.join(project, "package.json"),
      JSON.stringify({ name: "warden-outside", version: "1.0.0", private: true, type: "module" }, null, 2) + "\n"
    )
    for (const file of [
      "facade.mjs",
      "inbox.mjs",
      "ledger.mjs",
      "command-card.mjs",
      "typed.ts",
      "tsconfig.json",
      "trace.mjs",
      "trace-hooks.mjs"
    ]) {
      Fs.copyFileSync(Path.join(Outside.consumerDir, file), Path.join(project, file))
    }
    const typesNode = readManifest(
      Path.dirname(createRequire(Path.join(repoRoot, "package.json")).resolve("@types/node/package.json"))
    ).version
    const prebuilds = Path.join(root, "prebuilds")
    const prebuilt = localPrebuild(prebuilds)
    yield* timed(
      timings,
      "npm install",
      Outside.runOk(
        "npm",
        ["install", "--no-audit", "--no-fund", "--prefer-offline", ...tarballs, `@types/node@${typesNode}`],
        {
          cwd: project,
          env: Outside.outsideEnv({ npm_config_better_sqlite3_local_prebuilds: prebuilds }),
          timeout: "10 minutes"
        }
      )
    )
    // Which better-sqlite3 binary the install got: the local prebuild when the versions matched.
    const installedSqlite = readManifest(Path.join(project, "node_modules", "better-sqlite3")).version
    timings[
      installedSqlite === prebuilt.version
        ? "better-sqlite3 from the local prebuild"
        : `better-sqlite3 ${installedSqlite} compiled`
    ] = 1

    let traces = 0
    return {
      project,
      tarballs,
      packages,
      timings,
      env: (trace) =>
        Outside.outsideEnv(
          trace === undefined
            ? {}
            : {
                WARDEN_TRACE_FILE: trace,
                NODE_OPTIONS: `--import=${Path.join(project, "trace.mjs")}`
              }
        ),
      traceFile: (name) => Path.join(root, `trace-${++traces}-${name}.txt`)
    }
  })
)

/** What a traced process resolved: nothing from the workspace, no TypeScript, Warden from the installed dist/. */
const assertTraceOutside = (traceFile: string, project: string, mustInclude: ReadonlyArray<string>) => {
  assert.isTrue(Fs.existsSync(traceFile), `no module trace at ${traceFile}: the tracing preload did not run`)
  const files = Outside.tracedFiles(traceFile)
  const inWorkspace = files.filter((f) => Outside.isInside(f, repoRoot))
  assert.deepStrictEqual(inWorkspace, [], "modules resolved into the workspace")
  assert.deepStrictEqual(
    files.filter((f) => /\.[cm]?ts$/.test(f)),
    [],
    "TypeScript modules loaded at run time"
  )
  const warden = files.filter((f) => f.includes(`${Path.sep}@warden${Path.sep}`))
  assert.deepStrictEqual(
    warden.filter(
      (f) =>
        !Outside.isInside(f, Path.join(project, "node_modules", "@warden")) || !f.includes(`${Path.sep}dist${Path.sep}`)
    ),
    [],
    "Warden modules from somewhere other than the installed dist/"
  )
  for (const suffix of mustInclude) {
    assert.isTrue(
      warden.some((f) => f.endsWith(suffix)),
      `${suffix} was not loaded (loaded: ${warden.length} Warden modules)`
    )
  }
}

/**
 * The installed project, made once for this file's tests (on the live clock) and removed after
 * them. Not @effect/vitest's `layer(...)`: it assigns its testers onto vitest's shared `it`
 * (`Object.assign`), so in a worker that keeps its modules between files (`isolate: false`), every
 * later file's `it.effect` ran on this layer's runtime, without its TestClock.
 */
const installedScope = Effect.runSync(Scope.make())
const installed = Layer.toRuntime(InstalledLive).pipe(
  Scope.extend(installedScope),
  Effect.orDie,
  Effect.cached,
  Effect.runSync
)
const withInstalled = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Installed>> =>
  Effect.flatMap(installed, (runtime) => Effect.provide(effect, runtime))
const twentyMinutes = 20 * 60_000

describe("warden installed from packed tarballs, outside the workspace", () => {
  beforeAll(() => Effect.runPromise(Effect.asVoid(installed)), twentyMinutes)
  afterAll(() => Effect.runPromise(Scope.close(installedScope, Exit.void)), twentyMinutes)
  it.live("the installed packages are the built ones, copied in, with no test tooling", () =>
    withInstalled(
      Effect.gen(function* () {
        const { packages, project } = yield* Installed
        const nodeModules = Path.join(project, "node_modules")
        const installed = installedPackages(nodeModules)
        for (const { manifest: source } of packages) {
          const dir = Path.join(nodeModules, source.name)
          assert.isFalse(Fs.lstatSync(dir).isSymbolicLink(), `${source.name} is a link, not an installed copy`)
          assert.isTrue(Outside.isInside(Fs.realpathSync(dir), project))
          assert.deepStrictEqual(installed.get(source.name), [dir], `${source.name} is installed once`)
          const manifest = readManifest(dir)
          assert.strictEqual(manifest.version, source.version)
          assert.isUndefined(manifest.private)
          if (source.name === "@warden/cli") {
            // An app, not a library: nothing to import, no types; `warden` is its surface.
            assert.deepStrictEqual(manifest.exports, { "./package.json": "./package.json" }, source.name)
            assert.isUndefined(manifest.main, source.name)
            assert.isUndefined(manifest.types, source.name)
            assert.deepStrictEqual(
              filesUnder(Path.join(dir, "dist")).filter((f) => f.endsWith(".d.ts") || Path.basename(f) === "index.js"),
              [],
              source.name
            )
          } else {
            assert.deepStrictEqual(
              manifest.exports?.["."],
              { types: "./dist/index.d.ts", import: "./dist/index.js" },
              source.name
            )
            for (const file of ["dist/index.js", "dist/index.d.ts", "dist/index.js.map", "dist/index.d.ts.map"]) {
              assert.isTrue(Fs.existsSync(Path.join(dir, file)), `${source.name}: ${file}`)
            }
          }
          const specs = { ...manifest.dependencies, ...manifest.peerDependencies }
          assert.deepStrictEqual(
            Object.entries(specs).filter(([, spec]) => /^(workspace|file|link):/.test(spec)),
            [],
            source.name
          )
          // Nothing the package ships names the workspace (source maps are relative).
          const naming = filesUnder(dir).filter((f) => namesWorkspace.test(Fs.readFileSync(f, "utf8")))
          assert.deepStrictEqual(naming, [], `${source.name} ships files that name ${repoRoot}`)
        }
        const cli = readManifest(Path.join(nodeModules, "@warden/cli"))
        assert.deepStrictEqual(cli.bin, { warden: "./dist/bin.cjs" })
        const bin = Fs.readFileSync(Path.join(nodeModules, "@warden/cli/dist/bin.cjs"), "utf8")
        assert.isTrue(bin.startsWith("#!/usr/bin/env node\n"), bin.slice(0, 40))
        // `warden run` bundled, with its V8 code cache (apps/cli/src/bin.ts, scripts/build.mjs).
        for (const file of ["dist/warden-run.cjs", "dist/warden-run.cjs.v8cache"]) {
          assert.isTrue(Fs.existsSync(Path.join(nodeModules, "@warden/cli", file)), `@warden/cli: ${file}`)
        }
        // The MCP server the demo registers ships beside the compiled test kit.
        assert.isTrue(Fs.existsSync(Path.join(nodeModules, "@warden/testkit/dist/mcp-server.mjs")))
        assert.deepStrictEqual(
          testOnly.filter((name) => installed.has(name)),
          [],
          "test-only packages installed"
        )
        // One effect for everything (the libraries take it as a peer).
        assert.strictEqual(
          installed.get("effect")?.length,
          1,
          `effect installed at ${installed.get("effect")?.join(", ")}`
        )
      })
    )
  )

  it.live(
    "npx warden --version runs the compiled CLI on plain Node",
    () =>
      withInstalled(
        Effect.gen(function* () {
          const { env, packages, project, traceFile } = yield* Installed
          const trace = traceFile("version")
          const ran = yield* Outside.runOk("npx", ["--no", "--", "warden", "--version"], {
            cwd: project,
            env: env(trace),
            timeout: "2 minutes"
          })
          const version = packages.find((p) => p.manifest.name === "@warden/cli")!.manifest.version
          assert.strictEqual(ran.stdout.trim(), version, ran.stderr)
          assertTraceOutside(trace, project, ["/@warden/cli/dist/bin.cjs"])
          // Answered before anything else loads: no other module of Warden, and no Effect.
          const files = Outside.tracedFiles(trace)
          assert.deepStrictEqual(
            files.filter(
              (f) => f.includes(`${Path.sep}@warden${Path.sep}`) && !f.endsWith("/@warden/cli/dist/bin.cjs")
            ),
            []
          )
          assert.deepStrictEqual(
            files.filter((f) => f.includes(`${Path.sep}node_modules${Path.sep}effect${Path.sep}`)),
            []
          )
        })
      ),
    180_000
  )

  it.live(
    "npx warden doctor --codex <the pinned binary>: the tested version, no drift, exit 0",
    () =>
      withInstalled(
        Effect.gen(function* () {
          const { env, project, traceFile } = yield* Installed
          const binary = yield* RealCodex.binaryPath
          const trace = traceFile("doctor")
          const ran = yield* Outside.runOk("npx", ["--no", "--", "warden", "doctor", "--codex", binary], {
            cwd: project,
            env: env(trace),
            timeout: "3 minutes"
          })
          assert.include(ran.stdout, `codex:    ${binary}`)
          assert.include(ran.stdout, "(the tested version)")
          assert.match(ran.stdout, /answers and refusals checked against this codex's schema: \d+, 0 do not validate/)
          assert.include(ran.stdout, "drift: none")
          // The answer journal's module, as installed (no WARDEN_JOURNAL_NATIVE out here): it loads.
          assert.match(
            ran.stdout,
            /^answer journal: a mapped file \(the module loads and .+ is on (ext4|xfs|tmpfs); module .+\/warden-journal\.node\)$/m
          )
          assertTraceOutside(trace, project, [
            "/@warden/cli/dist/commands/DoctorCommand.js",
            "/@warden/protocol/dist/SchemaDump.js"
          ])
        })
      ),
    240_000
  )

  it.live(
    "npx warden demo without a terminal: three items complete, exit 0, on the installed test kit and codex",
    () =>
      withInstalled(
        Effect.gen(function* () {
          const { env, project, traceFile } = yield* Installed
          const trace = traceFile("demo")
          const ran = yield* Outside.runOk("npx", ["--no", "--", "warden", "demo"], {
            cwd: project,
            env: env(trace),
            timeout: "3 minutes"
          })
          assert.include(ran.stderr, "No terminal: the demo policy answers")
          // The codex the demo ran is the one npm installed with @warden/testkit.
          assert.include(ran.stderr, `the pinned codex at ${Path.join(project, "node_modules")}${Path.sep}`)
          for (const i of [0, 1, 2])
            assert.match(ran.stdout, new RegExp(`^${i} +completed +1 (accepted|declined|timeout) `, "m"))
          assert.match(ran.stdout, /^c\d +2 +mcp tool +timeout +deadline +mcp demo\.poke/m)
          assert.include(ran.stdout, "exit code 0")
          assertTraceOutside(trace, project, [
            "/@warden/cli/dist/commands/DemoCommand.js",
            "/@warden/testkit/dist/McpServer.js"
          ])
          assert.deepStrictEqual(yield* Outside.settledProcesses(project), [], "processes left running by the demo")
        })
      ),
    240_000
  )

  it.scopedLive(
    "warden run (bundled: no module of Warden or Effect resolved) runs a work item on the pinned codex; a YAML rule accepts its card",
    () =>
      withInstalled(
        Effect.gen(function* () {
          const { env, project, traceFile } = yield* Installed
          const model = yield* ScriptedModel.make([
            Step.execCommand({
              cmd: "echo hello from warden run",
              escalated: true,
              justification: "the run needs one approval"
            }),
            Step.message("The command ran; done.")
          ])
          const launch = yield* RealCodex.make({ baseUrl: model.baseUrl })
          const rules = Path.join(launch.home, "rules.yaml")
          Fs.writeFileSync(
            rules,
            "rules:\n  - id: echo-ok\n    effect: allow\n    match: { command: { argvPrefix: [echo] } }\n"
          )
          // The launch's app-server flags (`app-server -c k=v --enable f ...`) as warden's own.
          const flags = launch.args.slice(1)
          const trace = traceFile("run")
          // The executable npm linked (npx would look for npm's cache under the launch's HOME).
          const ran = yield* Outside.runOk(
            Path.join(project, "node_modules", ".bin", "warden"),
            [
              "run",
              "--codex",
              launch.command,
              ...flags,
              "--cwd",
              launch.workspace,
              "--sandbox",
              "workspace-write",
              "--json",
              "--approvals",
              "rules",
              "--rules",
              rules,
              "say hello"
            ],
            { cwd: project, env: { ...env(trace), ...launch.env }, timeout: "3 minutes" }
          )
          const lines = ran.stdout
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l) as { readonly type: string } & Record<string, unknown>)
          assert.deepInclude(
            lines.find((l) => l.type === "card.settled")!,
            { outcome: "accepted", source: "rule:echo-ok" },
            ran.stderr
          )
          assert.deepInclude(lines.find((l) => l.type === "item.finished")!, { status: "completed" })
          assert.strictEqual(lines[lines.length - 1]!.type, "run.finished")
          // Everything came from the bundle (read from the installed dist/, not resolved as modules).
          assertTraceOutside(trace, project, ["/@warden/cli/dist/bin.cjs"])
          const files = Outside.tracedFiles(trace)
          // The ledger's writer thread (the run records in its default ledger) starts from its own
          // bundle beside bin.cjs, compiled with the code cache the package ships beside it: read
          // and compiled by the ledger's loader (WorkerScript.Loader), not resolved as a module, so
          // nothing else of @warden is in the trace; and it did not stop (the main thread would
          // have taken over, and said so).
          assert.deepStrictEqual(
            files.filter(
              (f) => f.includes(`${Path.sep}@warden${Path.sep}`) && !f.endsWith("/@warden/cli/dist/bin.cjs")
            ),
            []
          )
          const dist = Path.join(project, "node_modules", "@warden", "cli", "dist")
          assert.isTrue(Fs.existsSync(Path.join(dist, "ledger-writer.cjs")))
          assert.isTrue(Fs.existsSync(Path.join(dist, "ledger-writer.cjs.v8cache")))
          assert.notInclude(ran.stderr, "writer thread stopped")
          // The answer journal's native module ships beside the bundle (and in the ledger's
          // dist/internal/, where the library looks), and loads in a plain Node outside the
          // workspace with both its functions (packages/ledger/native). What ships, not what a run
          // did: that a journal maps its file is the ledger's tests' to show.
          for (const module of [
            Path.join(dist, "warden-journal.node"),
            Path.join(project, "node_modules", "@warden", "ledger", "dist", "internal", "warden-journal.node")
          ]) {
            const loaded = yield* Outside.runOk(
              "node",
              [
                "-e",
                "const m = { exports: {} }; process.dlopen(m, process.argv[1]); console.log(typeof m.exports.map, typeof m.exports.unmap)",
                module
              ],
              { cwd: project, env: env(), timeout: "30 seconds" }
            )
            assert.strictEqual(loaded.stdout.trim(), "function function", module)
          }
          assert.deepStrictEqual(
            files.filter((f) => f.includes(`${Path.sep}node_modules${Path.sep}effect${Path.sep}`)),
            []
          )
          assert.deepStrictEqual(yield* Outside.settledProcesses(project), [], "processes left running by warden run")
        })
      ),
    240_000
  )

  it.live(
    "a plain JavaScript program embeds Warden with createSupervisor against the pinned codex",
    () =>
      withInstalled(
        Effect.gen(function* () {
          const { env, project, traceFile } = yield* Installed
          const trace = traceFile("facade")
          const ran = yield* Outside.runOk("node", ["facade.mjs"], {
            cwd: project,
            env: env(trace),
            timeout: "3 minutes"
          })
          const report = JSON.parse(ran.stdout.trim()) as {
            status: string
            finalMessage: string
            codex: string
            cards: ReadonlyArray<{ kind: string; title: string; answer: string }>
          }
          assert.strictEqual(report.status, "completed", ran.stderr)
          assert.strictEqual(report.finalMessage, "The command ran; all done.")
          assert.strictEqual(report.cards.length, 1)
          assert.strictEqual(report.cards[0]!.kind, "command")
          assert.match(report.cards[0]!.title, /^run: echo hello from an installed warden/)
          assert.strictEqual(report.cards[0]!.answer, "Settled")
          assert.isTrue(Outside.isInside(report.codex, project), `codex ${report.codex} is not the installed one`)
          assertTraceOutside(trace, project, [
            "/@warden/supervisor/dist/Facade.js",
            "/@warden/testkit/dist/RealCodex.js"
          ])
          assert.deepStrictEqual(yield* Outside.settledProcesses(project), [], "processes left running by the program")
        })
      ),
    240_000
  )

  it.live(
    "a plain JavaScript program records its supervisor's card in @warden/ledger, the writer on its thread from the installed dist/",
    () =>
      withInstalled(
        Effect.gen(function* () {
          const { env, project, traceFile } = yield* Installed
          const trace = traceFile("ledger")
          const ran = yield* Outside.runOk("node", ["ledger.mjs"], {
            cwd: project,
            env: env(trace),
            timeout: "2 minutes"
          })
          const report = JSON.parse(ran.stdout.trim()) as {
            answer: { result: { decision: string } }
            cards: ReadonlyArray<{ title: string; outcome: string; source: string }>
            logged: ReadonlyArray<string>
          }
          assert.deepStrictEqual(report.answer.result, { decision: "accept" }, ran.stderr)
          assert.strictEqual(report.cards.length, 1)
          assert.match(report.cards[0]!.title, /^run: echo recorded by an installed ledger/)
          assert.deepInclude(report.cards[0]!, { outcome: "accepted", source: "handler" })
          // Written by the thread: it started from the installed package and never stopped.
          assert.deepStrictEqual(
            report.logged.filter((l) => l.includes("writer thread")),
            [],
            report.logged.join("\n")
          )
          assertTraceOutside(trace, project, [
            "/@warden/ledger/dist/index.js",
            "/@warden/ledger/dist/internal/WriterWorker.js",
            "/@warden/ledger/dist/internal/WorkerSql.js"
          ])
          assert.deepStrictEqual(yield* Outside.settledProcesses(project), [], "processes left running by the program")
        })
      ),
    180_000
  )

  it.live(
    "a plain JavaScript program serves a card from @warden/inbox on its own supervisor and answers it over HTTP",
    () =>
      withInstalled(
        Effect.gen(function* () {
          const { env, project, traceFile } = yield* Installed
          const trace = traceFile("inbox")
          const ran = yield* Outside.runOk("node", ["inbox.mjs"], {
            cwd: project,
            env: env(trace),
            timeout: "2 minutes"
          })
          const report = JSON.parse(ran.stdout.trim()) as {
            page: { status: number; type: string; titled: boolean }
            unauthorized: number
            card: { title: string; offers: ReadonlyArray<string> }
            decided: { status: number; settlement: { outcome: string; by: string } }
            again: { status: number; tag: string }
            answer: { result: { decision: string } }
          }
          assert.deepStrictEqual(report.page, { status: 200, type: "text/html", titled: true }, ran.stderr)
          assert.strictEqual(report.unauthorized, 401)
          assert.match(report.card.title, /^run: echo served by an installed inbox/)
          assert.include(report.card.offers, "accept")
          assert.strictEqual(report.decided.status, 200)
          assert.deepInclude(report.decided.settlement, { outcome: "accepted", by: "person (web)" })
          assert.deepStrictEqual(report.again, { status: 409, tag: "AlreadySettled" })
          assert.deepStrictEqual(report.answer.result, { decision: "accept" })
          assertTraceOutside(trace, project, [
            "/@warden/inbox/dist/index.js",
            "/@warden/inbox/dist/internal/Server.js",
            "/@warden/supervisor/dist/index.js"
          ])
          // The inbox needs nothing of the CLI.
          assert.deepStrictEqual(
            Outside.tracedFiles(trace).filter((f) => f.includes(`${Path.sep}@warden${Path.sep}cli${Path.sep}`)),
            []
          )
          assert.deepStrictEqual(yield* Outside.settledProcesses(project), [], "processes left running by the program")
        })
      ),
    180_000
  )

  it.live(
    "tsc --noEmit: a TypeScript program on the Effect API and the facade checks against the installed .d.ts",
    () =>
      withInstalled(
        Effect.gen(function* () {
          const { env, project } = yield* Installed
          // The workspace's compiler (a tool, not Warden), run on the project's own tsconfig.
          const tsc = Path.join(
            Path.dirname(createRequire(Path.join(repoRoot, "package.json")).resolve("typescript/package.json")),
            "bin",
            "tsc"
          )
          const ran = yield* Outside.runOk("node", [tsc, "--noEmit", "-p", "tsconfig.json", "--listFiles"], {
            cwd: project,
            env: env(),
            timeout: "3 minutes"
          })
          const files = ran.stdout
            .split("\n")
            .map((l) => l.trim())
            .filter((l) => l.endsWith(".ts"))
            .map((f) => Fs.realpathSync(f))
          const outside = files.filter((f) => !Outside.isInside(f, project))
          // Only the compiler's own lib.*.d.ts come from elsewhere.
          assert.deepStrictEqual(
            outside.filter((f) => !/^lib\.[\w.]+\.d\.ts$/.test(Path.basename(f))),
            []
          )
          const warden = files.filter((f) => f.includes(`${Path.sep}@warden${Path.sep}`))
          for (const pkg of [
            "approvals",
            "inbox",
            "json",
            "ledger",
            "observability",
            "protocol",
            "supervisor",
            "testkit",
            "transport"
          ]) {
            assert.isTrue(
              warden.some((f) => f.startsWith(Path.join(project, "node_modules", "@warden", pkg, "dist") + Path.sep)),
              `@warden/${pkg} declarations`
            )
          }
          assert.deepStrictEqual(
            warden.filter((f) => !f.endsWith(".d.ts")),
            [],
            "Warden sources compiled instead of declarations"
          )
        })
      ),
    240_000
  )
})
