/**
 * A fast path for decoding server requests' params, compiled once from the same Schema ASTs the
 * decoder uses, for the shapes they are made of: structs of strings, numbers, booleans, literals,
 * unknowns, guards (`Schema.declare`), arrays, `Schema.compose`, and unions of those with `null`
 * and `undefined`.
 *
 * It never decides anything the Schema decoder would not: it either produces exactly what
 * `Schema.decodeUnknownEither(schema, { onExcessProperty: "ignore" })` produces (the same values,
 * the same keys in the same order, new objects where Schema makes new ones), or it gives up
 * (`Miss`) and the caller asks the Schema decoder, which then decides, failure details included.
 * A shape outside the subset compiles to nothing (always the Schema decoder). Checked against the
 * Schema decoder over every captured request, generated params and mutations of them
 * (test/FastDecode.test.ts).
 *
 * Why: the generic decoder costs ~6-10 µs per command approval on the read loop (Either per field,
 * unions searched per value), a fifth of an approval's round trip (docs/performance.md, "Approval round trip");
 * this path costs about a microsecond.
 */
import type { SchemaAST } from "effect"
import { Either } from "effect"

/** The fast path could not decide: ask the Schema decoder. */
export const Miss: unique symbol = Symbol("FastDecode.Miss")
export type Miss = typeof Miss

/** Decode `input`, or `Miss`. Never throws on any input (a declaration's guard that throws is a Miss). */
export type Decoder = (input: unknown) => unknown

type Kind = "simple" | "complex"
interface Compiled {
  readonly decode: Decoder
  /** `simple`: its output is its input (no copy); `complex`: it builds a new value. */
  readonly kind: Kind
  /** It may accept `null` or `undefined` (only simple decoders are allowed to). */
  readonly nullish: boolean
}

const has = Object.prototype.hasOwnProperty

/**
 * The fast decoder of a schema's AST, or undefined when the shape is outside the subset (then
 * every input goes to the Schema decoder).
 */
export const compile = (ast: SchemaAST.AST): Decoder | undefined => {
  try {
    return go(ast)?.decode
  } catch {
    return undefined
  }
}

const simple = (decode: Decoder, nullish = false): Compiled => ({ decode, kind: "simple", nullish })

const go = (ast: SchemaAST.AST): Compiled | undefined => {
  switch (ast._tag) {
    case "StringKeyword":
      return simple((u) => (typeof u === "string" ? u : Miss))
    case "NumberKeyword":
      return simple((u) => (typeof u === "number" ? u : Miss))
    case "BooleanKeyword":
      return simple((u) => (typeof u === "boolean" ? u : Miss))
    case "UnknownKeyword":
    case "AnyKeyword":
      return simple((u) => u, true)
    case "UndefinedKeyword":
      return simple((u) => (u === undefined ? u : Miss), true)
    case "Literal": {
      const literal = ast.literal
      return simple((u) => (u === literal ? u : Miss), literal === null)
    }
    case "Declaration": {
      // `Schema.declare(guard)`: its decoder answers synchronously with an Either; the value it
      // accepts is the input itself (no type parameters, no transformation).
      if (ast.typeParameters.length > 0) return undefined
      const parse = ast.decodeUnknown()
      return simple((u) => {
        try {
          const result = parse(u, {}, ast)
          return Either.isEither(result) && Either.isRight(result) && result.right === u ? u : Miss
        } catch {
          return Miss
        }
      })
    }
    case "Union":
      return union(ast.types)
    case "TupleType":
      return array(ast)
    case "TypeLiteral":
      return struct(ast)
    case "Transformation":
      return compose(ast)
    default:
      return undefined
  }
}

/**
 * A union the fast path can decide without Schema's candidate search: members that are simple and
 * at most one complex member, whose input (an object or array) no other member accepts unless
 * those others only accept `null`/`undefined`/primitives. Tried in order; the first that accepts
 * decides.
 */
