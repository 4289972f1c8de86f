/**
 * The web inbox in a real browser (headless Chromium from Debian's `chromium`, driven by
 * playwright-core): `warden run --inbox` prints the link once; the page opened with it shows the
 * card with its countdown and details; clicking accept settles it `accepted` by the web (seen in
 * `--json` and on the wire); two pages answering the same card: exactly one wins and the other says
 * who did; a card decided from stdin or by its deadline leaves the page at once, saying who; a page
 * with a wrong token decides nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import { ScriptedModel, Step } from "@warden/testkit"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Browser from "./support/Browser.js"
import * as CliProcess from "./support/CliProcess.js"
import * as Codex from "./support/Codex.js"
import * as Inbox from "./support/Inbox.js"
import { cardOn, decidedOn, linkOf, openPage } from "./support/InboxPage.js"

/**
 * A fake app-server that opens `CARDS` command cards (`echo one`, `echo two`, ...) once the file
 * `TRIGGER` exists (watched, not polled), records each answer in `ANSWERS`, and completes the
 * turn when every card was answered.
 */
const fakeCodex = `#!${process.execPath}
const fs = require("node:fs")
const path = require("node:path")
const out = (f) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...f }) + "\\n")
const cards = Number(process.env.CARDS || "1")
const trigger = process.env.TRIGGER
let answered = 0
let opened = false
const open = () => {
  if (opened) return
  opened = true
  for (let i = 0; i < cards; i++) {
    out({ id: 100 + i, method: "item/commandExecution/requestApproval", params: { threadId: "thr_1", turnId: "turn_1", itemId: "call_" + i, command: "echo card-" + i, cwd: "/tmp", reason: "test", availableDecisions: ["accept", "decline"] } })
  }
}
const whenTriggered = () => {
  if (!trigger || fs.existsSync(trigger)) return open()
  const watcher = fs.watch(path.dirname(trigger), () => { if (fs.existsSync(trigger)) { watcher.close(); open() } })
  if (fs.existsSync(trigger)) { watcher.close(); open() }
}
require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const m = JSON.parse(line)
  if (m.method === undefined && m.id !== undefined) {
    fs.appendFileSync(process.env.ANSWERS, line + "\\n")
    if (++answered === cards) out({ method: "turn/completed", params: { threadId: "thr_1", turn: { id: "turn_1", status: "completed", items: [], error: null } } })
    return
  }
  if (m.method === "initialize") out({ id: m.id, result: { userAgent: "inbox-test/0.171.0", codexHome: "/tmp" } })
  if (m.method === "thread/start") out({ id: m.id, result: { thread: { id: "thr_1" } } })
  if (m.method === "thread/unsubscribe") out({ id: m.id, result: { status: "unsubscribed" } })
  if (m.method === "turn/start") {
    out({ id: m.id, result: { turn: { id: "turn_1", status: "inProgress", items: [] } } })
    whenTriggered()
  }
})
`

interface Fake {
  readonly codex: string
  readonly trigger: string
  readonly answers: () => ReadonlyArray<{ id: number; result: any }>
  readonly env: Record<string, string>
}

const fake = (cards: number) =>
  Effect.map(CliProcess.tempDir, (dir): Fake => {
    const codex = Path.join(dir, "codex")
    Fs.writeFileSync(codex, fakeCodex, { mode: 0o755 })
    const signals = Path.join(dir, "signals")
    Fs.mkdirSync(signals)
    const answersFile = Path.join(dir, "answers.jsonl")
    const trigger = Path.join(signals, "open-cards")
    return {
      codex,
      trigger,
      answers: () =>
        Fs.existsSync(answersFile)
          ? Fs.readFileSync(answersFile, "utf8")
              .trim()
              .split("\n")
              .map((l) => JSON.parse(l))
          : [],
      env: { CARDS: String(cards), TRIGGER: trigger, ANSWERS: answersFile }
    }
  })

