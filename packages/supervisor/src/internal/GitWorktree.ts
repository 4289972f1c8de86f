/**
 * A git worktree per work item: made before the item's thread starts, finished when the item ends.
 *
 * Every git command runs as a child (`git`, on PATH) with a bounded time, no prompt, no hook and no
 * signing: the work item's model wrote the files Warden commits, so nothing it wrote may run at
 * commit time (`core.hooksPath=/dev/null`; the worktree's own `.git` is a file git writes, codex's
 * sandbox keeps it read-only). Interrupting a command kills it.
 *
 * Crash safety is git's: `git worktree add` registers the worktree (`.git/worktrees/NAME`) and
 * checks it out; a worktree whose directory is gone is dropped by `git worktree prune`, which
 * `create` runs first. A worktree that outlives a crash stays with its branch (it may hold work) and
 * is taken up again by the next `create` for the same branch and path (`warden resume`); a branch
 * whose worktree is gone is checked out again as it is.
 */
import { execFile } from "node:child_process"
import { appendFile, mkdir, readFile } from "node:fs/promises"
import * as Path from "node:path"
import { ChildEnv } from "@warden/transport"
import { Data, Effect } from "effect"
import type { WorktreeOptions, WorktreeSummary } from "../Worktree.js"

/** A git command failed (or git is missing); `detail` is what it said on stderr, trimmed. */
export class GitError extends Data.TaggedError("GitError")<{
  readonly command: string
  readonly detail: string
}> {
  override get message() {
    return `${this.command}: ${this.detail}`
  }
}

/** How long one git command may take before it is killed. */
const COMMAND_TIMEOUT_MS = 120_000
/** What Warden commits as when the repository has no identity configured. */
const FALLBACK_IDENTITY = ["-c", "user.name=Warden", "-c", "user.email=warden@localhost"] as const
/** Every command: no hook runs (the model wrote the tree), nothing is signed, no pager, no prompt. */
const SAFE = ["-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", "-c", "core.pager=cat"] as const

const firstLine = (text: string) => text.trim().split("\n").slice(-3).join(" ").slice(0, 500)

/** Run git in `cwd`; its stdout, or a GitError. Interrupting kills the child. */
export const git = (cwd: string, args: ReadonlyArray<string>): Effect.Effect<string, GitError> =>
  Effect.async<string, GitError>((resume, signal) => {
    const command = `git ${args
      .filter((a) => !a.startsWith("user."))
      .slice(0, 3)
      .join(" ")}`
    execFile(
      "git",
      [...SAFE, ...args],
      {
        cwd,
        // Warden's own secrets never reach a child (ChildEnv): git may run what the repository configures.
        env: ChildEnv.make({ ...process.env, GIT_TERMINAL_PROMPT: "0", GIT_OPTIONAL_LOCKS: "0", LC_ALL: "C" }),
        maxBuffer: 32 * 1024 * 1024,
        timeout: COMMAND_TIMEOUT_MS,
        killSignal: "SIGKILL",
        signal,
        windowsHide: true
      },
      (error, stdout, stderr) => {
        if (error === null) return resume(Effect.succeed(stdout))
        const code = (error as NodeJS.ErrnoException).code
        const detail =
          code === "ENOENT" ? "git is not installed (not found on PATH)" : firstLine(String(stderr)) || error.message
        resume(Effect.fail(new GitError({ command, detail })))
      }
    )
  })

/** git, answering whether it exited 0 (for `diff --quiet` and `rev-parse --verify`). */
const gitOk = (cwd: string, args: ReadonlyArray<string>) =>
  git(cwd, args).pipe(
    Effect.as(true),
    Effect.catchAll(() => Effect.succeed(false))
  )

/** A branch or directory name made from an item id: git-ref safe, short, never empty. */
export const refSafe = (text: string): string => {
  const cleaned = text
    .replace(/[^A-Za-z0-9._-]+/g, "-")
    .replace(/^[-.]+|[-.]+$/g, "")
    .replace(/\.{2,}/g, ".")
  const short = cleaned.slice(0, 64).replace(/\.lock$/, "-lock")
  return short.length > 0 ? short : "item"
}

