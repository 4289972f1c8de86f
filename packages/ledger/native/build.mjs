#!/usr/bin/env node
// Builds the answer journal's mapped file (journal.c) into ../build/warden-journal.node, if this
// machine can: Linux, a C compiler (`cc`, or $CC) and Node's headers (beside the running `node`,
// or /usr/include/node as Debian's libnode-dev puts them). Run by `pnpm install` (the workspace's
// postinstall) and `pnpm test`; does nothing when the module was built from this source for this
// platform and architecture (its stamp). When it cannot build, it removes any earlier module, says
// why in one line and exits 0: the journal then appends with write(2)
// (docs/ledger.md, "Durability"), slower, the same guarantee.
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const here = Path.dirname(fileURLToPath(import.meta.url))
const source = Path.join(here, "journal.c")
const out = Path.join(here, "..", "build", "warden-journal.node")
const say = (line) => process.stdout.write(`warden-journal: ${line}\n`)

/**
 * What the module was built from and for: its source's digest, the platform and the architecture
 * (a checkout shared between machines of two architectures rebuilds it). The module is current
 * when its stamp says the same.
 */
const stampFile = `${out}.stamp`
const stampNow = () =>
  `${createHash("sha256").update(Fs.readFileSync(source)).digest("hex")} ${process.platform} ${process.arch}\n`
const upToDate = () => {
  try {
    return Fs.existsSync(out) && Fs.readFileSync(stampFile, "utf8") === stampNow()
  } catch {
    return false
  }
}

const headers = () =>
  [
    Path.join(Path.dirname(process.execPath), "..", "include", "node"),
    "/usr/include/node",
    "/usr/local/include/node"
  ].find((dir) => Fs.existsSync(Path.join(dir, "node_api.h")))

if (process.platform !== "linux") {
  Fs.rmSync(out, { force: true })
  say(`not built on ${process.platform}: the answer journal appends with write(2)`)
} else if (upToDate() && !process.argv.includes("--force")) {
  // built already, from this source, for this machine
} else {
  // Whatever was built before goes first: a build that fails leaves no stale module behind.
  Fs.rmSync(out, { force: true })
  Fs.rmSync(stampFile, { force: true })
  const include = headers()
  if (include === undefined)
    say("not built: no node_api.h (Node's headers) found; the answer journal appends with write(2)")
  else {
    Fs.mkdirSync(Path.dirname(out), { recursive: true })
    const partial = `${out}.${process.pid}.tmp`
    const cc = process.env.CC || "cc"
    // Node's headers as system headers: a warning of a newer compiler in them is not ours.
    const result = spawnSync(
      cc,
      [
        "-O2",
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        "-Wall",
        "-Werror",
        "-isystem",
        include,
        "-o",
        partial,
        source
      ],
      { stdio: ["ignore", "inherit", "inherit"] }
    )
    let loads = false
    if (result.status === 0) {
      // It must load here, and have both functions, to be kept.
      try {
        const module = { exports: {} }
        process.dlopen(module, partial)
        loads = typeof module.exports.map === "function" && typeof module.exports.unmap === "function"
      } catch {
        loads = false
      }
    }
    if (loads) {
      Fs.renameSync(partial, out)
      Fs.writeFileSync(stampFile, stampNow())
      say(`built ${Path.relative(process.cwd(), out) || out}`)
    } else {
      Fs.rmSync(partial, { force: true })
      say(
        `not built (${result.error !== undefined ? result.error.message : result.status !== 0 ? `${cc} exited with ${result.status}` : "it does not load"}); the answer journal appends with write(2)`
      )
    }
  }
}
