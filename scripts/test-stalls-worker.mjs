/**
 * Vitest set-up file (vitest.config.ts): each test worker watches its own event loop and notes a
 * stall with the test file and test running (scripts/test-stalls.mjs).
 */
import { afterEach, beforeEach, expect } from "vitest"
import { watch } from "./test-stalls.mjs"

let test = "(between tests)"
beforeEach((context) => {
  test = context.task.name
})
// A worker runs file after file (isolate: false): a stall in a file's hooks (beforeAll, afterAll)
// or while a file loads is named so, not after the last test that ran.
afterEach(() => {
  test = "(between tests: a hook, or a file loading)"
})
// A worker of the forks pool is a child of vitest's main process. One watcher per worker: a worker
// that runs several files runs this set-up again for each.
if (globalThis.__wardenStallWatch === undefined) {
  globalThis.__wardenStallWatch = true
  watch("worker", process.ppid, () => `${expect.getState().testPath ?? "(loading)"} > ${test}`)
}
