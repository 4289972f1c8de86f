/**
 * Checking a permissions grant against what codex asked for, and building the answer fresh.
 *
 * A permissions grant widens a worker's sandbox, so it is checked field by field and the answer
 * is built fresh from checked values: nothing a caller handed us is passed through by reference
 * (a getter or `toJSON` would run again inside JSON.stringify, after the check).
 *
 * Refused: unknown keys, inherited properties, accessors, `toJSON`, non-plain objects, empty path
 * lists, a non-integer or < 1 depth, an unknown scope, and anything wider than what was asked:
 * access to a path not asked, read or write to a path asked as deny, write where read was asked,
 * the network when not asked (`within`, over normalized sets). Every deny that was asked is kept
 * in the answer of a grant that gives any file-system access.
 */
import { Either } from "effect"

/**
 * How long a permissions grant lasts, `"turn"` or `"session"`; an answer without one means `"turn"`.
 */
export type GrantScope = "turn" | "session"

/**
 * A file-system location in a permission set, as the wire writes it.
 *
 * `path` is one path, `glob_pattern` a glob, `special` a location codex names by `kind` (kept
 * verbatim, with its optional `path` and `subpath`).
 */
export type FileSystemPath =
  | { readonly type: "path"; readonly path: string }
  | { readonly type: "glob_pattern"; readonly pattern: string }
  | {
      readonly type: "special"
      readonly value: { readonly kind: string; readonly path?: string; readonly subpath?: string | null }
    }

/**
 * One location of `fileSystem.entries` with its access, `read`, `write` or `deny`.
 *
 * A `deny` entry carves a location out of a wider access; a grant that gives any file-system
 * access keeps every deny that was asked.
 */
export interface FileSystemEntry {
  readonly path: FileSystemPath
  readonly access: "read" | "write" | "deny"
}

/**
 * A permission set that passed the shape check, holding only these fields of these types.
 *
 * Both what codex asked (`readRequested`) and what a grant gives are read into this shape. Null
 * fields are dropped (a `fileSystem` left with nothing is dropped too), an empty path list is
 * refused, and `network` is kept only when `enabled` is a boolean.
 */
export interface CheckedGrant {
  readonly fileSystem?: {
    readonly read?: ReadonlyArray<string>
    readonly write?: ReadonlyArray<string>
    readonly entries?: ReadonlyArray<FileSystemEntry>
    readonly globScanMaxDepth?: number
  }
  readonly network?: { readonly enabled: boolean }
}

/**
 * The result to send for `item/permissions/requestApproval`, built fresh from checked values.
 *
 * `permissions` is new plain JSON (`{}` grants nothing), `scope` is always stated, and
 * `strictAutoReview` is present only when the grant gave a boolean.
 */
export interface GrantAnswer {
  readonly permissions: Record<string, unknown>
  readonly scope: GrantScope
  readonly strictAutoReview?: boolean
}

class Refusal {
  constructor(readonly reason: string) {}
}

const fail = (reason: string): never => {
  throw new Refusal(reason)
}

/** Own, enumerable data properties of a plain object; anything else refuses. */
const plainRecord = (value: unknown, where: string, allowed: ReadonlyArray<string>): Map<string, unknown> => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail(`${where} is not an object`)
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) fail(`${where} is not a plain object`)
  if (Object.getOwnPropertySymbols(value).length > 0) fail(`${where} has symbol keys`)
  // Properties reachable through the prototype (e.g. Object.create({write: [...]})) are refused above;
  // a null-prototype object cannot inherit. Own keys are checked one by one.
  const out = new Map<string, unknown>()
  for (const key of Object.getOwnPropertyNames(value)) {
    if (!allowed.includes(key)) fail(`${where} has an unknown key "${key}"`)
    const descriptor = Object.getOwnPropertyDescriptor(value, key)!
    if (!("value" in descriptor)) fail(`${where}.${key} is an accessor, not a value`)
    if (!descriptor.enumerable) fail(`${where}.${key} is not enumerable`)
    out.set(key, descriptor.value)
  }
  return out
}

const plainArray = (value: unknown, where: string): ReadonlyArray<unknown> => {
  if (!Array.isArray(value) || Object.getPrototypeOf(value) !== Array.prototype) fail(`${where} is not an array`)
  const array = value as ReadonlyArray<unknown>
  const names = Object.getOwnPropertyNames(array)
  if (names.length !== array.length + 1) fail(`${where} has extra properties`)
  const out: Array<unknown> = []
  for (let i = 0; i < array.length; i++) {
    const descriptor = Object.getOwnPropertyDescriptor(array, String(i))
    if (descriptor === undefined || !("value" in descriptor)) fail(`${where}[${i}] is not a value`)
    out.push(descriptor!.value)
  }
  return out
}

