/**
 * The fast path of `ServerRequests.decode` (src/internal/FastDecode.ts) against the Schema decoder
 * it stands in for: on every input, it either gives up (Miss) or gives exactly the Schema
 * decoder's value (same values, same keys in the same order, arrays and objects rebuilt where
 * Schema rebuilds them); it never accepts what the Schema decoder refuses.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc, Schema } from "effect"
import { readFileSync, readdirSync } from "node:fs"
import { join } from "node:path"
import * as FastDecode from "../src/internal/FastDecode.js"
import { ServerRequests } from "../src/index.js"
import type { ServerRequestMethod } from "../src/ServerRequests.js"

const fixtures = process.env["WARDEN_FIXTURES"] ?? join(__dirname, "../../../fixtures/codex-0.171.0")

const captured: ReadonlyArray<{ method: ServerRequestMethod; params: unknown }> = readdirSync(fixtures)
  .filter((f) => f.endsWith(".jsonl"))
  .flatMap((f) =>
    readFileSync(join(fixtures, f), "utf8")
      .split("\n")
      .filter((l) => l.trim().length > 0)
      .map((l) => JSON.parse(l))
      .filter(
        (r) =>
          r.dir === "in" && r.frame && r.frame.id !== undefined && ServerRequests.isServerRequestMethod(r.frame.method)
      )
      .map((r) => ({ method: r.frame.method, params: r.frame.params }))
  )

const methods = ServerRequests.ServerRequestMethods
const schemaOf = (method: ServerRequestMethod) => ServerRequests.Specs[method].params as Schema.Schema<unknown, unknown>
const slow = Object.fromEntries(
  methods.map((m) => [m, Schema.decodeUnknownEither(schemaOf(m), { onExcessProperty: "ignore" })])
) as Record<ServerRequestMethod, (u: unknown) => Either.Either<unknown, unknown>>
const fast = Object.fromEntries(methods.map((m) => [m, FastDecode.compile(schemaOf(m).ast)])) as Record<
  ServerRequestMethod,
  FastDecode.Decoder | undefined
>

/** Deep equality that also requires the same own keys in the same order (what JSON would show). */
const sameValue = (a: unknown, b: unknown, path = "$"): string | undefined => {
  if (Object.is(a, b)) return undefined
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null)
    return `${path}: ${String(a)} vs ${String(b)}`
  if (Array.isArray(a) !== Array.isArray(b)) return `${path}: array vs object`
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  if (ka.join("\u0000") !== kb.join("\u0000")) return `${path}: keys [${ka}] vs [${kb}]`
  for (const k of ka) {
    const d = sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`)
    if (d !== undefined) return d
  }
  return undefined
}

/** Check one input; returns what went wrong, or undefined. Counts which path decided. */
const check = (
  method: ServerRequestMethod,
  input: unknown,
  tally: { fast: number; miss: number }
): string | undefined => {
  const decoder = fast[method]
  if (decoder === undefined) return undefined // no fast path for this shape (an empty struct): the Schema decoder decides
  const out = decoder(input)
  const reference = slow[method](input)
  if (out === FastDecode.Miss) {
    tally.miss++
    return undefined
  }
  tally.fast++
  if (Either.isLeft(reference))
    return `${method}: the fast path accepted what Schema refuses: ${JSON.stringify(input)?.slice(0, 300)}`
  const diff = sameValue(out, reference.right)
  return diff === undefined ? undefined : `${method}: ${diff} for ${JSON.stringify(input)?.slice(0, 300)}`
}

/** Values of every JSON shape (and undefined), small. */
const anyValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(null, undefined, true, false, 0, 1, -1.5, "", "x", "decline", "accept"),
    fc.string(),
    fc.double(),
    fc.array(tie("value"), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom("label", "description", "host", "action", "id", "x", "type"), tie("value"), {
      maxKeys: 4
    })
  )
})).value

/** The struct's own fields, each present or not, each a plausible or an arbitrary value, plus extra keys. */
const paramsFor = (method: ServerRequestMethod): fc.Arbitrary<unknown> => {
  const ast = schemaOf(method).ast
  const names = ast._tag === "TypeLiteral" ? ast.propertySignatures.map((ps) => String(ps.name)) : []
  const plausible = fc.oneof(
    fc.string(),
    fc.constant(null),
    fc.array(fc.string(), { maxLength: 3 }),
    fc.array(fc.record({ label: fc.string(), description: fc.string() }), { maxLength: 3 }),
    fc.array(fc.record({ host: fc.string(), action: fc.string() }), { maxLength: 3 }),
    fc.array(
      fc.record(
        {
          id: fc.string(),
          header: fc.string(),
          question: fc.string(),
          isOther: fc.boolean(),
          options: fc.constantFrom(null, [], [{ label: "a", description: "b" }])
        },
        {
          requiredKeys: ["id", "header", "question"]
        }
      ),
      { maxLength: 3 }
    ),
    fc.boolean(),
    anyValue
  )
  return fc
    .tuple(
      fc.record(Object.fromEntries(names.map((n) => [n, plausible])), { requiredKeys: [] }),
      fc.dictionary(fc.constantFrom("extra", "startedAtMs", "environmentId"), anyValue, { maxKeys: 2 }),
      fc.boolean()
    )
    .map(([own, extra, extraFirst]) => (extraFirst ? { ...extra, ...own } : { ...own, ...extra }))
}

describe("the fast decode of server requests' params", () => {
  it("every captured request: the fast path decides, and says what the Schema decoder says", () => {
    const tally = { fast: 0, miss: 0 }
    assert.isAbove(captured.length, 10)
    for (const c of captured) {
      const problem = check(c.method, c.params ?? {}, tally)
      assert.isUndefined(problem, problem)
    }
    assert.strictEqual(tally.miss, 0, "no captured request needs the Schema decoder")
    // And decode() as a whole: the same requests as the Schema decoder alone would give.
    for (const c of captured) {
      const decoded = ServerRequests.decode(1, c.method, c.params)
      const reference = slow[c.method](c.params ?? {})
      assert.strictEqual(decoded._tag, Either.isRight(reference) ? "Known" : "Malformed")
    }
  })

  it("generated params of every method: the fast path agrees with the Schema decoder or leaves it to it", () => {
    const tally = { fast: 0, miss: 0 }
    for (const method of methods) {
      fc.assert(
        fc.property(paramsFor(method), (input) => {
          const problem = check(method, input, tally)
          if (problem !== undefined) throw new Error(problem)
        }),
        { numRuns: 1_500 }
      )
    }
    // Both paths were exercised (else the test proves nothing about one of them). The split varies
    // with the seed (the fast path took 461 of the 15,000 in one CI run): the floor says "many", not a share.
    assert.isAbove(tally.fast, 100, `fast ${tally.fast}, miss ${tally.miss}`)
    assert.isAbove(tally.miss, 100, `fast ${tally.fast}, miss ${tally.miss}`)
  })

  it("captured requests with one field replaced by any value, or removed: the fast path agrees or leaves it to Schema", () => {
    const tally = { fast: 0, miss: 0 }
    const withKeys = captured.filter(
      (c) => typeof c.params === "object" && c.params !== null && Object.keys(c.params).length > 0
    )
    fc.assert(
      fc.property(
        fc.nat(withKeys.length - 1),
        fc.nat(),
        fc.option(anyValue, { nil: Symbol.for("remove") as unknown }),
        (which, keyIndex, value) => {
          const c = withKeys[which]!
          const params = { ...(c.params as Record<string, unknown>) }
          const keys = Object.keys(params)
          const key = keys[keyIndex % keys.length]!
          if (value === Symbol.for("remove")) delete params[key]
          else params[key] = value
          const problem = check(c.method, params, tally)
          if (problem !== undefined) throw new Error(problem)
        }
      ),
      { numRuns: 5_000 }
    )
    assert.isAbove(tally.fast, 100)
    assert.isAbove(tally.miss, 100)
  })

  it("not objects at all: never accepted by the fast path", () => {
    for (const method of methods) {
      for (const input of [null, undefined, 1, "x", true, [], [1], () => 1]) {
        const decoder = fast[method]
        if (decoder !== undefined) assert.strictEqual(decoder(input), FastDecode.Miss, `${method} ${String(input)}`)
      }
    }
  })

  it("the fast path rebuilds what Schema rebuilds: the params object and arrays of structs are new, guarded arrays are the input's", () => {
    const c = captured.find((x) => x.method === "item/commandExecution/requestApproval")!
    const input = c.params as Record<string, unknown>
    const out = fast["item/commandExecution/requestApproval"]!(input) as Record<string, unknown>
    assert.notStrictEqual(out, input)
    assert.strictEqual(out["commandActions"], input["commandActions"])
    const amendments = [{ host: "example.com", action: "allow", extra: 1 }]
    const withNet = fast["item/commandExecution/requestApproval"]!({
      ...input,
      proposedNetworkPolicyAmendments: amendments
    }) as Record<string, unknown>
    assert.deepStrictEqual(withNet["proposedNetworkPolicyAmendments"], [{ host: "example.com", action: "allow" }])
    assert.notStrictEqual(withNet["proposedNetworkPolicyAmendments"], amendments)
  })
})
