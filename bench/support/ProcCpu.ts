/**
 * CPU time of processes, read from /proc (Linux): what the fleet rows compare. `utime + stime` is
 * a process's own CPU; `cutime + cstime` adds its children that it waited for.
 */
import * as Fs from "node:fs"

const ticks = 100 // USER_HZ on Linux

/** The direct children of `pid` (every thread's), e.g. the app-server a transport spawned. */
export const childPids = (pid: number | "self" = "self"): Array<number> => {
  const pids = new Set<number>()
  try {
    for (const task of Fs.readdirSync(`/proc/${pid}/task`)) {
      const text = Fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim()
      for (const child of text.split(/\s+/).filter(Boolean)) pids.add(Number(child))
    }
  } catch {
    // gone
  }
  return [...pids]
}

/**
 * A process's CPU in ms from /proc: utime + stime (`own`), plus cutime + cstime (its waited-for
 * children) unless `own`. 0 for a process that is gone.
 */
export const cpuOfPid = (pid: number, own = false): number => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // fields[0] is field 3 (state); utime is field 14 -> index 11, stime 12, cutime 13, cstime 14.
    const sum = Number(fields[11]) + Number(fields[12]) + (own ? 0 : Number(fields[13]) + Number(fields[14]))
    return (sum * 1000) / ticks
  } catch {
    return 0
  }
}

/** The CPU of a process, its waited-for children and all its live descendants, in ms. */
export const treeCpu = (pid: number): number => {
  let total = cpuOfPid(pid)
  for (const child of childPids(pid)) total += treeCpu(child)
  return total
}
