/**
 * The web inbox in tests: a supervisor on the fake app-server with the inbox mounted on it, plain
 * `fetch` against the real server, and an event-stream reader whose events can be waited for.
 */
import { FakeAppServer, WokenWait } from "@warden/testkit"
import { Supervisor } from "@warden/supervisor"
import { Data, Deferred, Effect, Exit, Option, Redacted, Stream } from "effect"
import type { Scope } from "effect"
import * as Http from "node:http"
import { WebInbox } from "@warden/inbox"

export class InboxTestError extends Data.TaggedError("InboxTestError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

export const commandApproval = (threadId: string, turnId: string, itemId: string, command: string) => ({
  threadId,
  turnId,
  itemId,
  startedAtMs: 0,
  reason: "needs to run it",
  command,
  cwd: "/tmp/ws",
  availableDecisions: ["accept", "acceptForSession", "decline", "cancel"]
})

export interface Setup {
  readonly fake: FakeAppServer.FakeAppServer
  readonly supervisor: Supervisor.SupervisorShape
  readonly inbox: WebInbox.WebInbox
  readonly token: string
  readonly threadId: string
  /** Opens a command card on the fake's thread; returns the server's request id. */
  readonly openCommand: (command: string, itemId: string) => Effect.Effect<number | string>
  /** Waits until the card for server request `requestId` is open in the engine; returns its id. */
  readonly cardFor: (requestId: number | string) => Effect.Effect<string, InboxTestError>
}

/** A supervisor on the fake app-server, one work item running (turn `turn_1` left open), the inbox on it. */
export const setup = (
  config: Omit<WebInbox.WebInboxConfig, "port"> = {},
  supervisorConfig: Supervisor.SupervisorConfig = {}
): Effect.Effect<Setup, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const fake = FakeAppServer.make({ turns: "manual" })
    const supervisor = yield* Supervisor.make(supervisorConfig).pipe(Effect.provide(fake.layer))
    const inbox = yield* WebInbox.make(supervisor, { ...config, port: 0 })
    const handle = yield* supervisor.start({ prompt: "tidy up", id: 0 })
    const threadId = yield* handle.threadId
    yield* fake.nextRequest("turn/start")
    // The inbox stream starts with a snapshot taken after it subscribed: no card is missed.
    const cardFor = (requestId: number | string) =>
      supervisor.approvals.inbox.pipe(
        Stream.filterMap((update) =>
          Option.fromNullable(
            update._tag === "Snapshot"
              ? update.cards.find((c) => c.requestId === requestId)?.id
              : update._tag === "Opened" && update.card.requestId === requestId
                ? update.card.id
                : undefined
          )
        ),
        Stream.runHead,
        Effect.flatMap(
          Option.match({
            onNone: () => Effect.fail(new InboxTestError({ detail: "the inbox stream ended" })),
            onSome: Effect.succeed
          })
        ),
        Effect.timeoutFail({
          duration: "10 seconds",
          onTimeout: () => new InboxTestError({ detail: `no card opened for request ${requestId}` })
        })
      )
    return {
      fake,
      supervisor,
      inbox,
      token: Redacted.value(inbox.token),
      threadId,
      openCommand: (command, itemId) =>
        fake.request("item/commandExecution/requestApproval", commandApproval(threadId, "turn_1", itemId, command)),
      cardFor
    }
  })

export interface Reply {
  readonly status: number
  readonly text: string
  readonly json: any
  readonly headers: Headers
}

/** One HTTP request; the body parsed as JSON where it is. */
export const call = (url: string, init: RequestInit = {}): Effect.Effect<Reply, InboxTestError> =>
  Effect.tryPromise({
    try: async (signal) => {
      const res = await fetch(url, { ...init, signal })
      const text = await res.text()
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch {
        // not JSON
      }
      return { status: res.status, text, json, headers: res.headers }
    },
    catch: (e) => new InboxTestError({ detail: `${init.method ?? "GET"} ${url}: ${String(e)}` })
  })

export interface SseEvent {
  readonly event: string
  readonly data: any
}

