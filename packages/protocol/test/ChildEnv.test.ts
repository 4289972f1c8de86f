/**
 * The child `SchemaDump.generate` starts gets the environment every child of Warden gets
 * (src/internal/ChildEnv.ts applies the rule of `ChildEnv` of `@warden/transport`, whose withheld
 * values it shares without importing the transport): the two agree, and a value withheld through
 * the transport's `ChildEnv.withhold` is withheld here too.
 */
import { assert, describe, it } from "@effect/vitest"
import { ChildEnv } from "@warden/transport"
import * as ProtocolChildEnv from "../src/internal/ChildEnv.js"

describe("the schema generator's child environment", () => {
  it("is the transport's ChildEnv.make, withheld values included", () => {
    const env = {
      PATH: "/usr/bin:/bin",
      WARDEN_NOTIFY_SECRET: "s",
      warden_other: "x",
      HOOK: "protocol-test-key-0123456789",
      HEADER: "Bearer protocol-test-key-0123456789",
      SHORT: "pk1",
      GONE: undefined
    }
    const before = ProtocolChildEnv.make(env)
    assert.deepStrictEqual(before, ChildEnv.make(env))
    assert.deepStrictEqual(Object.keys(before).sort(), ["HEADER", "HOOK", "PATH", "SHORT"])
    ChildEnv.withhold("protocol-test-key-0123456789")
    ChildEnv.withhold("pk1")
    const after = ProtocolChildEnv.make(env)
    assert.deepStrictEqual(after, ChildEnv.make(env))
    assert.deepStrictEqual(after, { PATH: "/usr/bin:/bin" })
  })
})
