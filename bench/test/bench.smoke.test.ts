import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"

// The benchmarks must never rot: run `pnpm bench -- --quick` (the same entry point, as a child
// process: it needs --expose-gc) and check that every benchmark ran and produced finite numbers in
// the documented shape. No assertion on a number's size: a benchmark never fails a build.
const root = join(__dirname, "../..")
const tsx = join(root, "node_modules/.bin/tsx")

const runQuick = (out: string) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      tsx,
      ["--expose-gc", join(root, "bench/run.ts"), "--quick", "--out", out],
      { cwd: root, timeout: 600_000, killSignal: "SIGKILL", maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr })
      }
    )
  })

const isFiniteRecord = (value: unknown): boolean =>
  typeof value === "object" &&
  value !== null &&
  Object.values(value).every((v) => typeof v === "number" && Number.isFinite(v))

describe("pnpm bench --quick", () => {
  it("runs every benchmark and writes finite numbers in the results shape", { timeout: 630_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "warden-bench-"))
    try {
      const out = join(dir, "quick.json")
      const { code, stderr, stdout } = await runQuick(out)
      assert.strictEqual(code, 0, stderr)
      for (const title of [
        "1. Frame pipeline throughput",
        "2. Approval round trip",
        "3. Scale on one connection",
        "4. Real codex overhead",
        "5. Adversarial frames",
        "6. Fleet on one real app-server",
        "7. Start-up",
        "8. Telemetry cost on the read loop",
        "9. Flat memory under a long run",
        "**Targets**"
      ]) {
        assert.include(stdout, title)
      }

      const results = JSON.parse(readFileSync(out, "utf8"))
      assert.strictEqual(results.schema, 1)
      assert.strictEqual(results.quick, true)
      assert.strictEqual(
        results.modules,
        "sources",
        "pnpm bench measures the sources through tsx (pnpm bench:built the dist/)"
      )
      assert.isFalse(Number.isNaN(Date.parse(results.date)))
      assert.isString(results.machine.os)
      assert.isString(results.machine.cpu)
      assert.isAbove(results.machine.cores, 0)
      assert.match(results.machine.node, /^v\d+/)
      assert.isTrue(Number.isFinite(results.machine.loadAvgStart) && Number.isFinite(results.machine.loadAvgEnd))

      assert.sameMembers(Object.keys(results.benchmarks), [
        "framePipeline",
        "approvalRoundTrip",
        "scale",
        "realCodexOverhead",
        "adversarialFrames",
        "fleet",
        "startup",
        "telemetry",
        "flatMemory"
      ])
      for (const [name, bench] of Object.entries<any>(results.benchmarks)) {
        assert.strictEqual(bench.name, name)
        assert.isAbove(Object.keys(bench.metrics).length, 0, name)
        assert.isTrue(isFiniteRecord(bench.metrics), `${name} metrics: ${JSON.stringify(bench.metrics)}`)
        assert.isTrue(isFiniteRecord(bench.ratios), `${name} ratios: ${JSON.stringify(bench.ratios)}`)
        assert.isAbove(bench.targets.length, 0, name)
        for (const target of bench.targets) {
          assert.isString(target.target)
          assert.isTrue(Number.isFinite(target.value), `${name} ${target.name}`)
          assert.isBoolean(target.met)
        }
        assert.isAbove(bench.tables.length, 0, name)
        for (const table of bench.tables) assert.isAbove(table.rows.length, 0, `${name}: ${table.title}`)
      }
      // The ratios each benchmark is about.
      assert.isAbove(results.benchmarks.framePipeline.ratios.wardenVsBaseline, 0)
      assert.isAbove(results.benchmarks.framePipeline.ratios.wardenVsRaw, 0)
      assert.isAbove(results.benchmarks.approvalRoundTrip.metrics.wardenP99Us, 0)
      // The ledger's cost, on ÷ off in the same run.
      assert.isAbove(results.benchmarks.framePipeline.ratios.ledgerOnVsOff, 0)
      assert.isAbove(results.benchmarks.framePipeline.ratios.ledgerOnVsOffCpu, 0)
      assert.isAbove(results.benchmarks.approvalRoundTrip.ratios.ledgerOnVsOffP50, 0)
      assert.isAbove(results.benchmarks.approvalRoundTrip.ratios.ledgerOnVsOffP99, 0)
      assert.isTrue(Number.isFinite(results.benchmarks.scale.metrics.heapPerOpenCardBytes))
      // A pending request: with its caller, a caller of the same shape alone, and Warden's part (the difference).
      const scale = results.benchmarks.scale.metrics
      for (const key of ["heapPerPendingRequestBytes", "heapPerWaitingCallerBytes", "heapPerPendingRequestWardenBytes"])
        assert.isTrue(Number.isFinite(scale[key]), key)
      // The file's metrics are rounded to a few significant digits: the difference of two rounded
      // figures may differ from the rounded difference in its last digit.
      const difference = scale.heapPerPendingRequestBytes - scale.heapPerWaitingCallerBytes
      assert.closeTo(
        scale.heapPerPendingRequestWardenBytes,
        difference,
        Math.max(2, Math.abs(scale.heapPerPendingRequestBytes) * 1e-3)
      )
      assert.isAbove(results.benchmarks.realCodexOverhead.ratios.wardenVsDirect, 0)
      assert.isAbove(results.benchmarks.adversarialFrames.metrics.worstBeyondParseMs, 0)
      assert.isAbove(results.benchmarks.adversarialFrames.metrics.mixBeyondParseUs, 0)
      assert.isTrue(Number.isFinite(results.benchmarks.adversarialFrames.metrics.worstCensusMs))
      assert.isAbove(results.benchmarks.startup.metrics.baselineMsMedian, 0)
      assert.isAbove(results.benchmarks.startup.metrics.versionMsMedian, 0)
      assert.isAbove(results.benchmarks.startup.metrics.runToSpawnMsMedian, 0)
      assert.isBoolean(results.benchmarks.startup.params.codeCacheAccepted)
      assert.isAbove(results.benchmarks.flatMemory.ratios.heapLastVsFirst, 0)
      for (const [name, bench] of Object.entries<any>(results.benchmarks)) {
        for (const target of bench.targets)
          assert.isTrue(
            Number.isFinite(target.spread?.min) && Number.isFinite(target.spread?.max),
            `${name} ${target.name}: spread`
          )
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