describe("web inbox in a real browser", () => {
  it.scopedLive(
    "real codex: the card appears with its countdown and details; accept in the page settles it accepted by the web; the command runs",
    () =>
      Effect.gen(function* () {
        const browser = yield* Browser.launch
        const codex = yield* Codex.setup({
          lanes: {
            cmd: [
              Step.execCommand({ cmd: "echo warden-inbox-output", escalated: true, justification: "test inbox" }),
              Step.message("cmd done")
            ]
          }
        })
        const cli = yield* CliProcess.spawn(
          [
            "run",
            ...codex.flags,
            "--json",
            "--inbox",
            "127.0.0.1:0",
            `${ScriptedModel.laneMarker("cmd")} run the command`
          ],
          { env: codex.env, stdin: "ignore" }
        )
        const { link, url } = yield* linkOf(cli)
        const listening = yield* cli.waitForJson("inbox.listening", (l) => l.type === "inbox.listening")
        assert.strictEqual(listening.url, url)
        assert.notInclude(cli.lines().join("\n"), link.slice(link.indexOf("#token=") + 7), "the token is not in --json")
        const page = yield* openPage(browser, link)
        assert.notInclude(page.url(), "token=", "the token left the address bar")

        const opened = yield* cli.waitForJson("card.opened", (l) => l.type === "card.opened")
        const card = cardOn(page, opened.cardId)
        yield* Browser.step("the card appears", () => card.waitFor({ timeout: 15_000 }))
        assert.include(
          yield* Browser.step("title", () => card.locator(".title").innerText()),
          "echo warden-inbox-output"
        )
        assert.match(
          yield* Browser.step("countdown", () => card.locator(".countdown").innerText()),
          /^(\d+h)?(\d+m)?\d+s$/
        )
        yield* Browser.step("details", () => card.locator("button[data-action=details]").click())
        yield* Browser.step("details shown", () =>
          card.locator("pre.details:not([hidden])").waitFor({ timeout: 15_000 })
        )
        assert.include(yield* Browser.step("details text", () => card.locator("pre.details").innerText()), "command:")
        const board = yield* Browser.step("the board", () => page.locator("#items tr[data-item='0']").innerText())
        assert.include(board, "running")

        yield* Browser.step("accept", () => card.locator("button[data-decision=accept]").click())
        yield* Browser.step("the outcome", () => decidedOn(page, opened.cardId).waitFor({ timeout: 15_000 }))
        assert.include(
          yield* Browser.step("outcome text", () => decidedOn(page, opened.cardId).innerText()),
          "accepted by person (web)"
        )
        assert.strictEqual(yield* Browser.step("card gone", () => card.count()), 0)

        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 0, signal: null }, cli.stderr())
        const settled = cli.json().find((l) => l.type === "card.settled")!
        assert.deepInclude(settled, {
          cardId: opened.cardId,
          outcome: "accepted",
          source: "person",
          channel: "web",
          decision: "accept"
        })
        const outputs = (yield* codex.model.awaitRequests(2))
          .flatMap((r) => ScriptedModel.functionCallOutputs(r))
          .map((o) => JSON.stringify(o.output))
          .join("\n")
        assert.include(outputs, "warden-inbox-output", "the accepted command ran")
        assert.include(outputs, "exited with code 0")
      }),
    150_000
  )

  it.scopedLive(
    "two pages answer the same card: exactly one wins, the other says who did; the app-server got one answer",
    () =>
      Effect.gen(function* () {
        const browser = yield* Browser.launch
        const f = yield* fake(1)
        const cli = yield* CliProcess.spawn(
          ["run", "--codex", f.codex, "--json", "--inbox", "0", "--restarts", "0", "hello"],
          { env: f.env, stdin: "ignore" }
        )
        const { link } = yield* linkOf(cli)
        const a = yield* openPage(browser, link)
        const b = yield* openPage(browser, link)
        // What each page's answer came back with, for the message of a failure below (side-by-side
        // round 28: the accepting page once showed the acceptance as someone else's).
        const heard: Array<string> = []
        for (const [name, page] of [
          ["a", a],
          ["b", b]
        ] as const) {
          page.on("response", (r) => {
            if (r.url().endsWith("/decision")) heard.push(`${name}: HTTP ${r.status()}`)
          })
          page.on("requestfailed", (r) => {
            if (r.url().endsWith("/decision")) heard.push(`${name}: failed (${r.failure()?.errorText ?? "?"})`)
          })
        }
        Fs.writeFileSync(f.trigger, "")
        const opened = yield* cli.waitForJson("card.opened", (l) => l.type === "card.opened")
        yield* Browser.step("on page a", () => cardOn(a, opened.cardId).waitFor({ timeout: 15_000 }))
        yield* Browser.step("on page b", () => cardOn(b, opened.cardId).waitFor({ timeout: 15_000 }))
        // Both click at once. A page whose card has left (the other page won first) has nothing
        // to click: its click waits (up to 30 s: a loaded machine may take seconds to make a
        // button clickable) for the button or for the card's leaving, whichever comes. It waited
        // 5 s and swallowed its failure before: under double load both clicks ran out once and
        // nothing was decided (side-by-side round 22).
        const clickUnlessGone = (page: typeof a, decision: "accept" | "decline") => {
          const card = cardOn(page, opened.cardId)
          const click = card
            .locator(`button[data-decision=${decision}]`)
            .click({ timeout: 30_000 })
            .then(() => "clicked" as const)
          const gone = card.waitFor({ state: "detached", timeout: 30_000 }).then(() => "gone" as const)
          // The one that loses the race settles later: its failure is expected and dropped.
          click.catch(() => undefined)
          gone.catch(() => undefined)
          return Promise.race([click, gone])
        }
        // (Which of the two a page reports says little: a clicked card leaves its page too, maybe
        // before the click returns. That exactly one page decided is checked below.)
        yield* Browser.step("both click", () =>
          Promise.all([clickUnlessGone(a, "accept"), clickUnlessGone(b, "decline")])
        )
        for (const page of [a, b])
          yield* Browser.step("decided", () => decidedOn(page, opened.cardId).waitFor({ timeout: 15_000 }))
        const texts = [
          yield* Browser.step("a", () => decidedOn(a, opened.cardId).innerText()),
          yield* Browser.step("b", () => decidedOn(b, opened.cardId).innerText())
        ]
        const mine = [
          yield* Browser.step("a kind", () => decidedOn(a, opened.cardId).getAttribute("data-kind")),
          yield* Browser.step("b kind", () => decidedOn(b, opened.cardId).getAttribute("data-kind"))
        ]
        assert.strictEqual(
          mine.filter((k) => k === "mine").length,
          1,
          `exactly one page won: ${texts.join(" | ")} (answers: ${heard.join(", ") || "none seen"})`
        )
        const settled = yield* cli.waitForJson("card.settled", (l) => l.type === "card.settled")
        const winner = mine[0] === "mine" ? texts[0]! : texts[1]!
        const loser = mine[0] === "mine" ? texts[1]! : texts[0]!
        assert.include(winner, `${settled.outcome} by person (web) (you)`)
        assert.include(loser, `${settled.outcome} by person (web)`, "the other page says who decided")
        assert.notInclude(loser, "(you)")
        assert.deepInclude(settled, { source: "person", channel: "web" })
        yield* cli.exited()
        assert.strictEqual(f.answers().length, 1, "one answer on the wire")
        assert.deepStrictEqual(f.answers()[0]!.result, { decision: settled.decision })
      }),
    150_000
  )

  it.scopedLive(
    "a card decided on stdin leaves the page at once, saying who; a card nobody clicks leaves with its deadline; a wrong token decides nothing",
    () =>
      Effect.gen(function* () {
        const browser = yield* Browser.launch
        const f = yield* fake(2)
        const cli = yield* CliProcess.spawn(
          [
            "run",
            "--codex",
            f.codex,
            "--json",
            "--approvals",
            "stdin",
            "--inbox",
            "127.0.0.1:0",
            "--approval-timeout",
            "8s",
            "--restarts",
            "0",
            "hello"
          ],
          { env: f.env }
        )
        const { link, url } = yield* linkOf(cli)
        const page = yield* openPage(browser, link)
        const intruder = yield* Browser.page(browser)
        yield* Browser.step("open with a wrong token", () => intruder.goto(`${url}#token=not-the-token`))
        yield* Browser.step("the wrong token is refused", () =>
          intruder.locator("#status[data-state=denied]").waitFor({ timeout: 15_000 })
        )
        Fs.writeFileSync(f.trigger, "")
        const first = yield* cli.waitForJson(
          "card one",
          (l) => l.type === "card.opened" && String(l.summary).includes("card-0")
        )
        const second = yield* cli.waitForJson(
          "card two",
          (l) => l.type === "card.opened" && String(l.summary).includes("card-1")
        )
        yield* Browser.step("both on the page", () => cardOn(page, second.cardId).waitFor({ timeout: 15_000 }))
        yield* Browser.step("card one on the page", () => cardOn(page, first.cardId).waitFor({ timeout: 15_000 }))

        // Without the token (as the wrong page would send it) nothing is decided.
        const denied = yield* Effect.promise(() =>
          fetch(`${url}api/cards/${first.cardId}/decision`, {
            method: "POST",
            headers: { "x-warden-token": "not-the-token", "content-type": "application/json" },
            body: '{"decision":"accept"}'
          })
        )
        assert.strictEqual(denied.status, 401)

        yield* cli.write(JSON.stringify({ cardId: first.cardId, decision: "decline" }) + "\n")
        yield* Browser.step("card one leaves", () => decidedOn(page, first.cardId).waitFor({ timeout: 15_000 }))
        assert.strictEqual(yield* Browser.step("gone", () => cardOn(page, first.cardId).count()), 0)
        assert.include(
          yield* Browser.step("who", () => decidedOn(page, first.cardId).innerText()),
          "declined by person (stdin)"
        )

        yield* Browser.step("card two leaves by its deadline", () =>
          decidedOn(page, second.cardId).waitFor({ timeout: 30_000 })
        )
        assert.include(
          yield* Browser.step("who", () => decidedOn(page, second.cardId).innerText()),
          "timeout by deadline"
        )
        assert.strictEqual(yield* Browser.step("gone", () => cardOn(page, second.cardId).count()), 0)

        yield* cli.endStdin
        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 0, signal: null }, cli.stderr())
        const settled = cli.json().filter((l) => l.type === "card.settled")
        assert.deepStrictEqual(
          settled.map((l) => [l.cardId, l.outcome, l.source, l.channel ?? null]),
          [
            [first.cardId, "declined", "person", "stdin"],
            [second.cardId, "timeout", "deadline", null]
          ]
        )
        assert.deepStrictEqual(
          f.answers().map((a) => a.result),
          [{ decision: "decline" }, { decision: "decline" }]
        )
        assert.strictEqual(
          yield* Browser.step("the intruder saw no card", () => intruder.locator("[data-card]").count()),
          0
        )
      }),
    150_000
  )

  it.scopedLive(
    "--notify: a signed message with links; the accept link, opened in the browser and confirmed, decides once (channel link); then 410",
    () =>
      Effect.gen(function* () {
        const browser = yield* Browser.launch
        // Two cards: the second keeps the run alive while the first's link is tried again.
        const f = yield* fake(2)
        const receiver = yield* Inbox.receiver([])
        const cli = yield* CliProcess.spawn(
          ["run", "--codex", f.codex, "--json", "--inbox", "0", "--notify", receiver.url, "--restarts", "0", "hello"],
          { env: { ...f.env, WARDEN_NOTIFY_SECRET: "s3cret-for-the-test" }, stdin: "ignore" }
        )
        yield* linkOf(cli)
        Fs.writeFileSync(f.trigger, "")
        const deliveries = yield* receiver.waitFor(2)
        for (const d of deliveries)
          assert.strictEqual(
            d.signature,
            "sha256=" + Crypto.createHmac("sha256", "s3cret-for-the-test").update(d.body).digest("hex")
          )
        const messages = deliveries.map((d) => JSON.parse(d.body))
        const message = messages.find((m) => m.card.title.includes("card-0"))
        const other = messages.find((m) => m.card.title.includes("card-1"))
        const page = yield* Browser.page(browser)
        yield* Browser.step("open the link", () => page.goto(message.links.accept))
        assert.deepStrictEqual(f.answers(), [], "opening the link decides nothing")
        yield* Browser.step("confirm", () => page.locator("form button[type=submit]").click())
        yield* Browser.step("the result", () =>
          page.locator("h1", { hasText: "accepted" }).waitFor({ timeout: 15_000 })
        )
        const settled = yield* cli.waitForJson("card.settled", (l) => l.type === "card.settled")
        assert.deepInclude(settled, { cardId: message.card.id, outcome: "accepted", source: "person", channel: "link" })
        const again = yield* Effect.promise(() => fetch(message.links.accept, { method: "POST" }))
        assert.strictEqual(again.status, 410, "a used link is gone")
        const declined = yield* Effect.promise(() => fetch(other.links.decline, { method: "POST" }))
        assert.strictEqual(declined.status, 200)
        const exited = yield* cli.exited()
        assert.deepStrictEqual(exited, { code: 0, signal: null }, cli.stderr())
        assert.deepStrictEqual(
          f.answers().map((a) => [a.id, a.result]),
          [
            [100, { decision: "accept" }],
            [101, { decision: "decline" }]
          ]
        )
        assert.notInclude(cli.stderr(), "s3cret-for-the-test")
      }),
    150_000
  )
})
