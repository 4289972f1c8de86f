/**
 * The file changes of a `fileChange` item, as cards show them and rules read them, and the bound
 * on how many are listed: public as `Card.fileChangesOf`, `Card.MaxFileChanges` and
 * `Card.OmittedChanges`.
 */
import { Json } from "@warden/protocol"
import type { FileChange } from "../Card.js"

/**
 * Changes a fileChange item lists at most (`Card.fileChangesOf`); the rest are replaced by one
 * entry of kind `OmittedChanges`. Large enough for a real refactor, small enough to check quickly.
 */
export const MaxFileChanges = 10_000

/**
 * The `kind` of the entry that stands for the changes not listed (its path says how many, and is
 * not a path). Rules read it as unknown changes: no path allow matches, every path deny does.
 */
export const OmittedChanges = "omitted"

const isRecord = Json.isRecord

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/**
 * The changes of a `fileChange` item (from its `item/started` notification), as cards show them and
 * rules check them. Codex sends `kind` as `{type: "add" | "delete" | "update", move_path?}`; a move
 * becomes two entries (`move-from` with the diff, `move-to`) so that every touched path is listed
 * and checked. Unreadable entries are skipped. At most `MaxFileChanges` entries are kept; when there
 * were more, one last entry of kind `OmittedChanges` says how many changes were left out, so that
 * no rule takes the list for all of them (a path allow never matches it, a path deny always does).
 */
export const fileChangesOf = (item: unknown): ReadonlyArray<FileChange> => {
  try {
    if (!isRecord(item)) return []
    const changes = item["changes"]
    if (!Array.isArray(changes)) return []
    const out: Array<FileChange> = []
    for (let i = 0; i < changes.length; i++) {
      if (out.length >= MaxFileChanges) {
        out.push(omittedEntry(changes.length - i))
        break
      }
      const change: unknown = changes[i]
      if (!isRecord(change)) continue
      const path = str(change["path"])
      if (path === undefined || path.length === 0) continue
      const rawKind = change["kind"]
      const kind =
        typeof rawKind === "string" ? rawKind : isRecord(rawKind) ? (str(rawKind["type"]) ?? "unknown") : "unknown"
      const diff = str(change["diff"])
      const movePath = isRecord(rawKind) ? (str(rawKind["move_path"]) ?? str(rawKind["movePath"])) : undefined
      if (movePath !== undefined && movePath.length > 0) {
        out.push({ path, kind: "move-from", ...(diff !== undefined ? { diff } : {}) })
        out.push({ path: movePath, kind: "move-to" })
      } else {
        out.push({ path, kind, ...(diff !== undefined ? { diff } : {}) })
      }
    }
    return out
  } catch {
    return []
  }
}

/** The entry standing for `count` changes left out of a list. */
export const omittedEntry = (count: number): FileChange => ({ path: `… ${count} more changes`, kind: OmittedChanges })

/** How many changes such an entry stands for. */
export const omittedCount = (change: FileChange): number => Number(/[0-9]+/.exec(change.path)?.[0] ?? 1)
