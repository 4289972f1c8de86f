/**
 * `pnpm bench:built`: the benchmarks against the built packages (each `@warden/*` import resolved
 * to its `dist/`, what an embedder installs) instead of the TypeScript sources through tsx. tsx
 * transforms with esbuild's `keepNames`, which names every function through
 * `Object.defineProperty(fn, "name", ...)` and so gives each closure a dictionary of properties
 * (~0.25 KiB per closure made): the sources' heap rows carry that cost, the built packages do not.
 */
import { register } from "node:module"

register("./built-hooks.mjs", import.meta.url)
