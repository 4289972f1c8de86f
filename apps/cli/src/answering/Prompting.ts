/**
 * `--approvals prompt`: a person answers the cards on the terminal, one at a time, oldest first.
 * Cards that open meanwhile queue on the board (none is lost); a card that settles by itself
 * (deadline, withdrawn by the server, turn ended) while it is being asked about is dropped from
 * the prompt and the next one is asked.
 *
 * The prompts are @effect/cli `Prompt`s run against a Terminal whose output is the board (the
 * prompt's frame is drawn under the open cards) and whose input is one long-lived raw-mode
 * reader of stdin. In raw mode the terminal sends Ctrl-C as a key, not a signal: it is turned
 * back into SIGINT, so Ctrl-C still stops the run (every open card is refused as `shutdown`).
 */
import { Prompt } from "@effect/cli"
import * as Terminal from "@effect/platform/Terminal"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import { CardGroup } from "@warden/approvals"
import type { Approvals, Card } from "@warden/approvals"
import type { Supervisor } from "@warden/supervisor"
import { Decision } from "@warden/protocol"
import { Effect, Either, Layer, Mailbox, Option, Stream, SubscriptionRef } from "effect"
import type { Scope } from "effect"
import type { Board } from "../terminal/Board.js"
import * as CardPrompt from "./CardPrompt.js"
import type { RunOffers } from "../state/StateLedger.js"

const visible = (text: string): string => text.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, "")

/**
 * The open cards, oldest first, after one batch of inbox updates, applied together: a card opened
 * and settled in the same batch (a remembered rule settled it as it opened) is never among them.
 */
export const afterUpdates = (
  cards: ReadonlyArray<Card.CardView>,
  updates: Iterable<Approvals.InboxUpdate>
): ReadonlyArray<Card.CardView> => {
  let next = cards
  for (const update of updates) {
    switch (update._tag) {
      case "Snapshot":
        next = [...update.cards].sort((a, b) => a.openedAt - b.openedAt)
        break
      case "Opened":
        if (!next.some((c) => c.id === update.card.id)) next = [...next, update.card]
        break
      case "Settled":
        next = next.filter((c) => c.id !== update.settlement.card.id)
        break
    }
  }
  return next
}

/**
 * The open cards, oldest first, from the inbox's snapshot-then-changes stream: one change of the
 * ref per chunk of updates (the inbox's chunks are what was published in one step), so the prompt
 * never asks about a card that was settled in the step that opened it.
 */
export const openCards = (updates: Stream.Stream<Approvals.InboxUpdate>) =>
  Effect.gen(function* () {
    const ref = yield* SubscriptionRef.make<ReadonlyArray<Card.CardView>>([])
    yield* updates.pipe(
      Stream.runForEachChunk((chunk) => SubscriptionRef.update(ref, (cards) => afterUpdates(cards, chunk))),
      Effect.interruptible,
      Effect.forkScoped
    )
    return ref
  })

/**
 * Ask about the open cards until the scope closes. With `always` (the ledger is on), cards that a
 * remembered rule can be scoped to also offer "always" (`r`): the rule is stored (author
 * `prompt`), then the card is accepted; if it cannot be stored, the board says why and the card is
 * asked about again.
 */
