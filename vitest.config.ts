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
    setupFiles: ["./scripts/test-stalls-worker.mjs"],
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    testTimeout: 20_000,
    hookTimeout: 20_000,
    fakeTimers: { toFake: [] }
  }
})
