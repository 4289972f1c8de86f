/**
 * The README's test command sets up what the tests need (issue 27): `pnpm test` starts with
 * `scripts/prerequisites.mjs`, which installs the missing Debian packages (tmux, chromium,
 * postgresql) with apt-get when it runs as root, and otherwise stops before any test with the one
 * command to run, never asking for a password.
 *
 * Run here on a machine of our own making: a PATH holding only a fake `apt-get` that records what
 * it was asked and "installs" a package by putting its executables on that PATH. As root (or, when
 * the suite is not root, as root of a user namespace: `unshare --map-root-user`) the script must
 * install exactly what is missing and go on; as another user (nobody, or this non-root user) it
 * must run nothing and print the command.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Outside from "./support/Outside.js"

const { repoRoot } = Outside
const script = Path.join(repoRoot, "scripts", "prerequisites.mjs")
const root = process.getuid?.() === 0

/** A directory to be the whole PATH, with a fake apt-get; `present` executables are already there. */
const fakeMachine = (present: ReadonlyArray<string>) => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-prereq-"))
  Fs.chmodSync(dir, 0o777)
  const bin = Path.join(dir, "bin")
  Fs.mkdirSync(bin, { mode: 0o777 })
  Fs.chmodSync(bin, 0o777)
  const tool = (name: string) => Fs.writeFileSync(Path.join(bin, name), "#!/bin/sh\nexit 0\n", { mode: 0o755 })
  for (const name of present) tool(name)
  // Each package "installs" the executables the script looks for.
  Fs.writeFileSync(
    Path.join(bin, "apt-get"),
    [
      "#!/bin/sh",
      `echo "$*" >> ${dir}/apt.log`,
      `echo "DEBIAN_FRONTEND=$DEBIAN_FRONTEND" >> ${dir}/apt.log`,
      '[ "$1" = install ] || exit 0',
      'for p in "$@"; do',
      '  case "$p" in',
      `    tmux|chromium) printf '#!/bin/sh\\nexit 0\\n' > ${bin}/$p; /bin/chmod 755 ${bin}/$p ;;`,
      `    postgresql) for t in initdb pg_ctl; do printf '#!/bin/sh\\nexit 0\\n' > ${bin}/$t; /bin/chmod 755 ${bin}/$t; done ;;`,
      `    iproute2) printf '#!/bin/sh\\nexit 0\\n' > ${bin}/ip; /bin/chmod 755 ${bin}/ip ;;`,
      "  esac",
      "done",
      ""
    ].join("\n"),
    { mode: 0o755 }
  )
  const log = () => (Fs.existsSync(Path.join(dir, "apt.log")) ? Fs.readFileSync(Path.join(dir, "apt.log"), "utf8") : "")
  return { dir, bin, log, remove: () => Fs.rmSync(dir, { recursive: true, force: true }) }
}

const env = (bin: string): NodeJS.ProcessEnv => {
  const { WARDEN_CHROMIUM: _, ...rest } = process.env
  return { ...rest, PATH: bin }
}

/** The script as root: this process if it is root, else root of a new user namespace. */
const runAsRoot = (bin: string, args: ReadonlyArray<string> = []) =>
  root
    ? spawnSync(process.execPath, [script, ...args], { env: env(bin), encoding: "utf8" })
    : spawnSync("/usr/bin/unshare", ["--map-root-user", process.execPath, script, ...args], {
        env: env(bin),
        encoding: "utf8"
      })

/**
 * The script as a user that is not root: nobody when this process is root. Nobody runs a copy of
 * the script in the fake machine's directory (which all may read), not the checkout's: a checkout
 * in a directory only its owner may enter (a home directory, `mktemp -d`) is out of nobody's reach.
 */
const runAsUser = (bin: string, args: ReadonlyArray<string> = []) => {
  if (!root) return spawnSync(process.execPath, [script, ...args], { env: env(bin), encoding: "utf8" })
  const copy = Path.join(Path.dirname(bin), "prerequisites.mjs")
  Fs.copyFileSync(script, copy)
  Fs.chmodSync(copy, 0o644)
  return spawnSync(process.execPath, [copy, ...args], { env: env(bin), encoding: "utf8", uid: 65534, gid: 65534 })
}

