/**
 * Event-loop stalls during `vitest run` (vitest.config.ts): a test that holds its process's event
 * loop (a synchronous child process, a long loop, a heap thrashing in garbage collection) delays
 * every timer and every message of that process, including vitest's own calls between its worker
 * and its main process, which give up after 60 s ("Timeout calling onTaskUpdate"). Such a test
 * passes on an idle machine and breaks the run on a busy one.
 *
 * `watch` notes every gap of at least `WARDEN_TEST_STALL_MS` (default 5,000 ms) between two ticks
 * of a one-second timer, and every garbage collection of at least a second, in the process it runs
 * in, as one line in `node_modules/.cache/warden-test/stalls-<run>.log` naming the process, the
 * test file and the test running. The main process watches itself from vitest's global set-up
 * (this module's `setup`), each worker from the set-up file `test-stalls-worker.mjs`; at the end
 * of the run `teardown` prints what was noted. It reports; it does not fail a test (a stall's
 * length depends on the machine, and timing is never asserted).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { PerformanceObserver } from "node:perf_hooks"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const directory = Path.join(root, "node_modules", ".cache", "warden-test")

/** Smallest gap noted, in milliseconds. */
export const threshold = Number(process.env.WARDEN_TEST_STALL_MS ?? 5_000)

/** The log of the vitest run whose main process is `mainPid` (workers are its children). */
export const logPath = (mainPid) => Path.join(directory, `stalls-${mainPid}.log`)

/**
 * Watches this process's event loop until it exits; `where()` names what runs at the moment
 * (the test file and test). The timer and the observer do not keep the process alive.
 */
export const watch = (label, mainPid, where) => {
  const file = logPath(mainPid)
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  const note = (what) =>
    Fs.appendFileSync(file, `${new Date().toISOString()} ${label} pid ${process.pid} ${what} in ${where()}\n`)
  let last = performance.now()
  const tick = setInterval(() => {
    const now = performance.now()
    const gap = now - last - 1_000
    last = now
    if (gap >= threshold) note(`event loop held ${Math.round(gap)} ms`)
  }, 1_000)
  tick.unref()
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if (entry.duration >= 1_000) note(`garbage collection ${Math.round(entry.duration)} ms`)
    }
  })
  gc.observe({ entryTypes: ["gc"] })
  return () => {
    clearInterval(tick)
    gc.disconnect()
  }
}

let stop = () => {}

/** Vitest global set-up: the main process watches itself. */
export const setup = () => {
  Fs.rmSync(logPath(process.pid), { force: true })
  stop = watch("main", process.pid, () => "vitest's main process")
}

/** Vitest global tear-down: prints the stalls noted in this run, if any. */
export const teardown = () => {
  stop()
  const file = logPath(process.pid)
  if (!Fs.existsSync(file)) return
  const lines = Fs.readFileSync(file, "utf8").trim()
  if (lines.length > 0)
    process.stderr.write(`\nEvent-loop stalls of ${threshold} ms or more in this run (${file}):\n${lines}\n`)
}
