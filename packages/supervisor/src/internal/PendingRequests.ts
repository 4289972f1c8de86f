/**
 * Our requests in flight, correlated by id. Each entry resumes its caller, once, from the read loop
 * (synchronously, from the response frame) or from the connection's end. An optional hook runs in the read loop too, before
 * the next frame is looked at: thread/start and thread/resume register the thread's route there.
 */
import { SecretMask } from "@warden/approvals"
import { Effect } from "effect"
import type { ConnectionLost, RequestTimeout } from "../Errors.js"
import { RemoteError } from "../Errors.js"

export interface Entry {
  readonly method: string
  /** Resumes the caller, once: the response, the server's error, or the connection's end. */
  readonly settle: (outcome: Effect.Effect<unknown, RemoteError | ConnectionLost | RequestTimeout>) => void
  readonly onResult?: ((result: unknown) => void) | undefined
}

export interface PendingRequests {
  readonly nextId: () => number
  readonly add: (id: number, entry: Entry) => void
  readonly remove: (id: number) => void
  /** Settle from a response frame; false when nobody waits (late reply after a timeout). */
  readonly resolve: (id: number | string, result: unknown) => boolean
  readonly reject: (
    id: number | string,
    error: { readonly code: number; readonly message: string; readonly data?: unknown }
  ) => boolean
  readonly failAll: (error: ConnectionLost) => number
  readonly size: () => number
}

export const make = (): PendingRequests => {
  const entries = new Map<number, Entry>()
  let counter = 0
  const take = (id: number | string) => {
    if (typeof id !== "number") return undefined
    const entry = entries.get(id)
    if (entry) entries.delete(id)
    return entry
  }
  return {
    nextId: () => counter++,
    add: (id, entry) => {
      entries.set(id, entry)
    },
    remove: (id) => {
      entries.delete(id)
    },
    resolve: (id, result) => {
      const entry = take(id)
      if (!entry) return false
      // The caller is resumed even if the hook throws (the throw still ends the connection: it
      // happens on the read loop); its entry is gone already, so nothing else would resume it.
      try {
        entry.onResult?.(result)
      } finally {
        entry.settle(Effect.succeed(result))
      }
      return true
    },
    reject: (id, error) => {
      const entry = take(id)
      if (!entry) return false
      entry.settle(
        // The server's words are shown (errors, events, logs): masked like everything that leaves.
        Effect.fail(
          new RemoteError({
            method: entry.method,
            code: error.code,
            detail: SecretMask.maskText(error.message),
            ...(error.data !== undefined ? { data: error.data } : {})
          })
        )
      )
      return true
    },
    failAll: (error) => {
      const all = Array.from(entries.values())
      entries.clear()
      for (const entry of all) entry.settle(Effect.fail(error))
      return all.length
    },
    size: () => entries.size
  }
}