describe("the test command's prerequisites (scripts/prerequisites.mjs)", () => {
  it("pnpm test runs it first, and runs no test when it fails", () => {
    const manifest = JSON.parse(Fs.readFileSync(Path.join(repoRoot, "package.json"), "utf8"))
    assert.match(manifest.scripts.test, /^node scripts\/prerequisites\.mjs && /)
  })

  it("as root: installs exactly what is missing with apt-get, non-interactively, says so, and goes on", () => {
    const machine = fakeMachine(["initdb", "pg_ctl"])
    try {
      const run = runAsRoot(machine.bin)
      assert.strictEqual(run.status, 0, run.stderr)
      assert.include(run.stderr, "missing tmux (Debian package tmux)")
      assert.include(run.stderr, "missing chromium (Debian package chromium): the web inbox's browser tests")
      assert.notInclude(run.stderr, "missing PostgreSQL")
      assert.include(run.stderr, "missing ip (iproute2) (Debian package iproute2): the fleet's nemesis tests")
      assert.include(run.stderr, "installing tmux chromium iproute2 with apt-get (running as root)")
      assert.include(run.stderr, "installed tmux chromium iproute2")
      assert.deepStrictEqual(machine.log().trim().split("\n"), [
        "update -qq",
        "DEBIAN_FRONTEND=noninteractive",
        "install -y -qq tmux chromium iproute2",
        "DEBIAN_FRONTEND=noninteractive"
      ])
      // A second run finds everything and does nothing.
      const again = runAsRoot(machine.bin)
      assert.strictEqual(again.status, 0, again.stderr)
      assert.strictEqual(again.stderr, "")
      assert.strictEqual(machine.log().trim().split("\n").length, 4)
    } finally {
      machine.remove()
    }
  })

  it("as root: a package that apt-get did not make usable stops the tests", () => {
    const machine = fakeMachine(["tmux", "initdb", "pg_ctl", "ip"])
    try {
      Fs.writeFileSync(Path.join(machine.bin, "apt-get"), "#!/bin/sh\nexit 0\n", { mode: 0o755 })
      const run = runAsRoot(machine.bin)
      assert.strictEqual(run.status, 1, run.stderr)
      assert.include(run.stderr, "still missing chromium after installing chromium")
    } finally {
      machine.remove()
    }
  })

  it("as another user: runs nothing and prints the one command to run", () => {
    const machine = fakeMachine(["initdb", "pg_ctl", "ip"])
    try {
      const run = runAsUser(machine.bin)
      assert.strictEqual(run.status, 1, run.stderr)
      assert.include(run.stderr, "no test was run")
      assert.include(run.stderr, "\n    sudo apt-get update && sudo apt-get install -y tmux chromium\n")
      assert.include(run.stderr, "missing tmux")
      assert.strictEqual(machine.log(), "", "apt-get must not run")
    } finally {
      machine.remove()
    }
  })

  it("--check reports without installing, and WARDEN_CHROMIUM must name an executable", () => {
    const machine = fakeMachine(["tmux", "chromium", "initdb", "pg_ctl", "ip"])
    try {
      const ok = runAsRoot(machine.bin, ["--check"])
      assert.strictEqual(ok.status, 0, ok.stderr)
      assert.include(ok.stderr, "are installed")
      const pointed = spawnSync(process.execPath, [script, "--check"], {
        env: { ...env(machine.bin), WARDEN_CHROMIUM: Path.join(machine.dir, "no-such-chromium") },
        encoding: "utf8"
      })
      assert.strictEqual(pointed.status, 1, pointed.stderr)
      assert.include(pointed.stderr, "which is not an executable file")
      assert.include(pointed.stderr, "sudo apt-get update && sudo apt-get install -y chromium")
      assert.strictEqual(machine.log(), "")
    } finally {
      machine.remove()
    }
  })
})
