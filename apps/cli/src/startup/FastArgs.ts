/**
 * `warden run`'s command line read without @effect/cli's parser, when it has the plain shape
 * almost every command line has; anything else is declined and goes to @effect/cli as before.
 *
 * Why: @effect/cli parses through Effect, building the command's whole help document and trying
 * every option against every argument (built-in options first, then the command's own), and at
 * start-up all of that code runs cold: about a quarter of what `warden run` does before it spawns
 * codex (docs/performance.md, "Start-up"). This reads the same option definitions
 * (RunCommand.options, the @effect/cli `Options` values) and gives the same parsed value, which
 * the test suite checks against @effect/cli's own parse for generated command lines
 * (apps/cli/test/fast-args.test.ts).
 *
 * The plain shape: `run`, then options, then one or more PROMPTs. An option is `--name VALUE`,
 * `--name=VALUE` or a flag `--name`, each name exactly as defined (or an alias, such as `-c`), a
 * repeatable option any number of times (`--name VALUE` only), any other at most once. Declined, so that @effect/cli
 * decides (and words any error) as it always has: a name it does not know (built-ins such as
 * `--help`, misspellings, other cases), `--`, clustered short flags, a value that starts with `-`
 * or a flag followed by a word @effect/cli would read as its value (`true`, `no`, ...), a PROMPT
 * that starts with `-` or an option after a PROMPT, a value its option's type or check refuses, a
 * missing required option, and any option built in a way this reader does not know.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"

/** The shape of @effect/cli 0.77's option descriptions (its internal tags), as far as read here. */
interface Node {
  readonly _tag: string
  readonly [key: string]: unknown
}

/** One flag or option on the command line: its names, its type, whether it repeats. */
interface Leaf {
  readonly node: Node
  readonly primitive: Node
  readonly repeatable: boolean
  readonly values: Array<string | undefined>
}

// @effect/cli reads these after a boolean flag as the flag's value (primitive.js, trueValues and falseValues).
const booleanWords = new Set(["true", "1", "y", "yes", "on", "false", "0", "n", "no", "off"])

const Declined = Symbol("Declined")
type Declined = typeof Declined
const Missing = Symbol("Missing")
type Missing = typeof Missing

const fullName = (name: string): string => (name.length === 1 ? `-${name}` : `--${name}`)

/** The leaves (Single options) of one option description, or false for a shape this reader does not know. */
const collect = (node: Node, repeatable: boolean, into: Map<string, Leaf>): boolean => {
  switch (node._tag) {
    case "Single": {
      const primitive = node["primitiveType"]
      if (
        typeof node["name"] !== "string" ||
        !Array.isArray(node["aliases"]) ||
        typeof primitive !== "object" ||
        primitive === null
      )
        return false
      const leaf: Leaf = { node, primitive: primitive as Node, repeatable, values: [] }
      for (const name of [node["name"], ...(node["aliases"] as Array<unknown>)]) {
        if (typeof name !== "string" || into.has(fullName(name))) return false
        into.set(fullName(name), leaf)
      }
      return true
    }
    case "Variadic":
      return (
        Option.isOption(node["min"]) &&
        Option.isNone(node["min"]) &&
        Option.isOption(node["max"]) &&
        Option.isNone(node["max"]) &&
        (node["argumentOption"] as Node | undefined)?._tag === "Single" &&
        collect(node["argumentOption"] as Node, true, into)
      )
    case "Map":
    case "WithDefault":
      return (
        typeof node["options"] === "object" &&
        node["options"] !== null &&
        collect(node["options"] as Node, repeatable, into)
      )
    default:
      return false
  }
}

const integer = /^(?:0|[1-9][0-9]{0,8})$/

/** One value of a leaf as @effect/cli's primitive type reads it, or Declined. */
const primitiveValue = (primitive: Node, value: string | undefined): unknown | Declined => {
  switch (primitive._tag) {
    case "Text":
      return value ?? Declined
    case "Integer":
      return value !== undefined && integer.test(value) ? Number(value) : Declined
    case "Choice": {
      const alternatives = primitive["alternatives"]
      if (value === undefined || !Array.isArray(alternatives)) return Declined
      const found = alternatives.find((pair) => Array.isArray(pair) && pair[0] === value) as
        | [string, unknown]
        | undefined
      return found === undefined ? Declined : found[1]
    }
    case "Bool": {
      // A flag given without a value: the flag's "if present" value (@effect/cli's default value of the primitive).
      const present = primitive["defaultValue"]
      return value === undefined && Option.isOption(present) && Option.isSome(present) ? present.value : Declined
    }
    default:
      return Declined
  }
}

