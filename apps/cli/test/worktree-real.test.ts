/**
 * `warden run --worktree` against the real pinned codex (0.171.0) and a ScriptedModel: three items
 * write different files (codex's own apply_patch, inside each item's worktree) into the same
 * repository and end with three branches, each holding only its own change; a fourth item changes
 * nothing and leaves no worktree and no branch. Without a repository, `--worktree` is a usage error.
 */
import { assert, describe, it } from "@effect/vitest"
import { ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...args], {
    cwd,
    encoding: "utf8"
  }).trim()

const writer = (name: string) => [Step.applyPatch(`${name}.txt`, `written by ${name}\n`), Step.message(`${name} done`)]

describe("warden run --worktree (real codex 0.171.0)", () => {
  it.scopedLive(
    "three items, three branches each holding only its own change; an item that changed nothing leaves nothing",
    () =>
      Effect.gen(function* () {
        const codex = yield* Codex.setup({
          lanes: { a: writer("a"), b: writer("b"), c: writer("c"), idle: [Step.message("nothing to change")] }
        })
        const repo = codex.launch.workspace
        git(repo, "init", "-q", "-b", "main")
        Fs.writeFileSync(Path.join(repo, "README"), "the repository\n")
        git(repo, "add", "README")
        git(repo, "commit", "-q", "-m", "first")
        const base = git(repo, "rev-parse", "HEAD")

        const prompts = ["a", "b", "c", "idle"].map((lane) => `${ScriptedModel.laneMarker(lane)} work on ${lane}`)
        const run = yield* CliProcess.runToEnd(
          [
            "run",
            ...codex.flags,
            "--json",
            "--approvals",
            "deny",
            "--no-state",
            "--worktree",
            "--concurrency",
            "4",
            ...prompts
          ],
          { env: codex.env }
        )
        assert.deepStrictEqual(run.exited, { code: 0, signal: null }, run.stderr)
        const lines = run.json()
        assert.strictEqual(lines.filter((l) => l.type === "item.worktree").length, 4)
        const finished = lines.filter((l) => l.type === "item.finished").sort((x, y) => x.item - y.item)
        assert.deepStrictEqual(
          finished.map((l) => l.status),
          ["completed", "completed", "completed", "completed"],
          run.stderr
        )
        // No card: each patch wrote inside its own worktree, codex's writable root.
        assert.strictEqual(lines.filter((l) => l.type === "card.opened").length, 0)

        for (const [index, name] of ["a", "b", "c"].entries()) {
          const w = finished[index]!.worktree
          assert.deepStrictEqual(
            [w.changed, w.kept, w.files, w.insertions, w.base, w.error],
            [true, true, 1, 1, base.slice(0, 12), null]
          )
          assert.match(w.branch, new RegExp(`^warden/[^/]+/${index}$`))
          assert.deepStrictEqual(git(repo, "ls-tree", "-r", "--name-only", w.branch).split("\n").sort(), [
            "README",
            `${name}.txt`
          ])
          assert.strictEqual(git(repo, "show", `${w.branch}:${name}.txt`), `written by ${name}`)
          assert.strictEqual(Fs.readFileSync(Path.join(w.path, `${name}.txt`), "utf8"), `written by ${name}\n`)
        }
        const idle = finished[3]!.worktree
        assert.deepStrictEqual([idle.changed, idle.kept], [false, false])
        assert.isFalse(Fs.existsSync(idle.path))
        const branches = git(repo, "branch", "--format=%(refname:short)").split("\n").sort()
        assert.deepStrictEqual(branches, ["main", ...[0, 1, 2].map((i) => finished[i]!.worktree.branch)].sort())
        assert.strictEqual(
          git(repo, "worktree", "list", "--porcelain")
            .split("\n")
            .filter((l) => l.startsWith("worktree ")).length,
          4
        )
        // The main checkout saw none of it.
        assert.strictEqual(git(repo, "status", "--porcelain"), "")
        assert.deepStrictEqual(
          Fs.readdirSync(repo).filter((f) => f !== ".git" && f !== ".warden"),
          ["README"]
        )
      }),
    180_000
  )

  it.scopedLive("--worktree outside a git repository is a usage error (exit 2) and starts nothing", () =>
    Effect.gen(function* () {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-no-repo-"))),
        (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
      )
      const run = yield* CliProcess.runToEnd(
        ["run", "--codex", "/nonexistent/codex", "--no-state", "--worktree", "--cwd", dir, "hello"],
        {}
      )
      assert.strictEqual(run.exited.code, 2, run.stderr)
      assert.include(run.stderr, "--worktree needs a git repository")
      assert.include(run.stderr, "is not in a git repository")
    })
  )
})
