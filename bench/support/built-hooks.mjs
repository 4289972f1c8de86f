/**
 * Module resolution hook for `bench/support/built.mjs`: a `@warden/*` specifier resolves as usual
 * (to `packages/NAME/src/….ts`), then to the same module under `dist/` (`….js`), which
 * `pnpm build` made; a missing one is an error, never a silent fall back to the sources.
 */
import { existsSync } from "node:fs"
import { fileURLToPath, pathToFileURL } from "node:url"

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  if (!specifier.startsWith("@warden/")) return resolved
  const source = /^(.*\/(?:packages|apps)\/[^/]+\/)src\/(.*)\.ts$/.exec(fileURLToPath(resolved.url))
  if (!source) return resolved
  const built = `${source[1]}dist/${source[2]}.js`
  if (!existsSync(built)) throw new Error(`bench:built: ${built} is not built (pnpm build)`)
  return { ...resolved, url: pathToFileURL(built).href, format: "module" }
}
