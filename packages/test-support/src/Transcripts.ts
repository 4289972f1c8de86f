/**
 * The golden transcripts of the real codex 0.171.0 (`fixtures/codex-0.171.0` at the repository
 * root, or `$WARDEN_FIXTURES`), read once per test file by the test kit's `TranscriptReplay` (one
 * `{dir, t, proc?, frame}` per line; `in` = what the server sent), and what the protocol's tests
 * look for in them: the server's messages, its notifications, and our requests with its answers.
 */
import { TranscriptReplay } from "@warden/testkit"

export type Frame = TranscriptReplay.Frame
export type Line = TranscriptReplay.Line
export type Transcript = TranscriptReplay.Transcript

/** Every transcript, sorted by name. */
export const transcripts: ReadonlyArray<Transcript> = TranscriptReplay.loadAll()

/** The transcript `name` (its file name without `.jsonl`); throws when there is none. */
export const transcript = (name: string): Transcript => {
  const found = transcripts.find((t) => t.name === name)
  if (found === undefined) throw new Error(`no transcript ${name} in ${TranscriptReplay.fixturesDir}`)
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
