/**
 * A proven rule offered at the third acceptance, where the person answers (the ledger's
 * `Offers`): on the terminal (tmux) and in the web inbox (a real browser). The fake app-server
 * asks `make check` three times, then `make lint`. The first two acceptances offer nothing; the
 * third offers `suggested-make-check`, shown in full with its replay; taking it is a remembered
 * rule (its author the channel, its note the offer), and a later run's `make check` is accepted
 * by it with no person. Nothing is taken unless the person takes it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Path from "node:path"
import * as Browser from "./support/Browser.js"
import * as CliProcess from "./support/CliProcess.js"
import * as Inbox from "./support/Inbox.js"
import { cardOn, decidedOn, linkOf, openPage } from "./support/InboxPage.js"
import { recordedRunArgs, writeFakeCodex } from "./support/LedgerCodex.js"
import * as Tmux from "./support/Tmux.js"

const prompts = ["make check", "make check", "make check", "make lint"]

/** The remembered rules in the ledger `db`, and how a later run's `make check` settles there (no person). */
const afterwards = (codex: string, db: string) =>
  Effect.gen(function* () {
    const listed = yield* CliProcess.runToEnd(["rules", "list", "--json", "--state", db])
    assert.deepStrictEqual(listed.exited, { code: 0, signal: null }, listed.stderr)
    const later = yield* CliProcess.runToEnd([...recordedRunArgs(codex, db, "deny"), "make check"])
    return {
      rules: listed.json(),
      settled: later
        .json()
        .filter((l) => l.type === "card.settled")
        .map((l) => `${l["outcome"]}:${l["source"]}`)
    }
  })

describe("a rule offered at the third acceptance", () => {
  it.scopedLive(
    "on the terminal (tmux): shown in full after the third acceptance, kept with y, in force for a later run",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "ledger.db")
        const pane = yield* Tmux.run([
          "run",
          "--codex",
          codex,
          "--state",
          db,
          "--restarts",
          "0",
          "--concurrency",
          "1",
          ...prompts
        ])
        // One card at a time: the first two acceptances offer nothing (the next card is asked at once).
        for (const item of [0, 1, 2]) {
          const shown = yield* pane.waitFor(`item ${item}'s card asked`, (s) =>
            new RegExp(`── card c\\d+ · item ${item} · command ──`).test(s)
          )
          assert.notInclude(shown, "rule offered", `no offer before the third acceptance (item ${item})`)
          yield* pane.sendKeys("a")
        }
        const offered = yield* pane.waitFor("the offer", (s) => s.includes("keep rule suggested-make-check?"))
        assert.include(offered, "rule offered after card")
        assert.match(
          offered,
          /replayed over \d+ recorded cards: decides 3, would have saved 3 asks, flips 0 recorded declines/
        )
        assert.include(offered, "argvPrefix")
        yield* pane.sendKeys("y")
        yield* pane.waitFor("the rule kept", (s) =>
          /remembered \S+: allow .*make check.*\(from rule suggested-make-check\)/.test(s)
        )
        yield* pane.waitFor("the lint card asked", (s) => /── card c\d+ · item 3 · command ──/.test(s))
        yield* pane.sendKeys("d")
        assert.strictEqual(yield* pane.exitStatus(), 0, yield* pane.history)

        const { rules, settled } = yield* afterwards(codex, db)
        assert.strictEqual(rules.length, 1, JSON.stringify(rules))
        assert.strictEqual(rules[0]!["author"], "prompt")
        assert.include(String(rules[0]!["note"]), "offered on acceptance (suggested-make-check)")
        assert.deepStrictEqual(settled, [`accepted:remembered:${String(rules[0]!["id"])}`])
      }),
    180_000
  )

  it.scopedLive(
    "in the web inbox (real browser): offered with the third acceptance's answer, kept with a click, in force for a later run",
    () =>
      Effect.gen(function* () {
        const browser = yield* Browser.launch
        const dir = yield* CliProcess.tempDir
        const codex = writeFakeCodex(dir)
        const db = Path.join(dir, "ledger.db")
        const cli = yield* CliProcess.spawn(
          [
            "run",
            "--codex",
            codex,
            "--state",
            db,
            "--json",
            "--inbox",
            "127.0.0.1:0",
            "--approvals",
            "inbox",
            "--restarts",
            "0",
            "--concurrency",
            "4",
            ...prompts
          ],
          { stdin: "ignore" }
        )
        const { link, token, url } = yield* linkOf(cli)
        const page = yield* openPage(browser, link)
        const opened = () => cli.json().filter((l) => l.type === "card.opened")
        yield* cli.waitUntil("the four cards open", () => (opened().length >= 4 ? true : undefined), "60 seconds")
        const cardOf = (item: number) => String(opened().find((l) => l["item"] === item)!["cardId"])

        for (const item of [0, 1, 2]) {
          const card = cardOf(item)
          yield* Browser.step(`card ${card} shown`, () => cardOn(page, card).waitFor({ timeout: 15_000 }))
          yield* Browser.step(`accept ${card}`, () =>
            cardOn(page, card).locator("button[data-decision=accept]").click()
          )
          yield* Browser.step(`${card} decided`, () => decidedOn(page, card).waitFor({ timeout: 15_000 }))
          const offers = yield* Browser.step("offers", () => decidedOn(page, card).locator("[data-offer]").count())
          assert.strictEqual(offers, item === 2 ? 1 : 0, `offer shown after acceptance ${item + 1}`)
        }
        const offer = decidedOn(page, cardOf(2)).locator("[data-offer='suggested-make-check']")
        const text = yield* Browser.step("the offer", () => offer.innerText())
        assert.include(text, "argvPrefix")
        assert.match(text, /decides 3, would have saved 3 asks, and flips 0 recorded declines/)
        // An offer not made is not taken.
        const forged = yield* Inbox.call(`${url}api/offers/suggested-rm-rf`, {
          method: "POST",
          headers: { "x-warden-token": token }
        })
        assert.strictEqual(forged.status, 422, forged.text)
        yield* Browser.step("keep it", () => offer.locator("button[data-action=take-offer]").click())
        yield* Browser.step("kept", () =>
          decidedOn(page, cardOf(2)).locator("[data-offer][data-taken]").waitFor({ timeout: 15_000 })
        )
        assert.match(yield* Browser.step("note", () => offer.innerText()), /remembered \S+: allow .*make check/)
        const lint = cardOf(3)
        yield* Browser.step("decline lint", () => cardOn(page, lint).locator("button[data-decision=decline]").click())
        assert.deepStrictEqual(yield* cli.exited(), { code: 0, signal: null }, cli.stderr())

        const { rules, settled } = yield* afterwards(codex, db)
        assert.strictEqual(rules.length, 1, JSON.stringify(rules))
        assert.strictEqual(rules[0]!["author"], "web")
        assert.deepStrictEqual(settled, [`accepted:remembered:${String(rules[0]!["id"])}`])
      }),
    180_000
  )
})
