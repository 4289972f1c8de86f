/**
 * Vitest set-up file (vitest.config.ts): each test worker watches its own event loop and notes a
 * stall with the test file and test running (scripts/test-stalls.mjs).
 */
import { beforeEach, expect } from "vitest"
import { watch } from "./test-stalls.mjs"

let test = "(between tests)"
beforeEach((context) => {
  test = context.task.name
})
// A worker of the forks pool is a child of vitest's main process. One watcher per worker: a worker
// that runs several files runs this set-up again for each.
if (globalThis.__wardenStallWatch === undefined) {
  globalThis.__wardenStallWatch = true
  watch("worker", process.ppid, () => `${expect.getState().testPath ?? "(loading)"} > ${test}`)
}
