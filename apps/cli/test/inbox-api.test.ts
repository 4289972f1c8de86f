/**
 * The web inbox's API against the real HTTP server, mounted on a supervisor whose app-server is
 * the test kit's fake (which records exactly what it was answered): the token guards everything
 * but the page; decisions take the `--approvals stdin` path with channel `web`; the first answer
 * wins and a later one is `AlreadySettled` with who decided; unknown cards are 404; the event
 * stream carries cards and work items; the OpenAPI document comes from the API definition.
 */
import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import { Deferred, Duration, Effect, Either, Exit, Fiber, Redacted, Schedule, Schema, Scope } from "effect"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import * as Options from "../src/contract/Options.js"
import { InboxApi, WebInbox } from "@warden/inbox"
import * as CliProcess from "./support/CliProcess.js"
import * as Inbox from "./support/Inbox.js"

const json = (token: string, body?: unknown): RequestInit => ({
  method: body === undefined ? "GET" : "POST",
  headers: { "x-warden-token": token, "content-type": "application/json" },
  ...(body === undefined ? {} : { body: JSON.stringify(body) })
})

describe("web inbox API", () => {
  it.scopedLive("without the right token every route but the page is 401 with an empty body, and decides nothing", () =>
    Effect.gen(function* () {
      const t = yield* Inbox.setup()
      const requestId = yield* t.openCommand("echo hi", "call_1")
      const cardId = yield* t.cardFor(requestId)
      const base = t.inbox.url
      const wrong = t.token.slice(0, -1) + (t.token.endsWith("A") ? "B" : "A")
      const attempts: ReadonlyArray<[string, RequestInit]> = [
        [`${base}api/cards`, {}],
        [`${base}api/cards/${cardId}`, { headers: { "x-warden-token": wrong } }],
        [
          `${base}api/cards/${cardId}/decision`,
          {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ decision: "accept" })
          }
        ],
        [
          `${base}api/cards/${cardId}/decision`,
          {
            method: "POST",
            headers: { "x-warden-token": wrong, "content-type": "application/json" },
            body: JSON.stringify({ decision: "accept" })
          }
        ],
        [
          `${base}api/cards/${cardId}/decision?token=${t.token}`,
          {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ decision: "accept" })
          }
        ],
        [`${base}api/items`, { headers: { "x-warden-token": "" } }],
        [`${base}api/openapi.json`, {}],
        [`${base}api/events`, {}],
        [`${base}api/events?token=${wrong}`, {}],
        [`${base}no/such/route`, {}]
      ]
      for (const [url, init] of attempts) {
        const reply = yield* Inbox.call(url, init)
        assert.strictEqual(reply.status, 401, `${init.method ?? "GET"} ${url}`)
        assert.strictEqual(reply.text, "", `${url}: a 401 says nothing`)
      }
      // Nothing was decided: the card is still open and the app-server got no answer.
      assert.deepStrictEqual(
        (yield* t.supervisor.approvals.openCards).map((c) => c.id),
        [cardId]
      )
      assert.deepStrictEqual(t.fake.answersSoFar(), [])
      // The page itself needs no token (it holds no data) and forbids everything it does not need.
      const page = yield* Inbox.call(base)
      assert.strictEqual(page.status, 200)
      assert.include(page.text, '<script type="module" src="inbox.js">')
      assert.include(page.headers.get("content-security-policy") ?? "", "default-src 'none'")
      assert.strictEqual(page.headers.get("referrer-policy"), "no-referrer")
      assert.isNull(page.headers.get("set-cookie"))
      const script = yield* Inbox.call(`${base}inbox.js`)
      assert.strictEqual(script.status, 200)
      assert.include(script.headers.get("content-type") ?? "", "javascript")
    })
  )

  it.scopedLive(
    "cards: the list, one card in full (masked), accept by the web, then AlreadySettled with who decided; unknown is 404; nonsense is 400",
    () =>
      Effect.gen(function* () {
        const t = yield* Inbox.setup()
        const secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
        const requestId = yield* t.openCommand(
          `curl -H 'Authorization: Bearer ${secret}' https://example.com`,
          "call_1"
        )
        const cardId = yield* t.cardFor(requestId)
        const base = t.inbox.url

        const list = yield* Inbox.call(`${base}api/cards`, json(t.token))
        assert.strictEqual(list.status, 200)
        assert.deepStrictEqual(
          list.json.cards.map((c: any) => [c.id, c.kind, c.item, c.offers]),
          [[cardId, "command", 0, ["accept", "acceptForSession", "decline", "cancel"]]]
        )
        assert.isAbove(list.json.cards[0].deadlineAt, list.json.cards[0].openedAt)

        const full = yield* Inbox.call(`${base}api/cards/${cardId}`, json(t.token))
        assert.strictEqual(full.status, 200)
        assert.strictEqual(full.json.state, "open")
        assert.include(full.json.details.join("\n"), "cwd: /tmp/ws")
        assert.include(full.json.details.join("\n"), "curl")
        assert.notInclude(full.text, secret, "the card is masked")
        assert.notInclude(list.text, secret, "the list is masked")

        const bad = yield* Inbox.call(`${base}api/cards/${cardId}/decision`, json(t.token, { decision: "yes please" }))
        assert.strictEqual(bad.status, 400)
        assert.strictEqual(bad.json._tag, "InvalidDecision")
        const noBody = yield* Inbox.call(`${base}api/cards/${cardId}/decision`, {
          method: "POST",
          headers: { "x-warden-token": t.token, "content-type": "application/json" },
          body: '{"decis'
        })
        assert.strictEqual(noBody.status, 400, "a body cut short decides nothing")
        assert.deepStrictEqual(t.fake.answersSoFar(), [], "nothing was answered yet")

        const accepted = yield* Inbox.call(`${base}api/cards/${cardId}/decision`, json(t.token, { decision: "accept" }))
        assert.strictEqual(accepted.status, 200, accepted.text)
        assert.deepInclude(accepted.json.settlement, {
          cardId,
          outcome: "accepted",
          source: "person",
          channel: "web",
          by: "person (web)",
          written: true
        })
        const answer = yield* t.fake.answerTo(requestId)
        assert.deepStrictEqual(answer["result"], { decision: "accept" })

        const again = yield* Inbox.call(`${base}api/cards/${cardId}/decision`, json(t.token, { decision: "decline" }))
        assert.strictEqual(again.status, 409)
        assert.strictEqual(again.json._tag, "AlreadySettled")
        assert.deepInclude(again.json.settlement, { outcome: "accepted", by: "person (web)" })
        assert.strictEqual(t.fake.answersSoFar().length, 1, "the late answer wrote nothing")

        const settled = yield* Inbox.call(`${base}api/cards/${cardId}`, json(t.token))
        assert.strictEqual(settled.json.state, "settled")
        assert.strictEqual(settled.json.settlement.outcome, "accepted")

        const unknown = yield* Inbox.call(`${base}api/cards/c999/decision`, json(t.token, { decision: "accept" }))
        assert.strictEqual(unknown.status, 404)
        assert.deepStrictEqual(unknown.json, { _tag: "UnknownCard", cardId: "c999" })
        assert.strictEqual((yield* Inbox.call(`${base}api/cards/c999`, json(t.token))).status, 404)
      })
  )

  it.scopedLive(
    "a card without a deadline (an infinite one) lists with deadlineAt null, which the API's schema reads",
    () =>
      Effect.gen(function* () {
        const t = yield* Inbox.setup({}, { approvals: { deadlines: { default: Duration.infinity } } })
        const cardId = yield* t.cardFor(yield* t.openCommand("echo forever", "call_1"))
        const list = yield* Inbox.call(`${t.inbox.url}api/cards`, json(t.token))
        assert.strictEqual(list.status, 200)
        const cards = Schema.decodeUnknownSync(Schema.Array(InboxApi.CardBrief))(list.json.cards)
        assert.deepStrictEqual(
          cards.map((c) => [c.id, c.deadlineAt]),
          [[cardId, null]]
        )
        const full = yield* Inbox.call(`${t.inbox.url}api/cards/${cardId}`, json(t.token))
        assert.strictEqual(Schema.decodeUnknownSync(InboxApi.CardFull)(full.json).deadlineAt, null)
      })
  )

  it.scopedLive("a structured answer (questions) goes through as --approvals stdin sends it", () =>
    Effect.gen(function* () {
      const t = yield* Inbox.setup()
      const requestId = yield* t.fake.request("item/tool/requestUserInput", {
        threadId: t.threadId,
        turnId: "turn_1",
        itemId: "q",
        questions: [
          {
            id: "colour",
            header: "Colour",
            question: "Which colour?",
            isOther: false,
            isSecret: false,
            options: [
              { label: "red", description: "warm" },
              { label: "blue", description: "cold" }
            ]
          }
        ]
      })
      const cardId = yield* t.cardFor(requestId)
      const reply = yield* Inbox.call(
        `${t.inbox.url}api/cards/${cardId}/decision`,
        json(t.token, { decision: { answers: { colour: ["blue"] } } })
      )
      assert.strictEqual(reply.status, 200, reply.text)
      assert.strictEqual(reply.json.settlement.outcome, "accepted")
      assert.deepStrictEqual((yield* t.fake.answerTo(requestId))["result"], {
        answers: { colour: { answers: ["blue"] } }
      })
    })
  )

  it.scopedLive(
    "always: remembered then accepted; when nothing can be remembered the card stays open (422); without the ledger it is not offered",
    () =>
      Effect.gen(function* () {
        const remembered: Array<string> = []
        const t = yield* Inbox.setup({
          always: (card) =>
            Effect.sync(() => {
              if (card.summary.kind === "command" && card.summary.command.includes("&&"))
                return Either.left("not a simple command")
              remembered.push(card.id)
              return Either.right({ id: "r1", describe: card.title })
            })
        })
        const simple = yield* t.openCommand("ls -la", "call_1")
        const compound = yield* t.openCommand("ls && rm -rf x", "call_2")
        const simpleId = yield* t.cardFor(simple)
        const compoundId = yield* t.cardFor(compound)
        const list = yield* Inbox.call(`${t.inbox.url}api/cards`, json(t.token))
        assert.include(list.json.cards[0].offers, "always")
        const refused = yield* Inbox.call(
          `${t.inbox.url}api/cards/${compoundId}/decision`,
          json(t.token, { decision: "always" })
        )
        assert.strictEqual(refused.status, 422)
        assert.strictEqual(refused.json._tag, "NotRemembered")
        assert.include(
          (yield* t.supervisor.approvals.openCards).map((c) => c.id),
          compoundId,
          "still open"
        )
        const ok = yield* Inbox.call(
          `${t.inbox.url}api/cards/${simpleId}/decision`,
          json(t.token, { decision: "always" })
        )
        assert.strictEqual(ok.status, 200, ok.text)
        assert.strictEqual(ok.json.settlement.outcome, "accepted")
        assert.deepStrictEqual(remembered, [simpleId])
        assert.deepStrictEqual((yield* t.fake.answerTo(simple))["result"], { decision: "accept" })

        const plain = yield* Inbox.setup()
        const other = yield* plain.openCommand("ls", "call_1")
        const otherId = yield* plain.cardFor(other)
        const offers = (yield* Inbox.call(`${plain.inbox.url}api/cards`, json(plain.token))).json.cards[0].offers
        assert.notInclude(offers, "always")
        const noLedger = yield* Inbox.call(
          `${plain.inbox.url}api/cards/${otherId}/decision`,
          json(plain.token, { decision: "always" })
        )
        assert.strictEqual(noLedger.status, 422)
        assert.deepStrictEqual(plain.fake.answersSoFar(), [])
      })
  )

  it.scopedLive(
    "the event stream: a snapshot, then cards opening and settling elsewhere (with who), and work items",
    () =>
      Effect.gen(function* () {
        const t = yield* Inbox.setup()
        const stream = yield* Inbox.events(`${t.inbox.url}api/events?token=${encodeURIComponent(t.token)}`)
        assert.strictEqual(stream.status, 200)
        const hello = yield* stream.waitFor("hello", (e) => e.event === "hello")
        assert.deepStrictEqual(hello.data.cards, [])
        assert.deepInclude(hello.data.items[0], { item: 0, status: "running", threadId: t.threadId })

        const requestId = yield* t.openCommand("echo hi", "call_1")
        const opened = yield* stream.waitFor("card.opened", (e) => e.event === "card.opened")
        assert.strictEqual(opened.data.title.includes("echo hi"), true)
        // Decided elsewhere (as --approvals stdin does): the stream says who.
        const result = yield* t.supervisor.approvals.answer(opened.data.id, Decision.Decline, "stdin")
        assert.strictEqual(result._tag, "Settled")
        const settled = yield* stream.waitFor("card.settled", (e) => e.event === "card.settled")
        assert.deepInclude(settled.data, { cardId: opened.data.id, outcome: "declined", by: "person (stdin)" })
        assert.deepStrictEqual((yield* t.fake.answerTo(requestId))["result"], { decision: "decline" })

        // The header works as well as the query; a second page sees the same.
        const second = yield* Inbox.events(`${t.inbox.url}api/events`, { "x-warden-token": t.token })
        yield* second.waitFor("hello", (e) => e.event === "hello")

        yield* t.fake.completeTurn(t.threadId, "turn_1", "completed", { message: "all tidy" })
        const finished = yield* second.waitFor(
          "item finished",
          (e) => e.event === "item.updated" && e.data.status === "completed"
        )
        assert.deepInclude(finished.data, { item: 0, finalMessage: "all tidy" })
        assert.isNumber(finished.data.finishedAt)
        const items = yield* Inbox.call(`${t.inbox.url}api/items`, json(t.token))
        assert.strictEqual(items.status, 200, items.text)
        assert.deepInclude(items.json.items[0], { item: 0, status: "completed", prompt: "tidy up" })
      })
  )

  it.scopedLive("closing the inbox ends it even while event streams are open (the server does not wait for them)", () =>
    Effect.gen(function* () {
      const t = yield* Inbox.setup()
      const scope = yield* Scope.make()
      const inbox = yield* WebInbox.make(t.supervisor, { port: 0 }).pipe(Scope.extend(scope))
      const token = Redacted.value(inbox.token)
      const stream = yield* Inbox.events(`${inbox.url}api/events`, { "x-warden-token": token })
      yield* stream.waitFor("hello", (e) => e.event === "hello")
      yield* Scope.close(scope, Exit.void)
      yield* stream.ended
      const after = yield* Inbox.call(`${inbox.url}api/cards`, json(token)).pipe(Effect.either)
      assert.isTrue(Either.isLeft(after), "nothing listens any more")
    })
  )

  it.scopedLive(
    "a decision whose answer is on its way when the inbox closes gets its answer (the run's last card), not a cut connection; one stuck past the bound does not hold the close",
    () =>
      Effect.gen(function* () {
        const t = yield* Inbox.setup()
        // The answer of a decision waits for the offer made with it (`offers.after`): held here.
        const release = yield* Deferred.make<void>()
        const make = (reached: Deferred.Deferred<void>, after: Effect.Effect<void>) =>
          Effect.gen(function* () {
            const scope = yield* Scope.make()
            const inbox = yield* WebInbox.make(t.supervisor, {
              port: 0,
              offers: {
                after: () => Effect.as(Effect.zipRight(Deferred.succeed(reached, undefined), after), undefined),
                take: () => Effect.succeed(Either.left("none"))
              }
            }).pipe(Scope.extend(scope))
            return { scope, inbox, token: Redacted.value(inbox.token) }
          })
        const refused = (url: string, token: string) =>
          // Stops listening at once when the close begins: a new request is refused.
          Inbox.call(url, json(token)).pipe(
            Effect.either,
            Effect.repeat({ until: Either.isLeft, schedule: Schedule.spaced("10 millis") })
          )

        const reached = yield* Deferred.make<void>()
        const first = yield* make(reached, Deferred.await(release))
        const stream = yield* Inbox.events(`${first.inbox.url}api/events`, { "x-warden-token": first.token })
        yield* stream.waitFor("hello", (e) => e.event === "hello")
        const cardId = yield* t.cardFor(yield* t.openCommand("echo one", "call_1"))
        const decided = yield* Effect.fork(
          Inbox.call(`${first.inbox.url}api/cards/${cardId}/decision`, json(first.token, { decision: "accept" }))
        )
        yield* Deferred.await(reached) // settled; its answer waits
        const closing = yield* Effect.fork(Scope.close(first.scope, Exit.void))
        yield* refused(`${first.inbox.url}api/cards`, first.token)
        yield* Deferred.succeed(release, undefined)
        const reply = yield* Fiber.join(decided)
        assert.strictEqual(reply.status, 200, `the decision's answer arrived: ${reply.text}`)
        assert.strictEqual(reply.json.settlement.outcome, "accepted")
        yield* Fiber.join(closing)
        yield* stream.ended
        assert.deepStrictEqual(
          t.fake.answersSoFar().map((a) => a.result),
          [{ decision: "accept" }]
        )

        // An answer that does not come (its offer still being made) is cut after the bound.
        const stuck = yield* Deferred.make<void>()
        const reachedToo = yield* Deferred.make<void>()
        const second = yield* make(reachedToo, Deferred.await(stuck))
        const otherId = yield* t.cardFor(yield* t.openCommand("echo two", "call_2"))
        const held = yield* Effect.fork(
          Inbox.call(
            `${second.inbox.url}api/cards/${otherId}/decision`,
            json(second.token, { decision: "accept" })
          ).pipe(Effect.either)
        )
        yield* Deferred.await(reachedToo)
        yield* Scope.close(second.scope, Exit.void)
        const cut = yield* Fiber.join(held)
        assert.isTrue(Either.isLeft(cut) || cut.right.status !== 200, "the stuck answer was cut by the close")
      }),
    60_000
  )

  it.scopedLive(
    "notifications: signed over the body, retried after a failure (which decides nothing); the accept link decides once, then 410; forged is 401; GET only asks",
    () =>
      Effect.gen(function* () {
        const secret = "notify-secret-for-the-test"
        const receiver = yield* Inbox.receiver([500, 200])
        const reports: Array<string> = []
        const t = yield* Inbox.setup({ notify: { urls: [receiver.url], secret, report: (line) => reports.push(line) } })
        const requestId = yield* t.openCommand("echo notified", "call_1")
        const cardId = yield* t.cardFor(requestId)
        const [failed, delivered] = yield* receiver.waitFor(2)
        // The failed delivery was reported and decided nothing; the retry carries the same signed body.
        assert.include(reports.join("\n"), `notification of card ${cardId}`)
        assert.include(
          (yield* t.supervisor.approvals.openCards).map((c) => c.id),
          cardId
        )
        assert.deepStrictEqual(t.fake.answersSoFar(), [])
        assert.strictEqual(failed!.body, delivered!.body)
        assert.strictEqual(
          delivered!.signature,
          "sha256=" + Crypto.createHmac("sha256", secret).update(delivered!.body).digest("hex")
        )
        const message = JSON.parse(delivered!.body)
        assert.strictEqual(message.card.id, cardId)
        assert.include(message.card.title, "echo notified")
        assert.isString(message.links.accept)
        assert.isString(message.links.decline)
        assert.strictEqual(message.expiresAt, message.card.deadlineAt)

        // GET only asks (a link previewer decides nothing); POST decides, once.
        const asked = yield* Inbox.call(message.links.accept)
        assert.strictEqual(asked.status, 200)
        assert.include(asked.text, '<form method="post">')
        assert.deepStrictEqual(t.fake.answersSoFar(), [])
        const forged = message.links.accept.replace(/\/[^/]+$/, "/" + "A".repeat(43))
        const bad = yield* Inbox.call(forged, { method: "POST" })
        assert.strictEqual(bad.status, 401)
        assert.strictEqual(bad.text, "")
        const used = yield* Inbox.call(message.links.accept, { method: "POST" })
        assert.strictEqual(used.status, 200, used.text)
        assert.include(used.text, "accepted")
        assert.deepStrictEqual((yield* t.fake.answerTo(requestId))["result"], { decision: "accept" })
        const again = yield* Inbox.call(message.links.accept, { method: "POST" })
        assert.strictEqual(again.status, 410)
        assert.strictEqual((yield* Inbox.call(message.links.accept)).status, 410)
        const decline = yield* Inbox.call(message.links.decline, { method: "POST" })
        assert.strictEqual(decline.status, 409, "the other link finds the card settled and changes nothing")
        assert.include(decline.text, "accepted by person (link)")
        assert.strictEqual(t.fake.answersSoFar().length, 1)
      })
  )

  it.scopedLive("notifications: a card a rule settles at once is not announced; the next open card is", () =>
    Effect.gen(function* () {
      const receiver = yield* Inbox.receiver([])
      const t = yield* Inbox.setup(
        { notify: { urls: [receiver.url], secret: "s" } },
        {
          approvals: { rules: { rules: [{ id: "no-rm", effect: "deny", match: { command: { argvPrefix: ["rm"] } } }] } }
        }
      )
      const denied = yield* t.openCommand("rm -rf /tmp/x", "call_1")
      assert.deepStrictEqual((yield* t.fake.answerTo(denied))["result"], { decision: "decline" })
      const asked = yield* t.openCommand("echo ask me", "call_2")
      const cardId = yield* t.cardFor(asked)
      const [first] = yield* receiver.waitFor(1)
      assert.strictEqual(
        JSON.parse(first!.body).card.id,
        cardId,
        "the first message is the open card's: the denied one was never announced"
      )
    })
  )

  it.scopedLive(
    "behind a reverse proxy with a path prefix (publicUrl): the page, its script and API work through the proxy, the notification's links point at it and decide once",
    () =>
      Effect.gen(function* () {
        const receiver = yield* Inbox.receiver([])
        // The proxy strips /warden and forwards to the inbox; its own port is known before the inbox starts.
        const target = { port: 0 }
        const proxy = yield* Effect.acquireRelease(
          Effect.async<Http.Server>((resume) => {
            const server = Http.createServer((req, res) => {
              if (!req.url?.startsWith("/warden/")) {
                res.writeHead(404).end()
                return
              }
              const forwarded = Http.request(
                {
                  host: "127.0.0.1",
                  port: target.port,
                  method: req.method,
                  path: req.url.slice("/warden".length),
                  headers: req.headers
                },
                (answer) => {
                  res.writeHead(answer.statusCode ?? 502, answer.headers)
                  answer.pipe(res)
                }
              )
              forwarded.on("error", () => res.writeHead(502).end())
              req.pipe(forwarded)
            })
            server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
          }),
          (server) =>
            Effect.sync(() => {
              server.close()
              server.closeAllConnections()
            })
        )
        const address = proxy.address()
        const proxyPort = typeof address === "object" && address !== null ? address.port : 0
        const publicUrl = `http://127.0.0.1:${proxyPort}/warden/`
        const t = yield* Inbox.setup({ publicUrl, notify: { urls: [receiver.url], secret: "s" } })
        target.port = t.inbox.port
        assert.strictEqual(t.inbox.publicUrl, publicUrl)
        assert.strictEqual(Redacted.value(t.inbox.link), `${publicUrl}#token=${t.token}`)
        assert.notStrictEqual(t.inbox.url, publicUrl, "it still listens on its own address")

        // The page names its script and API relative to itself: under the prefix they resolve through the proxy.
        const page = yield* Inbox.call(publicUrl)
        assert.strictEqual(page.status, 200)
        const script = /<script[^>]*src="([^"]+)"/.exec(page.text)?.[1]
        assert.isDefined(script)
        assert.strictEqual((yield* Inbox.call(new URL(script!, publicUrl).href)).status, 200)
        const requestId = yield* t.openCommand("echo proxied", "call_1")
        const cardId = yield* t.cardFor(requestId)
        const cards = yield* Inbox.call(new URL("api/cards", publicUrl).href, json(t.token))
        assert.strictEqual(cards.status, 200)
        assert.include(cards.text, cardId)

        const [delivered] = yield* receiver.waitFor(1)
        const message = JSON.parse(delivered!.body)
        assert.strictEqual(message.inbox, publicUrl)
        assert.isTrue(message.links.accept.startsWith(`${publicUrl}l/`), message.links.accept)
        const used = yield* Inbox.call(message.links.accept, { method: "POST" })
        assert.strictEqual(used.status, 200, used.text)
        assert.deepStrictEqual((yield* t.fake.answerTo(requestId))["result"], { decision: "accept" })
        assert.strictEqual((yield* Inbox.call(message.links.accept, { method: "POST" })).status, 410)
      })
  )

  it.scopedLive(
    "a public URL that is not an absolute http(s) URL without query or fragment is refused before anything listens",
    () =>
      Effect.gen(function* () {
        const t = yield* Inbox.setup()
        for (const bad of [
          "ci.example",
          "ftp://ci.example/",
          "https://u:p@ci.example/",
          "https://ci.example/?a=1",
          "https://ci.example/#x"
        ]) {
          const result = yield* Effect.either(WebInbox.make(t.supervisor, { port: 0, publicUrl: bad }))
          assert.isTrue(Either.isLeft(result) && result.left.reason === "PublicUrl", bad)
        }
        assert.deepStrictEqual(
          WebInbox.publicOrigin("https://ci.example/warden/"),
          Either.right("https://ci.example/warden")
        )
        assert.deepStrictEqual(WebInbox.publicOrigin("https://ci.example"), Either.right("https://ci.example"))
      })
  )

  it.scopedLive(
    "work items: an inbox without a submit function (warden run) takes none: 405 NotAccepting, info says so",
    () =>
      Effect.gen(function* () {
        const t = yield* Inbox.setup()
        const info = yield* Inbox.call(`${t.inbox.url}api/info`, json(t.token))
        assert.strictEqual(JSON.parse(info.text).accepting, false)
        const refused = yield* Inbox.call(`${t.inbox.url}api/items`, json(t.token, { prompt: "more work" }))
        assert.strictEqual(refused.status, 405)
        assert.strictEqual(JSON.parse(refused.text)._tag, "NotAccepting")
        const items = JSON.parse((yield* Inbox.call(`${t.inbox.url}api/items`, json(t.token))).text).items
        assert.deepStrictEqual(
          items.map((i: { item: number }) => i.item),
          [0],
          "only the item that was running"
        )
      })
  )

  it.scopedLive(
    "work items: with a submit function, a submission is 202 with its id and appears on the board at once; a refusal's reason is masked and sent back",
    () =>
      Effect.gen(function* () {
        const submitted: Array<string> = []
        const t = yield* Inbox.setup({
          submit: ({ prompt }) =>
            prompt.includes("refuse")
              ? Effect.fail("stopping; token=ghp_abcdefghijklmnopqrstuvwxyz0123456789")
              : Effect.sync(() => (submitted.push(prompt), 7))
        })
        const accepted = yield* Inbox.call(`${t.inbox.url}api/items`, json(t.token, { prompt: "more work" }))
        assert.strictEqual(accepted.status, 202, accepted.text)
        assert.deepStrictEqual(JSON.parse(accepted.text), { item: 7 })
        assert.deepStrictEqual(submitted, ["more work"])
        const items = JSON.parse((yield* Inbox.call(`${t.inbox.url}api/items`, json(t.token))).text).items
        assert.deepInclude(
          items.find((i: { item: number }) => i.item === 7),
          { prompt: "more work", status: "queued" }
        )
        const refused = yield* Inbox.call(`${t.inbox.url}api/items`, json(t.token, { prompt: "refuse this" }))
        assert.strictEqual(refused.status, 405)
        assert.notInclude(refused.text, "ghp_abcdefghijklmnopqrstuvwxyz0123456789")
        assert.include(JSON.parse(refused.text).reason, "stopping")
      })
  )

  it.scopedLive("the OpenAPI document comes from the API definition and names the token", () =>
    Effect.gen(function* () {
      const t = yield* Inbox.setup()
      const doc = yield* Inbox.call(`${t.inbox.url}api/openapi.json`, json(t.token))
      assert.strictEqual(doc.status, 200)
      assert.strictEqual(doc.json.openapi.slice(0, 2), "3.")
      for (const path of [
        "/api/cards",
        "/api/cards/{cardId}",
        "/api/cards/{cardId}/decision",
        "/api/items",
        "/api/events",
        "/api/info"
      ]) {
        assert.property(doc.json.paths, path)
      }
      assert.deepInclude(Object.values(doc.json.components.securitySchemes), {
        type: "apiKey",
        name: "x-warden-token",
        in: "header"
      })
      assert.property(doc.json.paths["/api/cards/{cardId}/decision"].post.responses, "409")
    })
  )

  it.scopedLive("a non-loopback address is refused unless allowed; the token compare is exact", () =>
    Effect.gen(function* () {
      const t = yield* Inbox.setup()
      const refused = yield* WebInbox.make(t.supervisor, { host: "0.0.0.0", port: 0 }).pipe(Effect.exit)
      assert.isTrue(Exit.isFailure(refused))
      if (Exit.isFailure(refused)) assert.include(String(refused.cause), "not a loopback address")
      assert.isTrue(
        WebInbox.isLoopback("127.0.0.1") &&
          WebInbox.isLoopback("::1") &&
          !WebInbox.isLoopback("0.0.0.0") &&
          !WebInbox.isLoopback("192.168.1.2")
      )
      assert.isTrue(WebInbox.tokenMatches("abc", "abc"))
      assert.isFalse(WebInbox.tokenMatches("abc", "abd"))
      assert.isFalse(WebInbox.tokenMatches("abc", "abcd"))
      assert.isFalse(WebInbox.tokenMatches("abc", undefined))
      assert.notStrictEqual(WebInbox.newToken(), WebInbox.newToken())
      assert.isAtLeast(WebInbox.newToken().length, 43)
    })
  )

  it("--inbox addresses: PORT, HOST:PORT, [IPV6]:PORT; anything else is refused", () => {
    assert.deepStrictEqual(Options.parseInboxAddress("8420"), Either.right({ host: "127.0.0.1", port: 8420 }))
    assert.deepStrictEqual(Options.parseInboxAddress("0.0.0.0:0"), Either.right({ host: "0.0.0.0", port: 0 }))
    assert.deepStrictEqual(Options.parseInboxAddress("[::1]:9"), Either.right({ host: "::1", port: 9 }))
    for (const bad of ["", "x", "70000", "host:", ":80", "a:b:80", "[::1]", "::1:80"])
      assert.isTrue(Either.isLeft(Options.parseInboxAddress(bad)), bad)
  })

  it.scopedLive(
    "usage errors (exit 2, nothing started): a non-loopback address without --inbox-allow-remote, --notify without a secret or without --inbox, --approvals inbox without --inbox",
    () =>
      Effect.gen(function* () {
        const cases: ReadonlyArray<[ReadonlyArray<string>, string]> = [
          [["--inbox", "0.0.0.0:0"], "not a loopback address"],
          [["--inbox", "0", "--notify", "http://127.0.0.1:9/hook"], "--notify needs a secret"],
          [["--notify", "http://127.0.0.1:9/hook", "--notify-secret", "x"], "--notify needs --inbox"],
          [["--approvals", "inbox"], "--approvals inbox needs --inbox"],
          [["--inbox", "0", "--approvals", "deny"], "--inbox has nothing to answer"],
          [["--inbox-public-url", "https://ci.example/warden"], "--inbox-public-url needs --inbox"],
          [["--inbox", "0", "--inbox-public-url", "ci.example/warden"], "not an absolute URL"],
          [["--inbox", "0", "--inbox-public-url", "https://ci.example/warden?x=1"], "must not have a query"],
          [["--inbox", "0", "--inbox-public-url", "ftp://ci.example/"], "must be http(s)"]
        ]
        for (const [flags, message] of cases) {
          const result = yield* CliProcess.runToEnd(
            ["run", "--codex", process.execPath, "--no-state", ...flags, "hello"],
            { env: { WARDEN_NOTIFY_SECRET: "" } }
          )
          assert.strictEqual(result.exited.code, 2, `${flags.join(" ")}: ${result.stderr}`)
          assert.include(result.stderr, message)
          assert.notInclude(result.stderr, "inbox at", "no inbox was started")
        }
      }),
    120_000
  )
})
