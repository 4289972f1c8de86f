#!/usr/bin/env node
/**
 * `pnpm pack:all [DIR]`: packs every published package (`pnpm pack`, which applies publishConfig
 * and turns `workspace:*` into versions; each package's prepack builds it) into DIR (default
 * `packed/` at the root), after removing the tarballs a previous run left there. Then install them
 * anywhere with npm, e.g. `npm install --global packed/*.tgz` for the `warden` command.
 */
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { published } from "./build.mjs"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const dest = Path.resolve(process.argv[2] ?? Path.join(root, "packed"))
Fs.mkdirSync(dest, { recursive: true })
for (const file of Fs.readdirSync(dest)) if (file.endsWith(".tgz")) Fs.rmSync(Path.join(dest, file))

// Under `pnpm pack:all` the running pnpm is npm_execpath; otherwise the pinned one through npx.
const execpath = process.env["npm_execpath"]
const pinned = JSON.parse(Fs.readFileSync(Path.join(root, "package.json"), "utf8")).packageManager
const [command, prefix] =
  execpath !== undefined && /pnpm/.test(execpath) ? [process.execPath, [execpath]] : ["npx", ["--yes", pinned]]
const args = [
  ...prefix,
  "-r",
  ...published.flatMap((dir) => ["--filter", `./${dir}`]),
  "pack",
  "--pack-destination",
  dest
]
const result = spawnSync(command, args, { cwd: root, stdio: ["ignore", "ignore", "inherit"] })
if (result.status !== 0) {
  process.stderr.write(`pack:all: ${[command, ...args].join(" ")} failed\n`)
  process.exit(result.status ?? 1)
}
const tarballs = Fs.readdirSync(dest)
  .filter((f) => f.endsWith(".tgz"))
  .sort()
if (tarballs.length !== published.length) {
  process.stderr.write(`pack:all: expected ${published.length} tarballs in ${dest}, found ${tarballs.join(", ")}\n`)
  process.exit(1)
}
for (const file of tarballs) process.stdout.write(`${Path.join(dest, file)}\n`)
