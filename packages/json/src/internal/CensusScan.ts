/**
 * The scan behind the census (`JsonCensus.scan`): one linear pass over a valid JSON text that
 * counts the keys of every object and reports the large ones with where they are. Pure: the
 * registry and the thresholds are the public module's.
 *
 * @internal
 */

/** One large object of a text: where it is (keys as JSON string literals, array indices as numbers), and its count. */
export interface Found {
  readonly path: ReadonlyArray<string | number>
  readonly keys: number
}

/** Where the string literal opening at `at` closes (its closing quote). The text is valid JSON. */
const stringEnd = (text: string, at: number): number => {
  let j = at + 1
  for (;;) {
    j = text.indexOf('"', j)
    if (j < 0) return text.length
    let backslashes = 0
    for (let k = j - 1; text.charCodeAt(k) === 92; k--) backslashes++
    if ((backslashes & 1) === 0) return j
    j++
  }
}

/**
 * Every object of `minKeys` keys or more in a valid JSON text, up to `maxDepth` levels (the text's
 * value is level 1), innermost first in the order they close. One pass: linear in the text (each
 * string is skipped by `indexOf`, each backslash run is read once, by the quote that ends it).
 */
export const scan = (text: string, minKeys: number, maxDepth: number): ReadonlyArray<Found> => {
  const found: Array<Found> = []
  // The levels above the current one (1..maxDepth); the current level's state is kept in locals.
  const levels = maxDepth + 2
  const isObjectAt = new Uint8Array(levels)
  const keysAt = new Float64Array(levels)
  const commasAt = new Float64Array(levels)
  const keyStartAt = new Float64Array(levels)
  const keyEndAt = new Float64Array(levels)
  let depth = 0
  let isObject = false
  let expectKey = false
  let keys = 0
  let commas = 0
  let keyStart = 0
  let keyEnd = 0
  const n = text.length
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 34) {
      const end = stringEnd(text, i)
      if (expectKey) {
        expectKey = false
        keys++
        keyStart = i
        keyEnd = end + 1
      }
      i = end
    } else if (c === 44) {
      if (isObject) expectKey = true
      else commas++
    } else if (c === 123 || c === 91) {
      if (depth > 0 && depth <= maxDepth) {
        isObjectAt[depth] = isObject ? 1 : 0
        keysAt[depth] = keys
        commasAt[depth] = commas
        keyStartAt[depth] = keyStart
        keyEndAt[depth] = keyEnd
      }
      depth++
      // deeper than maxDepth, nothing is counted (expectKey stays false)
      isObject = c === 123 && depth <= maxDepth
      expectKey = isObject
      keys = 0
      commas = 0
    } else if (c === 125 || c === 93) {
      if (isObject && keys >= minKeys) {
        const path: Array<string | number> = []
        for (let l = 1; l < depth; l++)
          path.push(isObjectAt[l] === 1 ? text.slice(keyStartAt[l]!, keyEndAt[l]!) : commasAt[l]!)
        found.push({ path, keys })
      }
      depth--
      if (depth > 0 && depth <= maxDepth) {
        isObject = isObjectAt[depth] === 1
        keys = keysAt[depth]!
        commas = commasAt[depth]!
        keyStart = keyStartAt[depth]!
        keyEnd = keyEndAt[depth]!
      } else {
        isObject = false
      }
      expectKey = false
    }
  }
  return found
}

/** A key's name from its JSON string literal. */
const keyName = (literal: string): string =>
  literal.includes("\\") ? (JSON.parse(literal) as string) : literal.slice(1, -1)

/**
 * The object at `path` in `root` (what `JSON.parse` made of the scanned text), or `undefined`
 * when the path leads to no plain object (an array, a value a later twin key replaced).
 */
export const objectAt = (root: unknown, path: ReadonlyArray<string | number>): object | undefined => {
  let value: unknown = root
  for (const step of path) {
    if (typeof value !== "object" || value === null) return undefined
    value =
      typeof step === "number" ? (value as Array<unknown>)[step] : (value as Record<string, unknown>)[keyName(step)]
  }
  return typeof value === "object" && value !== null && !Array.isArray(value) ? value : undefined
}
