/**
 * A throwaway PostgreSQL server for tests, from the Debian package's binaries.
 *
 * `start` runs `initdb` in a new temp directory (as the `postgres` user when this process is
 * root: `initdb` refuses root), starts the server listening only on a unix socket in that
 * directory (no TCP: nothing is exposed and no port can collide), creates a database, and stops
 * the server and removes the directory when the scope closes, however the test ends. A missing
 * installation fails with `PostgresMissing` saying which package to install; it never skips.
 *
 * The server is a daemon (`pg_ctl` starts it in a session of its own), so it would outlive a test
 * process that dies before its scope closes (vitest stopped by Ctrl-C, or killed): then a
 * `Watchdog` stops it (`pg_ctl stop -m immediate`) and removes its directory.
 */
import { Data, Effect } from "effect"
import type * as Hosts from "./Hosts.js"
import * as Watchdog from "./Watchdog.js"
import type { Scope } from "effect"
import { execFile, execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** No PostgreSQL server binaries were found (PATH, `pg_config --bindir`, `/usr/lib/postgresql/N/bin`). */
export class PostgresMissing extends Data.TaggedError("PostgresMissing")<{ readonly message: string }> {}

/** A PostgreSQL command failed while the server was being set up (its output in `message`). */
export class PostgresFailed extends Data.TaggedError("PostgresFailed")<{ readonly message: string }> {}

/** A running throwaway server: how to connect, where it lives, and its postmaster's pid. */
export interface Server {
  /** The unix-socket directory, the `host` for node-postgres (a host starting with `/`). */
  readonly host: string
  /** The port (it only names the socket file: the server has no TCP listener). */
  readonly port: number
  readonly username: string
  readonly database: string
  /** `postgres://USER@/DB?host=DIR&port=PORT`. */
  readonly url: string
  /** The temp directory holding the data, the socket and `server.log`. */
  readonly dir: string
  /** The postmaster's pid (for tests that check nothing is left behind). */
  readonly pid: number
  /**
   * Started `on` a host (`start({ on })`): `postgres://USER@ADDRESS:5432/DB`, its TCP listener on
   * that host's address, open to the host's network (trust, as the socket is). Undefined otherwise.
   */
  readonly networkUrl: string | undefined
}

const binDir = (): string | undefined => {
  const onPath = (name: string) =>
    (process.env["PATH"] ?? "").split(":").some((dir) => dir !== "" && Fs.existsSync(Path.join(dir, name)))
  if (onPath("initdb") && onPath("pg_ctl")) return undefined // use PATH
  try {
    const dir = execFileSync("pg_config", ["--bindir"], { encoding: "utf8" }).trim()
    if (Fs.existsSync(Path.join(dir, "initdb"))) return dir
  } catch {
    // no pg_config
  }
  const root = "/usr/lib/postgresql"
  const versions = Fs.existsSync(root)
    ? Fs.readdirSync(root)
        .filter((v) => Fs.existsSync(Path.join(root, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : []
  if (versions[0] !== undefined) return Path.join(root, versions[0], "bin")
  throw new PostgresMissing({
    message:
      "PostgreSQL server binaries not found (initdb, pg_ctl): install the Debian package: apt-get install postgresql"
  })
}

const run = (command: string, args: ReadonlyArray<string>, asPostgres: boolean, on?: Hosts.Host) =>
  Effect.async<string, PostgresFailed>((resume) => {
    const local: ReadonlyArray<string> = asPostgres
      ? ["runuser", "-u", "postgres", "--", command, ...args]
      : [command, ...args]
    const [file, ...argv] = on === undefined ? local : on.exec(local)
    const child = execFile(file!, argv, { encoding: "utf8", timeout: 120_000 }, (error, stdout, stderr) => {
      if (error)
        resume(
          Effect.fail(new PostgresFailed({ message: `${command} ${args.join(" ")}: ${error.message}\n${stderr}` }))
        )
      else resume(Effect.succeed(stdout))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

let counter = 0

/**
 * Start a throwaway server in the caller's scope; closing the scope stops it (`pg_ctl stop -m
 * fast`, then SIGKILL of the postmaster if it is still alive) and removes its directory.
 *
 * @example
 * ```ts
 * const pg = yield* Postgres.start()
 * // PgClient.layer({ host: pg.host, port: pg.port, username: pg.username, database: pg.database })
 * ```
 */
export const start = (
  options: {
    readonly database?: string
    /**
     * Run the server on this host (its network namespace), listening on its address (port 5432)
     * as well as on the socket, for clients on other hosts: a fleet test's store on a host of its own.
     */
    readonly on?: Hosts.Host
  } = {}
): Effect.Effect<Server, PostgresMissing | PostgresFailed, Scope.Scope> =>
  Effect.gen(function* () {
    const bin = yield* Effect.try({
      try: binDir,
      catch: (e) => (e instanceof PostgresMissing ? e : new PostgresMissing({ message: String(e) }))
    })
    const tool = (name: string) => (bin === undefined ? name : Path.join(bin, name))
    const asPostgres = process.getuid?.() === 0
    const port = 54_000 + ((process.pid * 7 + ++counter) % 900)
    const database = options.database ?? "warden_test"
    const username = "warden"
    const server = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "wpg."))
        Fs.chmodSync(dir, 0o755)
        if (asPostgres) execFileSync("chown", ["postgres:", dir])
        return { dir }
      }),
      ({ dir }) =>
        Effect.gen(function* () {
          const data = Path.join(dir, "data")
          if (Fs.existsSync(Path.join(data, "postmaster.pid"))) {
            yield* run(tool("pg_ctl"), ["-D", data, "-m", "fast", "-w", "-t", "20", "stop"], asPostgres).pipe(
              Effect.ignore
            )
          }
          // Safety net: the postmaster recorded in its pid file, if it is still there.
          try {
            const pid = Number(Fs.readFileSync(Path.join(data, "postmaster.pid"), "utf8").split("\n")[0])
            if (pid > 0) process.kill(pid, "SIGKILL")
          } catch {
            // stopped, or never started
          }
          Fs.rmSync(dir, { recursive: true, force: true })
        })
    )
    const data = Path.join(server.dir, "data")
    // From here on: if this process dies before the scope closes, the watchdog stops the server
    // (once it runs) and removes the directory.
    // (`$WPG_AS` unquoted: empty, or the words that run it as `postgres`, as `run` does.)
    yield* Watchdog.onDeath(
      '$WPG_AS "$WPG_CTL" -D "$WPG_DATA" -m immediate -w -t 20 stop >/dev/null 2>&1; rm -rf "$WPG_DIR"',
      {
        WPG_AS: asPostgres ? "runuser -u postgres --" : "",
        WPG_CTL: tool("pg_ctl"),
        WPG_DATA: data,
        WPG_DIR: server.dir
      }
    )
    yield* run(tool("initdb"), ["-D", data, "-U", username, "--auth=trust", "-E", "UTF8", "--no-sync"], asPostgres)
    const on = options.on
    if (on !== undefined) {
      const subnet = on.address.split(".").slice(0, 3).join(".")
      Fs.appendFileSync(Path.join(data, "pg_hba.conf"), `host all all ${subnet}.0/24 trust\n`)
    }
    const listen = on === undefined ? "-c listen_addresses=''" : `-c listen_addresses='${on.address}'`
    yield* run(
      tool("pg_ctl"),
      [
        "-D",
        data,
        "-l",
        Path.join(server.dir, "server.log"),
        "-w",
        "-t",
        "60",
        "-o",
        `-k ${server.dir} -p ${on === undefined ? port : 5432} ${listen} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`,
        "start"
      ],
      asPostgres,
      on
    )
    const listenPort = on === undefined ? port : 5432
    yield* run(tool("createdb"), ["-h", server.dir, "-p", String(listenPort), "-U", username, database], false)
    const pid = Number(Fs.readFileSync(Path.join(data, "postmaster.pid"), "utf8").split("\n")[0])
    return {
      host: server.dir,
      port: listenPort,
      username,
      database,
      url: `postgres://${username}@/${database}?host=${encodeURIComponent(server.dir)}&port=${listenPort}`,
      dir: server.dir,
      pid,
      networkUrl: on === undefined ? undefined : `postgres://${username}@${on.address}:5432/${database}`
    }
  })