const pathList = (value: unknown, where: string): ReadonlyArray<string> | undefined => {
  if (value === undefined || value === null) return undefined
  const items = plainArray(value, where)
  if (items.length === 0) fail(`${where} is an empty path list`)
  return items.map((item, i) => {
    if (typeof item !== "string" || item.length === 0) fail(`${where}[${i}] is not a non-empty path`)
    return item as string
  })
}

const optionalString = (value: unknown, where: string): string | undefined => {
  if (value === undefined) return undefined
  if (typeof value !== "string") fail(`${where} is not a string`)
  return value as string
}

const fileSystemPath = (value: unknown, where: string): FileSystemPath => {
  const record = plainRecord(value, where, ["type", "path", "pattern", "value"])
  switch (record.get("type")) {
    case "path": {
      const path = record.get("path")
      if (typeof path !== "string" || path.length === 0 || record.size !== 2) fail(`${where} is not a valid path entry`)
      return { type: "path", path: path as string }
    }
    case "glob_pattern": {
      const pattern = record.get("pattern")
      if (typeof pattern !== "string" || pattern.length === 0 || record.size !== 2)
        fail(`${where} is not a valid glob entry`)
      return { type: "glob_pattern", pattern: pattern as string }
    }
    case "special": {
      if (record.size !== 2) fail(`${where} is not a valid special entry`)
      const special = plainRecord(record.get("value"), `${where}.value`, ["kind", "path", "subpath"])
      const kind = special.get("kind")
      if (typeof kind !== "string") fail(`${where}.value.kind is not a string`)
      const path = optionalString(special.get("path"), `${where}.value.path`)
      const rawSub = special.get("subpath")
      const subpath = rawSub === null ? null : optionalString(rawSub, `${where}.value.subpath`)
      return {
        type: "special",
        value: {
          kind: kind as string,
          ...(path !== undefined ? { path } : {}),
          ...(subpath !== undefined ? { subpath } : {})
        }
      }
    }
    default:
      return fail(`${where}.type is not one of path, glob_pattern, special`)
  }
}

const entryList = (value: unknown, where: string): ReadonlyArray<FileSystemEntry> | undefined => {
  if (value === undefined || value === null) return undefined
  const items = plainArray(value, where)
  if (items.length === 0) fail(`${where} is an empty entry list`)
  return items.map((item, i) => {
    const record = plainRecord(item, `${where}[${i}]`, ["path", "access"])
    const access = record.get("access")
    if (access !== "read" && access !== "write" && access !== "deny")
      fail(`${where}[${i}].access is not read, write or deny`)
    return {
      path: fileSystemPath(record.get("path"), `${where}[${i}].path`),
      access: access as FileSystemEntry["access"]
    }
  })
}

const checkShape = (value: unknown, where: string): CheckedGrant => {
  const top = plainRecord(value, where, ["fileSystem", "network"])
  let fileSystem: CheckedGrant["fileSystem"]
  const fsValue = top.get("fileSystem")
  if (fsValue !== undefined && fsValue !== null) {
    const fs = plainRecord(fsValue, `${where}.fileSystem`, ["read", "write", "entries", "globScanMaxDepth"])
    const read = pathList(fs.get("read"), `${where}.fileSystem.read`)
    const write = pathList(fs.get("write"), `${where}.fileSystem.write`)
    const entries = entryList(fs.get("entries"), `${where}.fileSystem.entries`)
    const depthValue = fs.get("globScanMaxDepth")
    let depth: number | undefined
    if (depthValue !== undefined && depthValue !== null) {
      if (typeof depthValue !== "number" || !Number.isSafeInteger(depthValue) || depthValue < 1) {
        fail(`${where}.fileSystem.globScanMaxDepth is not an integer >= 1`)
      }
      depth = depthValue as number
    }
    if (read || write || entries || depth !== undefined) {
      fileSystem = {
        ...(read ? { read } : {}),
        ...(write ? { write } : {}),
        ...(entries ? { entries } : {}),
        ...(depth !== undefined ? { globScanMaxDepth: depth } : {})
      }
    }
  }
  let network: CheckedGrant["network"]
  const netValue = top.get("network")
  if (netValue !== undefined && netValue !== null) {
    const net = plainRecord(netValue, `${where}.network`, ["enabled"])
    const enabled = net.get("enabled")
    if (enabled !== undefined && enabled !== null && typeof enabled !== "boolean")
      fail(`${where}.network.enabled is not a boolean`)
    if (enabled === true || enabled === false) network = { enabled }
  }
  return { ...(fileSystem ? { fileSystem } : {}), ...(network ? { network } : {}) }
}