const union = (types: ReadonlyArray<SchemaAST.AST>): Compiled | undefined => {
  const members: Array<Compiled> = []
  for (const t of types) {
    const c = go(t)
    if (c === undefined) return undefined
    members.push(c)
  }
  const complex = members.filter((m) => m.kind === "complex")
  if (complex.length > 1) return undefined
  // With a complex member (it takes objects or arrays), the simple ones may only be literals and
  // undefined: anything that could also take an object (unknown, a guard) would make the order of
  // Schema's candidate search matter.
  if (
    complex.length === 1 &&
    !types.every((t, i) => members[i]!.kind === "complex" || t._tag === "Literal" || t._tag === "UndefinedKeyword")
  ) {
    return undefined
  }
  const decoders = members.map((m) => m.decode)
  const decode: Decoder = (u) => {
    for (let i = 0; i < decoders.length; i++) {
      const out = decoders[i]!(u)
      if (out !== Miss) return out
    }
    return Miss
  }
  return { decode, kind: complex.length === 1 ? "complex" : "simple", nullish: members.some((m) => m.nullish) }
}

/** `Schema.Array(item)`: a new array of the decoded items. */
const array = (ast: SchemaAST.TupleType): Compiled | undefined => {
  if (ast.elements.length > 0 || ast.rest.length !== 1) return undefined
  const item = go(ast.rest[0]!.type)
  if (item === undefined) return undefined
  const decodeItem = item.decode
  return {
    kind: "complex",
    nullish: false,
    decode: (u) => {
      if (!Array.isArray(u)) return Miss
      const out = new Array(u.length)
      for (let i = 0; i < u.length; i++) {
        const v = decodeItem(u[i])
        if (v === Miss) return Miss
        out[i] = v
      }
      return out
    }
  }
}

/**
 * A struct of property signatures (no index signatures): a new object with the declared keys the
 * input has, in the schema's order, each decoded; excess keys ignored. A required key the input
 * lacks is a Miss (Schema decides what missing means).
 */
const struct = (ast: SchemaAST.TypeLiteral): Compiled | undefined => {
  // An empty struct is Schema's "any non-nullish value, as it is" (it keeps every key): not here.
  if (ast.indexSignatures.length > 0 || ast.propertySignatures.length === 0) return undefined
  const names: Array<string> = []
  const optional: Array<boolean> = []
  const decoders: Array<Decoder> = []
  for (const ps of ast.propertySignatures) {
    if (typeof ps.name !== "string") return undefined
    const c = go(ps.type)
    if (c === undefined) return undefined
    names.push(ps.name)
    optional.push(ps.isOptional)
    decoders.push(c.decode)
  }
  return {
    kind: "complex",
    nullish: false,
    decode: (u) => {
      if (typeof u !== "object" || u === null || Array.isArray(u)) return Miss
      const input = u as Record<string, unknown>
      const out: Record<string, unknown> = {}
      for (let i = 0; i < names.length; i++) {
        const name = names[i]!
        if (!has.call(input, name)) {
          if (optional[i]) continue
          return Miss
        }
        const v = decoders[i]!(input[name])
        if (v === Miss) return Miss
        out[name] = v
      }
      return out
    }
  }
}

/** `Schema.compose(from, to)`: decode with `from`, then with `to`. Other transformations: not here. */
const compose = (ast: SchemaAST.Transformation): Compiled | undefined => {
  if (ast.transformation._tag !== "ComposeTransformation") return undefined
  const from = go(ast.from)
  const to = go(ast.to)
  if (from === undefined || to === undefined) return undefined
  const decodeFrom = from.decode
  const decodeTo = to.decode
  return {
    kind: from.kind === "complex" || to.kind === "complex" ? "complex" : "simple",
    nullish: from.nullish && to.nullish,
    decode: (u) => {
      const mid = decodeFrom(u)
      return mid === Miss ? Miss : decodeTo(mid)
    }
  }
}
