/**
 * A plain JavaScript (ESM) program that serves Warden's web inbox from its own supervisor, run by
 * the outside-install test in a project that installed the packed tarballs with npm: what
 * `npm install @warden/inbox` gives. No TypeScript, no loader, no build.
 *
 * The supervisor's app-server is the test kit's fake (no codex, no model): it asks for one command
 * approval, the card it becomes is served by the inbox, and this program answers it over HTTP as a
 * person at the page would (the token in the `X-Warden-Token` header).
 *
 * Prints one JSON line: what happened.
 */
import { WebInbox } from "@warden/inbox"
import { Supervisor } from "@warden/supervisor"
import { FakeAppServer } from "@warden/testkit"
import { Effect, Redacted } from "effect"
import { startWithCommandCard } from "./command-card.mjs"

const http = (url, init) =>
  Effect.promise(async () => {
    const res = await fetch(url, init)
    const text = await res.text()
    return { status: res.status, type: res.headers.get("content-type"), text }
  })

const program = Effect.gen(function* () {
  const fake = FakeAppServer.make({ turns: "manual" })
  const supervisor = yield* Supervisor.make({}).pipe(Effect.provide(fake.layer))
  const inbox = yield* WebInbox.make(supervisor, { title: "outside" })
  const token = Redacted.value(inbox.token)
  const headers = { "x-warden-token": token, "content-type": "application/json" }

  const { requestId } = yield* startWithCommandCard(supervisor, fake, "tidy up", "echo served by an installed inbox")

  const page = yield* http(inbox.url)
  const unauthorized = yield* http(`${inbox.url}api/cards`)
  let cards = []
  for (let tries = 0; cards.length === 0 && tries < 100; tries++) {
    const listed = yield* http(`${inbox.url}api/cards`, { headers })
    cards = JSON.parse(listed.text).cards
    if (cards.length === 0) yield* Effect.sleep("100 millis")
  }
  const card = cards[0]
  const decided = yield* http(`${inbox.url}api/cards/${card.id}/decision`, {
    method: "POST",
    headers,
    body: JSON.stringify({ decision: "accept" })
  })
  const again = yield* http(`${inbox.url}api/cards/${card.id}/decision`, {
    method: "POST",
    headers,
    body: JSON.stringify({ decision: "decline" })
  })
  const answer = yield* fake.answerTo(requestId)
  return {
    page: { status: page.status, type: page.type, titled: page.text.includes("outside") },
    unauthorized: unauthorized.status,
    card: { title: card.title, offers: card.offers },
    decided: { status: decided.status, settlement: JSON.parse(decided.text).settlement },
    again: { status: again.status, tag: JSON.parse(again.text)._tag },
    answer
  }
})

const report = await Effect.runPromise(Effect.scoped(program))
process.stdout.write(`${JSON.stringify(report)}\n`)
