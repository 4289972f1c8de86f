/**
 * Several hosts on one machine, for the fleet's nemesis tests: each host a Linux network namespace
 * with its own address on one private network, as separate machines on one switch have.
 *
 * `network(["pg", "a", "b"])` makes, in the caller's scope:
 *
 * - a hub namespace holding a bridge (the switch);
 * - per host a namespace whose `eth0` is a veth into the bridge, with the address `10.X.Y.N/24`
 *   (N = 1, 2, ... in the order given) and its own loopback;
 * - a gateway: one veth from this process's namespace into the bridge (`10.X.Y.254`), so the test
 *   process reaches every host and every host reaches what the test serves (the scripted model,
 *   the PostgreSQL rows it checks) on `gateway`.
 *
 * Nothing else of this machine's network changes: no route, no forwarding, no firewall rule.
 * Processes run on a host through `host.exec(argv)` (`ip netns exec NS ...`, which execs: the pid
 * is the program's own).
 *
 * The nemesis, on a host: `isolate()` takes its link down (no carrier: every peer's packets are
 * lost, nothing is refused), `reconnect()` brings it back; `cutFrom(other)` and `healFrom(other)`
 * drop, on both sides, the packets between two hosts only (blackhole routes: silence, as a
 * partition is).
 *
 * Closing the scope SIGKILLs every process left in the namespaces, deletes them (the veths go
 * with them) and checks that none is left. Where namespaces cannot be made (not root, no
 * iproute2, a container without CAP_NET_ADMIN), `network` fails with `HostsUnavailable` saying
 * why and what to do: it never skips.
 */
