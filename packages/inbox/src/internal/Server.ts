/**
 * The web inbox's server (the implementation of `WebInbox.make`): the API's handlers, the page,
 * signed links and notifications, the event stream, the guards before routing, and the bounded
 * Node server, wired on `@effect/platform`'s `HttpLayerRouter`.
 *
 * @internal
 */
import {
  HttpApiBuilder,
  HttpApiError,
  HttpIncomingMessage,
  HttpLayerRouter,
  HttpServer,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import type { Card } from "@warden/approvals"
import { Approvals, SecretMask } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import type { Supervisor } from "@warden/supervisor"
import {
  Context,
  Data,
  Deferred,
  Effect,
  Either,
  Exit,
  FiberId,
  FiberSet,
  Layer,
  Option,
  PubSub,
  Queue,
  Redacted,
  Schedule,
  Stream
} from "effect"
import type { Scope } from "effect"
import * as Crypto from "node:crypto"
import type * as Http from "node:http"
import * as InboxApi from "../InboxApi.js"
import type { Limits, WebInbox, WebInboxConfig } from "../WebInbox.js"
import { isLoopback, publicOrigin } from "./Address.js"
import * as InboxBoard from "./Board.js"
import * as InboxLinks from "./Links.js"
import * as InboxPage from "./Page.js"
import * as InboxServer from "./NodeServer.js"
import { decodeError, describeServeError, describeValue, readFailure, tooLarge, withoutEcho } from "./Responses.js"
import { fromSupervisor, type SettledCard, type Source, type SourceEvent } from "./Source.js"

/** The default bounds: 5 s idle, 5 s keep-alive, 10 s for headers, 30 s for a request, 128 connections, 1 MiB bodies. */
export const DefaultLimits = {
  idleTimeout: "5 seconds",
  keepAliveTimeout: "5 seconds",
  headersTimeout: "10 seconds",
  requestTimeout: "30 seconds",
  maxConnections: 128,
  maxBodyBytes: 1024 * 1024
} as const satisfies Required<Limits>

/** The inbox could not start: the address is refused (`NotLoopback`), cannot be bound (`Listen`), or `publicUrl` is not an absolute http(s) URL without query or fragment (`PublicUrl`). */
export class WebInboxError extends Data.TaggedError("WebInboxError")<{
  readonly reason: "NotLoopback" | "Listen" | "PublicUrl"
  readonly detail: string
}> {
  override get message() {
    return this.detail
  }
}

/** A new random access token (32 bytes, base64url). */
export const newToken = (): string => Crypto.randomBytes(32).toString("base64url")

const digest = (text: string) => Crypto.createHash("sha256").update(text, "utf8").digest()

/** Compares in constant time (both sides hashed first, so lengths leak nothing). */
export const tokenMatches = (expected: string, given: string | undefined): boolean =>
  given !== undefined && Crypto.timingSafeEqual(digest(expected), digest(given))

/**
 * How long the inbox's close waits for the answers on their way (a decision's response): one
 * response is milliseconds; a handler stuck longer (an offer's replay, bounded at 10 s) is cut.
 */
const AnsweredWithinMs = 2_000

/** The event stream's route (`InboxApi`'s `events`): its token may come in the query; its response is not waited for at the close. */
const EventsPath = "/api/events"

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

/** On every response (the API's JSON, errors, the event stream, the pages): nothing is cached, nothing is sniffed. */
const everyResponseHeaders = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff"
}

const pageHeaders = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "cache-control": "no-store"
}

/**
 * Starts the web inbox for `supervisor` in the caller's scope (closing it stops the server and
 * every event stream). Fails with `WebInboxError` when the address is not loopback and
 * `allowRemote` is not set, or cannot be bound.
 */
export const make = (
  supervisor: Supervisor.SupervisorShape,
  config: WebInboxConfig = {}
): Effect.Effect<WebInbox, WebInboxError, Scope.Scope> => serve(fromSupervisor(supervisor), config)

