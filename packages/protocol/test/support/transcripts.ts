/**
 * The golden transcripts of the real codex 0.171.0 (`fixtures/codex-0.171.0` at the repository root, or
 * `$WARDEN_FIXTURES`): one `{dir, t, proc?, frame}` per line; `in` = what the server sent.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

export const FixturesDir = process.env["WARDEN_FIXTURES"] ??
  fileURLToPath(new URL("../../../../fixtures/codex-0.171.0", import.meta.url))

export type Frame = { readonly [key: string]: unknown }

export interface Line {
  readonly dir: "in" | "out"
  readonly t: number
  /** Which app-server process of the scenario (scenarios that restart the server run two). */
  readonly proc: number
  readonly frame: Frame
}

export interface Transcript {
  readonly name: string
  readonly lines: ReadonlyArray<Line>
}

const read = (file: string): Transcript => ({
  name: file.replace(/\.jsonl$/, ""),
  lines: readFileSync(join(FixturesDir, file), "utf8")
    .split("\n")
    .filter((line) => line.trim().length > 0)
    .map((line) => {
      const raw = JSON.parse(line) as { dir: "in" | "out"; t: number; proc?: number | null; frame: Frame }
      return { dir: raw.dir, t: raw.t, proc: raw.proc ?? 1, frame: raw.frame }
    })
})

export const transcripts: ReadonlyArray<Transcript> = readdirSync(FixturesDir)
  .filter((file) => file.endsWith(".jsonl"))
  .sort()
  .map(read)

export const transcript = (name: string): Transcript => {
  const found = transcripts.find((t) => t.name === name)
  if (found === undefined) throw new Error(`no transcript ${name} in ${FixturesDir}`)
  return found
}

/** Frames the server sent that carry a method: notifications (no id) and server requests (id). */
export const serverMessages = (t: Transcript) =>
  t.lines.flatMap((line) =>
    line.dir === "in" && typeof line.frame["method"] === "string"
      ? [{ method: line.frame["method"], params: line.frame["params"], id: line.frame["id"], frame: line.frame }]
      : []
  )

export const notifications = (t: Transcript) => serverMessages(t).filter((m) => m.id === undefined)

/** Our requests matched with the server's responses by (process, id). */
export const exchanges = (t: Transcript) => {
  const requests = new Map<string, { method: string; params: unknown }>()
  const out: Array<{ method: string; params: unknown; result?: unknown; error?: unknown }> = []
  for (const line of t.lines) {
    const id = line.frame["id"]
    if (id === undefined) continue
    const key = `${line.proc}:${JSON.stringify(id)}`
    if (line.dir === "out" && typeof line.frame["method"] === "string") {
      requests.set(key, { method: line.frame["method"], params: line.frame["params"] })
    } else if (line.dir === "in" && line.frame["method"] === undefined) {
      const request = requests.get(key)
      if (request === undefined) continue
      requests.delete(key)
      out.push({
        ...request,
        ...("result" in line.frame ? { result: line.frame["result"] } : {}),
        ...("error" in line.frame ? { error: line.frame["error"] } : {})
      })
    }
  }
  return out
}
