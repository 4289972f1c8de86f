/**
 * What a watching fiber waits on: nothing, until it is interrupted. Not `Effect.never`, which
 * keeps a ref'd timer for its life, so that a process with one cannot exit by itself: an engine
 * left open with nothing to do would hold its embedder's process.
 */
import { Effect } from "effect"

/** Waits until interrupted, holding no timer. */
export const untilInterrupted: Effect.Effect<never> = Effect.async<never>(() => {})