// ---------------------------------------------------------------------------------------------
// Normalized sets: one access per path

/**
 * The access a normalized set gives one path; `deny` allows least, then `read`, then `write`.
 */
export type Access = "read" | "write" | "deny"

/** Each path (by its exact JSON shape) with the one access a set gives it. */
export interface AccessSet {
  readonly byPath: ReadonlyMap<string, { readonly path: FileSystemPath; readonly access: Access }>
  readonly network: boolean
}

/** deny < read < write in what they allow; within one set the most restrictive mention wins. */
const rank: Record<Access, number> = { deny: 0, read: 1, write: 2 }

const pathKey = (path: FileSystemPath): string => JSON.stringify(path)

/**
 * Normalizes a checked permission set to one access per path.
 *
 * The `read` and `write` lists become plain path entries, `entries` keep their own access, and a
 * path mentioned twice gets the most restrictive access (a deny carve-out listed next to a write
 * stays a deny). Paths are compared by their exact JSON shape, not resolved on disk.
 */
export const normalize = (set: CheckedGrant): AccessSet => {
  const byPath = new Map<string, { readonly path: FileSystemPath; readonly access: Access }>()
  const add = (path: FileSystemPath, access: Access) => {
    const key = pathKey(path)
    const seen = byPath.get(key)
    if (seen === undefined || rank[access] < rank[seen.access]) byPath.set(key, { path, access })
  }
  const fs = set.fileSystem
  for (const path of fs?.read ?? []) add({ type: "path", path }, "read")
  for (const path of fs?.write ?? []) add({ type: "path", path }, "write")
  for (const entry of fs?.entries ?? []) add(entry.path, entry.access)
  return { byPath, network: set.network?.enabled === true }
}

const describePath = (path: FileSystemPath): string =>
  path.type === "path"
    ? JSON.stringify(path.path)
    : path.type === "glob_pattern"
      ? `glob ${JSON.stringify(path.pattern)}`
      : `special ${JSON.stringify(path.value.kind)}`

/**
 * Checks that a granted set is within the asked one, and returns the asked denies the grant leaves out.
 *
 * Every path the grant gives read or write was asked with at least that access (a path asked as
 * deny can never be granted), and the network only if asked; denies in the grant are always
 * allowed. On success (`Right`) it returns the asked denies the grant does not state: the answer
 * keeps them (a deny may only be kept, never dropped or turned into access). It fails (`Left`)
 * with the reason the grant is wider than asked, such as
 * `grant writes "/etc", which was not asked for`.
 */
export const within = (asked: AccessSet, granted: AccessSet): Either.Either<ReadonlyArray<FileSystemPath>, string> => {
  for (const [key, given] of granted.byPath) {
    if (given.access === "deny") continue // narrowing is always allowed
    const wanted = asked.byPath.get(key)
    if (wanted === undefined)
      return Either.left(
        `grant ${given.access === "write" ? "writes" : "reads"} ${describePath(given.path)}, which was not asked for`
      )
    if (wanted.access === "deny")
      return Either.left(
        `grant ${given.access === "write" ? "writes" : "reads"} ${describePath(given.path)}, which was asked as deny`
      )
    if (rank[given.access] > rank[wanted.access])
      return Either.left(`grant writes ${describePath(given.path)}, which was asked as read only`)
  }
  if (granted.network && !asked.network) return Either.left("grant enables the network, which was not asked for")
  const keep: Array<FileSystemPath> = []
  for (const [key, wanted] of asked.byPath) {
    if (wanted.access === "deny" && granted.byPath.get(key)?.access !== "deny") keep.push(wanted.path)
  }
  return Either.right(keep)
}

/**
 * Fresh plain JSON for the wire, built only from checked values.
 *
 * Every array and object is new, so nothing the caller still holds can change the answer after
 * the check.
 */
