/**
 * Vitest set-up file (vitest.config.ts): a worker keeps its modules from one test file to the next
 * (`isolate: false`), so a file that changes what every file shares breaks files that run after it
 * in the same worker, far from the cause. This catches the one change seen so far: the testers on
 * vitest's shared `it` replaced (`@effect/vitest`'s `layer(...)` assigns its own `effect`, `scoped`
 * and the rest onto it, so a later file's `it.effect` ran without its TestClock). The file that
 * meets the change fails, naming it, and the testers are put back first (docs/testing.md, "Files
 * share their worker").
 */
import { it } from "@effect/vitest"

const names = ["effect", "scoped", "live", "scopedLive", "flakyTest", "layer", "prop"]
const first = globalThis.__wardenSharedIt
if (first === undefined) {
  globalThis.__wardenSharedIt = Object.fromEntries(names.map((name) => [name, it[name]]))
} else {
  const changed = names.filter((name) => it[name] !== first[name])
  if (changed.length > 0) {
    Object.assign(it, first)
    throw new Error(
      `a test file that ran before this one in the same worker replaced it.${changed.join(", it.")} on vitest's shared \`it\` ` +
        "(@effect/vitest's layer(...) does: build the layer in beforeAll instead, see docs/testing.md, " +
        '"Files share their worker"); the originals are back, and this file fails so that it is seen'
    )
  }
}
