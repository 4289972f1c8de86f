/**
 * The shell lexer and the masking's word reader and searches keep their optimized code across full
 * garbage collections (the `kept` instance of `Lexer`, `ArgReader` and `NextIndex`): V8 held the
 * hidden class their objects end with only weakly, so with every one of them gone (each lives for
 * one call) a full collection threw away the optimized code of their methods ("weak objects"),
 * and lexing and masking (each card's summary, rules, every line the CLI prints) ran unoptimized
 * until they got hot again. Read from V8's own trace in a child process: the methods are optimized,
 * and none is deoptimized for a collected object afterwards.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { runFixture } from "./support.js"

/** The fixture's stdout (V8's trace, then `done`), run to its end. */
const traced = Effect.flatMap(
  runFixture("full-collections.ts", ["--trace-opt", "--trace-deopt", "--expose-gc"]),
  ({ code, out, err }) =>
    code === 0 ? Effect.succeed(out) : Effect.fail(new Error(`the fixture failed (${code}): ${err}`))
)

/** The methods of `Lexer`, `ArgReader` and `NextIndex` (V8 names a class's constructor by the class). */
const Methods =
  /<SharedFunctionInfo (run|endSegment|endWord|word|endCommand|value|option|after|Lexer|ArgReader|NextIndex)>/

describe("lexing and masking under full collections", () => {
  it.effect(
    "their optimized code outlives every lexer, reader and search",
    () =>
      Effect.gen(function* () {
        const lines = (yield* traced).split("\n")
        assert.isTrue(
          lines.some((l) => /^done \d+$/.test(l)),
          "the fixture ran to its end"
        )
        // Optimized at all (else finding no deoptimization below would prove nothing): some of the
        // lexer's methods and some of the word reader's. Not one named method each: which of them
        // V8 compiles on its own and which it inlines into their caller depends on timing (under a
        // double load the trace had no "completed optimizing" of `endSegment`, most likely inlined into
        // `run` only, and the test failed here).
        const optimized = (methods: RegExp) => lines.some((l) => l.includes("completed optimizing") && methods.test(l))
        assert.isTrue(
          optimized(/<JSFunction (run|endSegment|endWord|readHeredocs) /),
          "the lexer's methods were optimized"
        )
        assert.isTrue(optimized(/<JSFunction (word|value|option|after) /), "the word reader's methods were optimized")
        const thrownAway = lines.filter((l) => l.includes("reason: weak objects") && Methods.test(l))
        assert.deepStrictEqual(thrownAway, [])
      }),
    60_000
  )
})
