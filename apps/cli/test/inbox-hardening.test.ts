/**
 * The web inbox serves like a hardened server, and Warden's own secrets stay Warden's (issue 28,
 * items 7-10): a connection that sends nothing is closed after the idle timeout and the connection
 * cap keeps the inbox reachable (the event stream stays open); every route bounds its body (413);
 * a body that does not decode is told what was wrong, without its input; every response carries
 * `cache-control: no-store` and `nosniff`; `/favicon.ico` is answered without the token; a link's
 * signature is accepted in its canonical encoding only; `--notify` with credentials in the URL is
 * a usage error; and the codex child never gets `WARDEN_NOTIFY_SECRET` or the `--notify-secret`
 * value, from whichever variable it came.
 */
import { assert, describe, it } from "@effect/vitest"
import { WokenWait } from "@warden/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Path from "node:path"
import * as CliProcess from "./support/CliProcess.js"
import * as Inbox from "./support/Inbox.js"

const json = (token: string, body?: unknown): RequestInit => ({
  method: body === undefined ? "GET" : "POST",
  headers: { "x-warden-token": token, "content-type": "application/json" },
  ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
})

/** `n` TCP connections to the inbox that never send a byte; `closed()` counts the ones the server closed. */
const idleSockets = (url: string, n: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const { hostname, port } = new URL(url)
      const waits = WokenWait.make()
      let closed = 0
      const sockets = Array.from({ length: n }, () => {
        const socket = Net.connect({ host: hostname, port: Number(port) })
        socket.on("error", () => {})
        socket.on("close", () => {
          closed++
          waits.wake()
        })
        return socket
      })
      return {
        sockets,
        allClosed: waits.until(
          () => (closed === n ? true : undefined),
          "20 seconds",
          () => new Error(`${n - closed} of ${n} idle connections are still open`)
        )
      }
    }),
    ({ sockets }) => Effect.sync(() => sockets.forEach((s) => s.destroy()))
  )

/** A POST whose body is sent chunked (no content-length), `bytes` long; the answer's status and text. */
const chunkedPost = (url: string, token: string, bytes: number) =>
  Effect.async<{ status: number; text: string }, Error>((resume) => {
    const request = Http.request(
      url,
      {
        method: "POST",
        headers: { "x-warden-token": token, "content-type": "application/json", "transfer-encoding": "chunked" }
      },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => (text += chunk))
        res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, text })))
      }
    )
    request.on("error", (e) => resume(Effect.fail(e)))
    const chunk = Buffer.alloc(64 * 1024, "x")
    let sent = 0
    const pump = () => {
      while (sent < bytes) {
        sent += chunk.length
        if (!request.write(chunk)) return void request.once("drain", pump)
      }
      request.end()
    }
    request.write('{"prompt": "')
    pump()
  })