/** The repository holding `cwd`: its top-level directory, or a GitError saying it is none. */
export const repositoryOf = (cwd: string): Effect.Effect<string, GitError> =>
  git(cwd, ["rev-parse", "--show-toplevel"]).pipe(
    Effect.map((out) => out.trim()),
    Effect.mapError(
      (e) =>
        new GitError({
          command: e.command,
          detail: /not a git repository/i.test(e.detail) ? `${cwd} is not in a git repository` : e.detail
        })
    )
  )

/** A worktree made for one work item, to be finished once. */
export interface Made {
  /** The repository's top-level directory (the main worktree). */
  readonly top: string
  readonly path: string
  /** The item's working directory inside the worktree (the same place relative to the top as the item's cwd). */
  readonly cwd: string
  readonly branch: string
  readonly base: string
  /** True when an existing worktree of this branch was taken up (after a crash). */
  readonly reused: boolean
}

/** Keep `.warden/` out of the main checkout's `git status` (the repository's own exclude file, once). */
const excludeWardenDir = (top: string) =>
  Effect.gen(function* () {
    const common = (yield* git(top, ["rev-parse", "--git-common-dir"])).trim()
    const file = Path.join(Path.resolve(top, common), "info", "exclude")
    yield* Effect.tryPromise({
      try: async () => {
        const text = await readFile(file, "utf8").catch(() => "")
        if (text.split("\n").some((line) => line.trim() === "/.warden/")) return
        await mkdir(Path.dirname(file), { recursive: true })
        await appendFile(file, `${text.length > 0 && !text.endsWith("\n") ? "\n" : ""}/.warden/\n`)
      },
      catch: (cause) => new GitError({ command: "info/exclude", detail: String(cause) })
    })
  })

/** The registered worktree of `branch`, if any (`git worktree list --porcelain`). */
const worktreeOfBranch = (top: string, branch: string) =>
  Effect.map(git(top, ["worktree", "list", "--porcelain"]), (out) => {
    for (const block of out.split("\n\n")) {
      const lines = block.split("\n")
      const path = lines.find((l) => l.startsWith("worktree "))?.slice("worktree ".length)
      if (path !== undefined && lines.includes(`branch refs/heads/${branch}`)) return path
    }
    return undefined
  })

/**
 * One repository's worktree administration at a time (in this process): `git worktree add`
 * writes `.git/worktrees/<name>/` file by file, and a concurrent `worktree add`, `prune` or `list`
 * that reads a half-written one fails ("failed to read .git/worktrees/<name>/commondir"); seen
 * with three items starting at once on a busy machine.
 */
const repositoryLocks = new Map<string, Effect.Semaphore>()
const inRepository = <A, E>(top: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    let lock = repositoryLocks.get(top)
    if (lock === undefined) {
      lock = Effect.unsafeMakeSemaphore(1)
      repositoryLocks.set(top, lock)
    }
    return lock.withPermits(1)(effect)
  })

/**
 * Make the worktree of one work item: branch `branch` from `base` (default the HEAD of the
 * repository at `cwd`), checked out at `path` (default `<top>/.warden/worktrees/<run>/<item>`).
 * When the branch already has a worktree at that path (a crashed run), it is taken up as it is.
 */
export const create = (
  cwd: string,
  names: { readonly run: string; readonly item: string },
  options: WorktreeOptions
): Effect.Effect<Made, GitError> =>
  Effect.gen(function* () {
    const top = yield* repositoryOf(cwd)
    const branch = options.branch ?? `warden/${refSafe(names.run)}/${refSafe(names.item)}`
    if (!(yield* gitOk(top, ["check-ref-format", "--branch", branch]))) {
      return yield* new GitError({
        command: "git check-ref-format",
        detail: `${JSON.stringify(branch)} is not a valid branch name`
      })
    }
    const path = Path.resolve(
      top,
      options.path ?? Path.join(".warden", "worktrees", refSafe(names.run), refSafe(names.item))
    )
    const relative = Path.relative(top, Path.resolve(cwd))
    const itemCwd = relative.startsWith("..") ? path : Path.join(path, relative)
    return yield* inRepository(top, addWorktree(top, path, itemCwd, branch, options))
  })

