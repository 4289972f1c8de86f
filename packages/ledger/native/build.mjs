#!/usr/bin/env node
// Builds the answer journal's mapped file (journal.c) into ../build/warden-journal.node, if this
// machine can: Linux, a C compiler (`cc`, or $CC) and Node's headers (beside the running `node`,
// or /usr/include/node as Debian's libnode-dev puts them). Run by `pnpm install` (the workspace's
// postinstall) and `pnpm test`; does nothing when the module is newer than its source. When it
// cannot build, it says why in one line and exits 0: the journal then appends with write(2)
// (docs/ledger.md, "Durability"), slower, the same guarantee.
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const here = Path.dirname(fileURLToPath(import.meta.url))
const source = Path.join(here, "journal.c")
const out = Path.join(here, "..", "build", "warden-journal.node")
const say = (line) => process.stdout.write(`warden-journal: ${line}\n`)

const upToDate = () => {
  try {
    return Fs.statSync(out).mtimeMs >= Fs.statSync(source).mtimeMs
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

if (process.platform !== "linux") say(`not built on ${process.platform}: the answer journal appends with write(2)`)
else if (upToDate() && !process.argv.includes("--force")) {
  // built already
} else {
  const include = headers()
  if (include === undefined)
    say("not built: no node_api.h (Node's headers) found; the answer journal appends with write(2)")
  else {
    Fs.mkdirSync(Path.dirname(out), { recursive: true })
    const partial = `${out}.${process.pid}.tmp`
    const cc = process.env.CC || "cc"
    const result = spawnSync(
      cc,
      ["-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Werror", "-I", include, "-o", partial, source],
      { stdio: ["ignore", "inherit", "inherit"] }
    )
    if (result.status === 0) {
      Fs.renameSync(partial, out)
      say(`built ${Path.relative(process.cwd(), out) || out}`)
    } else {
      Fs.rmSync(partial, { force: true })
      say(
        `not built (${result.error !== undefined ? result.error.message : `${cc} exited with ${result.status}`}); the answer journal appends with write(2)`
      )
    }
  }
}
