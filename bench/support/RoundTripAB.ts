/**
 * An A/B of the approval round trip between engines of two (or more) source trees, in ONE process:
 * what issue 14's third pass (docs/performance.md, branch perf-rt) measured each change with.
 *
 * Each tree's `bench/ApprovalRoundTrip.ts` starts its own Warden (`startWarden`: the real
 * Supervisor on the in-memory transport, as in the bench row), and the plain-callback client of the
 * first tree is the reference. Every contender gets `--warm` round trips first, then `--rounds`
 * rounds of `--block` round trips each, the order of the contenders rotating every round (a fixed
 * order biases). Printed: each contender's p50 over every block and its ratio to the plain
 * client's, the per-round ratio (median, min–max), and for each tree after the first its per-round
 * p50 divided by the previous tree's (median, min–max): below 1 is faster.
 *
 * A tree is a directory with the repository's files at some commit and its `node_modules` linked
 * to an installed checkout's (Effect is then one module for every tree, as in one process of ours):
 *
 * ```sh
 * d=$DIR/base; mkdir -p $d && git archive <commit> | tar -x -C $d && ln -s $PWD/node_modules $d/node_modules
 * for nm in $(find . -path ./node_modules -prune -o -name node_modules -type d -prune -print); do cp -a $nm $d/$nm; done
 * node_modules/.bin/tsx --expose-gc bench/support/RoundTripAB.ts $DIR/base $PWD --rounds=10
 * ```
 *
 * Not a row of `pnpm bench`: a tool for comparing engines while changing one. On a shared machine
 * repeat it at different minutes and trust only what every repetition says. The engine has a
 * warm-up of several thousand round trips (see docs/performance.md, perf-rt): compare after it.
 */
import { pathToFileURL } from "node:url"
import { macrotask } from "./Stats.js"

interface Contender {
  readonly name: string
  readonly roundTrip: (id: number) => Promise<number>
}

const option = (name: string, fallback: number): number => {
  const given = process.argv.find((a) => a.startsWith(`--${name}=`))
  return given === undefined ? fallback : Number(given.slice(name.length + 3))
}
const median = (xs: ReadonlyArray<number>): number => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}
const spread = (xs: ReadonlyArray<number>): string =>
  `${median(xs).toFixed(3)} (${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)})`

const main = async (): Promise<void> => {
  const roots = process.argv.slice(2).filter((a) => !a.startsWith("--"))
  if (roots.length === 0) throw new Error("usage: RoundTripAB.ts TREE... [--rounds=10] [--block=1000] [--warm=2000]")
  const rounds = option("rounds", 10)
  const block = option("block", 1_000)
  const warm = option("warm", 2_000)
  const modules = await Promise.all(
    roots.map(
      (root) =>
        import(pathToFileURL(`${root}/bench/ApprovalRoundTrip.ts`).href) as Promise<
          typeof import("../ApprovalRoundTrip.js")
        >
    )
  )
  const wardens = []
  for (const m of modules) wardens.push(await m.startWarden())
  const plain = modules[0]!.startPlain()
  const contenders: Array<Contender> = [
    ...wardens.map((w, i) => ({ name: roots[i]!.split("/").pop()!, roundTrip: w.roundTrip })),
    {
      name: "plain",
      roundTrip: async (id: number) => {
        await macrotask()
        return plain.roundTrip(id)
      }
    }
  ]
  let id = 0
  try {
    for (let i = 0; i < warm; i++) for (const c of contenders) await c.roundTrip(id++)
    const all = contenders.map(() => [] as Array<number>)
    const perRound = contenders.map(() => [] as Array<number>)
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < contenders.length; k++) {
        const c = (k + round) % contenders.length
        const times: Array<number> = []
        for (let i = 0; i < block; i++) times.push(await contenders[c]!.roundTrip(id++))
        all[c]!.push(...times)
        perRound[c]!.push(median(times))
      }
    }
    const p = contenders.length - 1
    contenders.forEach((c, i) => {
      const ratios = perRound[i]!.map((m, r) => m / perRound[p]![r]!)
      console.log(
        `${c.name}: p50 ${median(all[i]!).toFixed(1)} µs, ${(median(all[i]!) / median(all[p]!)).toFixed(2)}x plain; per round ${spread(ratios)}`
      )
    })
    for (let i = 1; i < wardens.length; i++) {
      const relative = perRound[i]!.map((m, r) => m / perRound[i - 1]![r]!)
      console.log(`${contenders[i]!.name} ÷ ${contenders[i - 1]!.name}, per round: ${spread(relative)}`)
    }
  } finally {
    for (const w of wardens) await w.close()
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
