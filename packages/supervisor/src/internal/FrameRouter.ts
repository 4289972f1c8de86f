/**
 * Frame routing, synchronous: each frame the read loop takes goes where it belongs, in the loop's
 * own step. Responses resume their callers (`PendingRequests`; thread/start|resume register the
 * thread's route right there), notifications go to their thread's route (with the bookkeeping a
 * card needs: file changes, running commands, a turn's end) or to the connection-level PubSub,
 * server requests open cards in the connection's registry. Nothing here waits: a handler runs in a fiber of its
 * own, never on the loop.
 *
 * Scope and fibers: the router owns no fiber and no scope. It opens cards in the read loop's
 * fiber (`readIn`), parented to their thread's card scope; `abort` ends the connection through
 * the transport, and the read loop stops at the next frame.
 */
import type { Approvals } from "@warden/approvals"
import { Card } from "@warden/approvals"
import { Json, JsonRpc, ServerRequests } from "@warden/protocol"
import type { Transport as TransportNs } from "@warden/transport"
import { Effect } from "effect"
import type { Fiber, PubSub, RuntimeFlags } from "effect"
import * as Admission from "./Admission.js"
import type { PendingRequests } from "./PendingRequests.js"
import type { ThreadRoute } from "./ThreadRoute.js"

/** A notification that belongs to no thread we run (account, config, process news...). */
export interface ConnectionEvent {
  readonly method: string
  readonly params: unknown
}

const record = Json.asRecord

/** Thread id of a notification: `params.threadId`, or `params.thread.id` for thread/started. Hot path: no Schema. */
export const threadIdOf = (method: string, params: unknown): string | undefined => {
  const p = record(params)
  if (!p) return undefined
  const direct = p["threadId"]
  if (typeof direct === "string") return direct
  if (method === "thread/started") {
    const id = record(p["thread"])?.["id"]
    return typeof id === "string" ? id : undefined
  }
  return undefined
}

/** A frame whose handling threw: the read loop dies with it, and the connection ends naming it. */
export class FrameHandlingDefect extends Error {
  constructor(
    frame: Record<string, unknown>,
    readonly defect: unknown
  ) {
    const method = typeof frame["method"] === "string" ? frame["method"] : undefined
    const what = method !== undefined ? `${method}${frame["id"] !== undefined ? " request" : ""}` : "a response"
    super(`handling ${what} threw: ${defect instanceof Error ? defect.message : String(defect)}`)
    this.name = "FrameHandlingDefect"
  }
}

export interface FrameRouter {
  /** Handle one frame; returns an effect only for what must run in order (opening a card, aborting). */
  readonly handle: (frame: Record<string, unknown>) => Effect.Effect<void> | undefined
  /** End the connection as a protocol fault of the peer's; the read loop stops at the next frame. */
  readonly abort: (detail: string) => Effect.Effect<void>
  /** `abort` was called. */
  readonly aborted: () => boolean
  /** The read loop's fiber, once it runs: cards are opened in its steps. */
  readonly readIn: (fiber: Fiber.RuntimeFiber<unknown, unknown>, runtimeFlags: RuntimeFlags.RuntimeFlags) => void
}

export interface Options {
  readonly connection: TransportNs.Connection
  readonly pending: PendingRequests
  readonly connectionCards: Approvals.ConnectionCards
  readonly routes: ReadonlyMap<string, ThreadRoute>
  readonly connectionEvents: PubSub.PubSub<ConnectionEvent>
  /** Codex said it is under pressure (a rate limit reached): for adaptive admission. */
  readonly pressure: (reason: string) => void
}

