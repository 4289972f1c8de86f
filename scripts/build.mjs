#!/usr/bin/env node
/**
 * `pnpm build`: compiles every published package (packages/* and apps/cli) to ESM JavaScript,
 * `.d.ts` and source maps in its `dist/` with the workspace's TypeScript (`tsc -b
 * tsconfig.build.json`), then copies the runtime files tsc does not emit (`.mjs`, `.cjs`, `.json`
 * under `src/`, e.g. the test kit's MCP server script) beside the compiled modules.
 *
 *   node scripts/build.mjs            the whole workspace (tsconfig.build.json at the root)
 *   node scripts/build.mjs DIR...     these packages (and, through project references, what they use)
 *   node scripts/build.mjs --clean    remove every published package's dist/
 *
 * Development needs none of this: tests, `pnpm warden` and `tsc -b` read the TypeScript sources.
 */
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")

/** The packages `pnpm build` produces (each has a tsconfig.build.json). */
export const published = ["packages/transport", "packages/protocol", "packages/approvals", "packages/supervisor", "packages/testkit", "apps/cli"]

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

export const build = (dirs = []) => {
  const projects = dirs.length === 0
    ? [Path.join(root, "tsconfig.build.json")]
    : dirs.map((d) => Path.join(Path.resolve(d), "tsconfig.build.json"))
  const tsc = Path.join(Path.dirname(createRequire(Path.join(root, "package.json")).resolve("typescript/package.json")), "bin", "tsc")
  const result = spawnSync(process.execPath, [tsc, "-b", ...projects], { cwd: root, stdio: "inherit" })
  if (result.status !== 0) {
    process.stderr.write(`build: tsc -b ${projects.map((p) => Path.relative(root, p)).join(" ")} failed\n`)
    process.exit(result.status ?? 1)
  }
  for (const dir of published) {
    copyAssets(dir)
    pruneStale(dir)
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
  else build(args)
}
