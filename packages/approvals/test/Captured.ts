/**
 * Real frames from the shared transcripts of codex 0.171.0, decoded as the supervisor decodes them.
 */
import { ServerRequests } from "@warden/protocol"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import type { CardContext } from "../src/Card.js"
import { fileChangesOf } from "../src/Card.js"

const fixtures = process.env["WARDEN_FIXTURES"] ?? join(__dirname, "../../../fixtures/codex-0.171.0")

interface Record_ {
  readonly dir: "in" | "out"
  readonly frame: { readonly id?: string | number; readonly method?: string; readonly params?: unknown }
}

export const frames = (scenario: string): ReadonlyArray<Record_> =>
  readFileSync(join(fixtures, `${scenario}.jsonl`), "utf8")
    .split("\n")
    .filter((l) => l.trim().length > 0)
    .map((l) => JSON.parse(l) as Record_)

/** The first server request of a scenario, decoded; throws if there is none or it does not decode. */
export const request = (scenario: string, index = 0): ServerRequests.ServerRequest => {
  const requests = frames(scenario).filter(
    (r) => r.dir === "in" && r.frame.id !== undefined && r.frame.method !== undefined
  )
  const hit = requests[index]
  if (!hit) throw new Error(`${scenario}: no server request #${index}`)
  const decoded = ServerRequests.decode(hit.frame.id!, hit.frame.method!, hit.frame.params)
  if (decoded._tag !== "Known") throw new Error(`${scenario}: request did not decode: ${JSON.stringify(decoded)}`)
  return decoded
}

/** Raw params of the first server request (to build variants of real frames). */
export const rawParams = (scenario: string, index = 0): Record<string, unknown> => {
  const requests = frames(scenario).filter(
    (r) => r.dir === "in" && r.frame.id !== undefined && r.frame.method !== undefined
  )
  return structuredClone(requests[index]!.frame.params) as Record<string, unknown>
}

/** The context a supervisor keeps for a file-change approval: the changes of its `item/started`. */
export const fileChangeContext = (scenario: string): CardContext => {
  const started = frames(scenario).find(
    (r) =>
      r.dir === "in" &&
      r.frame.method === "item/started" &&
      (r.frame.params as { item?: { type?: string } } | undefined)?.item?.type === "fileChange"
  )
  if (!started) throw new Error(`${scenario}: no fileChange item/started`)
  return { fileChanges: fileChangesOf((started.frame.params as { item: unknown }).item) }
}

export const decode = (method: string, params: unknown, id: string | number = 1): ServerRequests.DecodedRequest =>
  ServerRequests.decode(id, method, params)

export const known = (method: string, params: unknown, id: string | number = 1): ServerRequests.ServerRequest => {
  const d = ServerRequests.decode(id, method, params)
  if (d._tag !== "Known") throw new Error(`did not decode: ${JSON.stringify(d)}`)
  return d
}
