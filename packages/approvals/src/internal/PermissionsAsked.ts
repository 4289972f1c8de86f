/**
 * What a permissions request asks, one `access path` string each (`write /a`, `read /b`,
 * `deny /repo/.git/hooks`, `network`): public as `Card.permissionsAsked`, shown on cards and read
 * by remembered rules to scope them.
 */
import { PermissionsGrant } from "@warden/protocol"
import { Either } from "effect"

const entryPath = (path: PermissionsGrant.FileSystemPath): string => {
  switch (path.type) {
    case "path":
      return path.path
    case "glob_pattern":
      return path.pattern
    case "special":
      return `<${path.value.kind}>${path.value.subpath ? ` ${path.value.subpath}` : ""}`
  }
}

/** `write /a, read /b, network` from what was asked. */
export const permissionsAsked = (permissions: unknown): ReadonlyArray<string> | undefined => {
  const read = PermissionsGrant.readRequested(permissions)
  if (Either.isLeft(read)) return undefined
  const asked = read.right
  const out: Array<string> = []
  for (const path of asked.fileSystem?.write ?? []) out.push(`write ${path}`)
  for (const path of asked.fileSystem?.read ?? []) out.push(`read ${path}`)
  for (const entry of asked.fileSystem?.entries ?? []) out.push(`${entry.access} ${entryPath(entry.path)}`)
  if (asked.network?.enabled === true) out.push("network")
  return [...new Set(out)]
}
