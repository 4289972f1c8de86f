/**
 * The built CLI, as the published package runs it: `node apps/cli/dist/bin.cjs`. `build` makes it
 * (`node scripts/build.mjs apps/cli`: tsc is incremental; the bundle and its code cache are made
 * again when their inputs changed).
 */
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

export const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..", "..")
export const bin = Path.join(root, "apps", "cli", "dist", "bin.cjs")
/** The bundled `warden run`. */
export const bundle = Path.join(root, "apps", "cli", "dist", "warden-run.cjs")

/** Node without NODE_OPTIONS (tsx's loader would be in it under `pnpm bench`), as a user's shell runs it. */
export const cleanEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra }
  delete env["NODE_OPTIONS"]
  return env
}

export const build = (): void => {
  const built = spawnSync(process.execPath, [Path.join(root, "scripts", "build.mjs"), Path.join(root, "apps", "cli")], {
    cwd: root,
    env: cleanEnv(),
    encoding: "utf8"
  })
  if (built.status !== 0) throw new Error(`building the CLI failed (exit ${built.status}): ${built.stderr}`)
  for (const file of [bin, bundle]) if (!Fs.existsSync(file)) throw new Error(`${file} is missing after the build`)
}
