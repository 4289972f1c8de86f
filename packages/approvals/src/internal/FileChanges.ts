/**
 * The bound on the file changes a card lists, shared by the summary that cuts the list
 * (`CardSummary.fileChangesOf`) and the rules that read it (`Policy`). Public as
 * `Card.MaxFileChanges` and `Card.OmittedChanges`.
 *
 * They live here, not in `Card.ts`, so that neither the summary nor the rules import `Card.ts` at
 * run time: `Card.ts` re-exports the summary's functions, and a runtime import back from them
 * would be an import cycle (`Card` -> `CardSummary` -> `Policy` -> `Card`).
 */

/**
 * Changes a fileChange item lists at most (`Card.fileChangesOf`); the rest are replaced by one
 * entry of kind `OmittedChanges`. Large enough for a real refactor, small enough to check quickly.
 */
export const MaxFileChanges = 10_000

/**
 * The `kind` of the entry that stands for the changes not listed (its path says how many, and is
 * not a path). Rules read it as unknown changes: no path allow matches, every path deny does.
 */
export const OmittedChanges = "omitted"
