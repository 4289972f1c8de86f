/**
 * Where the pinned codex lives. `@openai/codex` (a root devDependency) ships a JS launcher; the
 * native executable is in its optional dependency `@openai/codex-linux-x64` (an npm alias of
 * `@openai/codex@<version>-linux-x64`), resolved from the @openai/codex package directory.
 */
import { existsSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

export const PinnedCodexVersion = "0.171.0"

const requireHere = createRequire(import.meta.url)

/** The version of the installed `@openai/codex` package. */
export const installedCodexVersion = (): string => {
  const manifest = requireHere.resolve("@openai/codex/package.json")
  return (JSON.parse(readFileSync(manifest, "utf8")) as { readonly version: string }).version
}

/** Absolute path of the native codex binary (x86_64 Linux, musl build); throws with a fix if absent. */
export const codexBinaryPath = (): string => {
  const codexManifest = requireHere.resolve("@openai/codex/package.json")
  const requireFromCodex = createRequire(codexManifest)
  let nativeManifest: string
  try {
    nativeManifest = requireFromCodex.resolve("@openai/codex-linux-x64/package.json")
  } catch (cause) {
    throw new Error(
      `the native codex package @openai/codex-linux-x64 is not installed next to ${dirname(codexManifest)} ` +
        `(optional dependency skipped? run \`pnpm install\` on x86_64 Linux)`,
      { cause }
    )
  }
  const binary = join(dirname(nativeManifest), "vendor", "x86_64-unknown-linux-musl", "bin", "codex")
  if (!existsSync(binary)) throw new Error(`the native codex binary is missing at ${binary}`)
  return binary
}
