/**
 * A git worktree per work item (`WorkItem.worktree`): each item works on its own branch in its own
 * checkout, so items running at once on one repository never touch each other's files.
 *
 * Before the item's thread starts, the supervisor makes a worktree of the repository that holds the
 * item's `cwd` (default: the process's), on branch `warden/<runId>/<item id>` from `base` (default
 * that repository's HEAD), at `<top>/.warden/worktrees/<runId>/<item id>` (`/.warden/` is added to
 * the repository's `.git/info/exclude`). The thread's `cwd` is the same place inside the worktree,
 * so codex's `workspace-write` sandbox writes there and nowhere else in the repository.
 *
 * When the item ends (however: completed, failed, stopped), Warden commits what the item left
 * uncommitted onto the branch (no hook runs, nothing is signed; the repository's identity, or
 * `Warden <warden@localhost>` when it has none), then keeps the worktree and the branch when the
 * branch moved from its base, and removes both when it did not (unless `keep: "always"`). The
 * outcome is a {@link WorktreeSummary}: in `WorkResult.worktree` and the `WorktreeFinished` event.
 *
 * Crashes: `git worktree add` registers a worktree and checks it out; a registration whose
 * directory is gone is dropped by `git worktree prune`, which runs before every new worktree. A
 * worktree that outlives a crashed run keeps its branch (it may hold work); a later item with the
 * same branch and path (`warden resume`) takes it up as it is.
 */
import type { Effect } from "effect"
import * as GitWorktree from "./internal/GitWorktree.js"

/**
 * A git command failed, or git is missing: `command` is what ran (e.g. `git worktree add`),
 * `detail` what git said (or "… is not in a git repository").
 */
export type GitError = GitWorktree.GitError
export const GitError = GitWorktree.GitError

/**
 * The top-level directory of the git repository holding `cwd`; fails with a `GitError` when `cwd` is
 * in none (what `WorkItem.worktree` needs; the CLI checks it before anything starts).
 */
export const repositoryOf: (cwd: string) => Effect.Effect<string, GitError> = GitWorktree.repositoryOf

/** How one work item's worktree is made and finished; `true` on a `WorkItem` means all defaults. */
export interface WorktreeOptions {
  /** The commit to branch from: a branch, tag or commit (default: HEAD of the repository at the item's `cwd`). */
  readonly base?: string
  /** The branch to create (default `warden/<runId>/<item id>`); it must not exist unless its worktree is `path`. */
  readonly branch?: string
  /** Where to check it out, absolute or relative to the repository's top (default `.warden/worktrees/<runId>/<item id>`). */
  readonly path?: string
  /** `"changed"` (default): keep the worktree only when the item changed something; `"always"`: keep every one. */
  readonly keep?: "changed" | "always"
}

/**
 * What became of a work item's worktree when the item ended.
 *
 * `changed`: the branch holds commits its base does not (the item's changes, committed by Warden
 * when it left them uncommitted); then `diffstat` is `git diff --stat base head` and `files`,
 * `insertions`, `deletions` count it. `kept`: the worktree and the branch are still there.
 * `error`: finishing failed (git refused); the worktree is then kept exactly as it was and the
 * other fields say only where it is.
 */
export interface WorktreeSummary {
  readonly path: string
  readonly branch: string
  /** The commit the branch started from. */
  readonly base: string
  /** The branch's commit at the end. */
  readonly head: string
  readonly changed: boolean
  readonly kept: boolean
  readonly diffstat: string
  readonly files: number
  readonly insertions: number
  readonly deletions: number
  readonly error?: string
}
