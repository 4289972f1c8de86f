/**
 * The fleet's one inbox in a real browser (real codex 0.171.0, two `warden runner` processes on a
 * throwaway PostgreSQL): `warden fleet --inbox` shows every runner's open cards; accepting one in
 * the page decides it on the runner that drives its item (the inbox process is no runner), the
 * command runs, and the item completes; a second answer to a decided card is `AlreadySettled`
 * fleet-wide; the fleet's items are on the board; SIGTERM ends the inbox with exit 0.
 */
import { assert, describe, it } from "@effect/vitest"
import { connectFleet } from "@warden/cluster"
import { shardingTimings } from "@warden/test-support/ShardingTimings"
import { ScriptedModel, Step } from "@warden/testkit"
import { Effect, Schedule } from "effect"
import * as Browser from "./support/Browser.js"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"
import { shardingFlags, submitArgs, twoRunnerFleet, until } from "./support/Fleet.js"
import * as Inbox from "./support/Inbox.js"
import { cardOn, decidedOn, linkOf, openPage } from "./support/InboxPage.js"

const ITEMS = 12

describe("the fleet's one inbox (real codex 0.171.0, real browser)", () => {
  it.scopedLive(
    "every runner's cards in one page; accepting one there decides it on its runner; a second answer is AlreadySettled",
    () =>
      Effect.gen(function* () {
        const browser = yield* Browser.launch
        const codex = yield* Codex.setup({
          lanes: Object.fromEntries(
            Array.from({ length: ITEMS }, (_, i) => [
              `f${i}`,
              [
                Step.execCommand({
                  cmd: `echo warden-fleet-inbox-${i}`,
                  escalated: true,
                  justification: "fleet inbox"
                }),
                Step.message(`done ${i}`)
              ]
            ])
          )
        })
        const { a, b, pg } = yield* twoRunnerFleet(codex.launch, ["--concurrency", String(ITEMS)])

        const inbox = yield* CliProcess.spawn(
          ["fleet", "--cluster", pg.url, "--json", "--inbox", "127.0.0.1:0", ...shardingFlags],
          { stdin: "ignore" }
        )
        const { link, token, url } = yield* linkOf(inbox)
        const listening = yield* inbox.waitForJson("inbox.listening", (l) => l.type === "inbox.listening")
        assert.strictEqual(listening["url"], url)
        assert.notInclude(inbox.lines().join("\n"), token, "the token is not on stdout")
        const page = yield* openPage(browser, link)

        // Nobody answers at the submitter: the fleet's inbox does.
        const submit = yield* CliProcess.spawn(
          submitArgs({
            cluster: pg.url,
            workspace: codex.launch.workspace,
            lanes: Array.from({ length: ITEMS }, (_, i) => `f${i}`),
            submission: "fleetinbox",
            approvals: "inbox"
          }),
          { env: codex.env, stdin: "ignore" }
        )
        const opened = () => submit.json().filter((l) => l.type === "card.opened")
        const settledLine = (card: string) => submit.json().find((l) => l.type === "card.settled" && l["card"] === card)
        yield* until(`the ${ITEMS} cards open`, () => opened().length >= ITEMS)
        const runnersOfCards = new Set(opened().map((l) => String(l["runner"])))
        // 12 items over two runners holding 150 shards each: both hold some (all on one: 2 in 4,096).
        assert.deepStrictEqual([...runnersOfCards].sort(), [a.address, b.address].sort(), "cards on both runners")

        // Code without Effect sees the same: every runner's open cards, and an answer through the
        // facade decides one of them on its runner.
        const fleet = yield* Effect.acquireRelease(
          Effect.promise(() =>
            connectFleet({ cluster: pg.url, sharding: shardingTimings, pollInterval: "200 millis" })
          ),
          (f) => Effect.promise(() => f.close())
        )
        const seen = yield* Effect.promise(() => fleet.openCards()).pipe(
          Effect.filterOrFail((cards) => cards.length >= ITEMS),
          Effect.retry(Schedule.spaced("250 millis")),
          Effect.timeout("60 seconds")
        )
        assert.includeMembers(
          seen.map((c) => c.id),
          opened()
            .slice(0, ITEMS)
            .map((l) => String(l["card"]))
        )
        const first = yield* Effect.promise(() => fleet.cards()[Symbol.asyncIterator]().next())
        assert.strictEqual(first.value?._tag, "Snapshot")
        const viaFacade = String(opened()[0]!["card"])
        const byFacade = yield* Effect.promise(() => fleet.answer(viaFacade, "accept"))
        assert.strictEqual(byFacade._tag, "Settled", JSON.stringify(byFacade))
        if (byFacade._tag === "Settled")
          assert.deepInclude(byFacade.settlement, { cardId: viaFacade, outcome: "accepted" })

        // Each other card is accepted in the page, whichever runner holds it (a card stranded by a
        // move meanwhile is skipped: its item asks again on its new runner, and that card is accepted).
        const decided: Array<string> = [viaFacade]
        yield* Effect.gen(function* () {
          for (const line of opened()) {
            const card = String(line["card"])
            if (decided.includes(card) || settledLine(card) !== undefined) continue
            const shown = cardOn(page, card)
            yield* Browser.step(`card ${card} shown`, () => shown.waitFor({ timeout: 15_000 }))
            assert.include(
              yield* Browser.step("title", () => shown.locator(".title").innerText()),
              "warden-fleet-inbox-"
            )
            yield* Browser.step(`accept ${card}`, () => shown.locator("button[data-decision=accept]").click())
            yield* Browser.step(`${card} decided`, () => decidedOn(page, card).waitFor({ timeout: 60_000 }))
            assert.include(
              yield* Browser.step("outcome", () => decidedOn(page, card).innerText()),
              "accepted by person (web)"
            )
            decided.push(card)
          }
          if (!submit.json().some((l) => l.type === "run.finished")) return yield* Effect.fail("not finished yet")
        }).pipe(
          Effect.retry({ schedule: Schedule.spaced("500 millis"), while: (e) => e === "not finished yet" }),
          Effect.timeoutFail({
            duration: "300 seconds",
            onTimeout: () => new Error(`the submission did not finish\n${submit.stderr().slice(-3000)}`)
          })
        )
        assert.isAtLeast(decided.length, ITEMS)
        const [byPage] = decided.slice(1)

        // Decided on the runner that held each card, once: the first answer won fleet-wide.
        for (const card of decided)
          assert.deepInclude(settledLine(card)!, { outcome: "accepted", source: "person" }, card)
        const again = yield* Inbox.call(`${url}api/cards/${encodeURIComponent(byPage!)}/decision`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-warden-token": token },
          body: JSON.stringify({ decision: "decline" })
        })
        assert.strictEqual(again.status, 409, again.text)
        assert.deepInclude((again.json as any).settlement, { cardId: byPage, outcome: "accepted" })
        // The same through the facade: the first answer won.
        const late = yield* Effect.promise(() => fleet.answer(viaFacade, "decline"))
        assert.strictEqual(late._tag, "AlreadySettled", JSON.stringify(late))

        const exit = yield* submit.exited("60 seconds")
        assert.deepStrictEqual(exit, { code: 0, signal: null }, submit.stderr().slice(-3000))
        const results = submit.json().filter((l) => l.type === "item.result")
        assert.strictEqual(results.length, ITEMS)
        for (const r of results) assert.strictEqual(r["status"], "completed", JSON.stringify(r))
        const outputs = (yield* codex.model.requests)
          .flatMap((r) => ScriptedModel.functionCallOutputs(r))
          .map((o) => JSON.stringify(o.output))
          .join("\n")
        for (let i = 0; i < ITEMS; i++) assert.include(outputs, `warden-fleet-inbox-${i}`, `item ${i}'s command ran`)

        // The fleet's items on the board, finished.
        yield* Browser.step("the board shows the fleet's items", () =>
          page.locator("#items tr[data-item='fleetinbox-1'][data-status=completed]").waitFor({ timeout: 30_000 })
        )

        // A stop is the inbox's normal end.
        assert.deepStrictEqual(yield* inbox.stop, { code: 0, signal: null }, inbox.stderr())
      }),
    600_000
  )

  it.scopedLive(
    "--notify without --inbox, and --inbox on a remote address without --inbox-allow-remote, are usage errors",
    () =>
      Effect.gen(function* () {
        const notify = yield* CliProcess.runToEnd([
          "fleet",
          "--cluster",
          "postgres://nobody@127.0.0.1:1/none",
          "--notify",
          "https://hooks.example.test/x",
          "--notify-secret",
          "s3cret-value"
        ])
        assert.deepStrictEqual(notify.exited, { code: 2, signal: null })
        assert.include(notify.stderr, "--notify needs --inbox")
        const remote = yield* CliProcess.runToEnd([
          "fleet",
          "--cluster",
          "postgres://nobody@127.0.0.1:1/none",
          "--inbox",
          "0.0.0.0:0"
        ])
        assert.deepStrictEqual(remote.exited, { code: 2, signal: null })
        assert.include(remote.stderr, "not a loopback address")
      }),
    120_000
  )
})
