/**
 * `warden resume` and `--worktree`/`--max-tokens`: a run SIGKILLed while its item works in its
 * worktree (a card open, a file already written there) is resumed in the same worktree, on the
 * same branch (`item.worktree` says `reused`), with its budget; when it completes, its earlier work
 * and what came after are committed on that branch.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import { crashedRun, readLedger, recordedRunArgs, resumeArgs, writeFakeCodex } from "./support/LedgerCodex.js"

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...args], {
    cwd,
    encoding: "utf8"
  }).trim()

describe("warden resume with --worktree", () => {
  it.scopedLive(
    "the resumed item works on in the worktree it had; its work before the crash ends up on its branch",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "ledger.db")
        const repo = Path.join(dir, "repo")
        Fs.mkdirSync(repo)
        git(repo, "init", "-q", "-b", "main")
        Fs.writeFileSync(Path.join(repo, "README"), "r\n")
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", "first")

        const { signal, value: first } = yield* crashedRun({
          args: [...recordedRunArgs(codex, db), "--worktree", "--max-tokens", "5000", "--cwd", repo, "echo hi"],
          db,
          recorded: { cards: 1, turns: 1 },
          until: (cli) =>
            Effect.gen(function* () {
              const ready = yield* cli.waitForJson("the worktree", (l) => l.type === "item.worktree", "60 seconds")
              yield* cli.waitForJson("the card", (l) => l.type === "card.opened", "60 seconds")
              Fs.writeFileSync(Path.join(ready.path, "before-crash.txt"), "written before the crash\n")
              return ready
            })
        })
        assert.strictEqual(signal, "SIGKILL")
        assert.isFalse(first.reused)

        const resumed = yield* CliProcess.runToEnd(resumeArgs(codex, db))
        assert.deepStrictEqual(resumed.exited, { code: 0, signal: null }, resumed.stderr)
        const lines = resumed.json()
        const again = lines.find((l) => l.type === "item.worktree")!
        // Seen once under two test suites at once (not reproduced since): say what the resume wrote.
        assert.isDefined(
          again,
          `no item.worktree line; the resume wrote:\n${lines.map((l) => JSON.stringify(l)).join("\n")}\n${resumed.stderr}`
        )
        assert.deepStrictEqual([again.branch, again.path, again.reused], [first.branch, first.path, true])
        const finished = lines.find((l) => l.type === "item.finished")!
        assert.strictEqual(finished.status, "completed", resumed.stderr)
        assert.deepStrictEqual(
          [finished.worktree.branch, finished.worktree.changed, finished.worktree.kept],
          [first.branch, true, true]
        )
        assert.strictEqual(git(repo, "show", `${first.branch}:before-crash.txt`), "written before the crash")
        // The budget came along: recorded with the resumed item.
        const options = yield* readLedger(db, (ledger) =>
          Effect.gen(function* () {
            const runs = yield* ledger.runs()
            const next = runs.find((r) => r.resumedFrom !== undefined)!
            return (yield* ledger.workItems(next.runId))[0]!.options
          })
        )
        assert.deepStrictEqual(options["budget"], { maxTokens: 5000 })
        assert.deepStrictEqual((options["worktree"] as Record<string, unknown>)["branch"], first.branch)
      }),
    120_000
  )
})
