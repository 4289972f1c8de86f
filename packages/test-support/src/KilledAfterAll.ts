/**
 * The SIGKILL of every process a test file started, after all its tests, whatever happened. Apart
 * from `Processes` because it registers a vitest hook, and vitest refuses to be imported outside a
 * test run (a script run with plain tsx).
 */
import { afterAll } from "@effect/vitest"

/**
 * The process ids a test file started (call once, at the top of the file): each one's process
 * group, and the process itself, SIGKILLed in `afterAll` whatever happened.
 */
export const killedAfterAll = (): Set<number> => {
  const started = new Set<number>()
  afterAll(() => {
    for (const pid of started) {
      for (const target of [-pid, pid]) {
        try {
          process.kill(target, "SIGKILL")
        } catch {
          // gone
        }
      }
    }
  })
  return started
}
