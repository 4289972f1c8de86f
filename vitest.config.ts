import { defineConfig } from "vitest/config"

// One run for the whole workspace. Real-process tests are bounded by the 2-core CI machine:
// at most two test files run at once.
export default defineConfig({
  test: {
    include: [
      "packages/*/test/**/*.test.ts",
      "apps/*/test/**/*.test.ts",
      "examples/test/**/*.test.ts",
      "bench/test/**/*.test.ts",
      "packaging/test/**/*.test.ts"
    ],
    // The CLI compiled from the sources once per run, for the tests that start `warden` (scripts/test-bundle.mjs).
    // Event-loop stalls in the main process and in each worker are noted and printed at the end
    // (scripts/test-stalls.mjs).
    globalSetup: ["./scripts/test-bundle.mjs", "./scripts/test-stalls.mjs"],
    setupFiles: ["./scripts/test-stalls-worker.mjs", "./scripts/test-shared-worker.mjs"],
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    // Each worker keeps its modules from one file to the next: the CLI's, Effect's and the
    // packages' modules load once per worker, not once per file (that was ~170 s of 2-core time).
    // A test file must leave nothing behind that another file could see: a global it patched, a
    // spy not restored, a listener left on process (docs/testing.md, "Files share their worker").
    isolate: false,
    testTimeout: 20_000,
    hookTimeout: 20_000,
    fakeTimers: { toFake: [] }
  }
})
