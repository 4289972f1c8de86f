/**
 * The web inbox: an HTTP server in the same process as a supervisor (`warden run --inbox`, or an
 * embedder's own supervisor through {@link make} / {@link layer}), or over a fleet's cards
 * (`warden fleet --inbox`, {@link serve}), on `@effect/platform`'s `HttpApi`
 * and the Node server. It serves the page (`GET /`), the API of `InboxApi` (open cards, one card in
 * full, decisions, work items, the OpenAPI document) and a Server-Sent Events stream of card and
 * work-item events.
 *
 * Access: a random token (32 bytes, base64url) made at start unless given; every route but the
 * page and its script needs it (header `X-Warden-Token`; the event stream also `?token=`), compared
 * in constant time; without it the answer is 401 with an empty body and nothing is looked at. No
 * cookies. The server logs nothing (no request log, no listen log), so the token reaches only
 * whoever the caller prints it to. It binds to 127.0.0.1 unless told otherwise; a non-loopback
 * address needs `allowRemote`.
 *
 * Decisions take the path `--approvals stdin` takes (`Decision.fromJson`, and `always` through
 * the ledger's `rememberAlways`), answered through the approvals engine with channel `web`: the
 * first answer wins; a decision for a settled card is `AlreadySettled` (409, with who decided)
 * and changes nothing; an unknown card is 404. A request that fails or never arrives decides
 * nothing: the card waits for another answer or its deadline.
 */
import type { Card } from "@warden/approvals"
import { Supervisor } from "@warden/supervisor"
import { Context, Effect, Layer } from "effect"
import type { Duration, Either, Redacted, Scope } from "effect"
import type * as InboxApi from "./InboxApi.js"
import * as Address from "./internal/Address.js"
import * as Server from "./internal/Server.js"

export { DefaultLimits, newToken, tokenMatches, WebInboxError } from "./internal/Server.js"
export type { SettledCard, Source, SourceAnswer, SourceEvent } from "./internal/Source.js"
import type { Source } from "./internal/Source.js"

/**
 * Remembers an allow scoped to what the card asked (the CLI gives the ledger's `rememberAlways`);
 * Left: why nothing was remembered.
 */
export type RememberAlways = (
  card: Card.CardView
) => Effect.Effect<Either.Either<{ readonly id: string; readonly describe: string }, string>>

/** How to run the web inbox. */
export interface WebInboxConfig {
  /** Address to bind (default `127.0.0.1`). Anything but a loopback address needs `allowRemote`. */
  readonly host?: string
  /** Port (default 0: any free port; the bound one is in `WebInbox.port`). */
  readonly port?: number
  /** The access token; a random one when omitted (pass one only to share it with a trusted proxy). */
  readonly token?: string
  /** Bind to a non-loopback address (anyone who can reach it and has the token can decide cards). */
  readonly allowRemote?: boolean
  /** The page's title (default `warden`). */
  readonly title?: string
  /**
   * Where people reach the inbox when that is not its own address (a TLS reverse proxy, a tunnel):
   * an absolute `http(s)` URL, optionally with a path prefix the proxy strips (`https://ci.example/warden`),
   * without query or fragment. The notifications' links and the printed link use it; the server
   * still listens on `host`:`port`. Checked by {@link publicOrigin} (a bad one is `WebInboxError` `PublicUrl`).
   */
  readonly publicUrl?: string
  /** `always`: remember an allow scoped to the card, then accept it (the CLI's ledger); without it `always` is not offered. */
  readonly always?: RememberAlways
  /**
   * Rules offered with an acceptance (the CLI's ledger: `@warden/ledger`'s `Offers`): `after` is
   * asked once a card this inbox accepted settled `accepted` (its answer carries the offer, if
   * any); `take` remembers an offered rule (`POST /api/offers/{id}`; Left: why not, `422`).
   */
  readonly offers?: {
    readonly after: (card: Card.CardView) => Effect.Effect<InboxApi.OfferJson | undefined>
    readonly take: (
      id: string
    ) => Effect.Effect<Either.Either<{ readonly ruleId: string; readonly describe: string }, string>>
  }
  /**
   * Takes work items (`POST /api/items`, `warden serve`): starts one and says its id, or why not
   * (the reason is sent back: `405 NotAccepting`). Without it the inbox takes none (405).
   */
  readonly submit?: (submission: InboxApi.Submission) => Effect.Effect<string | number, string>
  /** Work items known before they start (shown queued). */
  readonly items?: ReadonlyArray<{ readonly id: string | number; readonly prompt: string }>
  /**
   * Notifications: when a card opens, POST a JSON message to each URL, signed with HMAC-SHA256 over
   * the body with `secret` (`X-Warden-Signature: sha256=HEX`), carrying signed single-use
   * accept/decline links that expire with the card. A failed delivery is reported through
   * `report` and retried with backoff until the card settles or its deadline passes; it never
   * decides the card.
   */
  readonly notify?: {
    readonly urls: ReadonlyArray<string>
    readonly secret: string
    readonly report?: (line: string) => void
  }
  /** The server's bounds (each defaults to `DefaultLimits`'). */
  readonly limits?: Limits
  /**
   * Where the server says what its operator should know (the connection cap reached); no token,
   * path or body is ever in it. Default: a line on stderr.
   */
  readonly log?: (line: string) => void
}

