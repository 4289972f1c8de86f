// Diff two V8 heap snapshots by (node type, constructor or name): count and self size, divided by
// PER (e.g. the number of threads the second snapshot has more), the TOP rows by size.
//   node scripts/heap-diff.mjs A.heapsnapshot B.heapsnapshot [PER] [TOP]
// Snapshots of the scale row's phases: pnpm bench -- --only scale --heap-snapshots DIR.
// Self sizes only (no retained sizes): what a phase allocated and kept, by kind.
import { readFileSync } from "node:fs"
const load = (file) => {
  const snap = JSON.parse(readFileSync(file, "utf8"))
  const f = snap.snapshot.meta.node_fields
  const types = snap.snapshot.meta.node_types[0]
  const n = f.length
  const iType = f.indexOf("type"),
    iName = f.indexOf("name"),
    iSize = f.indexOf("self_size")
  const nodes = snap.nodes,
    strings = snap.strings
  const agg = new Map()
  for (let i = 0; i < nodes.length; i += n) {
    const type = types[nodes[i + iType]]
    let name = strings[nodes[i + iName]]
    if (type === "string" || type === "concatenated string" || type === "sliced string") name = "(string)"
    else if (type === "number") name = "(number)"
    else if (type === "code") name = "(code)"
    else if (name.length > 60) name = name.slice(0, 60)
    const key = `${type}\t${name}`
    const e = agg.get(key) ?? { count: 0, size: 0 }
    e.count++
    e.size += nodes[i + iSize]
    agg.set(key, e)
  }
  return agg
}
const [a, b, perArg, topArg] = process.argv.slice(2)
const per = Number(perArg ?? 1),
  top = Number(topArg ?? 60)
const A = load(a),
  B = load(b)
const rows = []
for (const [k, e] of B) {
  const o = A.get(k) ?? { count: 0, size: 0 }
  rows.push([k, (e.count - o.count) / per, (e.size - o.size) / per])
}
for (const [k, o] of A) if (!B.has(k)) rows.push([k, -o.count / per, -o.size / per])
rows.sort((x, y) => y[2] - x[2])
let total = 0
for (const r of rows) total += r[2]
console.log(`total self size delta per unit: ${total.toFixed(0)} bytes`)
for (const r of rows.slice(0, top))
  console.log(`${r[2].toFixed(0).padStart(8)} B ${r[1].toFixed(2).padStart(8)}x  ${r[0]}`)
