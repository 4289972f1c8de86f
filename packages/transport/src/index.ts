/**
 * `@warden/transport`: newline-delimited JSON frames to and from one `codex app-server` child.
 *
 * - {@link ChildProcessTransport}: spawn the child and speak to it over its stdio (the real thing).
 * - {@link ChildEnv}: the environment every child gets: ours without Warden's own secrets.
 * - {@link MemoryTransport}: an in-memory peer with the same contract, for fast deterministic tests.
 * - {@link Transport}: the contract both implement (the `Transport` service, `Connection`).
 * - {@link JsonCensus}: moved to `@warden/json` (which the transport parses every frame with);
 *   re-exported here for one release.
 * - {@link ConnectionEnded}: why a connection ended, as a typed reason, and the typed errors
 *   (`ConnectionEnded`, `ConnectionClosed`, `SpawnFailed`, `UnencodableFrame`).
 *
 * @packageDocumentation
 */
export * as ChildEnv from "./ChildEnv.js"
export * as ChildProcessTransport from "./ChildProcessTransport.js"
export * as ConnectionEnded from "./ConnectionEnded.js"
export * as JsonCensus from "./JsonCensus.js"
export * as MemoryTransport from "./MemoryTransport.js"
export * as Transport from "./Transport.js"
