/**
 * `warden fleet --cluster URL --inbox [HOST:]PORT`: the fleet's one web inbox. Every runner's
 * open cards (read from the fleet's store, `FleetCards`), and the fleet's items on the board; a
 * decision is sent to the card's item on whichever runner drives it now, where the first answer
 * wins fleet-wide. The same page, API, token, links and notifications as `warden run --inbox`
 * (docs/inbox.md); `always` is not offered (the fleet has no one ledger to remember in), and the
 * inbox takes no work items (`warden submit` does). Loaded only when it runs; it runs until
 * SIGINT/SIGTERM, its normal end (exit 0). It owns no shards and changes no card by itself.
 */
import type { Decision } from "@warden/protocol"
import { ClusterClient, FleetCards, Storage } from "@warden/cluster"
import { WebInbox } from "@warden/inbox"
import type { InboxApi } from "@warden/inbox"
import { ChildEnv } from "@warden/transport"
import { Context, Effect, Layer, Queue, Redacted } from "effect"
import * as ExitCodes from "../contract/ExitCodes.js"
import type * as Opts from "../contract/Options.js"

/** A stored source (`Deadline`, `ThreadStopped`, `person`, `stranded`) in the inbox's words (`deadline`, `thread-stopped`). */
const sourceWord = (source: string) => source.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase()

const settlementJson = (s: FleetCards.FleetSettlement, channel: string | null): InboxApi.SettlementJson => {
  const source = sourceWord(s.source)
  return {
    cardId: s.cardId,
    outcome: s.outcome,
    source,
    channel,
    by: source === "person" && channel !== null ? `person (${channel})` : source,
    decision: null,
    // What the runner wrote to codex is its own record; the store says how the card ended.
    written: s.outcome === "accepted" || s.outcome === "declined" || s.outcome === "cancelled",
    detail: s.outcome === "stranded" ? "its runner lost the item; the runner that took it refused the card" : null,
    settledAt: s.settledAt,
    latencyMs: s.latencyMs
  }
}

const itemJson = (item: FleetCards.FleetItem): InboxApi.ItemJson => ({
  item: item.id,
  prompt: null,
  status: item.status,
  threadId: item.threadId,
  activity: `${item.runner ?? "no runner"}${item.turnsDone > 0 ? `, ${item.turnsDone} turn(s) done` : ""}${item.moves > 0 ? `, moved ${item.moves}x` : ""}`,
  tokens: null,
  startedAt: null,
  finishedAt:
    item.status === "completed" || item.status === "failed" || item.status === "stopped" ? item.updatedAt : null,
  finalMessage: null,
  error: null
})

/** The fleet's cards as the web inbox's source. */
export const sourceOf = (fleet: FleetCards.FleetCardsShape): WebInbox.Source => ({
  openCards: fleet.openCards,
  items: Effect.map(fleet.items, (items) => items.map(itemJson)),
  subscribe: Effect.gen(function* () {
    const from = yield* fleet.subscribe
    const out = yield* Effect.acquireRelease(Queue.unbounded<WebInbox.SourceEvent>(), Queue.shutdown)
    yield* Queue.takeBetween(from, 1, Number.MAX_SAFE_INTEGER).pipe(
      Effect.flatMap((batch) =>
        Queue.offerAll(
          out,
          Array.from(batch, (e): WebInbox.SourceEvent => {
            switch (e._tag) {
              case "Opened":
                return { _tag: "CardOpened", card: e.card }
              case "Settled":
                return {
                  _tag: "CardSettled",
                  settled: { card: e.card, settlement: settlementJson(e.settlement, null) }
                }
              case "Item":
                return { _tag: "ItemUpdated", item: itemJson(e.item) }
            }
          })
        )
      ),
      Effect.forever,
      Effect.interruptible,
      Effect.forkScoped
    )
    return out
  }),
  answer: (cardId: string, decision: Decision.Decision, channel: string) =>
    Effect.map(fleet.answer(cardId, decision), (answer): WebInbox.SourceAnswer => {
      switch (answer._tag) {
        case "Settled":
          return { _tag: "Settled", settlement: settlementJson(answer.settlement, channel) }
        case "AlreadySettled":
          return { _tag: "AlreadySettled", settlement: settlementJson(answer.settlement, null) }
        case "UnknownCard":
          return { _tag: "UnknownCard" }
        case "NotDelivered":
          return { _tag: "NotDelivered", reason: answer.detail }
      }
    })
})

/** Serves the fleet's inbox until the process is stopped. */
export const serve = (o: {
  readonly cluster: string
  readonly json: boolean
  readonly sharding: Record<string, unknown>
  readonly inbox: Opts.InboxSetting
}) =>
  Effect.gen(function* () {
    // The database URL may carry its password: nothing this process starts gets a variable holding it.
    ChildEnv.withhold(o.cluster)
    const live = FleetCards.layer().pipe(
      Layer.provideMerge(ClusterClient.layer({ sharding: o.sharding })),
      Layer.provideMerge(Storage.layer(o.cluster))
    )
    const context = yield* Layer.build(live).pipe(
      Effect.mapError(
        (e) =>
          new ExitCodes.CliExit({
            code: ExitCodes.Failed,
            message: `warden fleet --inbox: ${e instanceof Error ? e.message : String(e)}`
          })
      )
    )
    const fleet = Context.get(context, FleetCards.FleetCards)
    const inbox = yield* WebInbox.serve(sourceOf(fleet), {
      host: o.inbox.host,
      port: o.inbox.port,
      allowRemote: o.inbox.allowRemote,
      ...(o.inbox.publicUrl !== undefined ? { publicUrl: o.inbox.publicUrl } : {}),
      title: "warden fleet",
      ...(o.inbox.notify ? { notify: { ...o.inbox.notify, report: (line) => process.stderr.write(`${line}\n`) } } : {})
    }).pipe(Effect.mapError((error) => new ExitCodes.CliExit({ code: ExitCodes.Failed, message: error.message })))
    if (!WebInbox.isLoopback(inbox.host)) {
      process.stderr.write(
        `warden: WARNING: the inbox listens on ${inbox.host}, not loopback: anyone who reaches it with the token decides cards, over plain HTTP\n`
      )
    }
    // The token is printed here, once, and goes through nothing Warden records.
    process.stderr.write(`warden: inbox at ${Redacted.value(inbox.link)}\n`)
    const listening = {
      type: "inbox.listening",
      url: inbox.url,
      ...(o.inbox.publicUrl !== undefined ? { publicUrl: inbox.publicUrl } : {})
    }
    process.stdout.write(
      o.json
        ? `${JSON.stringify({ ts: new Date().toISOString(), ...listening })}\n`
        : `the fleet's inbox listens on ${inbox.url} (stop it with Ctrl-C)\n`
    )
    // Stopped by SIGINT/SIGTERM: its normal end.
    ExitCodes.stopEndsWith(0)
    return yield* Effect.never
  }).pipe(Effect.scoped)