/** Starts the web inbox over `source` in the caller's scope (see {@link make}). */
export const serve = (
  source: Source,
  config: WebInboxConfig = {}
): Effect.Effect<WebInbox, WebInboxError, Scope.Scope> =>
  Effect.gen(function* () {
    const host = config.host ?? "127.0.0.1"
    if (!isLoopback(host) && config.allowRemote !== true) {
      return yield* new WebInboxError({
        reason: "NotLoopback",
        detail: `the inbox binds to ${host}, which is not a loopback address: allow it explicitly (--inbox-allow-remote), or reach a loopback inbox through an SSH tunnel (docs/inbox.md)`
      })
    }
    const published = config.publicUrl === undefined ? undefined : publicOrigin(config.publicUrl)
    if (published !== undefined && Either.isLeft(published))
      return yield* new WebInboxError({ reason: "PublicUrl", detail: published.left })
    const token = config.token ?? newToken()
    const signer = InboxLinks.makeSigner()
    const always = config.always
    const title = config.title ?? "warden"
    const board = InboxBoard.make(config.items)
    for (const item of source.items === undefined ? [] : yield* source.items) board.put(item)
    const recent = new Map<Card.CardId, SettledCard>()
    const remember = (settled: SettledCard) => {
      recent.set(settled.card.id, settled)
      // As many as the engine remembers for late answers (the most recent).
      if (recent.size > Approvals.DefaultSettledHistory) recent.delete(recent.keys().next().value!)
    }
    const messages = yield* PubSub.unbounded<string>()

    // One pump per source: state first, then the message, so a page that reads the state after an
    // event never sees less than the event said.
    const changes = yield* source.subscribe
    const runFork = yield* FiberSet.makeRuntime<never>()
    const deliveries = new Map<Card.CardId, Deferred.Deferred<void>>()
    let origin = ""
    const report = (line: string) => config.notify?.report?.(SecretMask.maskText(line))
    const notifyOpened = (card: Card.CardView) => {
      const notify = config.notify
      if (notify === undefined || notify.urls.length === 0) return
      const stop = Deferred.unsafeMake<void>(FiberId.none)
      deliveries.set(card.id, stop)
      const links = {
        ...(card.offers.includes("Accept") ? { accept: origin + signer.path(card.id, "accept", card.deadlineAt) } : {}),
        decline: origin + signer.path(card.id, "decline", card.deadlineAt)
      }
      const body = JSON.stringify({
        type: "card.opened",
        card: InboxBoard.cardBrief(card, false),
        links,
        expiresAt: Number.isFinite(card.deadlineAt) ? card.deadlineAt : null,
        inbox: `${origin}/`
      })
      const signature = InboxLinks.signatureOf(notify.secret, body)
      for (const target of notify.urls) {
        const attempt = Effect.tryPromise({
          try: (signal) =>
            fetch(target, {
              method: "POST",
              body,
              signal,
              headers: { "content-type": "application/json", "x-warden-signature": signature }
            }).then(async (res) => {
              await res.body?.cancel()
              if (!res.ok) throw new Error(`HTTP ${res.status}`)
            }),
          catch: (error) => (error instanceof Error ? error.message : String(error))
        }).pipe(Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => "no answer within 10 s" }))
        const loop = Effect.gen(function* () {
          for (let n = 1; ; n++) {
            const result = yield* Effect.either(attempt)
            if (Either.isRight(result)) return
            const wait = InboxLinks.backoffMs(n)
            if (Date.now() + wait >= card.deadlineAt) {
              report(
                `warden: notification of card ${card.id} to ${target} failed (${result.left}); giving up at its deadline (the card is not decided by this)`
              )
              return
            }
            report(
              `warden: notification of card ${card.id} to ${target} failed (${result.left}); retrying in ${wait} ms`
            )
            yield* Effect.sleep(wait)
          }
        })
        runFork(Effect.raceFirst(loop, Deferred.await(stop)))
      }
    }
    const onChange = (event: SourceEvent, settledNow: ReadonlySet<string>) => {
      switch (event._tag) {
        case "CardOpened": {
          if (!settledNow.has(event.card.id)) notifyOpened(event.card)
          messages.unsafeOffer(sse("card.opened", InboxBoard.cardBrief(event.card, always !== undefined)))
          return
        }
        case "CardSettled": {
          remember(event.settled)
          const stop = deliveries.get(event.settled.card.id)
          if (stop) {
            deliveries.delete(event.settled.card.id)
            Deferred.unsafeDone(stop, Exit.void)
          }
          messages.unsafeOffer(sse("card.settled", event.settled.settlement))
          return
        }
        case "ItemUpdated": {
          messages.unsafeOffer(sse("item.updated", board.put(event.item)))
          return
        }
        case "Supervisor": {
          const changed = board.onSupervisorEvent(event.event, Date.now())
          if (changed) messages.unsafeOffer(sse("item.updated", changed))
          return
        }
      }
    }
    const openCard = (cardId: string) => Effect.map(source.openCards, (cards) => cards.find((c) => c.id === cardId))

    const settledOrUnknown = (cardId: string): Effect.Effect<never, InboxApi.AlreadySettled | InboxApi.UnknownCard> =>
      Effect.suspend((): Effect.Effect<never, InboxApi.AlreadySettled | InboxApi.UnknownCard> => {
        const done = recent.get(cardId)
        return done
          ? Effect.fail(new InboxApi.AlreadySettled({ settlement: done.settlement }))
          : Effect.fail(new InboxApi.UnknownCard({ cardId }))
      })

    const answer = (
      cardId: string,
      decision: Decision.Decision,
      channel: "web" | "link" = "web"
    ): Effect.Effect<
      { readonly settlement: InboxApi.SettlementJson },
      InboxApi.AlreadySettled | InboxApi.UnknownCard | InboxApi.NotDelivered
    > =>
      Effect.flatMap(
        source.answer(cardId, decision, channel),
        (
          result
        ): Effect.Effect<
          { readonly settlement: InboxApi.SettlementJson },
          InboxApi.AlreadySettled | InboxApi.UnknownCard | InboxApi.NotDelivered
        > => {
          switch (result._tag) {
            case "Settled":
              return Effect.succeed({ settlement: result.settlement })
            case "AlreadySettled":
              return Effect.fail(new InboxApi.AlreadySettled({ settlement: result.settlement }))
            case "UnknownCard":
              return Effect.fail(new InboxApi.UnknownCard({ cardId }))
            case "NotDelivered":
              return Effect.fail(new InboxApi.NotDelivered({ reason: SecretMask.maskText(result.reason) }))
          }
        }
      )

    const decide = (cardId: string, raw: unknown) =>
      Effect.gen(function* () {
        if (raw === "always") {
          if (always === undefined)
            return yield* new InboxApi.NotRemembered({ reason: '"always" needs the ledger (run without --no-state)' })
          const card = yield* openCard(cardId)
          if (card === undefined) return yield* settledOrUnknown(cardId)
          const remembered = yield* always(card)
          if (Either.isLeft(remembered))
            return yield* new InboxApi.NotRemembered({
              reason: `not remembered (${remembered.left}); the card stays open`
            })
          return yield* answer(cardId, Decision.Accept)
        }
        const decision = Decision.fromJson(raw)
        if (decision === undefined) {
          // What was sent is described, never repeated (it may be large, or hold what the sender typed).
          return yield* new InboxApi.InvalidDecision({
            reason: `decision: ${describeValue(raw)} is not one of "accept", "acceptForSession", "decline", "cancel", "always" or a structured answer`
          })
        }
        const card = config.offers === undefined ? undefined : yield* openCard(cardId)
        const decided = yield* answer(cardId, decision)
        return card === undefined || decided.settlement.outcome !== "accepted"
          ? decided
          : { ...decided, ...(yield* offerAfter(card)) }
      })

    /** The rule offered with this acceptance, if any (bounded: an offer that takes too long is not made). */
    const offerAfter = (card: Card.CardView) =>
      config.offers === undefined
        ? Effect.succeed({})
        : config.offers.after(card).pipe(
            Effect.timeoutOption("10 seconds"),
            Effect.map((found) =>
              Option.isSome(found) && found.value !== undefined
                ? { offer: SecretMask.maskJson(found.value) as InboxApi.OfferJson }
                : {}
            )
          )

    const InboxLive = HttpApiBuilder.group(InboxApi.InboxApi, "inbox", (handlers) =>
      handlers
        .handle("info", () =>
          Effect.succeed({
            always: always !== undefined,
            now: Date.now(),
            title,
            accepting: config.submit !== undefined
          })
        )
        .handle("cards", () =>
          Effect.map(source.openCards, (cards) => ({
            cards: [...cards]
              .sort((a, b) => a.openedAt - b.openedAt)
              .map((c) => InboxBoard.cardBrief(c, always !== undefined)),
            now: Date.now()
          }))
        )
        .handle("card", ({ path }) =>
          Effect.gen(function* () {
            const card = yield* openCard(path.cardId)
            if (card !== undefined) return InboxBoard.cardFull(card, always !== undefined, undefined)
            const done = recent.get(path.cardId)
            if (done !== undefined) return InboxBoard.cardFull(done.card, always !== undefined, done.settlement)
            return yield* new InboxApi.UnknownCard({ cardId: path.cardId })
          })
        )
        .handle("decide", ({ path, payload }) => decide(path.cardId, payload.decision))
        .handle("takeOffer", ({ path }) => {
          const offers = config.offers
          if (offers === undefined)
            return Effect.fail(new InboxApi.NotRemembered({ reason: "rules are offered only with the ledger" }))
          return Effect.flatMap(offers.take(path.offerId), (taken) =>
            Either.isLeft(taken)
              ? Effect.fail(new InboxApi.NotRemembered({ reason: SecretMask.maskText(taken.left) }))
              : Effect.succeed({ ruleId: taken.right.ruleId, describe: SecretMask.maskText(taken.right.describe) })
          )
        })
        .handle("items", () => Effect.sync(() => ({ items: board.items(), now: Date.now() })))
        .handle("submit", ({ payload }) => {
          const submit = config.submit
          if (submit === undefined)
            return Effect.fail(
              new InboxApi.NotAccepting({ reason: "this inbox takes no work items (only warden serve does)" })
            )
          return submit(payload).pipe(
            Effect.mapError((reason) => new InboxApi.NotAccepting({ reason: SecretMask.maskText(reason) })),
            Effect.map((item) => {
              // Shown queued at once; its events follow (a row made by an early event keeps them).
              messages.unsafeOffer(sse("item.updated", board.add(item, payload.prompt)))
              return { item }
            })
          )
        })
    )

    const eventStream = Effect.gen(function* () {
      const queue = yield* PubSub.subscribe(messages)
      // Subscribed before the snapshot: nothing that happens after it is missed (an event may repeat it).
      const cards = yield* source.openCards
      const hello = sse("hello", {
        now: Date.now(),
        always: always !== undefined,
        title,
        cards: [...cards]
          .sort((a, b) => a.openedAt - b.openedAt)
          .map((c) => InboxBoard.cardBrief(c, always !== undefined)),
        items: board.items()
      })
      const live = Stream.fromQueue(queue)
      const pings = Stream.repeatEffectWithSchedule(Effect.succeed(": ping\n\n"), Schedule.spaced("15 seconds"))
      return Stream.concat(Stream.make(hello), Stream.merge(live, pings, { haltStrategy: "left" }))
    })

    const StreamLive = HttpApiBuilder.group(InboxApi.InboxApi, "stream", (handlers) =>
      handlers.handleRaw("events", () =>
        Effect.map(Stream.unwrapScoped(eventStream).pipe(Stream.encodeText, Effect.succeed), (body) =>
          HttpServerResponse.stream(body, {
            contentType: "text/event-stream",
            headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
          })
        )
      )
    )

    const AuthorizationLive = Layer.succeed(InboxApi.Authorization, {
      token: (given) =>
        tokenMatches(token, Redacted.value(given)) ? Effect.void : Effect.fail(new HttpApiError.Unauthorized())
    })

    const Page = HttpLayerRouter.addAll([
      HttpLayerRouter.route(
        "GET",
        "/",
        Effect.sync(() =>
          HttpServerResponse.html(InboxPage.html(title)).pipe(HttpServerResponse.setHeaders(pageHeaders))
        )
      ),
      // Browsers ask for it on every page load: no icon, and no 401 in the console.
      HttpLayerRouter.route(
        "GET",
        "/favicon.ico",
        Effect.sync(() => HttpServerResponse.empty({ status: 204 }))
      ),
      HttpLayerRouter.route(
        "GET",
        "/inbox.js",
        Effect.sync(() =>
          HttpServerResponse.text(InboxPage.script, { contentType: "text/javascript; charset=utf-8" }).pipe(
            HttpServerResponse.setHeaders(pageHeaders)
          )
        )
      )
    ])

    const linkPage = (status: number, title: string, text: string, button?: string) =>
      HttpServerResponse.html(InboxLinks.page(title, text, button)).pipe(
        HttpServerResponse.setStatus(status),
        HttpServerResponse.setHeaders(InboxLinks.pageHeaders)
      )
    const link = (method: "GET" | "POST") => (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const segments = new URL(request.url, "http://inbox.invalid").pathname
          .split("/")
          .slice(2)
          .map((s) => decodeURIComponent(s))
        const checked = signer.check(segments, Date.now(), method === "POST")
        if (checked._tag === "Forged") return HttpServerResponse.empty({ status: 401 })
        if (checked._tag === "Gone") {
          return linkPage(
            410,
            "This link is no longer valid",
            checked.why === "used"
              ? "It was used already. It decided nothing now."
              : "It expired with its card. It decided nothing."
          )
        }
        const { cardId, decision } = checked.parts
        const card = yield* openCard(cardId)
        if (method === "GET") {
          if (card === undefined) {
            const done = recent.get(cardId)
            return linkPage(
              done ? 409 : 404,
              `Card ${cardId}`,
              done
                ? `Already ${done.settlement.outcome} by ${done.settlement.by}.`
                : "Warden does not know this card any more."
            )
          }
          return linkPage(
            200,
            `${decision === "accept" ? "Accept" : "Decline"} card ${cardId}?`,
            card.title,
            decision === "accept" ? "accept" : "decline"
          )
        }
        const result = yield* Effect.either(
          answer(cardId, decision === "accept" ? Decision.Accept : Decision.Decline, "link")
        )
        if (Either.isRight(result)) {
          const s = result.right.settlement
          return linkPage(200, `Card ${cardId}: ${s.outcome}`, `Decided by you (${s.by}).`)
        }
        switch (result.left._tag) {
          case "AlreadySettled":
            return linkPage(
              409,
              `Card ${cardId}`,
              `Already ${result.left.settlement.outcome} by ${result.left.settlement.by}; this link changed nothing.`
            )
          case "NotDelivered":
            return linkPage(
              503,
              `Card ${cardId}`,
              `Not decided: ${result.left.reason}. The card stays open; try again.`
            )
          case "UnknownCard":
            return linkPage(
              404,
              `Card ${cardId}`,
              "Warden does not know this card any more; this link changed nothing."
            )
        }
      })
    const Links = HttpLayerRouter.addAll([
      HttpLayerRouter.route("GET", "/l/*", link("GET")),
      HttpLayerRouter.route("POST", "/l/*", link("POST"))
    ])

    const limits = { ...DefaultLimits, ...config.limits }
    const maxBodyBytes = Math.max(0, limits.maxBodyBytes)
    const open = new Set(["/", "/inbox.js", "/favicon.ico"])
    const authorized = (request: HttpServerRequest.HttpServerRequest, url: URL) => {
      if (request.method === "GET" && open.has(url.pathname)) return true
      // A link is its own authorization (its signature), checked by its route.
      if (url.pathname.startsWith("/l/")) return true
      const header = request.headers[InboxApi.TokenHeader]
      const query = url.pathname === EventsPath ? (url.searchParams.get("token") ?? undefined) : undefined
      return tokenMatches(token, header) || tokenMatches(token, query)
    }
    // Before routing: a request without the token learns nothing (not even which routes exist); a
    // body over the bound is 413 on every route, by its length or once reading passes the bound;
    // a body that does not decode is told what was wrong, never what it was.
    const guard = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const url = new URL(request.url, "http://inbox.invalid")
        if (!authorized(request, url)) return Effect.succeed(HttpServerResponse.empty({ status: 401 }))
        const length = Number(request.headers["content-length"] ?? "0")
        if (!(length <= maxBodyBytes)) return Effect.succeed(tooLarge(maxBodyBytes))
        return app
      })
    // Inside the router (where a response can still be changed, unlike in `guard`): a body sent
    // without a length (chunked) is read up to the bound, past it the platform stops reading and
    // cuts the connection; a body that is not JSON, or does not decode, is told so without echo.
    const Bodies = HttpLayerRouter.middleware(
      <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
        app.pipe(
          HttpIncomingMessage.withMaxBodySize(Option.some(maxBodyBytes)),
          Effect.flatMap(withoutEcho),
          Effect.catchAllCause((cause) => {
            const read = readFailure(cause)
            if (read === "TooLarge") return Effect.succeed(tooLarge(maxBodyBytes))
            if (read === "NotJson") return Effect.succeed(decodeError("the body is not valid JSON"))
            return Effect.failCause(cause)
          })
        ),
      { global: true }
    )

    const Api = HttpLayerRouter.addHttpApi(InboxApi.InboxApi, { openapiPath: "/api/openapi.json" }).pipe(
      Layer.provide([Layer.provide(InboxLive, AuthorizationLive), StreamLive, AuthorizationLive])
    )
    let server: Http.Server | undefined
    const log = config.log ?? ((line: string) => void process.stderr.write(`${line}\n`))
    const Server = HttpLayerRouter.serve(Layer.mergeAll(Api, Page, Links, Bodies), {
      disableLogger: true,
      disableListenLog: true,
      middleware: guard
    }).pipe(
      Layer.provideMerge(
        NodeHttpServer.layer(
          () => (server = InboxServer.make(limits, everyResponseHeaders, log, (path) => path === EventsPath)),
          {
            host,
            port: config.port ?? 0
          }
        )
      )
    )
    const context = yield* Layer.build(Server).pipe(
      Effect.mapError(
        (error) =>
          new WebInboxError({
            reason: "Listen",
            detail: `the inbox cannot listen on ${host}:${config.port ?? 0}: ${describeServeError(error)}`
          })
      )
    )
    // Runs before the server's own close, which waits for every connection to end: an open event
    // stream never ends by itself, so stop listening and cut every connection first. The answers
    // on their way are let through first (for `AnsweredWithin` at most): the decision that ended
    // the run (its last card) would otherwise reach its page as a lost connection, and the page
    // would show the acceptance as someone else's.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        const closing = server
        if (closing === undefined) return
        closing.close()
        yield* Effect.promise(() => InboxServer.answered(closing, AnsweredWithinMs))
        closing.closeAllConnections()
      })
    )
    const address = Context.get(context, HttpServer.HttpServer).address
    const port = address._tag === "TcpAddress" ? address.port : 0
    const urlHost = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host
    const url = `http://${urlHost}:${port}/`
    origin = published !== undefined ? published.right : `http://${urlHost}:${port}`
    const publicUrl = `${origin}/`

    // The pumps start once the address is known (the links need it); the subscriptions, made at
    // the start, kept every event meanwhile.
    yield* Queue.takeBetween(changes, 1, Number.MAX_SAFE_INTEGER).pipe(
      Effect.flatMap((batch) =>
        Effect.sync(() => {
          // A card settled in the same batch it opened in (a rule, the safety filter) is not announced.
          const settledNow = new Set<string>()
          for (const e of batch) if (e._tag === "CardSettled") settledNow.add(e.settled.card.id)
          for (const e of batch) onChange(e, settledNow)
        })
      ),
      Effect.forever,
      Effect.interruptible,
      Effect.forkScoped
    )

    return {
      host,
      port,
      url,
      publicUrl,
      token: Redacted.make(token),
      link: Redacted.make(`${publicUrl}#token=${token}`)
    }
  })
