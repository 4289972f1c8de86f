import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import { PermissionsGrant } from "../src/index.js"

const requested = {
  network: null,
  fileSystem: {
    read: null,
    write: ["/var/tmp/w"],
    entries: [{ path: { type: "path", path: "/var/tmp/w" }, access: "write" }]
  }
}
const asked = { permissions: requested }

const refused = (grant: { permissions: unknown; scope?: unknown; strictAutoReview?: unknown }, why: RegExp) => {
  const r = PermissionsGrant.checkGrant(requested, grant)
  assert.isTrue(Either.isLeft(r), `expected a refusal for ${String(why)}`)
  if (Either.isLeft(r)) assert.match(r.left, why)
}

describe("PermissionsGrant.checkGrant", () => {
  it("grants exactly what was asked, scope defaulting to turn, as fresh JSON", () => {
    const r = PermissionsGrant.checkGrant(requested, asked)
    assert.isTrue(Either.isRight(r))
    if (Either.isRight(r)) {
      assert.deepStrictEqual(r.right, {
        permissions: { fileSystem: { write: ["/var/tmp/w"], entries: [{ path: { type: "path", path: "/var/tmp/w" }, access: "write" }] } },
        scope: "turn"
      })
      assert.notStrictEqual((r.right.permissions["fileSystem"] as any).write, requested.fileSystem.write)
    }
  })
  it("session scope and strictAutoReview are kept when valid", () => {
    const r = PermissionsGrant.checkGrant(requested, { ...asked, scope: "session", strictAutoReview: true })
    assert.isTrue(Either.isRight(r) && r.right.scope === "session" && r.right.strictAutoReview === true)
  })
  it("refuses an unknown key", () => refused({ permissions: { ...requested, shell: true } }, /unknown key "shell"/))
  it("refuses an unknown nested key", () => refused({ permissions: { fileSystem: { write: ["/var/tmp/w"], exec: [] } } }, /unknown key "exec"/))
  it("refuses inherited properties", () => refused({ permissions: Object.create({ fileSystem: { write: ["/var/tmp/w"] } }) }, /not a plain object/))
  it("refuses a getter (it would run again in JSON.stringify)", () => {
    let calls = 0
    const sneaky = {}
    Object.defineProperty(sneaky, "fileSystem", { enumerable: true, get: () => (calls++ === 0 ? { write: ["/var/tmp/w"] } : { write: ["/"] }) })
    refused({ permissions: sneaky }, /accessor/)
    assert.strictEqual(calls, 0)
  })
  it("refuses toJSON", () => refused({ permissions: { fileSystem: { write: ["/var/tmp/w"] }, toJSON: () => ({ fileSystem: { write: ["/"] } }) } }, /unknown key "toJSON"/))
  it("refuses a class instance", () => {
    class Perms { fileSystem = { write: ["/var/tmp/w"] } }
    refused({ permissions: new Perms() }, /not a plain object/)
  })
  it("refuses an empty path list", () => refused({ permissions: { fileSystem: { write: [] } } }, /empty path list/))
  it("refuses a non-integer depth", () => refused({ permissions: { fileSystem: { write: ["/var/tmp/w"], globScanMaxDepth: 1.5 } } }, /integer/))
  it("refuses a zero depth", () => refused({ permissions: { fileSystem: { write: ["/var/tmp/w"], globScanMaxDepth: 0 } } }, /integer/))
  it("refuses an unknown scope", () => refused({ ...asked, scope: "forever" }, /scope/))
  it("refuses a path that was not asked for", () => refused({ permissions: { fileSystem: { write: ["/"] } } }, /not asked for/))
  it("refuses enabling the network when it was not asked", () => refused({ permissions: { network: { enabled: true } } }, /network/))
  it("refuses a non-boolean strictAutoReview", () => refused({ ...asked, strictAutoReview: "yes" }, /strictAutoReview/))
  it("refuses an array with extra properties", () => {
    const write = ["/var/tmp/w"] as Array<string> & { extra?: number }
    write.extra = 1
    refused({ permissions: { fileSystem: { write } } }, /extra properties/)
  })
  it("refuses a Proxy that throws", () => {
    const hostile = new Proxy({}, { ownKeys: () => { throw new Error("trap") } })
    refused({ permissions: hostile }, /could not be read|trap/)
  })
  it("an empty grant is allowed (it grants nothing)", () => {
    const r = PermissionsGrant.checkGrant(requested, { permissions: {} })
    assert.deepStrictEqual(r, Either.right({ permissions: {}, scope: "turn" }))
  })
})
