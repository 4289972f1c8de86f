import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck } from "effect"
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
        permissions: {
          fileSystem: {
            write: ["/var/tmp/w"],
            entries: [{ path: { type: "path", path: "/var/tmp/w" }, access: "write" }]
          }
        },
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
  it("refuses an unknown nested key", () =>
    refused({ permissions: { fileSystem: { write: ["/var/tmp/w"], exec: [] } } }, /unknown key "exec"/))
  it("refuses inherited properties", () =>
    refused({ permissions: Object.create({ fileSystem: { write: ["/var/tmp/w"] } }) }, /not a plain object/))
  it("refuses a getter (it would run again in JSON.stringify)", () => {
    let calls = 0
    const sneaky = {}
    Object.defineProperty(sneaky, "fileSystem", {
      enumerable: true,
      get: () => (calls++ === 0 ? { write: ["/var/tmp/w"] } : { write: ["/"] })
    })
    refused({ permissions: sneaky }, /accessor/)
    assert.strictEqual(calls, 0)
  })
  it("refuses toJSON", () =>
    refused(
      { permissions: { fileSystem: { write: ["/var/tmp/w"] }, toJSON: () => ({ fileSystem: { write: ["/"] } }) } },
      /unknown key "toJSON"/
    ))
  it("refuses a class instance", () => {
    class Perms {
      fileSystem = { write: ["/var/tmp/w"] }
    }
    refused({ permissions: new Perms() }, /not a plain object/)
  })
  it("refuses an empty path list", () => refused({ permissions: { fileSystem: { write: [] } } }, /empty path list/))
  it("refuses a non-integer depth", () =>
    refused({ permissions: { fileSystem: { write: ["/var/tmp/w"], globScanMaxDepth: 1.5 } } }, /integer/))
  it("refuses a zero depth", () =>
    refused({ permissions: { fileSystem: { write: ["/var/tmp/w"], globScanMaxDepth: 0 } } }, /integer/))
  it("refuses an unknown scope", () => refused({ ...asked, scope: "forever" }, /scope/))
  it("refuses a path that was not asked for", () =>
    refused({ permissions: { fileSystem: { write: ["/"] } } }, /not asked for/))
  it("refuses enabling the network when it was not asked", () =>
    refused({ permissions: { network: { enabled: true } } }, /network/))
  it("refuses a non-boolean strictAutoReview", () => refused({ ...asked, strictAutoReview: "yes" }, /strictAutoReview/))
  it("refuses an array with extra properties", () => {
    const write = ["/var/tmp/w"] as Array<string> & { extra?: number }
    write.extra = 1
    refused({ permissions: { fileSystem: { write } } }, /extra properties/)
  })
  it("refuses a Proxy that throws", () => {
    const hostile = new Proxy(
      {},
      {
        ownKeys: () => {
          throw new Error("trap")
        }
      }
    )
    refused({ permissions: hostile }, /could not be read|trap/)
  })
  it("an empty grant is allowed (it grants nothing)", () => {
    const r = PermissionsGrant.checkGrant(requested, { permissions: {} })
    assert.deepStrictEqual(r, Either.right({ permissions: {}, scope: "turn" }))
  })
})

describe("PermissionsGrant: a grant is within the ask, denies included", () => {
  const withDenies = {
    fileSystem: {
      write: ["/repo"],
      entries: [
        { path: { type: "path", path: "/home/u/.ssh" }, access: "deny" },
        { path: { type: "path", path: "/repo/.git/hooks" }, access: "deny" }
      ]
    }
  }
  it("a path asked as deny cannot be granted as read or write", () => {
    for (const permissions of [
      { fileSystem: { read: ["/home/u/.ssh"] } },
      { fileSystem: { write: ["/home/u/.ssh"] } },
      { fileSystem: { entries: [{ path: { type: "path", path: "/home/u/.ssh" }, access: "read" }] } }
    ]) {
      const r = PermissionsGrant.checkGrant(withDenies, { permissions })
      assert.isTrue(
        Either.isLeft(r) && r.left.includes("/home/u/.ssh") && r.left.includes("asked as deny"),
        JSON.stringify(r)
      )
    }
  })
  it("a grant that drops the asked carve-outs keeps them in the answer", () => {
    const r = PermissionsGrant.checkGrant(withDenies, { permissions: { fileSystem: { write: ["/repo"] } } })
    assert.isTrue(Either.isRight(r))
    if (Either.isLeft(r)) return
    assert.deepStrictEqual(r.right.permissions, {
      fileSystem: {
        write: ["/repo"],
        entries: [
          { path: { type: "path", path: "/home/u/.ssh" }, access: "deny" },
          { path: { type: "path", path: "/repo/.git/hooks" }, access: "deny" }
        ]
      }
    })
  })
  it("write where only read was asked is refused, naming why", () => {
    const r = PermissionsGrant.checkGrant(
      { fileSystem: { read: ["/data"] } },
      { permissions: { fileSystem: { write: ["/data"] } } }
    )
    assert.deepStrictEqual(r, Either.left('grant writes "/data", which was asked as read only'))
  })
  it("a write and a deny of the same path in the ask: the deny wins", () => {
    const ask = { fileSystem: { write: ["/x"], entries: [{ path: { type: "path", path: "/x" }, access: "deny" }] } }
    const r = PermissionsGrant.checkGrant(ask, { permissions: { fileSystem: { write: ["/x"] } } })
    assert.isTrue(Either.isLeft(r) && r.left.includes("asked as deny"))
  })
})

