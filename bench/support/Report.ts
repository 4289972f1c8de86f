/**
 * What a benchmark returns, how it is printed (Markdown tables: readable in a terminal and pasted
 * as is into docs/performance.md), and the commit-friendly JSON written to bench/results/.
 */
import * as Os from "node:os"

export interface Target {
  readonly name: string
  /** Human-readable bound, e.g. ">= 1.0x" or "< 1 ms". */
  readonly target: string
  readonly value: number
  readonly met: boolean
  /**
   * What else `met` requires beyond the value meeting `target` (every item completed): a median
   * of several runs is then met only if every run that met the value met this too. Without it, `met`
   * is the value's alone (judged again on the median).
   */
  readonly alsoRequires?: string
  /** When the value is the median of several runs: their smallest and largest, and how many. */
  readonly spread?: { readonly min: number; readonly max: number; readonly runs: number }
}

export interface Table {
  readonly title: string
  readonly columns: ReadonlyArray<string>
  readonly rows: ReadonlyArray<ReadonlyArray<string | number>>
}

export interface BenchResult {
  readonly name: string
  readonly title: string
  /** Sizes and settings of this run (counts, chunk size, rounds). */
  readonly params: Readonly<Record<string, string | number | boolean>>
  /** Every measured number (finite), with its unit in the key. */
  readonly metrics: Readonly<Record<string, number>>
  /** Ratios between contenders measured in the same run. */
  readonly ratios: Readonly<Record<string, number>>
  readonly targets: ReadonlyArray<Target>
  readonly tables: ReadonlyArray<Table>
  readonly notes: ReadonlyArray<string>
}

export interface Machine {
  readonly os: string
  readonly arch: string
  readonly cpu: string
  readonly cores: number
  readonly memoryGiB: number
  readonly node: string
  readonly v8: string
  /** 1-minute load average when the run started and when it ended (other processes included). */
  readonly loadAvgStart: number
  readonly loadAvgEnd: number
}

export interface Results {
  readonly schema: 1
  readonly date: string
  readonly quick: boolean
  readonly durationSeconds: number
  /**
   * What Warden's modules were: its TypeScript sources through tsx (`pnpm bench`), or the built
   * packages' `dist/` (`pnpm bench:built`, what an embedder installs).
   */
  readonly modules: "sources" | "built"
  /**
   * How the ledger's answer journal stored its lines: `mapped` (its native module loaded:
   * packages/ledger/native) or `write(2)` (not built here, or `WARDEN_JOURNAL_NATIVE=off`).
   */
  readonly answerJournal?: "mapped" | "write(2)"
  readonly machine: Machine
  readonly benchmarks: Readonly<Record<string, BenchResult>>
}

export const machine = (loadAvgStart: number): Machine => {
  const cpus = Os.cpus()
  return {
    os: `${Os.type()} ${Os.release()} (${Os.platform()})`,
    arch: Os.arch(),
    cpu: cpus[0]?.model.trim() ?? "unknown",
    cores: typeof Os.availableParallelism === "function" ? Os.availableParallelism() : cpus.length,
    memoryGiB: Math.round((Os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    v8: process.versions.v8,
    loadAvgStart: Math.round(loadAvgStart * 100) / 100,
    loadAvgEnd: Math.round((Os.loadavg()[0] ?? 0) * 100) / 100
  }
}

export const loadAvg = (): number => Os.loadavg()[0] ?? 0

/** A number as a table cell: thousands separators for big ones, a few significant digits otherwise. */
export const cell = (value: string | number): string => {
  if (typeof value === "string") return value
  if (!Number.isFinite(value)) return String(value)
  const abs = Math.abs(value)
  if (Number.isInteger(value)) return value.toLocaleString("en-US")
  if (abs >= 1000) return Math.round(value).toLocaleString("en-US")
  if (abs >= 100) return value.toFixed(0)
  if (abs >= 10) return value.toFixed(1)
  if (abs >= 1) return value.toFixed(2)
  if (abs === 0) return "0"
  return value.toPrecision(2)
}

export const ratioCell = (value: number): string => (Number.isFinite(value) ? `${value.toFixed(2)}x` : String(value))

/** Cells that read as numbers (1,234, 0.87x, 5 %, 26.7 / 96.8): right-aligned. */
const numeric = (text: string) => /^[-+\d.,\s/%x]*$/.test(text)

export const markdown = (table: Table): string => {
  const rows = table.rows.map((r) => r.map(cell))
  const widths = table.columns.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i]?.length ?? 0)))
  const right = table.columns.map((_, i) => i > 0 && rows.every((r) => numeric(r[i] ?? "")))
  const line = (cells: ReadonlyArray<string>) =>
    `| ${cells.map((c, i) => (right[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(" | ")} |`
  const rule = `| ${widths.map((w, i) => (right[i] ? "-".repeat(Math.max(1, w - 1)) + ":" : "-".repeat(w))).join(" | ")} |`
  return [`**${table.title}**`, "", line(table.columns), rule, ...rows.map(line)].join("\n")
}

export const targetsTable = (results: ReadonlyArray<BenchResult>): Table => ({
  title: "Targets",
  columns: ["benchmark", "measure", "target", "value", "runs: min–max", "met"],
  rows: results.flatMap((r) =>
    r.targets.map((t) => {
      const show = (v: number) => (t.name.includes("ratio") || t.target.includes("x") ? ratioCell(v) : cell(v))
      const spread =
        t.spread === undefined || t.spread.runs < 2
          ? "1 run"
          : `${t.spread.runs}: ${show(t.spread.min)}–${show(t.spread.max)}`
      return [r.name, t.name, t.target, show(t.value), spread, t.met ? "yes" : "NO"]
    })
  )
})

