/**
 * The one reader of shell words and its two readings of the same characters: a script as the
 * shell runs it (`lex`, what rules decide on) and the command words of any text (`readTextWords`,
 * `valueExtent`, what masking reads). Their users' answers are pinned by Characterization.test.ts;
 * this shows why the readings differ where they do.
 */
import { assert, describe, it } from "@effect/vitest"
import type { CommandWordReader, ValueExtent } from "../src/internal/ShellLexer.js"
import { lexAll, readArgvWords, readTextWords, valueExtent } from "../src/internal/ShellLexer.js"

/** The words a reader is given, as `s..e` of their source, and where commands end (`|`). */
const wordsOf = (read: (reader: CommandWordReader) => void): ReadonlyArray<string> => {
  const seen: Array<string> = []
  read({
    word: (src, s, e, _start, end) => {
      seen.push(src.slice(s, e))
      return end
    },
    endCommand: () => {
      if (seen.at(-1) !== "|") seen.push("|")
    }
  })
  return seen
}

const extent = (src: string, p: number, exact = false): string => {
  const out: ValueExtent = { from: 0, to: 0, resume: 0 }
  valueExtent(src, p, src.indexOf(" ", p) < 0 ? src.length : src.indexOf(" ", p), exact, out)
  return `${src.slice(out.from, out.to)}|${out.resume}`
}

describe("ShellLexer: a script as the shell runs it", () => {
  it("quotes group words and are removed; operators end segments", () => {
    const lexed = lexAll(`echo 'mysql -pX' && ls "a b"`)
    assert.deepStrictEqual(lexed.segments, [
      ["echo", "mysql -pX"],
      ["ls", "a b"]
    ])
    assert.isTrue(lexed.complete)
    assert.isTrue(lexed.compound)
  })

  it("an unclosed quote swallows the rest of the script, which is then incomplete", () => {
    const lexed = lexAll("it's fine; mysql -phunter2")
    assert.deepStrictEqual(lexed.segments, [["its fine; mysql -phunter2"]])
    assert.isFalse(lexed.complete)
  })
})

describe("ShellLexer: the command words of any text", () => {
  it("a word ends at any blank, whatever quotes it holds; its opening and closing quotes are not part of it", () => {
    assert.deepStrictEqual(
      wordsOf((r) => readTextWords(`echo 'mysql -pX' && ls`, r)),
      ["echo", "mysql", "-pX", "|", "ls", "|"]
    )
  })

  it("an apostrophe of prose hides no word, and a line end ends a command", () => {
    assert.deepStrictEqual(
      wordsOf((r) => readTextWords("it's fine\nmysql -phunter2", r)),
      ["it's", "fine", "|", "mysql", "-phunter2", "|"]
    )
  })

  it("an argv's words are taken exactly; an operator word ends a command", () => {
    assert.deepStrictEqual(
      wordsOf((r) => readArgvWords(["mysql", "-p'x'", ";", "ls"], r)),
      ["mysql", "-p'x'", "|", "ls", "|"]
    )
  })

  it("a value is read inside the quotes it starts with, codex's '\\'' included, when they close on its line", () => {
    assert.strictEqual(extent(`'hunter 2' app`, 0), "hunter 2|10")
    assert.strictEqual(extent(`'\\''hunter 2'\\'' app`, 0), "hunter 2|16")
    assert.strictEqual(extent(`"a b" c`, 0), "a b|5")
    assert.strictEqual(extent("'open\nnext' x", 0), "open|11", "a quote that closes on another line is no quote")
    assert.strictEqual(extent("hunter2;ls", 0), "hunter2|10")
    assert.strictEqual(extent("-p'x'", 2, true), "'x'|5")
  })
})