export const toWire = (grant: CheckedGrant): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  if (grant.fileSystem) {
    const fs: Record<string, unknown> = {}
    if (grant.fileSystem.read) fs["read"] = [...grant.fileSystem.read]
    if (grant.fileSystem.write) fs["write"] = [...grant.fileSystem.write]
    if (grant.fileSystem.entries) {
      fs["entries"] = grant.fileSystem.entries.map((e) => ({
        path: { ...e.path, ...(e.path.type === "special" ? { value: { ...e.path.value } } : {}) },
        access: e.access
      }))
    }
    if (grant.fileSystem.globScanMaxDepth !== undefined) fs["globScanMaxDepth"] = grant.fileSystem.globScanMaxDepth
    out["fileSystem"] = fs
  }
  if (grant.network) out["network"] = { enabled: grant.network.enabled }
  return out
}

const scopeOf = (value: unknown): GrantScope => {
  if (value === undefined) return "turn"
  if (value === "turn" || value === "session") return value
  return fail(`scope ${JSON.stringify(String(value))} is neither "turn" nor "session"`)
}

const attempt = <A>(f: () => A): Either.Either<A, string> => {
  try {
    return Either.right(f())
  } catch (error) {
    if (error instanceof Refusal) return Either.left(error.reason)
    // A throwing Proxy trap or getter is hostile input, not a bug of ours: refuse it.
    return Either.left(`grant could not be read: ${error instanceof Error ? error.message : String(error)}`)
  }
}

/**
 * Reads the `permissions` of a server request into a `CheckedGrant`, or the reason it cannot be read.
 *
 * The same checks as a grant apply (unknown keys, non-plain objects, empty path lists, a bad depth
 * are refused), so a request refused here cannot be granted either: only the empty grant answers it.
 * Never throws.
 */
export const readRequested = (permissions: unknown): Either.Either<CheckedGrant, string> =>
  attempt(() => checkShape(permissions, "requested permissions"))

/**
 * Checks a grant against what was requested and builds the answer to send.
 *
 * `requested` is the request's `permissions` as received; `grant` is what a policy or a person
 * gives. Fails (`Left`, with a reason a person can read) when the request or the grant does not
 * have the expected shape, when the grant is wider than asked (see `within`), when `scope` is
 * neither `"turn"` nor `"session"` (it defaults to `"turn"`), or when `strictAutoReview` is not a
 * boolean. Never throws: a hostile getter or Proxy is a `Left` too. A grant that gives any
 * file-system access carries every deny that was asked.
 *
 * @example
 * ```ts
 * import { PermissionsGrant } from "@warden/protocol"
 *
 * const asked = { fileSystem: { write: ["/repo/out"] } }
 * PermissionsGrant.checkGrant(asked, { permissions: { fileSystem: { write: ["/repo/out"] } } })
 * // Either.right({ permissions: { fileSystem: { write: ["/repo/out"] } }, scope: "turn" })
 * PermissionsGrant.checkGrant(asked, { permissions: { network: { enabled: true } } })
 * // Either.left("grant enables the network, which was not asked for")
 * ```
 */
export const checkGrant = (
  requested: unknown,
  grant: { readonly permissions: unknown; readonly scope?: unknown; readonly strictAutoReview?: unknown }
): Either.Either<GrantAnswer, string> =>
  attempt(() => {
    const asked = checkShape(requested, "requested permissions")
    const given = checkShape(grant.permissions, "permissions")
    const kept = within(normalize(asked), normalize(given))
    if (Either.isLeft(kept)) return fail(kept.left)
    // A grant that gives any file-system access carries every deny that was asked with it.
    const answer =
      given.fileSystem !== undefined && kept.right.length > 0
        ? {
            ...given,
            fileSystem: {
              ...given.fileSystem,
              entries: [
                ...(given.fileSystem.entries ?? []),
                ...kept.right.map((path): FileSystemEntry => ({ path, access: "deny" }))
              ]
            }
          }
        : given
    const scope = scopeOf(grant.scope)
    const strict = grant.strictAutoReview
    if (strict !== undefined && typeof strict !== "boolean") fail("strictAutoReview is not a boolean")
    return {
      permissions: toWire(answer),
      scope,
      ...(typeof strict === "boolean" ? { strictAutoReview: strict } : {})
    }
  })

/**
 * The empty grant, the refusal that keeps the turn going.
 *
 * `{permissions: {}, scope: "turn"}`: nothing is granted, and the turn goes on without it.
 */
export const emptyGrant = (): GrantAnswer => ({ permissions: {}, scope: "turn" })