describe("web inbox: a hardened server", () => {
  it.scopedLive(
    "idle connections past the cap: the inbox still answers, the idle ones are closed after the idle timeout (said once on the log), and an event stream stays open",
    () =>
      Effect.gen(function* () {
        const log: Array<string> = []
        const t = yield* Inbox.setup({
          limits: { idleTimeout: "1 second", maxConnections: 8 },
          log: (line) => log.push(line)
        })
        const stream = yield* Inbox.events(`${t.inbox.url}api/events`, { "x-warden-token": t.token })
        assert.strictEqual(stream.status, 200)
        yield* stream.waitFor("hello", (e) => e.event === "hello")
        const idle = yield* idleSockets(t.inbox.url, 40)
        // Five times the cap of connections that send nothing: an authorised request still gets in.
        const cards = yield* Inbox.call(`${t.inbox.url}api/cards`, json(t.token))
        assert.strictEqual(cards.status, 200)
        yield* idle.allClosed
        assert.isTrue(
          log.some((line) => line.includes("connections") && line.includes("8")),
          log.join("\n")
        )
        assert.strictEqual(log.filter((line) => line.includes("cap")).length, 1, `said once: ${log.join("\n")}`)
        // The event stream outlived the idle timeout and still carries events.
        const requestId = yield* t.openCommand("echo still-streaming", "call_1")
        const cardId = yield* t.cardFor(requestId)
        yield* stream.waitFor("card.opened", (e) => e.event === "card.opened" && e.data.id === cardId)
      }),
    60_000
  )

  it.scopedLive(
    "after a request, an idle keep-alive connection is closed; a request whose body never finishes is closed (408) at the request timeout",
    () =>
      Effect.gen(function* () {
        const t = yield* Inbox.setup({
          limits: { keepAliveTimeout: "1 second", headersTimeout: "1 second", requestTimeout: "2 seconds" }
        })
        const { hostname, port } = new URL(t.inbox.url)
        const raw = (text: string) =>
          Effect.acquireRelease(
            Effect.async<{ received: string }, Error>((resume) => {
              const socket = Net.connect({ host: hostname, port: Number(port) }, () => socket.write(text))
              let received = ""
              socket.setEncoding("utf8")
              socket.on("data", (chunk: string) => (received += chunk))
              socket.on("error", () => {})
              socket.on("close", () => resume(Effect.succeed({ received })))
              return Effect.sync(() => socket.destroy())
            }).pipe(
              Effect.timeoutFail({
                duration: "20 seconds",
                onTimeout: () => new Error(`the server did not close: ${JSON.stringify(text.slice(0, 40))}`)
              })
            ),
            () => Effect.void
          )
        const keptAlive = yield* raw(`GET /favicon.ico HTTP/1.1\r\nhost: ${hostname}\r\n\r\n`)
        assert.match(keptAlive.received, /^HTTP\/1\.1 204/)
        const unfinished = yield* raw(
          `POST /api/items HTTP/1.1\r\nhost: ${hostname}\r\nx-warden-token: ${t.token}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"pro`
        )
        assert.match(unfinished.received, /^HTTP\/1\.1 408/)
      }),
    60_000
  )

  it.scopedLive(
    "a body over the bound is 413 on every route (a chunked one is cut), and nothing is decided",
    () =>
      Effect.gen(function* () {
        const t = yield* Inbox.setup({ submit: () => Effect.succeed(7), limits: { maxBodyBytes: 64 * 1024 } })
        const requestId = yield* t.openCommand("echo big", "call_1")
        const cardId = yield* t.cardFor(requestId)
        const big = JSON.stringify({ prompt: "p".repeat(200 * 1024) })
        for (const path of ["api/items", `api/cards/${cardId}/decision`, "api/cards", "no/such/route"]) {
          const reply = yield* Inbox.call(`${t.inbox.url}${path}`, json(t.token, big))
          assert.strictEqual(reply.status, 413, `${path}: ${reply.text.slice(0, 200)}`)
          assert.isBelow(reply.text.length, 1000)
        }
        // Without a length (chunked) it is read up to the bound, then the connection is cut (or 413 if it got there first).
        const chunked = yield* Effect.either(chunkedPost(`${t.inbox.url}api/items`, t.token, 1024 * 1024))
        if (chunked._tag === "Right") assert.strictEqual(chunked.right.status, 413, chunked.right.text.slice(0, 200))
        else assert.match(String(chunked.left), /ECONNRESET|EPIPE|socket hang up/)
        // Under the bound it is taken as before.
        assert.strictEqual(
          (yield* Inbox.call(`${t.inbox.url}api/items`, json(t.token, { prompt: "small" }))).status,
          202
        )
        assert.deepStrictEqual(t.fake.answersSoFar(), [])
        assert.deepStrictEqual(
          (yield* t.supervisor.approvals.openCards).map((c) => c.id),
          [cardId]
        )
      }),
    60_000
  )

  it.scopedLive(
    "a body that does not decode is 400 and says what was wrong without echoing it",
    () =>
      Effect.gen(function* () {
        const t = yield* Inbox.setup({ submit: () => Effect.succeed(7) })
        const requestId = yield* t.openCommand("echo decode", "call_1")
        const cardId = yield* t.cardFor(requestId)
        const marker = "ECHO-MARKER-7f3a"
        const cases: ReadonlyArray<[string, string, string]> = [
          ["api/items", JSON.stringify({ prompt: marker + "q".repeat(70_000) }), "prompt"],
          ["api/items", JSON.stringify({ prompt: [marker] }), "prompt"],
          ["api/items", JSON.stringify([marker]), "prompt"],
          ["api/items", `{"prompt": "${marker}`, "JSON"],
          [`api/cards/${cardId}/decision`, `{"decision": "${marker}`, "JSON"],
          [`api/cards/${cardId}/decision`, JSON.stringify({ decision: marker }), "decision"],
          [`api/cards/${cardId}/decision`, JSON.stringify({ decision: { [marker]: marker } }), "decision"]
        ]
        for (const [path, body, says] of cases) {
          const reply = yield* Inbox.call(`${t.inbox.url}${path}`, json(t.token, body))
          assert.strictEqual(reply.status, 400, `${path} ${body.slice(0, 60)}: ${reply.text.slice(0, 300)}`)
          assert.notInclude(reply.text, marker, `${path} ${body.slice(0, 60)} echoes its input`)
          assert.include(reply.text, says, `${path} ${body.slice(0, 60)}: ${reply.text}`)
          assert.isBelow(reply.text.length, 1000)
        }
        assert.deepStrictEqual(t.fake.answersSoFar(), [])
      }),
    60_000
  )

  it.scopedLive(
    "every response says no-store and nosniff; /favicon.ico is answered without the token",
    () =>
      Effect.gen(function* () {
        const t = yield* Inbox.setup({ limits: { maxBodyBytes: 1024 } })
        const base = t.inbox.url
        const requests: ReadonlyArray<[string, RequestInit]> = [
          ["api/info", json(t.token)],
          ["api/cards", json(t.token)],
          ["api/cards/c999", json(t.token)],
          ["api/cards/c999/decision", json(t.token, { decision: 12 })],
          ["api/cards/c999/decision", json(t.token, "x".repeat(4096))],
          ["api/items", json(t.token)],
          ["api/openapi.json", json(t.token)],
          ["api/cards", {}],
          ["no/such/route", json(t.token)],
          ["", {}],
          ["inbox.js", {}],
          ["l/c1/accept/1/n/s", {}],
          ["favicon.ico", {}]
        ]
        for (const [path, init] of requests) {
          const reply = yield* Inbox.call(`${base}${path}`, init)
          assert.strictEqual(reply.headers.get("cache-control"), "no-store", `${path} (${reply.status})`)
          assert.strictEqual(reply.headers.get("x-content-type-options"), "nosniff", `${path} (${reply.status})`)
        }
        const stream = yield* Inbox.events(`${base}api/events`, { "x-warden-token": t.token })
        assert.strictEqual(stream.status, 200)
        const favicon = yield* Inbox.call(`${base}favicon.ico`)
        assert.oneOf(favicon.status, [200, 204])
      }),
    60_000
  )

  it.scopedLive(
    "a link with SIG= is 401 and decides nothing; the link itself still works",
    () =>
      Effect.gen(function* () {
        const receiver = yield* Inbox.receiver([])
        const t = yield* Inbox.setup({ notify: { urls: [receiver.url], secret: "s" } })
        const requestId = yield* t.openCommand("echo link", "call_1")
        yield* t.cardFor(requestId)
        const [delivered] = yield* receiver.waitFor(1)
        const accept: string = JSON.parse(delivered!.body).links.accept
        const padded = yield* Inbox.call(`${accept}=`, { method: "POST" })
        assert.strictEqual(padded.status, 401)
        assert.deepStrictEqual(t.fake.answersSoFar(), [])
        assert.strictEqual((yield* Inbox.call(accept, { method: "POST" })).status, 200)
      }),
    60_000
  )
})

