/**
 * The web inbox on your own supervisor: `WebInbox.layer` over the `Supervisor` service. A person
 * answers cards in a browser, at the link the inbox prints; a program answers them over its HTTP
 * API. Here the program plays the person: it waits for the card on the API (a client derived from
 * `InboxApi`, the API's schema) and accepts it, as the page's Accept button does.
 *
 *   pnpm --filter @warden/examples inbox     (runs offline against the pinned codex)
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { InboxApi, WebInbox } from "@warden/inbox"
import { CodexCommand, Supervisor } from "@warden/supervisor"
import { Console, Effect, Layer, Redacted } from "effect"
import { offlineCodex } from "./OfflineCodex.js"

/** A client of the inbox's API, with its token (the inbox made one at start: `inbox.token`). */
const inboxClient = (inbox: WebInbox.WebInbox) =>
  HttpApiClient.make(InboxApi.InboxApi, {
    baseUrl: inbox.url,
    transformClient: HttpClient.mapRequest(
      HttpClientRequest.setHeader(InboxApi.TokenHeader, Redacted.value(inbox.token))
    )
  })

/** What a person at the page does: wait for the first card, then accept it. */
const acceptFirstCard = (inbox: WebInbox.WebInbox) =>
  Effect.gen(function* () {
    const client = yield* inboxClient(inbox)
    // The page follows the event stream (`GET /api/events`); asking every 100 ms does here.
    const { cards } = yield* client.inbox
      .cards()
      .pipe(Effect.delay("100 millis"), Effect.repeat({ until: ({ cards }) => cards.length > 0 }))
    const card = cards[0]!
    const { settlement } = yield* client.inbox.decide({ path: { cardId: card.id }, payload: { decision: "accept" } })
    yield* Console.log(`card ${card.id} (${card.title}): ${settlement.outcome} by ${settlement.by}`)
  })

const program = (workspace: string) =>
  Effect.gen(function* () {
    const supervisor = yield* Supervisor.Supervisor
    const inbox = yield* WebInbox.WebInboxService
    // `inbox.link` (the page's URL with the token) is for the person who decides, and for nothing
    // that records: print it where they read it. This program only says where the inbox listens.
    yield* Console.log(`inbox listening at ${inbox.url}`)
    yield* acceptFirstCard(inbox).pipe(Effect.provide(FetchHttpClient.layer), Effect.forkScoped)
    const result = yield* supervisor.run({ prompt: "say hello", cwd: workspace })
    yield* Console.log(`status: ${result.status}; final message: ${result.finalMessage}`)
    return result
  })

/** The inbox mounted on a supervisor (loopback, any free port, a fresh token); cards wait for a person up to a minute. */
const layer = (codex: CodexCommand.CodexCommand) =>
  WebInbox.layer({ title: "example" }).pipe(
    Layer.provideMerge(
      Supervisor.layer({ approvals: { deadlines: { default: "1 minute" } } }).pipe(
        Layer.provide(CodexCommand.transportLayer(codex))
      )
    )
  )

if (import.meta.url === `file://${process.argv[1]}`) {
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const codex = yield* offlineCodex
        yield* program(codex.cwd ?? process.cwd()).pipe(Effect.provide(layer(codex)))
      })
    )
  ).catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}
