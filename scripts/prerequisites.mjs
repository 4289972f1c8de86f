#!/usr/bin/env node
/**
 * The first step of `pnpm test`: what the test suite needs from the machine, beyond what
 * `pnpm install` brings. Four Debian packages:
 *
 * - `tmux`: the CLI's terminal tests drive `warden` in a real terminal;
 * - `chromium`: the web inbox's browser tests drive a real headless Chromium (`WARDEN_CHROMIUM`,
 *   else `chromium` on PATH);
 * - `postgresql`: the cluster's tests start a throwaway PostgreSQL server (`initdb` and `pg_ctl` on
 *   PATH, or under `/usr/lib/postgresql/N/bin`);
 * - `iproute2`: the fleet's nemesis tests (apps/cli/test/cluster-hosts.test.ts) put each host in a
 *   Linux network namespace (`ip netns`), which also needs root: as another user those tests fail
 *   with a message saying so (`@warden/test-support/Hosts`).
 *
 * When something is missing and this runs as root (CI, a container, a fresh build box), it
 * installs it with `apt-get`, saying what and why, then checks again. Otherwise it runs no test: it
 * prints the one command to run and exits 1. It never asks for a password (no sudo).
 *
 * `--check` only reports (exit 0 when everything is there, 1 with the command otherwise), as root too.
 */
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

const executable = (path) => {
  try {
    Fs.accessSync(path, Fs.constants.X_OK)
    return Fs.statSync(path).isFile()
  } catch {
    return false
  }
}

const onPath = (name) =>
  (process.env["PATH"] ?? "")
    .split(Path.delimiter)
    .filter((dir) => dir !== "")
    .map((dir) => Path.join(dir, name))
    .find(executable)

const postgresBinaries = () => {
  if (onPath("initdb") !== undefined && onPath("pg_ctl") !== undefined) return "PATH"
  const root = "/usr/lib/postgresql"
  const versions = Fs.existsSync(root) ? Fs.readdirSync(root) : []
  const dir = versions
    .map((v) => Path.join(root, v, "bin"))
    .find((bin) => executable(Path.join(bin, "initdb")) && executable(Path.join(bin, "pg_ctl")))
  return dir
}

/** What the suite needs: each with the Debian package that brings it and the tests that need it. */
const needs = [
  {
    name: "tmux",
    debian: "tmux",
    tests: "the CLI's terminal tests drive warden in a real terminal",
    found: () => onPath("tmux")
  },
  {
    name: "chromium",
    debian: "chromium",
    tests: "the web inbox's browser tests drive a real headless Chromium",
    found: () => {
      const chosen = process.env["WARDEN_CHROMIUM"]
      return chosen === undefined || chosen === "" ? onPath("chromium") : executable(chosen) ? chosen : undefined
    }
  },
  {
    name: "PostgreSQL server (initdb, pg_ctl)",
    debian: "postgresql",
    tests: "the cluster's tests start a throwaway PostgreSQL server",
    found: postgresBinaries
  },
  {
    name: "ip (iproute2)",
    debian: "iproute2",
    tests: "the fleet's nemesis tests run each host in a Linux network namespace (which also needs root)",
    found: () => onPath("ip")
  }
]

const say = (line) => process.stderr.write(`prerequisites: ${line}\n`)
const missing = () => needs.filter((need) => need.found() === undefined)

const check = process.argv.includes("--check")
const before = missing()
if (before.length === 0) {
  if (check) say("tmux, chromium, the PostgreSQL server and iproute2 are installed")
  process.exit(0)
}

const packages = before.map((need) => need.debian)
const command = `sudo apt-get update && sudo apt-get install -y ${packages.join(" ")}`
for (const need of before) say(`missing ${need.name} (Debian package ${need.debian}): ${need.tests}`)
if (process.env["WARDEN_CHROMIUM"] && before.some((need) => need.debian === "chromium")) {
  say(`WARDEN_CHROMIUM is set to ${process.env["WARDEN_CHROMIUM"]}, which is not an executable file`)
}

const root = process.getuid?.() === 0
if (check || !root) {
  say(`no test was run. Install ${packages.length === 1 ? "it" : "them"} (as root), then run the test command again:`)
  process.stderr.write(`\n    ${command}\n\n`)
  process.exit(1)
}

if (onPath("apt-get") === undefined) {
  say(
    `no apt-get on this machine: install ${packages.join(", ")} with its package manager, then run the test command again`
  )
  process.exit(1)
}

// Root, with apt-get: install what is missing, non-interactively, and say so.
const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" }
// apt-get's own output is shown only when it fails (its last 40 lines).
const apt = (args) => {
  say(`running apt-get ${args.join(" ")}`)
  const result = spawnSync("apt-get", args, {
    stdio: ["ignore", "pipe", "pipe"],
    env,
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024
  })
  if (result.status === 0) return true
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}${result.error ? String(result.error) : ""}`
  process.stderr.write(`${output.trimEnd().split("\n").slice(-40).join("\n")}\n`)
  return false
}
say(`installing ${packages.join(" ")} with apt-get (running as root)`)
if (!apt(["update", "-qq"]) || !apt(["install", "-y", "-qq", ...packages])) {
  say(`apt-get failed: no test was run. Install ${packages.join(" ")}, then run the test command again`)
  process.exit(1)
}
const after = missing()
if (after.length > 0) {
  for (const need of after) say(`still missing ${need.name} after installing ${need.debian}`)
  process.exit(1)
}
say(`installed ${packages.join(" ")}`)