describe("warden run: the codex child's environment and --notify's URL", () => {
  /** A codex that writes its environment to `out` and ends. */
  const envDumper = (out: string) => `#!${process.execPath}
require("node:fs").writeFileSync(${JSON.stringify(out)}, JSON.stringify(process.env))
process.exit(1)
`

  it.scopedLive(
    "WARDEN_NOTIFY_SECRET, any WARDEN_ variable and the --notify-secret value never reach codex; PATH, HOME and the rest do",
    () =>
      Effect.gen(function* () {
        const dir = yield* CliProcess.tempDir
        const script = Path.join(dir, "codex")
        const out = Path.join(dir, "env.json")
        Fs.writeFileSync(script, envDumper(out), { mode: 0o755 })
        const notifySecret = "notify-secret-from-env-3c9d1e"
        const base = [
          "run",
          "--codex",
          script,
          "--no-state",
          "--restarts",
          "0",
          "--json",
          "--inbox",
          "0",
          "--notify",
          "http://127.0.0.1:9/hook"
        ]
        const fromEnv = yield* CliProcess.runToEnd([...base, "hello"], {
          env: {
            WARDEN_NOTIFY_SECRET: notifySecret,
            WARDEN_OTHER_SETTING: "warden-only-value",
            SOME_USER_VARIABLE: "kept-for-codex"
          }
        })
        assert.isTrue(Fs.existsSync(out), fromEnv.stderr)
        const seen = JSON.parse(Fs.readFileSync(out, "utf8")) as Record<string, string>
        assert.isUndefined(seen["WARDEN_NOTIFY_SECRET"])
        assert.isUndefined(seen["WARDEN_OTHER_SETTING"])
        assert.notInclude(JSON.stringify(seen), notifySecret)
        assert.strictEqual(seen["SOME_USER_VARIABLE"], "kept-for-codex")
        assert.strictEqual(seen["PATH"], process.env["PATH"])
        assert.strictEqual(seen["HOME"], process.env["HOME"])
        Fs.rmSync(out)

        // The flag's value, given from a variable of another name: no variable holding it reaches codex.
        const flagSecret = "notify-secret-from-flag-8b2e7a"
        const fromFlag = yield* CliProcess.runToEnd([...base, "--notify-secret", flagSecret, "hello"], {
          env: { HOOK_SIGNING_KEY: flagSecret, HOOK_HEADER: `Bearer ${flagSecret}`, WARDEN_NOTIFY_SECRET: "" }
        })
        assert.isTrue(Fs.existsSync(out), fromFlag.stderr)
        const seenFlag = JSON.parse(Fs.readFileSync(out, "utf8")) as Record<string, string>
        assert.notInclude(JSON.stringify(seenFlag), flagSecret)
        assert.isUndefined(seenFlag["HOOK_SIGNING_KEY"])
        assert.strictEqual(seenFlag["PATH"], process.env["PATH"])
      }),
    120_000
  )

  it.scopedLive(
    "--notify with credentials in the URL is a usage error (exit 2) that does not print the password",
    () =>
      Effect.gen(function* () {
        for (const url of ["http://user:pa55-w0rd-x@127.0.0.1:9/hook", "https://token-only-x9@hooks.example/x"]) {
          const result = yield* CliProcess.runToEnd([
            "run",
            "--codex",
            process.execPath,
            "--no-state",
            "--inbox",
            "0",
            "--notify",
            url,
            "--notify-secret",
            "s",
            "hello"
          ])
          assert.strictEqual(result.exited.code, 2, result.stderr)
          assert.include(result.stderr, "credentials")
          assert.notInclude(result.stderr, "pa55-w0rd-x")
          assert.notInclude(result.stderr, "token-only-x9")
          assert.notInclude(result.stderr, "inbox at", "no inbox was started")
        }
      }),
    60_000
  )
})