describe("PermissionsGrant property: every accepted grant is within the ask with its denies; every refusal names why", () => {
  const paths = ["/a", "/a/b", "/c", "/home/u/.ssh", "/repo", "/repo/.git/hooks"] as const
  const access = FastCheck.constantFrom("read", "write", "deny")
  const entry = FastCheck.record({ path: FastCheck.constantFrom(...paths), access })
  const set = FastCheck.record({
    read: FastCheck.uniqueArray(FastCheck.constantFrom(...paths), { maxLength: 3 }),
    write: FastCheck.uniqueArray(FastCheck.constantFrom(...paths), { maxLength: 3 }),
    entries: FastCheck.array(entry, { maxLength: 4 }),
    network: FastCheck.boolean()
  })
  const toWire = (s: {
    read: ReadonlyArray<string>
    write: ReadonlyArray<string>
    entries: ReadonlyArray<{ path: string; access: string }>
    network: boolean
  }) => {
    const fileSystem = {
      ...(s.read.length > 0 ? { read: [...s.read] } : {}),
      ...(s.write.length > 0 ? { write: [...s.write] } : {}),
      ...(s.entries.length > 0
        ? { entries: s.entries.map((e) => ({ path: { type: "path", path: e.path }, access: e.access })) }
        : {})
    }
    return {
      ...(Object.keys(fileSystem).length > 0 ? { fileSystem } : {}),
      ...(s.network ? { network: { enabled: true } } : {})
    }
  }
  /** The reference: the most restrictive access each set gives a path, written out by hand. */
  const accessOf = (wire: any): Map<string, string> => {
    const out = new Map<string, string>()
    const order = { deny: 0, read: 1, write: 2 } as Record<string, number>
    const add = (p: string, a: string) => {
      const seen = out.get(p)
      if (seen === undefined || order[a]! < order[seen]!) out.set(p, a)
    }
    for (const p of wire.fileSystem?.read ?? []) add(p, "read")
    for (const p of wire.fileSystem?.write ?? []) add(p, "write")
    for (const e of wire.fileSystem?.entries ?? []) add(e.path.path, e.access)
    return out
  }

  it.prop(
    "generated asks and grants",
    [set, set, FastCheck.constantFrom("turn", "session")],
    ([ask, grant, scope]) => {
      const askWire = toWire(ask)
      const grantWire = toWire(grant)
      const r = PermissionsGrant.checkGrant(askWire, { permissions: grantWire, scope })
      const asked = accessOf(askWire)
      const given = accessOf(grantWire)
      const order = { deny: 0, read: 1, write: 2 } as Record<string, number>
      const widening = [...given].filter(
        ([p, a]) => a !== "deny" && (asked.get(p) === undefined || order[a]! > order[asked.get(p)!]!)
      )
      const networkWidening = grant.network && !ask.network
      if (Either.isLeft(r)) {
        assert.isTrue(widening.length > 0 || networkWidening, `refused without a widening: ${r.left}`)
        assert.isTrue(
          widening.some(([p]) => r.left.includes(JSON.stringify(p))) || r.left.includes("network"),
          `the reason names the path: ${r.left}`
        )
        return
      }
      assert.deepStrictEqual(widening, [], "an accepted grant gives nothing beyond the ask")
      assert.isFalse(networkWidening)
      const answered = accessOf(r.right.permissions)
      for (const [p, a] of answered) {
        if (a === "deny") continue
        assert.isDefined(asked.get(p), `${p} was asked`)
        assert.isAtMost(order[a]!, order[asked.get(p)!]!, `${p}: ${a} within ${asked.get(p)}`)
      }
      if (answered.size > 0) {
        for (const [p, a] of asked)
          if (a === "deny") assert.strictEqual(answered.get(p), "deny", `the asked deny of ${p} is kept`)
      }
      assert.strictEqual(r.right.scope, scope)
    },
    { fastCheck: { numRuns: 2000 } }
  )
})
