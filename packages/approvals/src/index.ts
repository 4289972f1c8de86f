/**
 * `@warden/approvals`: approval cards as scoped fibers. Every server request becomes a card that a
 * rule, a handler, a person or its deadline settles exactly once; deny is the default in every
 * failure mode.
 *
 * - {@link Approvals}: the engine (service, layer, `answer`, events, inbox) and the open-card
 *   registry the supervisor opens per connection (`ConnectionCards`).
 * - {@link Config}: its configuration, decoded once (`ConfigError`).
 * - {@link Card}: what a card shows and how it settled.
 * - {@link CardGroup}: cards that ask the same thing, answered at once (`Approvals.answerGroup`).
 * - {@link CardText}: a card as text for people (kind label, details, offer words), control characters escaped.
 * - {@link ApprovalEvent}: what subscribers see.
 * - {@link Policy}: allow/deny rules (JSON or YAML) and their evaluation.
 * - {@link Deadlines}: per-method deadlines.
 * - {@link DeadlineTimer}: one fiber for many deadlines (shared with the supervisor).
 * - {@link SecretMask}: the one masking function set every exit goes through.
 * - {@link ShellCommand}: how rules read a command line (wrappers, nested shells, every command it may run).
 * - {@link Audit}: the JSONL audit trail.
 * - {@link EventPump}, {@link Observers}: reading what is published, by a fiber that loses nothing
 *   or synchronously in the publishing step.
 *
 * @packageDocumentation
 */
export * as Approvals from "./Approvals.js"
export * as ApprovalEvent from "./ApprovalEvent.js"
export * as Audit from "./Audit.js"
export * as Card from "./Card.js"
export * as CardGroup from "./CardGroup.js"
export * as CardText from "./CardText.js"
export * as Config from "./Config.js"
export * as Deadlines from "./Deadlines.js"
export * as DeadlineTimer from "./DeadlineTimer.js"
export * as EventPump from "./EventPump.js"
export * as Observers from "./Observers.js"
export * as Policy from "./Policy.js"
export * as SecretMask from "./SecretMask.js"
export * as ShellCommand from "./ShellCommand.js"