/**
 * Whether `value` meets a target written as `>= 1.0x`, `<= 5x`, `< 100 ms`, `≤ 2 KiB`, `≤ 0.10`:
 * the comparison and the first number of the string (its unit is the value's).
 */
export const meets = (target: string, value: number): boolean => {
  const m = /^\s*(>=|<=|≥|≤|<|>)\s*([\d.,]+)/.exec(target)
  if (m === null) throw new Error(`cannot read the target ${JSON.stringify(target)}`)
  const bound = Number(m[2]!.replace(/,/g, ""))
  switch (m[1]) {
    case ">=":
    case "≥":
      return value >= bound
    case "<=":
    case "≤":
      return value <= bound
    case "<":
      return value < bound
    default:
      return value > bound
  }
}

const medianOf = (values: ReadonlyArray<number>): number => {
  const s = [...values].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

/**
 * Several runs of one benchmark as one result: every target's value is the median of the runs
 * (met judged on the median, with the runs' min and max beside it), every metric and ratio the
 * median of the runs; the tables are those of the run whose first target is the median one, and
 * a table of every run's target values is added.
 */
export const medianOfRuns = (runs: ReadonlyArray<BenchResult>): BenchResult => {
  const first = runs[0]
  if (first === undefined) throw new Error("medianOfRuns: no run")
  if (runs.length === 1)
    return { ...first, targets: first.targets.map((t) => ({ ...t, spread: { min: t.value, max: t.value, runs: 1 } })) }
  const keyed = (pick: (r: BenchResult) => Readonly<Record<string, number>>) => {
    const out: Record<string, number> = {}
    for (const key of Object.keys(pick(first))) out[key] = medianOf(runs.map((r) => pick(r)[key] ?? Number.NaN))
    return out
  }
  const targets = first.targets.map((t, i) => {
    const values = runs.map((r) => r.targets[i]!.value)
    const value = medianOf(values)
    // A target that also requires something the runs verify (every item completed) stays unmet if
    // any run missed it. Only such a target: another's run may say unmet where its rounded value
    // meets the bound (0.8996 shown as 0.9), which says nothing more about the median.
    const verified =
      t.alsoRequires === undefined ||
      runs.every((r) => r.targets[i]!.met || !meets(r.targets[i]!.target, r.targets[i]!.value))
    return {
      ...t,
      value,
      met: meets(t.target, value) && verified,
      spread: { min: Math.min(...values), max: Math.max(...values), runs: runs.length }
    }
  })
  const firstValues = runs.map((r) => r.targets[0]?.value ?? 0)
  const mid = medianOf(firstValues)
  const representative = runs[firstValues.indexOf(mid)] ?? runs[Math.floor(runs.length / 2)]!
  return {
    ...representative,
    params: { ...representative.params, runs: runs.length },
    metrics: keyed((r) => r.metrics),
    ratios: keyed((r) => r.ratios),
    targets,
    tables: [
      {
        title: `Every run (${runs.length}): the target values; the value above is their median`,
        columns: ["measure", ...runs.map((_, i) => `run ${i + 1}`), "median"],
        rows: targets.map((t, i) => [t.name, ...runs.map((r) => r.targets[i]!.value), t.value])
      },
      ...representative.tables
    ],
    notes: [
      `Median of ${runs.length} runs; the tables below the first are those of the run whose first target value is the median.`,
      ...representative.notes
    ]
  }
}

/**
 * A benchmark run 3 times (once in quick mode): every target is the median of the runs, with their
 * spread; each run's targets are logged as it ends.
 */
export const repeated =
  <O extends { readonly quick: boolean; readonly log: (line: string) => void }>(
    runOnce: (options: O) => Promise<BenchResult>
  ) =>
  async (options: O): Promise<BenchResult> => {
    const runs = options.quick ? 1 : 3
    const results: Array<BenchResult> = []
    for (let i = 0; i < runs; i++) {
      const result = await runOnce(options)
      options.log(`  run ${i + 1}/${runs}: ${result.targets.map((t) => `${t.name} = ${t.value}`).join("; ")}`)
      results.push(result)
    }
    return medianOfRuns(results)
  }

export const render = (result: BenchResult): string =>
  [
    `### ${result.title}`,
    "",
    ...result.tables.flatMap((t) => [markdown(t), ""]),
    ...(result.notes.length > 0 ? [...result.notes.map((n) => `- ${n}`), ""] : [])
  ].join("\n")

/** A table for the JSON file: numbers rounded to 4 significant digits, so the file diffs well. */
export const roundedTable = (table: Table): Table => ({
  ...table,
  rows: table.rows.map((r) =>
    r.map((c) => (typeof c === "number" && Number.isFinite(c) ? Number(c.toPrecision(4)) : c))
  )
})

/** Finite numbers only (JSON has no NaN/Infinity); rounded so the file diffs well. */
export const finiteRecord = (record: Readonly<Record<string, number>>, digits = 4): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const [k, v] of Object.entries(record)) {
    if (!Number.isFinite(v)) throw new Error(`benchmark metric ${k} is not finite: ${v}`)
    out[k] = Number(v.toPrecision(digits))
  }
  return out
}
