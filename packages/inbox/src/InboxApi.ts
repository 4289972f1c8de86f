/**
 * The web inbox's HTTP API (`WebInbox`, and `warden run --inbox`), defined once with
 * `@effect/platform`'s `HttpApi`: the server's handlers, the OpenAPI document
 * (`GET /api/openapi.json`) and the page all follow from it.
 *
 * Every route but the page itself (`GET /`) needs the access token, in the `X-Warden-Token`
 * header (the event stream also takes `?token=`); without it the answer is 401 with an empty body,
 * before anything else is looked at. What the API shows is what the approvals engine already
 * masked (card views and settlements); request values are never sent.
 */
import {
  HttpApi,
  HttpApiEndpoint,
  HttpApiError,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity,
  OpenApi
} from "@effect/platform"
import { Schema } from "effect"
import { version } from "./internal/Version.js"

/** The header that carries the access token. */
export const TokenHeader = "x-warden-token"

/** How a card settled, as the inbox shows it (masked; `by` is a phrase for people: `person (web)`, `deadline`). */
export const SettlementJson = Schema.Struct({
  cardId: Schema.String,
  outcome: Schema.String,
  /** `person`, `deadline`, `rule:<id>`, `remembered:<id>`, ... (the approvals' `describeSource`). */
  source: Schema.String,
  /** For a person's decision: where it came from (`web`, `stdin`, `terminal`, ...), when known. */
  channel: Schema.NullOr(Schema.String),
  by: Schema.String,
  decision: Schema.NullOr(Schema.String),
  written: Schema.Boolean,
  detail: Schema.NullOr(Schema.String),
  settledAt: Schema.Number,
  latencyMs: Schema.Number
})
export type SettlementJson = typeof SettlementJson.Type

/** An open card in the list: enough to show it and its countdown. */
export const CardBrief = Schema.Struct({
  id: Schema.String,
  method: Schema.String,
  kind: Schema.String,
  /** One masked line. */
  title: Schema.String,
  item: Schema.NullOr(Schema.Union(Schema.String, Schema.Number)),
  threadId: Schema.NullOr(Schema.String),
  turnId: Schema.NullOr(Schema.String),
  /** The decision words this card takes (`accept`, `acceptForSession`, `decline`, `cancel`, and `always` when the ledger is on). */
  offers: Schema.Array(Schema.String),
  openedAt: Schema.Number,
  /** When the card refuses by itself (epoch ms); null for a card without a deadline (an infinite one). */
  deadlineAt: Schema.NullOr(Schema.Number)
})
export type CardBrief = typeof CardBrief.Type

/** One card in full: the masked summary (command, cwd, diff, permissions asked, MCP inputs, questions), as lines and as data. */
export const CardFull = Schema.Struct({
  ...CardBrief.fields,
  state: Schema.Literal("open", "settled"),
  details: Schema.Array(Schema.String),
  summary: Schema.Unknown,
  settlement: Schema.NullOr(SettlementJson)
})
export type CardFull = typeof CardFull.Type

/** A work item on the board. */
export const ItemJson = Schema.Struct({
  item: Schema.Union(Schema.String, Schema.Number),
  prompt: Schema.NullOr(Schema.String),
  status: Schema.String,
  threadId: Schema.NullOr(Schema.String),
  activity: Schema.String,
  tokens: Schema.NullOr(Schema.Number),
  startedAt: Schema.NullOr(Schema.Number),
  finishedAt: Schema.NullOr(Schema.Number),
  finalMessage: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String)
})
export type ItemJson = typeof ItemJson.Type

/**
 * A rule offered with an acceptance (the ledger on): the person's acceptances of cards like this
 * one, never declined, make a proposal proven by replay against the whole record; taking it
 * (`POST /api/offers/{offerId}`) remembers it. Nothing is taken by itself.
 */
export const OfferJson = Schema.Struct({
  /** The proposal's id (`suggested-...`). */
  id: Schema.String,
  /** One line: what it allows, its evidence, what it would have saved. */
  summary: Schema.String,
  /** The rule in full, as a rules file holds it (YAML, its evidence as a comment). */
  rule: Schema.String,
  /** The whole record replayed with the rules in force and this one. */
  replay: Schema.Struct({
    cards: Schema.Number,
    decides: Schema.Number,
    savedAsks: Schema.Number,
    flippedDenials: Schema.Number,
    flippedAcceptances: Schema.Number
  }),
  /** How many accepted cards are its evidence. */
  evidence: Schema.Number
})
export type OfferJson = typeof OfferJson.Type