const addWorktree = (
  top: string,
  path: string,
  itemCwd: string,
  branch: string,
  options: WorktreeOptions
): Effect.Effect<Made, GitError> =>
  Effect.gen(function* () {
    yield* git(top, ["worktree", "prune"]).pipe(Effect.ignore)
    const existing = yield* worktreeOfBranch(top, branch)
    if (existing !== undefined) {
      if (Path.resolve(existing) !== path) {
        return yield* new GitError({
          command: "git worktree add",
          detail: `branch ${branch} is already checked out at ${existing}`
        })
      }
      const base = (yield* git(top, ["merge-base", "HEAD", branch]).pipe(
        Effect.orElse(() => git(path, ["rev-parse", "HEAD"]))
      )).trim()
      return { top, path, cwd: itemCwd, branch, base, reused: true }
    }
    if (yield* gitOk(top, ["rev-parse", "--verify", "--quiet", `refs/heads/${branch}`])) {
      // The branch outlived its worktree (removed by hand, or pruned after a crash): check it out
      // again as it is, with the work it holds.
      const base = (yield* git(top, ["merge-base", options.base ?? "HEAD", branch])).trim()
      yield* git(top, ["worktree", "add", "--quiet", path, branch])
      return { top, path, cwd: itemCwd, branch, base, reused: true }
    }
    const baseRef = options.base ?? "HEAD"
    const base = (yield* git(top, ["rev-parse", "--verify", "--quiet", `${baseRef}^{commit}`]).pipe(
      Effect.mapError(
        () =>
          new GitError({
            command: "git rev-parse",
            detail: `${JSON.stringify(baseRef)} names no commit in ${top}${baseRef === "HEAD" ? " (a repository without a commit?)" : ""}`
          })
      )
    )).trim()
    if (path.startsWith(Path.join(top, ".warden") + Path.sep)) yield* excludeWardenDir(top)
    yield* git(top, ["worktree", "add", "--quiet", "-b", branch, path, base])
    return { top, path, cwd: itemCwd, branch, base, reused: false }
  })

const shortstat = (text: string) => {
  const number = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0)
  return {
    files: number(/(\d+) files? changed/),
    insertions: number(/(\d+) insertions?\(\+\)/),
    deletions: number(/(\d+) deletions?\(-\)/)
  }
}

/**
 * Finish a worktree: commit what the item left uncommitted onto its branch, then keep the worktree
 * when the branch moved from its base (or `keep: "always"`), else remove it and delete its branch.
 * A git failure keeps everything as it is and says so in `error`.
 */
export const finish = (made: Made, options: WorktreeOptions, message: string): Effect.Effect<WorktreeSummary> =>
  Effect.gen(function* () {
    const { base, branch, path } = made
    yield* git(path, ["add", "--all"])
    const staged = !(yield* gitOk(path, ["diff", "--cached", "--quiet"]))
    if (staged) {
      const identity = (yield* git(path, ["config", "user.email"]).pipe(Effect.orElseSucceed(() => ""))).trim()
      yield* git(path, [
        ...(identity === "" ? FALLBACK_IDENTITY : []),
        "commit",
        "--quiet",
        "--no-verify",
        "-m",
        message
      ])
    }
    const head = (yield* git(path, ["rev-parse", "HEAD"])).trim()
    const changed = head !== base
    const diffstat = changed ? (yield* git(path, ["diff", "--stat=120", base, head])).trimEnd() : ""
    const counts = changed
      ? shortstat(yield* git(path, ["diff", "--shortstat", base, head]))
      : { files: 0, insertions: 0, deletions: 0 }
    const keep = changed || options.keep === "always"
    if (!keep) {
      yield* inRepository(
        made.top,
        Effect.zipRight(git(made.top, ["worktree", "remove", "--force", path]), git(made.top, ["branch", "-D", branch]))
      )
    }
    return { path, branch, base, head, changed, kept: keep, diffstat, ...counts }
  }).pipe(
    Effect.catchAll((e) =>
      Effect.succeed<WorktreeSummary>({
        path: made.path,
        branch: made.branch,
        base: made.base,
        head: made.base,
        changed: false,
        kept: true,
        diffstat: "",
        files: 0,
        insertions: 0,
        deletions: 0,
        error: e.message
      })
    )
  )
