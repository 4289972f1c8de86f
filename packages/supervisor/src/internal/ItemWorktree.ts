/**
 * A work item's worktree, when it asks for one (`WorkItem.worktree`): made before its thread
 * starts, on branch `warden/<run id>/<item id>`, announced (`WorktreeReady`), and finished once
 * (committed, kept or removed; `WorktreeFinished`). The git work itself is `GitWorktree`'s.
 *
 * Scope and fibers: no fiber. `forItem` runs in the item's scope and adds one finalizer there,
 * which finishes the worktree if the item's success has not already done so: whichever comes first,
 * the item's result (which then carries the summary) or the close of its scope (any failure, a
 * stop), finishes it, once.
 */
import { SecretMask } from "@warden/approvals"
import { Effect } from "effect"
import type { Scope } from "effect"
import { WorkItemFailed } from "../Errors.js"
import type { WorkEvent, WorkItem } from "../WorkItem.js"
import type { WorktreeSummary } from "../Worktree.js"
import * as GitWorktree from "./GitWorktree.js"

export interface ItemWorktrees {
  /**
   * The item as it runs (in its worktree, if it has one) and how its worktree is finished (once:
   * a second call gets the first's summary; undefined without a worktree). Fails the item
   * `worktree-failed` when the worktree cannot be made.
   */
  readonly forItem: (
    item: WorkItem,
    emit: (event: WorkEvent) => void
  ) => Effect.Effect<
    { readonly work: WorkItem; readonly finish: Effect.Effect<WorktreeSummary | undefined> },
    WorkItemFailed,
    Scope.Scope
  >
}

/** The worktrees of one run (`runId`, the branches' middle part). */
export const make = (runId: string): ItemWorktrees => {
  let unnamedItems = 0
  const forItem = (item: WorkItem, emit: (event: WorkEvent) => void) =>
    Effect.gen(function* () {
      if (item.worktree === undefined || item.worktree === false) {
        return { work: item, finish: Effect.succeed<WorktreeSummary | undefined>(undefined) }
      }
      const options = item.worktree === true ? {} : item.worktree
      const name = String(item.id ?? `item-${++unnamedItems}`)
      const made = yield* GitWorktree.create(item.cwd ?? process.cwd(), { run: runId, item: name }, options).pipe(
        Effect.mapError(
          (e) =>
            new WorkItemFailed({
              reason: "worktree-failed",
              detail: SecretMask.maskText(e.message),
              threadId: item.threadId
            })
        )
      )
      emit({
        _tag: "WorktreeReady",
        item: item.id,
        path: made.path,
        branch: made.branch,
        base: made.base,
        reused: made.reused
      })
      const finish = yield* Effect.cached(
        GitWorktree.finish(made, options, `warden: work item ${name} (run ${runId})`).pipe(
          Effect.tap((worktree) => Effect.sync(() => emit({ _tag: "WorktreeFinished", item: item.id, worktree })))
        )
      )
      yield* Effect.addFinalizer(() => finish)
      // Uninterruptible: a stop that came while git commits must not leave the memo interrupted
      // and the worktree unfinished (each git command is bounded, see GitWorktree).
      return {
        work: { ...item, cwd: made.cwd },
        finish: Effect.uninterruptible(Effect.map(finish, (summary): WorktreeSummary | undefined => summary))
      }
    })
  return { forItem }
}
