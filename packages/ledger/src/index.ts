/**
 * `@warden/ledger`: Warden's durable record. Runs, work items, threads and turns, every approval
 * card with its one settlement (or `stranded`), late decisions, and remembered rules, in SQLite
 * (or any `@effect/sql` client), with nothing secret stored; the queries a crashed run is
 * recovered with, the audit's queries, and policy replay. See docs/ledger.md.
 *
 * @packageDocumentation
 */

/**
 * The `Ledger` service (`Ledger.Ledger`), its layers (`layerSqlite({ filename })`, `layer` on
 * any `SqlClient`), runs (`beginRun` → `Run.record` / `Run.attach`), audit and recovery queries,
 * remembered-rule storage, `LedgerError`, and the records the queries return.
 */
export * as Ledger from "./Ledger.js"

/**
 * The ledger opened for reading only (`LedgerReader.layerSqlite({ filename })`): the audit,
 * recovery and remembered-rule reads, on a file this user may only read; never created, migrated
 * or written.
 */
export * as LedgerReader from "./LedgerReader.js"

/** What the ledger records: supervisor events, approval events, and submitted work items. */
export * as LedgerEvent from "./LedgerEvent.js"

/**
 * The facts of a card a rule matches on, as stored (masked, bounded), and `toRequest`, which
 * rebuilds from them the request `Policy.evaluate` reads.
 */
export * as CardFacts from "./CardFacts.js"

/**
 * Remembered decisions: scopes, validation, `scopeFor` (the narrowest scope covering a request),
 * the pure matcher `rememberedFor`, and `decide`, which consults the configured rules first so a
 * remembered allow never overrides a deny.
 */
export * as Remembered from "./Remembered.js"

/**
 * Remembered decisions wired to the approvals engine: `make(ledger, runId)` gives the synchronous
 * `remembered` lookup a connection's cards consult (`DecisionConfig.remembered`), over a snapshot
 * of the rules in force, and `always(card, { author })`, which stores an allow scoped to what the
 * card asked; `scopeForCard` says what that scope would be.
 */
export * as Remembering from "./Remembering.js"

/** Replaying recorded cards against candidate rules (pure): per card and in totals. */
export * as Replay from "./Replay.js"

/**
 * Rules proposed from what people decided (`Suggest.suggest`): allow and deny rules built from at
 * least `min` recorded decisions, as narrow as the evidence, never for what must stay asked, each
 * proven by replaying the whole record; `Suggest.rulesFile` writes them as a rules file.
 */
export * as Suggest from "./Suggest.js"

/** The schema as `@effect/sql` migrations (`Migrations.run` brings any `SqlClient` up to date). */
export * as Migrations from "./Migrations.js"

/**
 * A proposed rule offered at the Nth acceptance (`Offers.make`): after a person accepts a card
 * that a proven proposal of `Suggest` covers, the offer; taking it is a remembered rule.
 */
export * as Offers from "./Offers.js"
