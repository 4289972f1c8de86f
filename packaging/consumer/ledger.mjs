/**
 * A plain JavaScript (ESM) program that records a supervisor's run in the ledger, run by the
 * outside-install test in a project that installed the packed tarballs with npm: what
 * `npm install @warden/ledger` gives. No TypeScript, no loader, no build.
 *
 * The supervisor's app-server is the test kit's fake: it asks for one command approval, a handler
 * accepts it, and the ledger (`layerSqlite`, its writer on its own thread, from the installed
 * `dist/`) records the card and its settlement. A second ledger on the file reads them back.
 *
 * Prints one JSON line: what was read back, and what was logged.
 */
import { Ledger } from "@warden/ledger"
import { Decision } from "@warden/protocol"
import { Supervisor } from "@warden/supervisor"
import { FakeAppServer } from "@warden/testkit"
import { Effect, Logger } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { startWithCommandCard } from "./command-card.mjs"

const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "warden-outside-ledger-"))
const filename = Path.join(dir, "ledger.db")
const logged = []
const logger = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ message }) => logged.push(Array.isArray(message) ? message.join(" ") : String(message)))
)

const record = Effect.gen(function* () {
  const ledger = yield* Ledger.Ledger
  const fake = FakeAppServer.make({ turns: "manual" })
  const supervisor = yield* Supervisor.make({ approvals: { handler: () => Effect.succeed(Decision.Accept) } }).pipe(
    Effect.provide(fake.layer)
  )
  const run = yield* ledger.beginRun({ label: "outside" })
  yield* run.attach(supervisor)
  const { requestId } = yield* startWithCommandCard(
    supervisor,
    fake,
    "record me",
    "echo recorded by an installed ledger"
  )
  const answer = yield* fake.answerTo(requestId)
  yield* ledger.flush
  return { runId: run.id, answer }
})

const { runId, answer } = await Effect.runPromise(
  Effect.scoped(record).pipe(Effect.provide(Ledger.layerSqlite({ filename })), Effect.provide(logger))
)
const cards = await Effect.runPromise(
  Effect.scoped(Effect.flatMap(Ledger.Ledger, (ledger) => ledger.cards({ runId }))).pipe(
    Effect.provide(Ledger.layerSqlite({ filename })),
    Effect.provide(logger)
  )
)
Fs.rmSync(dir, { recursive: true, force: true })
process.stdout.write(
  `${JSON.stringify({
    answer,
    cards: cards.map((c) => ({ title: c.title, outcome: c.settlement?.outcome, source: c.settlement?.source })),
    logged
  })}\n`
)
