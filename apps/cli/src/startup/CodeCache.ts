/**
 * Loading the bundled `warden run` (`dist/warden-run.cjs`, made by `pnpm build`) with V8's code
 * cache. Compiling the bundle's megabyte of JavaScript took about as long as evaluating it; with
 * the cache V8 deserializes the compiled functions instead (docs/performance.md, "Start-up").
 *
 * The cache (`warden-run.cjs.v8cache`) is written by the build, beside the bundle, and ships with
 * it, so it always belongs to that exact source. V8 checks that it was made by the same V8 version
 * with the same flags and the same source length, and rejects it otherwise: then the bundle is
 * compiled from source, as without a cache (slower, never wrong). Node's own module loader has no
 * code cache before Node 22, hence `vm.Script` and a CommonJS bundle.
 */
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as Vm from "node:vm"

/** The cache file of a bundle. */
export const cacheFile = (bundle: string): string => `${bundle}.v8cache`

/**
 * The bundle's source. The build checks that it is ASCII (esbuild escapes everything else), so
 * reading it as Latin-1 gives the same string, without UTF-8 decoding (~20 ms for the megabyte).
 */
export const read = (bundle: string): string => Fs.readFileSync(bundle, "latin1")

/**
 * Compiles the bundle as Node compiles a CommonJS module, with the cache if there is one.
 * `filename` names the script in stack traces. A cache holds the name it was written under, and a
 * script made from it keeps that name: the build writes it under the bare file name
 * (`warden-run.cjs`), so that the package does not carry the build's path.
 */
export const compile = (source: string, filename: string, cachedData?: Buffer): Vm.Script =>
  new Vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename,
    ...(cachedData !== undefined ? { cachedData } : {})
  })

/** Runs the compiled bundle's top level; its module exports. */
export const evaluate = (script: Vm.Script, bundle: string): unknown => {
  const module = { exports: {} as unknown }
  const wrapper = script.runInThisContext() as (...args: ReadonlyArray<unknown>) => void
  wrapper.call(module.exports, module.exports, createRequire(bundle), module, bundle, Path.dirname(bundle))
  return module.exports
}

const readOptional = (file: string): Buffer | undefined => {
  try {
    return Fs.readFileSync(file)
  } catch {
    return undefined
  }
}

export interface Loaded {
  readonly exports: unknown
  /** Whether V8 used the cache: `false` when there was none or V8 rejected it. */
  readonly cached: boolean
}

/** Evaluates the CommonJS bundle (its module exports), with its cache when V8 accepts it; undefined when there is no bundle. */
export const load = (bundle: string): Loaded | undefined => {
  let source: string
  try {
    source = read(bundle)
  } catch {
    return undefined
  }
  const cachedData = readOptional(cacheFile(bundle))
  const script = compile(source, bundle, cachedData)
  return { exports: evaluate(script, bundle), cached: cachedData !== undefined && script.cachedDataRejected !== true }
}
