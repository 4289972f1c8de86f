/**
 * A git worktree per work item, with real git on a temporary repository and the fake app-server:
 * each item's thread runs in its own worktree, what it changed is committed on its own branch, a
 * worktree that changed nothing is removed with its branch, and the worktree is finished however the
 * item ends (completed, refused, stopped).
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Effect, Exit, Fiber, Stream } from "effect"
import type { WorkItem } from "../src/index.js"
import * as GitWorktree from "../src/internal/GitWorktree.js"
import { supervise } from "./support.js"

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...args], {
    cwd,
    encoding: "utf8"
  }).trim()

/** A repository with one commit (README), in a temporary directory removed with the test's scope. */
const repository = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-worktree-")))
    git(dir, "init", "-q", "-b", "main")
    Fs.writeFileSync(Path.join(dir, "README"), "hello\n")
    Fs.mkdirSync(Path.join(dir, "sub"))
    Fs.writeFileSync(Path.join(dir, "sub", "keep"), "")
    git(dir, "add", ".")
    git(dir, "commit", "-q", "-m", "first")
    return dir
  }),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** thread/start as the fake answers it, after writing `files` (name → text) into the thread's cwd: the model's work. */
const writesOnStart = (files: (cwd: string) => Record<string, string>) => {
  let n = 0
  return (params: { cwd: string }) => {
    for (const [name, text] of Object.entries(files(params.cwd))) Fs.writeFileSync(Path.join(params.cwd, name), text)
    return { result: { thread: { id: `thr_w${++n}` } } }
  }
}

const branches = (dir: string) =>
  git(dir, "branch", "--format=%(refname:short)")
    .split("\n")
    .filter((b) => b.length > 0)
    .sort()