/**
 * The server's bounds. A connection that has not sent a whole request's headers within
 * `idleTimeout` of opening is closed (one that sent nothing, above all); after a response, an idle
 * keep-alive connection is closed after `keepAliveTimeout`; a request's headers must arrive within
 * `headersTimeout` and the whole request within `requestTimeout` (a response, such as the event
 * stream, may last as long as it needs). At most `maxConnections` are open at once: one more
 * closes the oldest that has not sent a request yet, or is refused when every one has (said once
 * on the log until the count falls back). A request body over `maxBodyBytes` is 413, on every route.
 */
export interface Limits {
  readonly idleTimeout?: Duration.DurationInput
  readonly keepAliveTimeout?: Duration.DurationInput
  readonly headersTimeout?: Duration.DurationInput
  readonly requestTimeout?: Duration.DurationInput
  readonly maxConnections?: number
  readonly maxBodyBytes?: number
}

/** The running inbox. */
export interface WebInbox {
  /** The address the server is bound to. */
  readonly host: string
  readonly port: number
  /** The page's URL, without the token (the listening address). */
  readonly url: string
  /** The page's URL as people reach it: `publicUrl` when given, else `url`. */
  readonly publicUrl: string
  /** The access token. Show it to the person who decides, and to nothing that records. */
  readonly token: Redacted.Redacted<string>
  /** The page's public URL with the token in its fragment (never sent to the server, never in its logs). */
  readonly link: Redacted.Redacted<string>
}

/** The `WebInbox` service tag, provided by {@link layer}. */
export class WebInboxService extends Context.Tag("@warden/inbox/WebInbox")<WebInboxService, WebInbox>() {}

/** Whether `host` names this machine only (127.0.0.0/8, ::1, localhost). */
export const isLoopback: (host: string) => boolean = Address.isLoopback

/**
 * The origin (with any path prefix, no trailing slash) that links are built on, from a public URL:
 * `https://ci.example/warden/` gives `https://ci.example/warden`. Left: why it is not one (not
 * absolute, not http(s), has credentials, a query or a fragment).
 */
export const publicOrigin: (text: string) => Either.Either<string, string> = Address.publicOrigin

/**
 * Starts the web inbox for `supervisor` in the caller's scope (closing it stops the server and
 * every event stream). Fails with `WebInboxError` when the address is not loopback and
 * `allowRemote` is not set, or cannot be bound, or `publicUrl` is not one.
 */
export const make: (
  supervisor: Supervisor.SupervisorShape,
  config?: WebInboxConfig
) => Effect.Effect<WebInbox, Server.WebInboxError, Scope.Scope> = Server.make

/**
 * Starts the web inbox over any `Source` of cards (a fleet's one inbox: `warden fleet --inbox`)
 * in the caller's scope; otherwise as {@link make}. The source's answers stand for the engine's:
 * `NotDelivered` (the card's decider not reached) is the API's 503 `NotDelivered`, and the card
 * stays open.
 */
export const serve: (
  source: Source,
  config?: WebInboxConfig
) => Effect.Effect<WebInbox, Server.WebInboxError, Scope.Scope> = Server.serve

/**
 * {@link make} as a layer over the `Supervisor` service: mount the inbox on your own supervisor.
 *
 * @example
 * ```ts
 * import { WebInbox } from "@warden/inbox"
 * import { CodexCommand, Supervisor } from "@warden/supervisor"
 * import { Effect, Layer, Redacted } from "effect"
 *
 * const Live = WebInbox.layer({ port: 8420 }).pipe(
 *   Layer.provideMerge(Supervisor.layer({}).pipe(Layer.provide(CodexCommand.transportLayer({ command: "codex" }))))
 * )
 * const program = Effect.gen(function*() {
 *   const inbox = yield* WebInbox.WebInboxService
 *   console.error(`inbox: ${Redacted.value(inbox.link)}`)
 * })
 * ```
 */
export const layer = (
  config: WebInboxConfig = {}
): Layer.Layer<WebInboxService, Server.WebInboxError, Supervisor.Supervisor> =>
  Layer.scoped(
    WebInboxService,
    Effect.flatMap(Supervisor.Supervisor, (supervisor) => make(supervisor, config))
  )
