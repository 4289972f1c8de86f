/**
 * The web inbox's Node HTTP server, bounded: Node's defaults keep a connection that never sends a
 * byte open for ever, and take any number of them (400 such connections from any local user, no
 * token needed, made the inbox unreachable once file handles ran out).
 *
 * - A connection that has not sent a whole request's headers within `idleTimeout` of opening is
 *   closed (Node's own timeouts start with the first byte of a request, so one that sends nothing
 *   is never timed out by them).
 * - Node's timeouts for the rest: `headersTimeout`, `requestTimeout` (receiving the request, not
 *   answering it: the event stream lasts as long as it needs) and `keepAliveTimeout`.
 * - At most `maxConnections` at once, counted here: one more closes the oldest connection that has
 *   not sent a request yet (so an idle crowd cannot keep a person out), or is refused when every
 *   open one is in use. Reaching the cap is said once on the log, again only after the count fell
 *   under half of it.
 * - `cache-control: no-store` and `x-content-type-options: nosniff` are set on every response
 *   before any handler runs (a handler's own headers win).
 * - The responses on their way, but the event streams' (which never end by themselves), are
 *   counted: `answered` waits for them when the inbox closes, so that a person whose decision
 *   ended the run is told it was theirs instead of losing the connection under it.
 */
import { Duration } from "effect"
import * as Http from "node:http"
import type * as Net from "node:net"

export interface Bounds {
  readonly idleTimeout: Duration.DurationInput
  readonly keepAliveTimeout: Duration.DurationInput
  readonly headersTimeout: Duration.DurationInput
  readonly requestTimeout: Duration.DurationInput
  readonly maxConnections: number
}

const ms = (d: Duration.DurationInput) => Math.max(1, Math.round(Duration.toMillis(Duration.decode(d))))

/** Per server: its responses on their way (event streams aside), and who waits for none to be. */
const inFlight = new WeakMap<Http.Server, { count: number; readonly idle: Array<() => void> }>()

/**
 * Resolves once no response of `server` is on its way (the event streams aside), or after
 * `withinMs`, whichever comes first. For the close: call it after `server.close()` (no new
 * connection), before cutting the connections that are left.
 */
export const answered = (server: Http.Server, withinMs: number): Promise<void> =>
  new Promise((resolve) => {
    const state = inFlight.get(server)
    if (state === undefined || state.count === 0) return resolve()
    const timer = setTimeout(done, Math.max(0, withinMs))
    function done() {
      clearTimeout(timer)
      const at = state!.idle.indexOf(done)
      if (at >= 0) state!.idle.splice(at, 1)
      resolve()
    }
    state.idle.push(done)
  })

/** A Node HTTP server with these bounds and headers (not listening yet). */
export const make = (
  bounds: Bounds,
  headers: Readonly<Record<string, string>>,
  log: (line: string) => void,
  /** Whether a request's path is an event stream's (its response lasts as long as the connection). */
  streaming: (path: string) => boolean
): Http.Server => {
  const requestTimeout = ms(bounds.requestTimeout)
  const headersTimeout = Math.min(ms(bounds.headersTimeout), requestTimeout)
  const server = Http.createServer({
    headersTimeout,
    requestTimeout,
    keepAliveTimeout: ms(bounds.keepAliveTimeout),
    // How often Node looks for requests past those timeouts (its default is 30 s).
    connectionsCheckingInterval: Math.min(1_000, headersTimeout)
  })
  const idleTimeout = ms(bounds.idleTimeout)
  const cap = Math.max(1, bounds.maxConnections)
  // Insertion order is age: the first entry without a request is the oldest idle one.
  const open = new Map<Net.Socket, { requested: boolean; timer: NodeJS.Timeout }>()
  let capSaid = false
  server.on("connection", (socket: Net.Socket) => {
    if (open.size >= cap) {
      let idle: Net.Socket | undefined
      for (const [s, entry] of open) {
        if (!entry.requested) {
          idle = s
          break
        }
      }
      if (!capSaid) {
        capSaid = true
        log(
          `warden: the inbox has ${cap} connections open, its cap: ${idle !== undefined ? "closing the oldest that sent no request for each new one" : "refusing new ones"} until fewer are open`
        )
      }
      if (idle === undefined) return void socket.destroy()
      idle.destroy()
      forget(idle)
    }
    const timer = setTimeout(() => {
      if (open.get(socket)?.requested !== true) socket.destroy()
    }, idleTimeout)
    timer.unref()
    open.set(socket, { requested: false, timer })
    socket.once("close", () => forget(socket))
  })
  const forget = (socket: Net.Socket) => {
    const entry = open.get(socket)
    if (entry === undefined) return
    clearTimeout(entry.timer)
    open.delete(socket)
    if (open.size < cap / 2) capSaid = false
  }
  const flight = { count: 0, idle: [] as Array<() => void> }
  inFlight.set(server, flight)
  // Registered before the handler's own listener (added when the server is served): runs first.
  server.on("request", (request: Http.IncomingMessage, response: Http.ServerResponse) => {
    const entry = open.get(request.socket)
    if (entry !== undefined && !entry.requested) {
      entry.requested = true
      clearTimeout(entry.timer)
    }
    for (const [name, value] of Object.entries(headers)) response.setHeader(name, value)
    if (!streaming((request.url ?? "").split("?")[0]!)) {
      flight.count++
      // "close": sent whole, or the connection went first.
      response.once("close", () => {
        flight.count--
        if (flight.count === 0) for (const done of flight.idle.slice()) done()
      })
    }
  })
  return server
}
