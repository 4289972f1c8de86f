#!/usr/bin/env node
/**
 * `prepack` of every published package (run in the package's directory by `pnpm pack` and
 * `pnpm publish`): builds the package (and what it depends on) so the tarball never carries a
 * stale or missing `dist/`, then checks that every file the published manifest points at exists.
 *
 * The workspace's package.json files point at the TypeScript sources (`exports: ./src/*.ts`);
 * the published manifest points at `dist/` through `publishConfig`, which pnpm applies when it
 * packs and npm does not. So packing with npm is refused: its tarball would point at sources.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { build } from "./build.mjs"

const agent = process.env["npm_config_user_agent"] ?? ""
if (!agent.startsWith("pnpm/")) {
  process.stderr.write(
    "prepack: pack and publish Warden's packages with pnpm (`pnpm pack`, `pnpm -r publish`): the published " +
      "manifest comes from publishConfig, which only pnpm applies.\n"
  )
  process.exit(1)
}

const dir = process.cwd()
await build([dir])

const manifest = JSON.parse(Fs.readFileSync(Path.join(dir, "package.json"), "utf8"))
const targets = []
const collect = (value) => {
  if (typeof value === "string") targets.push(value)
  else if (value !== null && typeof value === "object") for (const v of Object.values(value)) collect(v)
}
collect(manifest.publishConfig ?? {})
const missing = targets.filter((t) => t.startsWith("./") && !Fs.existsSync(Path.join(dir, t)))
if (missing.length > 0) {
  process.stderr.write(`prepack: ${manifest.name}: missing after the build: ${missing.join(", ")}\n`)
  process.exit(1)
}
