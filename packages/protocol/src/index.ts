/**
 * `@warden/protocol`: the codex app-server protocol for Warden, measured against codex 0.171.0.
 *
 * - {@link JsonRpc}: frames classified on the way in, encoded on the way out.
 * - {@link Json}: small guards for untyped JSON, and Schema failures told without values.
 * - {@link Decision}: what can be decided about a server request, in one vocabulary.
 * - {@link PermissionsGrant}: a permissions grant checked against what was asked.
 * - {@link ServerRequests}: the ten server requests, their params, refusals and answer encoders.
 * - {@link ClientMethods}: the requests Warden sends, with params and result schemas.
 * - {@link Events}: server notifications as typed domain events.
 * - {@link Thread}, {@link ThreadItem}, {@link Turn}: what those events carry.
 * - {@link OpenEnum}: string enums that tolerate values added by a newer server.
 *
 * The binary's own schema dump (`generate-json-schema`) and a validator over it are a separate
 * entry point, `@warden/protocol/SchemaDump`.
 *
 * @packageDocumentation
 */
export * as JsonRpc from "./JsonRpc.js"
export * as Json from "./Json.js"
export * as Decision from "./Decision.js"
export * as PermissionsGrant from "./PermissionsGrant.js"
export * as ServerRequests from "./ServerRequests.js"
export * as ClientMethods from "./ClientMethods.js"
export * as Events from "./Events.js"
export * as Thread from "./Thread.js"
export * as ThreadItem from "./ThreadItem.js"
export * as Turn from "./Turn.js"
export * as OpenEnum from "./OpenEnum.js"