export const make = (options: Options): FrameRouter => {
  const { connection, connectionEvents, connectionCards, pending, pressure, routes } = options

  const routeNotification = (method: string, params: unknown) => {
    const threadId = threadIdOf(method, params)
    const p = record(params)
    if (method === "serverRequest/resolved" && p) {
      const requestId = p["requestId"]
      if (typeof requestId === "number" || typeof requestId === "string") connectionCards.withdraw(requestId)
    }
    const route = threadId !== undefined ? routes.get(threadId) : undefined
    if (route) {
      if (method === "item/started" || method === "item/completed") {
        const item = record(p?.["item"])
        const itemId = item?.["id"]
        if (item && typeof itemId === "string") {
          // Kept while the item runs (its approval request does not carry them), made on first use.
          if (item["type"] === "fileChange") {
            if (method === "item/started") (route.fileChanges ??= new Map()).set(itemId, Card.fileChangesOf(item))
            else route.fileChanges?.delete(itemId)
          }
          if (item["type"] === "commandExecution") {
            if (method === "item/started") (route.runningCommands ??= new Set()).add(itemId)
            else route.runningCommands?.delete(itemId)
          }
        }
      } else if (method === "turn/completed") {
        const turnId = record(p?.["turn"])?.["id"]
        route.runningCommands?.clear()
        route.fileChanges?.clear()
        // The server resolves its own pending requests at turn end; refuse any we still hold.
        connectionCards.closeWhere(
          (card) => card.threadId === threadId && (turnId === undefined || card.turnId === turnId),
          {
            _tag: "TurnEnded"
          }
        )
      }
      route.routed++
      route.receive({ _tag: "Notification", method, params })
      return
    }
    if (method === "account/rateLimits/updated") {
      const reason = Admission.pressureOfRateLimits(params)
      if (reason !== undefined) pressure(reason)
    }
    connectionEvents.unsafeOffer({ method, params })
  }

  // A card's context without file changes is its route's work item only: one object per route,
  // held by every card of it (an open card is kept small: docs/performance.md).
  const contexts = new WeakMap<ThreadRoute, Card.CardContext>()
  const noContext: Card.CardContext = {}
  const contextOf = (route: ThreadRoute | undefined): Card.CardContext => {
    if (route === undefined || route.workItem === undefined) return noContext
    let context = contexts.get(route)
    if (context === undefined) {
      context = { workItem: route.workItem }
      contexts.set(route, context)
    }
    return context
  }

  /** The read loop's fiber (cards are opened in its steps), once it runs. */
  let reading:
    | { readonly fiber: Fiber.RuntimeFiber<unknown, unknown>; readonly runtimeFlags: RuntimeFlags.RuntimeFlags }
    | undefined

  const openCard = (requestId: JsonRpc.RequestId, method: string, params: unknown) => {
    const decoded = ServerRequests.decode(requestId, method, params)
    const threadId = ServerRequests.threadIdFor(decoded)
    const route = threadId !== undefined ? routes.get(threadId) : undefined
    const itemId = record(params)?.["itemId"]
    const fileChanges = route && typeof itemId === "string" ? route.fileChanges?.get(itemId) : undefined
    const openOptions: Approvals.OpenOptions = {
      parent: route?.cardScope,
      ...(route?.traceParent !== undefined ? { traceParent: route.traceParent } : {}),
      context: fileChanges
        ? { fileChanges, ...(route?.workItem !== undefined ? { workItem: route.workItem } : {}) }
        : contextOf(route)
    }
    // Opened in the read loop's own step (`openNow`): an effect only when something must wait.
    const opened =
      reading === undefined
        ? connectionCards.open(decoded, openOptions)
        : connectionCards.openNow(decoded, openOptions, reading.fiber, reading.runtimeFlags)
    return Effect.isEffect(opened)
      ? Effect.flatMap(opened, (result) => duplicate(result, requestId, method) ?? Effect.void)
      : duplicate(opened, requestId, method)
  }
  // Not a closure per card: under esbuild's `keepNames` (the bundled `warden run`, tsx) a named
  // inner function costs a `defineProperty` of its name each time it is made, ~0.5 µs.
  const duplicate = (result: Approvals.OpenResult, requestId: JsonRpc.RequestId, method: string) =>
    result._tag === "Duplicate"
      ? abort(
          `the server sent request id ${JSON.stringify(requestId)} (${method}) while a request with that id is still open`
        )
      : undefined

  let aborted = false
  const abort = (detail: string) =>
    Effect.suspend(() => {
      aborted = true
      return connection.abort(detail)
    })

  const handle = (frame: Record<string, unknown>): Effect.Effect<void> | undefined => {
    // Most frames are notifications (deltas, item events): route them without the classified
    // object (what `classify` answers for a string method and no id, minus one allocation).
    const method = frame["method"]
    if (typeof method === "string" && frame["id"] === undefined) {
      routeNotification(method, frame["params"])
      return undefined
    }
    const message = JsonRpc.classify(frame)
    switch (message._tag) {
      case "Response":
        pending.resolve(message.id, message.result)
        return undefined
      case "ErrorResponse":
        pending.reject(message.id, message.error)
        return undefined
      case "Notification":
        routeNotification(message.method, message.params)
        return undefined
      case "Request":
        return openCard(message.id, message.method, message.params)
      case "Invalid":
        // It may have been an approval request whose id we cannot read: the connection is unusable.
        return abort(`unclassifiable frame: ${message.detail}`)
    }
  }

  return {
    handle,
    abort,
    aborted: () => aborted,
    readIn: (fiber, runtimeFlags) => {
      reading = { fiber, runtimeFlags }
    }
  }
}
