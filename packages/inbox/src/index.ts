/**
 * `@warden/inbox`: Warden's web inbox. An HTTP server in the same process as a supervisor where
 * people answer its approval cards: a page, an HTTP API with its OpenAPI document, a Server-Sent
 * Events stream of cards and work items, signed single-use links and signed notifications; bound
 * to loopback and guarded by a token unless told otherwise, bounded in connections, time and body
 * size. It answers through the approvals engine like any person (the first answer wins). See
 * docs/inbox.md.
 *
 * The run's state that the inbox's item list and the CLI's board share is its own module,
 * `@warden/inbox/RunState` (no HTTP in it).
 *
 * @packageDocumentation
 */

/**
 * The inbox on a supervisor: `WebInbox.make(supervisor, config)` in a scope, or
 * `WebInbox.layer(config)` over the `Supervisor` service; its configuration (`WebInboxConfig`,
 * `Limits`, `DefaultLimits`), the running inbox (`WebInbox`: its address, token and link) and
 * `WebInboxError`.
 */
export * as WebInbox from "./WebInbox.js"

/**
 * The inbox's HTTP API as an `@effect/platform` `HttpApi` (`InboxApi.InboxApi`): its routes, the
 * JSON of cards, settlements and work items, its errors, and the token header. A client can be
 * derived from it (`HttpApiClient.make(InboxApi.InboxApi)`).
 */
export * as InboxApi from "./InboxApi.js"
