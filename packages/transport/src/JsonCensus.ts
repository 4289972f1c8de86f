/**
 * Moved: the census of a frame's large objects is `JsonCensus` of `@warden/json` (also
 * `@warden/json/JsonCensus`), which the transport and the protocol both import. This module
 * re-exports it, the same functions and the same registry, for one release; import it from
 * `@warden/json` instead.
 *
 * @deprecated Import `JsonCensus` from `@warden/json`; this re-export goes in 0.2.0.
 * @since 0.1.0
 */

// What the census module exports, by name (each documented where it is written).
export {
  ScanFrom,
  MinKeys,
  MaxDepth,
  keyCount,
  note,
  scan,
  census,
  parse,
  keysWithin,
  isEmpty
} from "@warden/json/JsonCensus"
export type { Found, Keys } from "@warden/json/JsonCensus"
