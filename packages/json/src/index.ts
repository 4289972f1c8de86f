/**
 * `@warden/json`: pure JSON helpers, the lowest layer of Warden (it imports no other package).
 *
 * - {@link JsonCensus}: `JSON.parse` that also counts the keys of a text's large objects, so a
 *   bounded walk knows an object's size before it enumerates it (`keyCount`, `keysWithin`,
 *   `isEmpty`). The transport registers while it parses frames, the protocol reads: one registry.
 *
 * @packageDocumentation
 */
export * as JsonCensus from "./JsonCensus.js"
