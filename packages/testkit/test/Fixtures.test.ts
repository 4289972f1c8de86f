import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

// The repository keeps a copy of the shared golden transcripts so tests run from any clone. Where
// the shared original is present (CI, the team's machines), the copy must not have drifted from it.
const copy = join(__dirname, "../../../fixtures/codex-0.171.0")
const shared = join(__dirname, "../../../../shared/fixtures/codex-0.171.0")

describe("golden transcripts", () => {
  it("the repository's copy is complete, and identical to the shared original where that exists", () => {
    const files = readdirSync(copy).sort()
    const transcripts = files.filter((f) => f.endsWith(".jsonl"))
    assert.isAtLeast(transcripts.length, 50)
    for (const t of transcripts) assert.include(files, t.replace(/\.jsonl$/, ".summary.json"))
    if (existsSync(shared)) {
      assert.deepStrictEqual(files, readdirSync(shared).sort())
      for (const f of files)
        assert.strictEqual(readFileSync(join(copy, f), "utf8"), readFileSync(join(shared, f), "utf8"), f)
    }
  })
})
