/**
 * `@warden/cluster`: Warden across machines. Every work item is an `@effect/cluster` entity
 * (id = the item's id) hosted by runner processes, each with its own local supervisor; durable
 * messages and shard ownership live in PostgreSQL; decisions from the one inbox are routed to the
 * runner that holds the card; when a runner dies, its items move to the survivors and resume
 * their threads, and its open cards are recorded `stranded`, once.
 *
 * @packageDocumentation
 */

/** The work item entity and its RPCs (`Run` persisted; `Steer`, `Interrupt`, `Stop`, `Status`, `Events`, `Answer`). */
export * as WorkItemEntity from "./WorkItemEntity.js"

/** The schemas that travel: item spec, run result, status, event lines, decisions and answers, card ids. */
export * as Wire from "./Wire.js"

/** A runner process: one supervisor hosting the entities of its shards (`Runner.layer`). */
export * as Runner from "./Runner.js"

/** A client of the fleet: run, follow, answer, status, stop (`ClusterClient.layer`). */
export * as ClusterClient from "./Client.js"

/** The fleet's SQL client from a `--cluster` URL (`Storage.layer`). */
export * as Storage from "./Storage.js"

/** The property-test invariants (1, 2, 4) checked over what a fleet recorded: lines seen and decisions given. */
export * as Invariants from "./Invariants.js"

/** The fleet's one inbox: every runner's open cards from the store, answers routed to each card's item (`FleetCards.make`). */
export * as FleetCards from "./FleetCards.js"

/** The fleet's one inbox behind Promises, for code without Effect (`connectFleet`). */
export * as FleetFacade from "./FleetFacade.js"
export { connectFleet } from "./FleetFacade.js"
