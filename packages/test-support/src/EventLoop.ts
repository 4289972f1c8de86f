/**
 * Giving the event loop back in the middle of long synchronous test work (a property's cases, a
 * corpus, a frame shape after another). A vitest worker that holds its event loop cannot answer
 * its main process, and vitest fails a run whose worker leaves a call unanswered for 60 s
 * ("Timeout calling onTaskUpdate") however green the tests are (docs/testing.md, "Event-loop
 * stalls"). Asynchronous FastCheck properties await `yieldNow` before each case.
 */

/** One macrotask: timers, I/O and vitest's RPC get their turn, and every pending microtask has run. */
export const macrotask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/**
 * How much synchronous work `yieldNow` lets pass between two macrotasks: the event loop turns
 * about 40 times a second whatever the machine does, and a case costs one macrotask at most.
 */
export const YieldEveryMs = 25

let lastYield = Date.now()

/** One macrotask if YieldEveryMs of work has passed since the last one (else nothing). */
export const yieldNow = async (): Promise<void> => {
  if (Date.now() - lastYield < YieldEveryMs) return
  await macrotask()
  lastYield = Date.now()
}