export interface EventReader {
  readonly status: number
  /** Every event read so far. */
  readonly events: () => ReadonlyArray<SseEvent>
  /** The first event (from the start) matching `predicate`, waiting for it (bounded). */
  readonly waitFor: (what: string, predicate: (e: SseEvent) => boolean) => Effect.Effect<SseEvent, InboxTestError>
  /** Waits until the server ended the stream (bounded). */
  readonly ended: Effect.Effect<void, InboxTestError>
}

/** Reads the event stream at `url` until the scope closes. */
export const events = (
  url: string,
  headers: Record<string, string> = {}
): Effect.Effect<EventReader, InboxTestError, Scope.Scope> =>
  Effect.gen(function* () {
    const controller = yield* Effect.acquireRelease(
      Effect.sync(() => new AbortController()),
      (c) => Effect.sync(() => c.abort())
    )
    const res = yield* Effect.tryPromise({
      try: () => fetch(url, { headers, signal: controller.signal }),
      catch: (e) => new InboxTestError({ detail: `GET ${url}: ${String(e)}` })
    })
    const seen: Array<SseEvent> = []
    const ended = yield* Deferred.make<void>()
    const waits = WokenWait.make()
    if (res.status === 200 && res.body) {
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
      let buffer = ""
      void (async () => {
        try {
          for (;;) {
            const { value, done } = await reader.read()
            if (done) return
            buffer += value
            let cut: number
            while ((cut = buffer.indexOf("\n\n")) >= 0) {
              const chunk = buffer.slice(0, cut)
              buffer = buffer.slice(cut + 2)
              let event = "message"
              let data = ""
              for (const line of chunk.split("\n")) {
                if (line.startsWith("event: ")) event = line.slice(7)
                else if (line.startsWith("data: ")) data += line.slice(6)
              }
              if (data !== "") seen.push({ event, data: JSON.parse(data) })
            }
            waits.wake()
          }
        } catch {
          // aborted, or the connection was cut
        } finally {
          Deferred.unsafeDone(ended, Exit.void)
        }
      })()
    } else {
      yield* Effect.promise(() => res.text())
    }
    return {
      status: res.status,
      events: () => [...seen],
      ended: Deferred.await(ended).pipe(
        Effect.timeoutFail({
          duration: "15 seconds",
          onTimeout: () => new InboxTestError({ detail: "the event stream did not end" })
        })
      ),
      waitFor: (what, predicate) =>
        waits.until(
          () => seen.find(predicate),
          "15 seconds",
          () =>
            new InboxTestError({ detail: `no ${what} on the event stream; saw ${JSON.stringify(seen).slice(0, 2000)}` })
        )
    }
  })

export interface Delivery {
  readonly body: string
  readonly signature: string | undefined
}

/** A notification receiver on loopback answering each POST with the next status of `statuses` (then 200). */
export const receiver = (
  statuses: ReadonlyArray<number>
): Effect.Effect<
  {
    readonly url: string
    readonly waitFor: (n: number) => Effect.Effect<ReadonlyArray<Delivery>, InboxTestError>
  },
  never,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const deliveries: Array<Delivery> = []
    const waits = WokenWait.make()
    const server = yield* Effect.acquireRelease(
      Effect.async<Http.Server>((resume) => {
        const server = Http.createServer((req, res) => {
          let body = ""
          req.setEncoding("utf8")
          req.on("data", (chunk: string) => (body += chunk))
          req.on("end", () => {
            res.statusCode = statuses[deliveries.length] ?? 200
            deliveries.push({ body, signature: req.headers["x-warden-signature"] as string | undefined })
            res.end()
            waits.wake()
          })
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    const port = (server.address() as { port: number }).port
    return {
      url: `http://127.0.0.1:${port}/hook`,
      waitFor: (n) =>
        waits.until(
          () => (deliveries.length >= n ? deliveries.slice(0, n) : undefined),
          "15 seconds",
          () => new InboxTestError({ detail: `fewer than ${n} notifications arrived` })
        )
    }
  })