/** The value of one option description given what the command line held for its leaves. */
const optionValue = (node: Node, leaves: Map<string, Leaf>): unknown | Missing | Declined => {
  switch (node._tag) {
    case "Single": {
      const leaf = leaves.get(fullName(node["name"] as string))!
      if (leaf.values.length === 0) return Missing
      return leaf.values.length === 1 ? primitiveValue(leaf.primitive, leaf.values[0]) : Declined
    }
    case "Variadic": {
      const leaf = leaves.get(fullName((node["argumentOption"] as Node)["name"] as string))!
      const values: Array<unknown> = []
      for (const raw of leaf.values) {
        const value = primitiveValue(leaf.primitive, raw)
        if (value === Declined) return Declined
        values.push(value)
      }
      return values
    }
    case "Map": {
      const inner = optionValue(node["options"] as Node, leaves)
      if (inner === Missing || inner === Declined) return inner
      // Runs outside any fiber (the program is built before it runs): a check that throws declines,
      // and @effect/cli then meets the same throw inside the runtime, where Main reports defects.
      let mapped: unknown
      try {
        mapped = (node["f"] as (a: unknown) => unknown)(inner)
      } catch {
        return Declined
      }
      if (!Effect.isEffect(mapped)) return Declined
      const exit = Effect.runSyncExit(mapped as Effect.Effect<unknown, unknown>)
      return Exit.isSuccess(exit) ? exit.value : Declined
    }
    case "WithDefault": {
      const inner = optionValue(node["options"] as Node, leaves)
      return inner === Missing ? node["fallback"] : inner
    }
    default:
      return Declined
  }
}

/**
 * `args` (the command line after the executable: `["run", ...]`) parsed as @effect/cli parses
 * it for a command named `run` with `options` (each an @effect/cli `Options`) and the PROMPTs
 * under `promptsKey` (`Args.text` at least once), or undefined: the caller then asks @effect/cli.
 */
export const parseRun = <A>(
  options: Record<string, unknown>,
  promptsKey: string,
  args: ReadonlyArray<string>
): A | undefined => {
  if (args[0] !== "run") return undefined
  const leaves = new Map<string, Leaf>()
  for (const [key, option] of Object.entries(options)) {
    if (key === promptsKey) continue
    if (typeof option !== "object" || option === null || !collect(option as Node, false, leaves)) return undefined
  }
  // The command line without the repeatable options' pairs, which @effect/cli takes out from
  // anywhere before it reads the rest in order: what follows a flag there is what it may read as
  // the flag's value. `flags` are the positions of boolean flags in it.
  const rest: Array<string> = []
  const flags: Array<number> = []
  let at = 1
  while (at < args.length && args[at]!.startsWith("-")) {
    const token = args[at]!
    const inline = /^(--[^=]+)=(.+)$/.exec(token)
    const leaf = leaves.get(inline ? inline[1]! : token)
    if (leaf === undefined) return undefined
    if (leaf.values.length > 0 && !leaf.repeatable) return undefined
    // @effect/cli takes `--name=VALUE` of a repeatable option for a PROMPT (and the run then refuses it).
    if (inline !== null && leaf.repeatable) return undefined
    if (leaf.primitive._tag === "Bool") {
      if (inline !== null) return undefined
      flags.push(rest.length)
      rest.push(token)
      leaf.values.push(undefined)
      at += 1
      continue
    }
    const value = inline ? inline[2]! : args[at + 1]
    if (value === undefined || value.startsWith("-") || value.trim() !== value || value.length === 0) return undefined
    if (!leaf.repeatable) rest.push(token, ...(inline ? [] : [value]))
    leaf.values.push(value)
    at += inline ? 1 : 2
  }
  const prompts = args.slice(at)
  if (prompts.length === 0 || prompts.some((p) => p.trimStart().startsWith("-"))) return undefined
  rest.push(...prompts)
  if (flags.some((i) => i + 1 < rest.length && booleanWords.has(rest[i + 1]!.trim().toLowerCase()))) return undefined
  const parsed: Record<string, unknown> = {}
  for (const [key, option] of Object.entries(options)) {
    if (key === promptsKey) {
      parsed[key] = prompts
      continue
    }
    const value = optionValue(option as Node, leaves)
    if (value === Missing || value === Declined) return undefined
    parsed[key] = value
  }
  return parsed as A
}
