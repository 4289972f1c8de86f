/**
 * The environment every child of Warden gets (ChildEnv, applied by ChildProcessTransport to every
 * spawn): ours without Warden's own variables and without a variable holding a withheld secret.
 */
import { assert, describe, it } from "@effect/vitest"
import { ChildEnv } from "@warden/transport"

describe("ChildEnv", () => {
  it("leaves out every WARDEN_ variable (any case) and keeps the rest as it is", () => {
    const env = ChildEnv.make({
      PATH: "/usr/bin",
      HOME: "/home/a",
      WARDEN_NOTIFY_SECRET: "s",
      warden_other: "x",
      OPENAI_API_KEY: "k",
      GONE: undefined
    })
    assert.deepStrictEqual(env, { PATH: "/usr/bin", HOME: "/home/a", OPENAI_API_KEY: "k" })
  })

  it("leaves out a variable whose value is a withheld secret, or holds one of 8 characters or more", () => {
    ChildEnv.withhold("hook-key-0123456789")
    ChildEnv.withhold("/")
    ChildEnv.withhold("")
    const env = ChildEnv.make({
      PATH: "/usr/bin:/bin",
      HOOK: "hook-key-0123456789",
      HEADER: "Bearer hook-key-0123456789",
      SLASH: "/",
      EMPTY: ""
    })
    assert.deepStrictEqual(env, { PATH: "/usr/bin:/bin", EMPTY: "" }, "a short secret matches whole values only")
  })
})