export const run = (
  supervisor: Supervisor.SupervisorShape,
  board: Board,
  always?: CardPrompt.Always,
  offers?: RunOffers
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const node = yield* NodeTerminal.make(() => false)
    const keys = yield* node.readInput
    const listeners = new Set<Mailbox.Mailbox<Terminal.UserInput>>()
    yield* Effect.addFinalizer(() => Effect.sync(() => board.setPrompt(undefined)))
    yield* keys.take.pipe(
      Effect.flatMap((input) =>
        Effect.sync(() => {
          if (input.key.ctrl && input.key.name === "c") {
            process.kill(process.pid, "SIGINT")
            return
          }
          for (const listener of listeners) listener.unsafeOffer(input)
        })
      ),
      Effect.forever,
      Effect.interruptible,
      Effect.forkScoped
    )

    const terminal = Terminal.Terminal.of({
      columns: node.columns,
      rows: node.rows,
      isTTY: node.isTTY,
      readInput: Effect.acquireRelease(
        Effect.tap(Mailbox.make<Terminal.UserInput>(), (mailbox) => Effect.sync(() => listeners.add(mailbox))),
        (mailbox) => Effect.sync(() => listeners.delete(mailbox))
      ),
      readLine: Effect.fail(new Terminal.QuitException()),
      display: (text) =>
        Effect.sync(() => {
          if (visible(text).trim() !== "") board.setPrompt(text.split("\n"))
        })
    })
    const promptEnv = Layer.mergeAll(Layer.succeed(Terminal.Terminal, terminal), NodeFileSystem.layer, NodePath.layer)

    const open = yield* openCards(supervisor.inbox.updates)
    // Answered here: skipped even before the inbox reports them settled.
    const answered = new Set<string>()
    const firstOpen = open.changes.pipe(
      Stream.filterMap((cards) => Option.fromNullable(cards.find((c) => !answered.has(c.id)))),
      Stream.runHead
    )
    const settled = (card: Card.CardView) =>
      open.changes.pipe(
        Stream.filter((cards) => !cards.some((c) => c.id === card.id)),
        Stream.runHead
      )

    /**
     * A rule offered after this acceptance: shown in full on the board, then asked (default no).
     * The next card is asked once this is answered (its deadline runs meanwhile, as always).
     */
    const offerAfter = (card: Card.CardView, offers: RunOffers) =>
      Effect.gen(function* () {
        const offer = yield* offers.after(card)
        if (offer === undefined) return
        board.log(`rule offered after card ${card.id} (${offer.id}): ${offer.summary}`)
        for (const line of offer.rule.trimEnd().split("\n")) board.log(`  ${line}`)
        board.log(
          `  replayed over ${offer.replay.cards} recorded cards: decides ${offer.replay.decides}, would have saved ${offer.replay.savedAsks} asks, flips ${offer.replay.flippedDenials} recorded declines`
        )
        const keep = yield* Prompt.run(
          Prompt.confirm({
            message: `keep rule ${offer.id}? (a remembered rule; warden rules revoke ends it)`,
            initial: false
          })
        ).pipe(
          Effect.provide(promptEnv),
          Effect.catchAll(() => Effect.succeed(false))
        )
        board.setPrompt(undefined)
        if (!keep) return board.log(`rule ${offer.id} not kept`)
        const taken = yield* offers.take(offer.id, "prompt")
        board.log(
          Either.isLeft(taken)
            ? `rule ${offer.id} not kept: ${taken.left}`
            : `remembered ${taken.right.ruleId}: allow ${taken.right.describe} (from rule ${offer.id})`
        )
      })

    const askOnce = Effect.gen(function* () {
      const head = yield* firstOpen
      if (Option.isNone(head)) return
      const card = head.value
      // Cards asking the same thing, open and not answered here yet: `g` answers them all.
      const group = CardGroup.groupOf(card)
      const membersOf = (cards: ReadonlyArray<Card.CardView>) =>
        group === undefined ? [card] : cards.filter((c) => !answered.has(c.id) && CardGroup.groupOf(c) === group)
      const members = membersOf(yield* SubscriptionRef.get(open))
      // A card of the same group that opens (or leaves) while the prompt is shown: the prompt is
      // asked again, so that `[g] accept all N` counts what is open now.
      const regrouped =
        group === undefined
          ? Effect.never
          : open.changes.pipe(
              Stream.filter((cards) => membersOf(cards).length !== members.length),
              Stream.runHead
            )
      const answer = yield* Prompt.run(CardPrompt.make(card, always, Math.max(1, members.length))).pipe(
        Effect.provide(promptEnv),
        Effect.map((a): Option.Option<CardPrompt.Answer> | "regroup" => Option.some(a)),
        Effect.catchAll(() => Effect.succeed(Option.none())),
        Effect.raceFirst(Effect.as(settled(card), Option.none())),
        Effect.raceFirst(Effect.as(regrouped, "regroup" as const))
      )
      board.setPrompt(undefined)
      if (answer === "regroup" || Option.isNone(answer)) return
      if (answer.value._tag === "DecideGroup" && group !== undefined) {
        for (const member of members) answered.add(member.id)
        const result = yield* supervisor.approvals.answerGroup(group, answer.value.decision, "terminal")
        const settled = result.answered.filter((a) => a.result._tag === "Settled").length
        board.log(
          `${settled} card(s) asking the same as ${card.id} answered` +
            (result.notOffered.length > 0
              ? `; left open (the decision is not offered): ${result.notOffered.join(", ")}`
              : "")
        )
        return
      }
      let decision: Decision.Decision
      if (answer.value._tag === "Always") {
        if (always === undefined) return
        const remembered = yield* always.remember(card)
        if (Either.isLeft(remembered)) {
          board.log(`card ${card.id}: not remembered (${remembered.left}); answer it again`)
          return
        }
        board.log(`remembered ${remembered.right.id}: allow ${remembered.right.describe} (from card ${card.id})`)
        decision = Decision.Accept
      } else {
        decision = answer.value.decision
      }
      answered.add(card.id)
      const result = yield* supervisor.approvals.answer(card.id, decision, "terminal")
      if (result._tag === "Settled" && result.settlement.outcome === "accepted" && offers !== undefined)
        yield* offerAfter(card, offers)
      if (result._tag === "AlreadySettled") {
        board.log(`card ${card.id}: your answer came too late; it had already settled (${result.settlement.outcome})`)
      } else if (result._tag === "UnknownCard") {
        board.log(`card ${card.id}: no longer open`)
      }
    })
    yield* askOnce.pipe(Effect.forever, Effect.interruptible, Effect.forkScoped)
  })
