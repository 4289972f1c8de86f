/**
 * The web inbox as a person meets it in the CLI's tests: the link a `warden` command printed on
 * stderr (once), the page opened with it in a real browser (`Browser.ts`) until its event stream
 * is live, and the page's card and settled-card elements.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import type { Browser as PlaywrightBrowser, Page } from "playwright-core"
import * as Browser from "./Browser.js"
import type { TestProcess } from "@warden/testkit"
import type * as CliProcess from "./CliProcess.js"

/**
 * The link `cli` printed on stderr (`inbox at URL#token=...`, once), its URL and token. The inbox's
 * modules load on first use: under a second test suite on 2 cores that took over 30 s once, so
 * the bound is wide (and the tests' own, 150 s).
 */
export const linkOf = (
  cli: CliProcess.Cli
): Effect.Effect<
  { readonly link: string; readonly url: string; readonly token: string },
  TestProcess.TestProcessError
> =>
  Effect.map(
    cli.waitForStderr("the inbox link", (t) => /inbox at http:\/\/\S+#token=\S+/.test(t), "90 seconds"),
    (text) => {
      const links = text.match(/inbox at (http:\/\/\S+#token=\S+)/g) ?? []
      assert.strictEqual(links.length, 1, "the link is printed once")
      const link = links[0]!.slice("inbox at ".length)
      return { link, url: link.slice(0, link.indexOf("#")), token: link.slice(link.indexOf("#token=") + 7) }
    }
  )

/** Opens the page at `link` and waits until its event stream is live. */
export const openPage = (browser: PlaywrightBrowser, link: string) =>
  Effect.gen(function* () {
    const page = yield* Browser.page(browser)
    yield* Browser.step("open the page", () => page.goto(link))
    yield* Browser.step("the page goes live", () =>
      page.locator("#status[data-state=live]").waitFor({ timeout: 15_000 })
    )
    return page
  })

/** The open card `cardId` on the page. */
export const cardOn = (page: Page, cardId: string) => page.locator(`[data-card="${cardId}"]`)
/** The note the page leaves when card `cardId` settled (who decided). */
export const decidedOn = (page: Page, cardId: string) => page.locator(`[data-settled="${cardId}"]`)
