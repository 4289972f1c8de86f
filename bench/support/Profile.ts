/**
 * A CPU profile of a window of this process (node:inspector), for the benchmarks' `--profile DIR`:
 * written to `DIR/NAME-N.cpuprofile` (N counts this process's profiles of that name). Without a
 * directory the window just runs.
 */
const counts = new Map<string, number>()

export const profiled = async <A>(
  dir: string | undefined,
  name: string,
  intervalUs: number,
  window: () => Promise<A>
): Promise<A> => {
  if (dir === undefined) return window()
  const { Session } = await import("node:inspector")
  const { mkdirSync, writeFileSync } = await import("node:fs")
  const session = new Session()
  session.connect()
  const post = (method: string, params?: object) =>
    new Promise<any>((resolve, reject) =>
      session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result)))
    )
  await post("Profiler.enable")
  await post("Profiler.setSamplingInterval", { interval: intervalUs })
  await post("Profiler.start")
  try {
    return await window()
  } finally {
    const { profile } = await post("Profiler.stop")
    mkdirSync(dir, { recursive: true })
    const n = (counts.get(name) ?? 0) + 1
    counts.set(name, n)
    writeFileSync(`${dir}/${name}-${n}.cpuprofile`, JSON.stringify(profile))
    session.disconnect()
  }
}