/** No open card, and no card settled recently, has this id. Nothing was decided. */
export class UnknownCard extends Schema.TaggedError<UnknownCard>()(
  "UnknownCard",
  { cardId: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/** The card had already settled: this decision changed nothing; `settlement` says who decided. */
export class AlreadySettled extends Schema.TaggedError<AlreadySettled>()(
  "AlreadySettled",
  { settlement: SettlementJson },
  HttpApiSchema.annotations({ status: 409 })
) {}

/** The body is not a decision (`reason` says why). Nothing was decided. */
export class InvalidDecision extends Schema.TaggedError<InvalidDecision>()(
  "InvalidDecision",
  { reason: Schema.String },
  HttpApiSchema.annotations({ status: 400 })
) {}

/** `always` could not be remembered (no ledger, or no scope for this card); the card stays open. */
export class NotRemembered extends Schema.TaggedError<NotRemembered>()(
  "NotRemembered",
  { reason: Schema.String },
  HttpApiSchema.annotations({ status: 422 })
) {}

/**
 * The decision did not reach the one who decides the card (a fleet's runner not reached in time,
 * its store not read); `reason` says which. Nothing is known to be decided: the card stays open
 * unless the answer arrives after all (the first answer wins); try again.
 */
export class NotDelivered extends Schema.TaggedError<NotDelivered>()(
  "NotDelivered",
  { reason: Schema.String },
  HttpApiSchema.annotations({ status: 503 })
) {}

/** This inbox takes no work items (`warden run`'s are given on its command line; only `warden serve` takes them). */
export class NotAccepting extends Schema.TaggedError<NotAccepting>()(
  "NotAccepting",
  { reason: Schema.String },
  HttpApiSchema.annotations({ status: 405 })
) {}

/** A work item as submitted (`warden serve`): its prompt, non-empty, at most 64 KiB. */
export const Submission = Schema.Struct({
  prompt: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(65_536))
})
export type Submission = typeof Submission.Type

/** The access token check, for the OpenAPI document and as a second check behind the server's own. */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("@warden/inbox/InboxApi/Authorization", {
  failure: HttpApiError.Unauthorized,
  security: { token: HttpApiSecurity.apiKey({ key: TokenHeader, in: "header" }) }
}) {}

const cardId = HttpApiSchema.param("cardId", Schema.String)

/** The cards, the work items, and decisions. */
export class InboxGroup extends HttpApiGroup.make("inbox")
  .add(
    HttpApiEndpoint.get("info", "/api/info").addSuccess(
      Schema.Struct({
        /** Whether `always` is offered (the ledger is on). */
        always: Schema.Boolean,
        /** The server's clock (epoch ms), so a page can correct its countdowns. */
        now: Schema.Number,
        title: Schema.String,
        /** Whether work items can be submitted (`POST /api/items`: `warden serve`). */
        accepting: Schema.Boolean
      })
    )
  )
  .add(
    HttpApiEndpoint.get("cards", "/api/cards").addSuccess(
      Schema.Struct({ cards: Schema.Array(CardBrief), now: Schema.Number })
    )
  )
  .add(HttpApiEndpoint.get("card")`/api/cards/${cardId}`.addSuccess(CardFull).addError(UnknownCard))
  .add(
    HttpApiEndpoint.post("decide")`/api/cards/${cardId}/decision`
      .setPayload(
        Schema.Struct({
          /** `accept`, `acceptForSession`, `decline`, `cancel`, `always`, or the method's structured answer (as `--approvals stdin`). */
          decision: Schema.Unknown
        })
      )
      .addSuccess(
        Schema.Struct({
          settlement: SettlementJson,
          /** With a person's acceptance (the ledger on): a proven rule this card is evidence of, offered. */
          offer: Schema.optionalWith(OfferJson, { exact: true })
        })
      )
      .addError(UnknownCard)
      .addError(AlreadySettled)
      .addError(InvalidDecision)
      .addError(NotRemembered)
      .addError(NotDelivered)
  )
  .add(
    HttpApiEndpoint.post("takeOffer")`/api/offers/${HttpApiSchema.param("offerId", Schema.String)}`
      /** The remembered rule now in force: its id and what it allows. */
      .addSuccess(Schema.Struct({ ruleId: Schema.String, describe: Schema.String }))
      .addError(NotRemembered)
  )
  .add(
    HttpApiEndpoint.get("items", "/api/items").addSuccess(
      Schema.Struct({ items: Schema.Array(ItemJson), now: Schema.Number })
    )
  )
  .add(
    HttpApiEndpoint.post("submit", "/api/items")
      .setPayload(Submission)
      /** The new item's id; it runs as soon as admission lets it (its events follow on the stream). */
      .addSuccess(Schema.Struct({ item: Schema.Union(Schema.String, Schema.Number) }), { status: 202 })
      .addError(NotAccepting)
  )
  .middleware(Authorization) {}

/**
 * The event stream: `text/event-stream`, one event per card or work-item change (`card.opened`,
 * `card.settled`, `item.updated`), each `data` one JSON object; first a `hello` event.
 */
export class StreamGroup extends HttpApiGroup.make("stream").add(
  HttpApiEndpoint.get("events", "/api/events")
    .setUrlParams(Schema.Struct({ token: Schema.optional(Schema.String) }))
    .addSuccess(HttpApiSchema.Text({ contentType: "text/event-stream" }))
) {}

/** The whole API. */
export class InboxApi extends HttpApi.make("warden-inbox")
  .add(InboxGroup)
  .add(StreamGroup)
  .annotate(OpenApi.Title, "Warden web inbox")
  .annotate(OpenApi.Version, version)
  .annotate(
    OpenApi.Description,
    "Answer Warden's approval cards over HTTP. Every route needs the access token printed at start (header X-Warden-Token; the event stream also takes ?token=)."
  ) {}
