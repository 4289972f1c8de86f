/**
 * How a property family runs: FastCheck generates schedules (an async property, see `yieldNow`),
 * each one runs in its own World, the first broken invariant fails the case, FastCheck shrinks it
 * and prints the shrunk schedule one step per line (Printable) with the World's trace.
 *
 * Knobs (environment):
 * - WARDEN_PROPERTY_RUNS: multiply every family's run count (e.g. 0.1 for a quick look, 10 overnight);
 * - WARDEN_PROPERTY_SEED: replay a FastCheck seed (printed with every failure);
 * - WARDEN_PROPERTY_PATH: with the seed, replay the shrunk case itself (the `path` FastCheck prints);
 * - WARDEN_RECORD_REGRESSIONS=1: append the shrunk schedule of a failure to regressions.json.
 */
import { afterAll, it } from "@effect/vitest"
import { yieldNow } from "@warden/test-support/EventLoop"
import { FastCheck as fc } from "effect"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import type { Printable, Schedule, Weights } from "./Schedule.js"
import { scheduleArb } from "./Schedule.js"
import type { InvariantId, Stats } from "./World.js"
import { emptyStats, InvariantNames, runSchedule, Violation } from "./World.js"

export const regressionsFile = join(__dirname, "regressions.json")

export interface Regression {
  readonly name: string
  /**
   * `fixed`: a bug the engine no longer has; `known-bug`: still there (replayed strictly, must still
   * fail); `mutation`: what a deliberately broken engine failed with (the real one must pass);
   * `model`: a false alarm of the checker, now right.
   */
  readonly status: "fixed" | "known-bug" | "mutation" | "model"
  /** The invariant it broke (for a known bug: the one it must still break when replayed strictly). */
  readonly invariant: InvariantId
  readonly note: string
  readonly schedule: Schedule
}

export const loadRegressions = (): ReadonlyArray<Regression> =>
  JSON.parse(readFileSync(regressionsFile, "utf8")) as ReadonlyArray<Regression>

const scale = Number(process.env["WARDEN_PROPERTY_RUNS"] ?? "1")
const seed = process.env["WARDEN_PROPERTY_SEED"] !== undefined ? Number(process.env["WARDEN_PROPERTY_SEED"]) : undefined
const path = process.env["WARDEN_PROPERTY_PATH"]

export const describeStats = (stats: Stats): string => {
  const settled = Object.entries(stats.settledBy)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(", ")
  return [
    `${stats.schedules} schedules, ${stats.steps} steps`,
    `${stats.answers} answers on the wire (${stats.acceptances} acceptances), ${stats.timeouts} card deadlines`,
    `${stats.decisions} decisions (${stats.late} late)`,
    `${stats.delivered} notifications delivered (${stats.deliveredPastOpenCards} while another thread had an open card)`,
    `${stats.connectionEnds} connection ends, ${stats.writesRefusedAfterEnd} writes refused after an end`,
    ...(stats.reconnects + stats.served > 0
      ? [
          `${stats.reconnects} restarts; ends handled by the engine: ${count(stats.endReasons)}`,
          `injected: ${count(stats.injected)} (${stats.injectedLogs} error logs they caused)`,
          `invariant 9: ${stats.served} new work items served (${stats.servedAfterRestart} on a restarted connection)`
        ]
      : []),
    `requests settled by: ${settled}`
  ].join("; ")
}

const count = (record: Record<string, number>): string =>
  Object.entries(record)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(", ") || "none"

export interface Family {
  /** The defects family: restarts on, the hostile tracer, defect handler scripts and faults; invariant 9 checked. */
  readonly defects?: boolean
  /** Which invariants this family leans on (every family checks all of them). */
  readonly invariants: ReadonlyArray<InvariantId>
  readonly title: string
  readonly weights: Weights
  readonly runs: number
  readonly maxSteps: number
  /** Work items started and brought to a running turn before the random steps (as steps). */
  readonly minWarm: number
  readonly maxWarm: number
  /** Percentage of schedules with a scripted handler (the rest: people decide, cards stay open longer). */
  readonly scriptedHandler: number
}

/** What a family ran, for the coverage checks its file makes once the property has run. */
export interface FamilyRun {
  readonly stats: Stats
  readonly runs: number
}

/** One `it.prop` for a family, with a report line (the count) once it ran. */
export const property = (family: Family): FamilyRun => {
  const stats = emptyStats()
  const runs = Math.max(1, Math.round(family.runs * scale))
  let lastFailure: { schedule: Schedule; violation: Violation } | undefined
  const started = Date.now()
  const label = `invariant ${family.invariants.join(", ")} (${family.title})`

  const arbitrary = scheduleArb(family.weights, {
    maxSteps: family.maxSteps,
    minWarm: family.minWarm,
    maxWarm: family.maxWarm,
    scriptedHandler: family.scriptedHandler,
    defects: family.defects ?? false
  })
  // As @effect/vitest's `it.prop`, but asynchronous: each schedule (shrinking included) starts
  // after `yieldNow`, so the worker answers vitest while the family runs. Seeds and paths replay.
  it(`${label}: ${family.invariants.map((i) => InvariantNames[i]).join("; ")}`, async () => {
    await fc.assert(
      fc.asyncProperty(arbitrary, async (printable: Printable) => {
        await yieldNow()
        try {
          await runSchedule(printable.schedule, stats)
        } catch (error) {
          // The last failing case FastCheck tries is the shrunk one.
          if (error instanceof Violation) lastFailure = { schedule: printable.schedule, violation: error }
          throw error
        }
      }),
      {
        numRuns: runs,
        ...(seed !== undefined ? { seed } : {}),
        ...(seed !== undefined && path !== undefined ? { path } : {})
      }
    )
  }, 600_000)

  afterAll(() => {
    console.log(
      `${label}: ${stats.schedules} schedules in ${((Date.now() - started) / 1000).toFixed(1)} s (${describeStats(stats)})`
    )
    if (lastFailure) {
      const entry: Regression = {
        name: `found by the ${family.title} property: invariant ${lastFailure.violation.invariant}`,
        status: "known-bug",
        invariant: lastFailure.violation.invariant,
        note: lastFailure.violation.detail,
        schedule: lastFailure.schedule
      }
      console.log(
        `keep it: add this entry to ${regressionsFile} (or run with WARDEN_RECORD_REGRESSIONS=1):\n${JSON.stringify(entry)}`
      )
      if (process.env["WARDEN_RECORD_REGRESSIONS"] === "1") {
        writeFileSync(regressionsFile, JSON.stringify([...loadRegressions(), entry], null, 2) + "\n")
      }
    }
  })
  return { stats, runs }
}
