/**
 * A real headless Chromium for the web inbox's tests: Debian's `chromium` package (or
 * `WARDEN_CHROMIUM`), driven by `playwright-core` through its `executablePath` (no browser is
 * downloaded). Launched in the test's scope; closing the scope closes the browser (bounded), then
 * kills its process group if anything is left.
 *
 * When chromium is missing these tests fail, saying how to install it (`pnpm test` installs it first when run as root).
 */
import { ProcessTree } from "@warden/testkit"
import { Data, Effect } from "effect"
import type { Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Browser, Page } from "playwright-core"
import { chromium } from "playwright-core"

export class BrowserError extends Data.TaggedError("BrowserError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

/** The chromium executable, or a failure that says how to install it. */
export const executable: Effect.Effect<string, BrowserError> = Effect.suspend(() => {
  // As scripts/prerequisites.mjs finds it: WARDEN_CHROMIUM, else `chromium` on PATH.
  const onPath = (process.env["PATH"] ?? "")
    .split(":")
    .filter((dir) => dir !== "")
    .map((dir) => Path.join(dir, "chromium"))
    .find((file) => Fs.existsSync(file))
  const path = process.env["WARDEN_CHROMIUM"] ?? onPath ?? "/usr/bin/chromium"
  return Fs.existsSync(path)
    ? Effect.succeed(path)
    : Effect.fail(
        new BrowserError({
          detail:
            `chromium is not installed (${path} does not exist). The web inbox tests drive a real headless Chromium: ` +
            "install it with `apt-get install -y chromium` (Debian package `chromium`; `pnpm test` installs it when run as root), or point WARDEN_CHROMIUM at one."
        })
      )
})

/** A headless browser, closed with the scope. */
export const launch: Effect.Effect<Browser, BrowserError, Scope.Scope> = Effect.gen(function* () {
  const executablePath = yield* executable
  const root = process.getuid?.() === 0
  return yield* Effect.acquireRelease(
    Effect.tryPromise({
      try: () =>
        chromium.launch({ executablePath, headless: true, args: root ? ["--no-sandbox"] : [], timeout: 60_000 }),
      catch: (e) => new BrowserError({ detail: `chromium did not start: ${String(e)}` })
    }),
    (browser) =>
      Effect.gen(function* () {
        // The browser runs as our child (playwright-core drives it in this process): its processes, by executable.
        const tree = ProcessTree.descendants(process.pid).filter((pid) => /chrom/i.test(ProcessTree.commandLine(pid)))
        // A finalizer is uninterruptible: without `interruptible` the timeout could not cut a close that hangs.
        yield* Effect.promise(() => browser.close().catch(() => undefined)).pipe(
          Effect.interruptible,
          Effect.timeoutOption("10 seconds")
        )
        for (const p of tree) {
          try {
            process.kill(p, "SIGKILL")
          } catch {
            // gone
          }
        }
      })
  )
})

/** A new page (its own context: its own sessionStorage), closed with the browser. */
export const page = (browser: Browser): Effect.Effect<Page, BrowserError> =>
  Effect.tryPromise({
    try: async () => (await browser.newContext()).newPage(),
    catch: (e) => new BrowserError({ detail: `no page: ${String(e)}` })
  })

/** A playwright step as an effect (its own timeouts bound it). */
export const step = <A>(what: string, f: () => Promise<A>): Effect.Effect<A, BrowserError> =>
  Effect.tryPromise({ try: f, catch: (e) => new BrowserError({ detail: `${what}: ${String(e)}` }) })
