/**
 * Whether a runner checks that it still owns an item before it acts for it: the epoch fence on
 * every conditional write of the item's and cards' rows (`ItemStore`), and the handlers' own
 * checks (the lease on the item's shard, and a write that changed nothing marking the item lost).
 *
 * Always on in Warden: nothing in the package's public surface turns it off. It exists so that a
 * test can turn the checks off and show that the invariants then break (docs/scaling.md,
 * "Fencing"): the checks, not a lucky interleaving, keep a runner that lost an item from acting
 * for it. Not exported from `@warden/cluster`.
 */
import { Context } from "effect"

export class OwnershipChecks extends Context.Reference<OwnershipChecks>()("@warden/cluster/internal/OwnershipChecks", {
  defaultValue: (): { readonly enabled: boolean } => ({ enabled: true })
}) {}
