/**
 * The live process tree under a pid, read from Linux `/proc` (empty elsewhere).
 *
 * For tests that must show every process they started is gone, and for finding a child they did
 * not spawn themselves (such as the app-server a transport started) to signal it.
 */
import * as Fs from "node:fs"

interface Stat {
  readonly ppid: number
  readonly state: string
}

const stat = (pid: number): Stat | undefined => {
  try {
    const text = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // `pid (comm) state ppid ...`; comm may hold spaces and parentheses: split after the last ")".
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
    return { state: fields[0] ?? "", ppid: Number(fields[1]) }
  } catch {
    return undefined // gone meanwhile, or no /proc
  }
}

/** Alive and not a zombie (a zombie is dead; it only waits for its parent to reap it). */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  const s = stat(pid)
  return s === undefined ? true : s.state !== "Z"
}

/** Every descendant of `pid` (children, their children...), zombies included. */
export const descendants = (pid: number): Array<number> => {
  if (!Fs.existsSync("/proc")) return []
  const children = new Map<number, Array<number>>()
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    const s = stat(Number(entry))
    if (s === undefined) continue
    const list = children.get(s.ppid) ?? []
    list.push(Number(entry))
    children.set(s.ppid, list)
  }
  const out: Array<number> = []
  const frontier = [pid]
  while (frontier.length > 0) {
    for (const child of children.get(frontier.pop()!) ?? []) {
      out.push(child)
      frontier.push(child)
    }
  }
  return out
}

/** The parent of `pid` (undefined if it is gone, or without /proc). */
export const parentOf = (pid: number): number | undefined => stat(pid)?.ppid

/** Live (non-zombie) descendants of `pid`. */
export const liveDescendants = (pid: number): Array<number> => descendants(pid).filter(isAlive)

/** The command line of `pid`, arguments joined by spaces ("" if unknown). */
export const commandLine = (pid: number): string => {
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim()
  } catch {
    return ""
  }
}

/** Live descendants of `pid` whose command line contains every one of `parts`. */
export const find = (pid: number, ...parts: ReadonlyArray<string>): Array<number> =>
  liveDescendants(pid).filter((p) => {
    const line = commandLine(p)
    return parts.every((part) => line.includes(part))
  })
