/** Signed single-use decision links: what verifies, what is gone, what is forged; the notifications' backoff. */
import { assert, describe, it } from "@effect/vitest"
import * as InboxLinks from "../src/internal/Links.js"

describe("signed links", () => {
  it("links: a used or expired link is gone; a changed part is forged", () => {
    const signer = InboxLinks.makeSigner()
    const parts = (path: string) => path.split("/").slice(2).map(decodeURIComponent)
    const live = parts(signer.path("c1", "accept", 2_000))
    assert.strictEqual(signer.check(live, 1_000, false)._tag, "Valid")
    assert.deepStrictEqual(signer.check(live, 2_000, false), { _tag: "Gone", why: "expired" })
    assert.strictEqual(signer.check(live, 1_000, true)._tag, "Valid")
    assert.deepStrictEqual(signer.check(live, 1_000, true), { _tag: "Gone", why: "used" })
    const other = parts(signer.path("c1", "decline", 2_000))
    assert.strictEqual(signer.check(["c2", ...other.slice(1)], 1_000, false)._tag, "Forged")
    assert.strictEqual(signer.check([other[0]!, "accept", ...other.slice(2)], 1_000, false)._tag, "Forged")
    assert.strictEqual(signer.check([other[0]!, other[1]!, "9999", ...other.slice(3)], 1_000, false)._tag, "Forged")
    assert.strictEqual(InboxLinks.makeSigner().check(other, 1_000, false)._tag, "Forged", "another key")
    assert.deepStrictEqual([1, 2, 3, 10].map(InboxLinks.backoffMs), [500, 1_000, 2_000, 30_000])
  })

  it("a link's signature verifies in its canonical encoding only", () => {
    const signer = InboxLinks.makeSigner()
    const path = signer.path("c1", "accept", 4_000_000_000_000)
    const segments = path.split("/").slice(2)
    assert.strictEqual(signer.check(segments, 0, false)._tag, "Valid")
    const [card, decision, expires, nonce, signature] = segments as [string, string, string, string, string]
    assert.strictEqual(
      signer.check([card, decision, expires, nonce, signature + "="], 0, false)._tag,
      "Forged",
      "padding"
    )
    assert.strictEqual(
      signer.check([card, decision, expires, nonce, signature.replace(/-/g, "+").replace(/_/g, "/")], 0, false)._tag,
      signature.match(/[-_]/) ? "Forged" : "Valid",
      "base64 alphabet"
    )
    assert.strictEqual(
      signer.check([card, decision, "0" + expires, nonce, signature], 0, false)._tag,
      "Forged",
      "a leading zero in the expiry"
    )
    // The last character carries 2 spare bits in base64url of 32 bytes: a different one decodes the same.
    const last = signature.at(-1)!
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    const sibling = alphabet[(alphabet.indexOf(last) & ~3) | ((alphabet.indexOf(last) + 1) & 3)]!
    assert.deepStrictEqual(
      Buffer.from(signature.slice(0, -1) + sibling, "base64url"),
      Buffer.from(signature, "base64url")
    )
    assert.strictEqual(
      signer.check([card, decision, expires, nonce, signature.slice(0, -1) + sibling], 0, false)._tag,
      "Forged",
      "spare bits"
    )
    assert.strictEqual(signer.check(segments, 0, false)._tag, "Valid")
  })
})