describe("WorkItem.worktree: a git worktree per work item", () => {
  it.scopedLive(
    "three items on one repository: each change on its own branch, an item that changed nothing leaves nothing behind",
    () =>
      Effect.gen(function* () {
        const repo = yield* repository
        const { fake, supervisor } = yield* supervise(
          { runId: "run1", concurrency: 3 },
          {
            behaviour: {
              "thread/start": writesOnStart((cwd) => {
                const item = Path.basename(cwd)
                return item === "c" ? {} : { [`${item}.txt`]: `written by ${item}\n` }
              })
            }
          }
        )
        const run = (id: string) => supervisor.run({ id, prompt: `item ${id}`, cwd: repo, worktree: true })
        const [a, b, c] = yield* Effect.all([run("a"), run("b"), run("c")], { concurrency: 3 })

        // Each thread ran in its own worktree.
        const cwds = fake
          .requestsSoFar()
          .filter((r) => r.method === "thread/start")
          .map((r) => r.params.cwd)
          .sort()
        assert.deepStrictEqual(
          cwds,
          ["a", "b", "c"].map((i) => Path.join(repo, ".warden", "worktrees", "run1", i))
        )

        for (const [result, id] of [
          [a, "a"],
          [b, "b"]
        ] as const) {
          const w = result.worktree!
          assert.strictEqual(w.branch, `warden/run1/${id}`)
          assert.isTrue(w.changed)
          assert.isTrue(w.kept)
          assert.strictEqual(w.files, 1)
          assert.strictEqual(w.insertions, 1)
          assert.include(w.diffstat, `${id}.txt`)
          assert.isUndefined(w.error)
          // The branch holds the item's change and nothing of the others'.
          assert.deepStrictEqual(
            git(repo, "ls-tree", "-r", "--name-only", w.branch).split("\n").sort(),
            ["README", `${id}.txt`, "sub/keep"].sort()
          )
          assert.strictEqual(git(repo, "rev-parse", `${w.branch}^`), w.base)
          assert.isTrue(Fs.existsSync(Path.join(w.path, `${id}.txt`)))
        }
        const cw = c.worktree!
        assert.deepStrictEqual([cw.changed, cw.kept], [false, false])
        assert.isFalse(Fs.existsSync(cw.path))
        assert.deepStrictEqual(branches(repo), ["main", "warden/run1/a", "warden/run1/b"])
        assert.notInclude(git(repo, "worktree", "list"), cw.path)
        // The main checkout is untouched, and the worktrees do not show in its status.
        assert.strictEqual(git(repo, "status", "--porcelain"), "")
        assert.strictEqual(git(repo, "rev-parse", "--abbrev-ref", "HEAD"), "main")
      })
  )

  it.scopedLive("the thread's cwd is the same place inside the worktree; --base picks the commit it starts from", () =>
    Effect.gen(function* () {
      const repo = yield* repository
      const first = git(repo, "rev-parse", "HEAD")
      git(repo, "tag", "v1")
      Fs.writeFileSync(Path.join(repo, "later"), "after v1\n")
      git(repo, "add", ".")
      git(repo, "commit", "-q", "-m", "second")
      const { fake, supervisor } = yield* supervise(
        { runId: "run2" },
        { behaviour: { "thread/start": writesOnStart(() => ({ "n.txt": "1\n" })) } }
      )
      const result = yield* supervisor.run({
        id: 7,
        prompt: "x",
        cwd: Path.join(repo, "sub"),
        worktree: { base: "v1" }
      })
      const w = result.worktree!
      assert.strictEqual(
        fake.requestsSoFar().find((r) => r.method === "thread/start")!.params.cwd,
        Path.join(w.path, "sub")
      )
      assert.strictEqual(w.base, first)
      assert.strictEqual(w.branch, "warden/run2/7")
      assert.deepStrictEqual(git(repo, "ls-tree", "-r", "--name-only", w.branch).split("\n").sort(), [
        "README",
        "sub/keep",
        "sub/n.txt"
      ])
    })
  )

  it.scopedLive("not a git repository: the item fails worktree-failed, and no thread is started", () =>
    Effect.gen(function* () {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-no-repo-"))),
        (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
      )
      const { fake, supervisor } = yield* supervise()
      const exit = yield* Effect.exit(supervisor.run({ prompt: "x", cwd: dir, worktree: true }))
      assert.isTrue(Exit.isFailure(exit))
      const failure = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.strictEqual(failure?.reason, "worktree-failed")
      assert.include(failure?.detail, "is not in a git repository")
      assert.isUndefined(fake.requestsSoFar().find((r) => r.method === "thread/start"))
    })
  )

  it.scopedLive(
    "an item that fails keeps what it wrote (committed on its branch), and the finish is announced before the item's end",
    () =>
      Effect.gen(function* () {
        const repo = yield* repository
        const { supervisor } = yield* supervise(
          { runId: "run3" },
          {
            behaviour: {
              "thread/start": (params: { cwd: string }) => {
                Fs.writeFileSync(Path.join(params.cwd, "partial.txt"), "half done\n")
                return { error: { code: -32603, message: "the server broke" } }
              }
            }
          }
        )
        const events = yield* supervisor.events.pipe(
          Stream.filter((e) => e._tag === "ItemFinished" || (e._tag === "Work" && e.event._tag.startsWith("Worktree"))),
          Stream.take(3),
          Stream.runCollect,
          Effect.fork
        )
        const exit = yield* Effect.exit(supervisor.run({ id: "f", prompt: "x", cwd: repo, worktree: true }))
        assert.isTrue(Exit.isFailure(exit))
        const seen = [...(yield* Fiber.join(events))]
        assert.deepStrictEqual(
          seen.map((e) => (e._tag === "Work" ? e.event._tag : e._tag)),
          ["WorktreeReady", "WorktreeFinished", "ItemFinished"]
        )
        const finished = seen[1]!
        const w =
          finished._tag === "Work" && finished.event._tag === "WorktreeFinished" ? finished.event.worktree : undefined
        assert.deepStrictEqual([w?.changed, w?.kept, w?.branch], [true, true, "warden/run3/f"])
        assert.strictEqual(git(repo, "show", `${w!.branch}:partial.txt`), "half done")
      })
  )

  it.scopedLive("a stopped item's worktree is finished too: its work committed, the worktree kept", () =>
    Effect.gen(function* () {
      const repo = yield* repository
      const { fake, supervisor } = yield* supervise({ runId: "run4" }, { turns: "manual" })
      const handle = yield* supervisor.start({ id: "s", prompt: "x", cwd: repo, worktree: true })
      const start = yield* fake.nextRequest("thread/start")
      yield* fake.nextRequest("turn/start")
      Fs.writeFileSync(Path.join(start.params.cwd, "wip.txt"), "work in progress\n")
      yield* handle.stop
      assert.strictEqual(git(repo, "show", "warden/run4/s:wip.txt"), "work in progress")
      assert.isTrue(Fs.existsSync(Path.join(start.params.cwd, "wip.txt")))
      assert.include(git(repo, "log", "-1", "--format=%s", "warden/run4/s"), "warden: work item s (run run4)")
    })
  )

  it.scopedLive("nothing the item wrote runs at commit time: the repository's hooks are not run", () =>
    Effect.gen(function* () {
      const repo = yield* repository
      const marker = Path.join(repo, "..", `${Path.basename(repo)}-hook-ran`)
      yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(marker, { force: true })))
      for (const hook of ["pre-commit", "commit-msg", "post-commit", "post-checkout"]) {
        Fs.writeFileSync(Path.join(repo, ".git", "hooks", hook), `#!/bin/sh\ntouch '${marker}'\n`, { mode: 0o755 })
      }
      const { supervisor } = yield* supervise(
        { runId: "run5" },
        { behaviour: { "thread/start": writesOnStart(() => ({ "h.txt": "x\n" })) } }
      )
      const result = yield* supervisor.run({ id: "h", prompt: "x", cwd: repo, worktree: true })
      assert.isTrue(result.worktree!.changed)
      assert.isFalse(Fs.existsSync(marker), "a hook ran")
    })
  )

  it.scopedLive("a branch whose worktree is gone is checked out again, with the work it holds", () =>
    Effect.gen(function* () {
      const repo = yield* repository
      const path = Path.join(repo, ".warden", "worktrees", "run7", "g")
      git(repo, "worktree", "add", "-q", "-b", "warden/run7/g", path, "HEAD")
      Fs.writeFileSync(Path.join(path, "kept.txt"), "committed before the crash\n")
      git(path, "add", ".")
      git(path, "commit", "-q", "-m", "work")
      Fs.rmSync(path, { recursive: true, force: true })
      const { supervisor } = yield* supervise(
        { runId: "run7" },
        { behaviour: { "thread/start": writesOnStart(() => ({ "more.txt": "x\n" })) } }
      )
      const result = yield* supervisor.run({ id: "g", prompt: "x", cwd: repo, worktree: true })
      const w = result.worktree!
      assert.isTrue(w.changed)
      assert.strictEqual(w.base, git(repo, "rev-parse", "main"))
      assert.deepStrictEqual(git(repo, "ls-tree", "-r", "--name-only", w.branch).split("\n").sort(), [
        "README",
        "kept.txt",
        "more.txt",
        "sub/keep"
      ])
    })
  )

  it.scopedLive("a worktree left by a crashed run is taken up by the next item with the same branch and path", () =>
    Effect.gen(function* () {
      const repo = yield* repository
      const path = Path.join(repo, ".warden", "worktrees", "run6", "r")
      git(repo, "worktree", "add", "-q", "-b", "warden/run6/r", path, "HEAD")
      Fs.writeFileSync(Path.join(path, "before-crash.txt"), "from the first run\n")
      const { supervisor } = yield* supervise({ runId: "run6" })
      const events = yield* supervisor.events.pipe(
        Stream.filter((e) => e._tag === "Work" && e.event._tag === "WorktreeReady"),
        Stream.take(1),
        Stream.runCollect,
        Effect.fork
      )
      const item: WorkItem.WorkItem = { id: "r", prompt: "x", cwd: repo, worktree: true }
      const result = yield* supervisor.run(item)
      const ready = [...(yield* Fiber.join(events))][0]!
      assert.isTrue(ready._tag === "Work" && ready.event._tag === "WorktreeReady" && ready.event.reused)
      assert.isTrue(result.worktree!.changed)
      assert.strictEqual(git(repo, "show", "warden/run6/r:before-crash.txt"), "from the first run")
    })
  )
})

describe("GitWorktree: many items on one repository at once", () => {
  it.scoped(
    "24 worktrees made and 24 removed at once on one repository all succeed (git's worktree administration is serialized per repository)",
    () =>
      Effect.gen(function* () {
        const dir = yield* repository
        const items = Array.from({ length: 24 }, (_, i) => `item-${i}`)
        const made = yield* Effect.forEach(items, (item) => GitWorktree.create(dir, { run: "race", item }, {}), {
          concurrency: "unbounded"
        })
        assert.strictEqual(new Set(made.map((m) => m.path)).size, items.length)
        for (const m of made) assert.isTrue(Fs.existsSync(Path.join(m.path, "README")), m.path)
        const finished = yield* Effect.forEach(made, (m) => GitWorktree.finish(m, {}, "nothing"), {
          concurrency: "unbounded"
        })
        assert.deepStrictEqual(
          finished.filter((f) => f.error !== undefined || f.kept).map((f) => f.error ?? f.path),
          []
        )
        assert.deepStrictEqual(branches(dir), ["main"])
      }),
    { timeout: 120_000 }
  )
})