import { Data, Effect } from "effect"
import type { Scope } from "effect"
import { execFile, execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"

/** Network namespaces cannot be made here (the message says why and what to do). */
export class HostsUnavailable extends Data.TaggedError("HostsUnavailable")<{ readonly message: string }> {}

/** An `ip` command failed while the network was being changed (its output in `message`). */
export class HostsFailed extends Data.TaggedError("HostsFailed")<{ readonly message: string }> {}

/** One host: a network namespace with one address. */
export interface Host {
  /** The name given to `network`. */
  readonly name: string
  /** The namespace's name (`ip netns exec NAME ...`). */
  readonly netns: string
  /** Its address on the network (no prefix length). */
  readonly address: string
  /** `argv` run on this host: `["ip", "netns", "exec", NS, ...argv]`. */
  readonly exec: (argv: ReadonlyArray<string>) => ReadonlyArray<string>
  /** The pids of the processes running in the namespace now. */
  readonly pids: () => ReadonlyArray<number>
  /** Its link down: the host is cut from every other host and the gateway (packets lost, nothing refused). */
  readonly isolate: Effect.Effect<void, HostsFailed>
  /** Its link up again. */
  readonly reconnect: Effect.Effect<void, HostsFailed>
  /** Packets between this host and `other` dropped, both ways; every other path stays. */
  readonly cutFrom: (other: Host) => Effect.Effect<void, HostsFailed>
  /** Undo `cutFrom(other)`. */
  readonly healFrom: (other: Host) => Effect.Effect<void, HostsFailed>
}

/** The hosts by name, and the test process's own address on their network. */
export interface Network {
  readonly hosts: Readonly<Record<string, Host>>
  /** This process's address on the network (listen here to serve the hosts). */
  readonly gateway: string
  /** The network's prefix, `10.X.Y`. */
  readonly subnet: string
  /** What the names of its namespaces start with (`namespacesWith(prefix)` lists those left). */
  readonly prefix: string
}

const ip = (args: ReadonlyArray<string>) =>
  Effect.async<string, HostsFailed>((resume) => {
    const child = execFile("ip", [...args], { encoding: "utf8", timeout: 30_000 }, (error, stdout, stderr) => {
      if (error)
        resume(Effect.fail(new HostsFailed({ message: `ip ${args.join(" ")}: ${stderr.trim() || error.message}` })))
      else resume(Effect.succeed(stdout))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const ipSync = (args: ReadonlyArray<string>): string => {
  try {
    return execFileSync("ip", [...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 })
  } catch {
    return ""
  }
}

/** The namespaces `ip netns list` shows whose name starts with `prefix`. */
export const namespacesWith = (prefix: string): ReadonlyArray<string> =>
  ipSync(["netns", "list"])
    .split("\n")
    .map((l) => l.trim().split(/\s+/)[0] ?? "")
    .filter((n) => n.startsWith(prefix))

const unavailable = (why: string) =>
  new HostsUnavailable({
    message:
      `the fleet's nemesis tests run each host in its own Linux network namespace, and none can be made here: ${why}. ` +
      "They need root (or CAP_NET_ADMIN) and iproute2: run the tests as root (`sudo npx --yes pnpm@10.34.9 test`), " +
      "in a container started with --cap-add NET_ADMIN, and on Debian `apt-get install iproute2`."
  })

/** Whether namespaces can be made here; the reason when not. */
export const check = (): Effect.Effect<void, HostsUnavailable> =>
  Effect.suspend(() => {
    if (process.platform !== "linux") return Effect.fail(unavailable(`this is ${process.platform}, not Linux`))
    try {
      execFileSync("ip", ["-V"], { stdio: "ignore" })
    } catch {
      return Effect.fail(unavailable("the `ip` command (iproute2) is not installed"))
    }
    if (process.getuid?.() !== 0) return Effect.fail(unavailable("this process is not root"))
    return Effect.void
  })

let counter = 0

const namespacePrefix = "wnet-"

const killAllIn = (ns: string) => {
  for (const pid of ipSync(["netns", "pids", ns])
    .split("\n")
    .map(Number)
    .filter((p) => p > 0)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // gone
    }
  }
}

/**
 * The namespaces (and their processes) of a test process that is gone: one killed before its
 * scope could close (a test run stopped with SIGKILL) leaves them; the next network removes them.
 * A veth's both ends live in namespaces (or the gateway's outer end in the hub), so deleting the
 * namespaces removes every link too.
 */
const removeOrphans = Effect.gen(function* () {
  const orphans = namespacesWith(namespacePrefix).filter((ns) => {
    const pid = Number(ns.slice(namespacePrefix.length).split("-")[0])
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false
    try {
      process.kill(pid, 0)
      return false
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === "ESRCH"
    }
  })
  for (const ns of orphans) killAllIn(ns)
  for (const ns of orphans) yield* ip(["netns", "del", ns]).pipe(Effect.ignore)
})

/**
 * Make the hosts `names` (at most 200) on one new network; closing the scope removes everything.
 *
 * @example
 * ```ts
 * const net = yield* Hosts.network(["pg", "a", "b"])
 * spawn(net.hosts.a.exec(["node", "runner.js"]))
 * yield* net.hosts.a.isolate
 * ```
 */
export const network = (
  names: ReadonlyArray<string>
): Effect.Effect<Network, HostsUnavailable | HostsFailed, Scope.Scope> =>
  Effect.gen(function* () {
    yield* check()
    yield* removeOrphans
    // Namespaces are named `wnet-PID-N-...` (the test process's pid: removeOrphans reads it);
    // interface names are at most 15 bytes: `w<6 hex digits><letter><3 digits>`.
    const n = ++counter
    const id = `w${randomBytes(3).toString("hex")}`
    const prefix = `${namespacePrefix}${process.pid}-${n}-`
    // A /24 no address of this namespace is in (the gateway's route must be the only one to it);
    // inside the namespaces nothing else can collide.
    const inUse = ipSync(["-o", "addr", "show"])
    let subnet = ""
    for (let attempt = 0; subnet === "" && attempt < 1000; attempt++) {
      const candidate = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`
      if (!inUse.includes(` ${candidate}.`)) subnet = candidate
    }
    const hub = `${prefix}hub`
    const gatewayLink = `${id}g0`
    const made: Array<string> = []

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        for (const ns of [...made].reverse()) killAllIn(ns)
        for (const ns of made) yield* ip(["netns", "del", ns]).pipe(Effect.ignore)
        // A veth made here but not yet moved (a set-up that failed half-way), and the gateway's.
        for (const link of ipSync(["-o", "link", "show"]).matchAll(new RegExp(`^\\d+: (${id}[a-z0-9]+)[@:]`, "gm")))
          yield* ip(["link", "del", link[1]!]).pipe(Effect.ignore)
        const left = namespacesWith(prefix)
        if (left.length > 0) yield* Effect.logWarning(`Hosts: namespaces left behind: ${left.join(", ")}`)
      })
    )

    const addNamespace = (ns: string) =>
      ip(["netns", "add", ns]).pipe(
        Effect.tap(() => Effect.sync(() => made.push(ns))),
        Effect.mapError((e) => (made.length === 0 ? unavailable(e.message) : e)),
        Effect.zipRight(ip(["-n", ns, "link", "set", "lo", "up"]))
      )

    yield* addNamespace(hub)
    yield* ip(["-n", hub, "link", "add", "br0", "type", "bridge"])
    yield* ip(["-n", hub, "link", "set", "br0", "up"])

    /** A veth whose one end (`outer`) goes into the hub's bridge; the other stays where it was made. */
    const plug = (inner: string, outer: string) =>
      Effect.gen(function* () {
        yield* ip(["link", "add", inner, "type", "veth", "peer", "name", outer])
        yield* ip(["link", "set", outer, "netns", hub])
        yield* ip(["-n", hub, "link", "set", outer, "master", "br0"])
        yield* ip(["-n", hub, "link", "set", outer, "up"])
      })

    const hosts: Record<string, Host> = {}
    for (const [index, name] of names.entries()) {
      const ns = `${prefix}${name}`
      const address = `${subnet}.${index + 1}`
      const inner = `${id}h${String(index).padStart(3, "0")}`
      const outer = `${id}p${String(index).padStart(3, "0")}`
      yield* addNamespace(ns)
      yield* plug(inner, outer)
      yield* ip(["link", "set", inner, "netns", ns])
      yield* ip(["-n", ns, "link", "set", inner, "name", "eth0"])
      yield* ip(["-n", ns, "addr", "add", `${address}/24`, "dev", "eth0"])
      yield* ip(["-n", ns, "link", "set", "eth0", "up"])
      const route = (verb: "add" | "del", other: Host) =>
        Effect.all([
          ip(["-n", ns, "route", verb, "blackhole", `${other.address}/32`]),
          ip(["-n", other.netns, "route", verb, "blackhole", `${address}/32`])
        ]).pipe(Effect.asVoid)
      hosts[name] = {
        name,
        netns: ns,
        address,
        exec: (argv) => ["ip", "netns", "exec", ns, ...argv],
        pids: () =>
          ipSync(["netns", "pids", ns])
            .split("\n")
            .map(Number)
            .filter((p) => p > 0),
        isolate: ip(["-n", hub, "link", "set", outer, "down"]).pipe(Effect.asVoid),
        reconnect: ip(["-n", hub, "link", "set", outer, "up"]).pipe(Effect.asVoid),
        cutFrom: (other) => route("add", other),
        healFrom: (other) => route("del", other)
      }
    }

    const gateway = `${subnet}.254`
    yield* plug(gatewayLink, `${id}g1`)
    yield* ip(["addr", "add", `${gateway}/24`, "dev", gatewayLink])
    yield* ip(["link", "set", gatewayLink, "up"])
    return { hosts, gateway, subnet, prefix }
  })
