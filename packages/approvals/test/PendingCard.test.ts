import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import { Chunk, Context, Effect, Exit, FiberId, FiberRef, Option, Scope, Stream, TestClock, Tracer } from "effect"
import { Approvals, Card } from "../src/index.js"
import { captured, deskSetup } from "./support.js"

const command = () => captured("item/commandExecution/requestApproval")
const elicitationForm = () => captured("mcpServer/elicitation/request", (p) => p._meta === null)

const setup = deskSetup

/** Effect's tracer, keeping every span it makes. */
const recordingTracer = Effect.map(Effect.tracer, (base) => {
  const made: Array<Tracer.Span> = []
  const recording = Tracer.make({
    span: (...args) => {
      const span = base.span(...args)
      made.push(span)
      return span
    },
    context: base.context
  })
  return { made, recording }
})

describe("pending cards", () => {
  it.scoped("the deadline (15 min by default) writes the method's refusal, once", () =>
    Effect.gen(function* () {
      const { connectionCards, wire, thread, drained } = yield* setup()
      const opened = yield* connectionCards.open(command(), { parent: thread })
      assert.strictEqual(opened._tag, "Opened")
      yield* TestClock.adjust("14 minutes")
      yield* TestClock.adjust("59999 millis")
      assert.deepStrictEqual(wire.written, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(wire.written, [{ jsonrpc: "2.0", id: 0, result: { decision: "decline" } }])
      const settled = (yield* drained()).filter((e) => e._tag === "CardSettled")
      assert.strictEqual(settled.length, 1)
      const s = settled[0]!._tag === "CardSettled" ? settled[0]!.settlement : undefined
      assert.strictEqual(s?.outcome, "timeout")
      assert.strictEqual(s?.source._tag, "Deadline")
      assert.strictEqual(connectionCards.size(), 0)
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(wire.written.length, 1)
    })
  )

  it.scoped(
    "a card's view: summary and title are its own enumerable properties (JSON, spreads and Object.keys see them), built once",
    () =>
      Effect.gen(function* () {
        const { connectionCards, thread } = yield* setup()
        const opened = yield* connectionCards.open(command(), { parent: thread, context: { workItem: 7 } })
        assert.strictEqual(opened._tag, "Opened")
        const card = opened._tag === "Opened" ? opened.card : undefined
        assert.deepStrictEqual(Object.keys(card!), [
          "id",
          "requestId",
          "method",
          "threadId",
          "turnId",
          "workItem",
          "summary",
          "title",
          "offers",
          "openedAt",
          "deadlineAt"
        ])
        const json = JSON.parse(JSON.stringify(card))
        assert.strictEqual(json.summary.kind, "command")
        assert.strictEqual(json.title, card!.title)
        assert.strictEqual(json.workItem, 7)
        assert.strictEqual({ ...card! }.summary, card!.summary, "a spread copies the (same) summary")
        assert.strictEqual(card!.summary, card!.summary, "built once")
        // Nothing of the request beyond the masked summary is enumerable.
        assert.notInclude(JSON.stringify(card), "proposedExecpolicyAmendment")
      })
  )

  it.scoped(
    "a portable copy carries the view's summary once it was made (not made again where it is read), and not before",
    () =>
      Effect.gen(function* () {
        const { connectionCards, thread } = yield* setup()
        const opened = yield* connectionCards.open(command(), { parent: thread })
        const view = opened._tag === "Opened" ? opened.card : undefined
        assert.isDefined(view)
        if (view === undefined) return
        // Nothing read it yet: the copy is what the summary is made from, and nothing more.
        const before = Card.portable(view)
        assert.isTrue(before._tag === "Request" && before.summarized === undefined)
        const made = { summary: view.summary, title: view.title }
        const after = Card.portable(view)
        assert.isTrue(after._tag === "Request" && after.summarized?.summary === view.summary)
        // Across a thread or a process (JSON), the carried summary is the one read back.
        const crossed: Card.PortableCard = JSON.parse(JSON.stringify(after))
        const back = Card.fromPortable(crossed)
        assert.deepStrictEqual({ summary: back.summary, title: back.title }, JSON.parse(JSON.stringify(made)))
        // And it is used as carried, not made again from the request.
        const carried =
          crossed._tag === "Request"
            ? Card.fromPortable({ ...crossed, summarized: { summary: made.summary, title: "carried, not made" } })
            : undefined
        assert.strictEqual(carried?.title, "carried, not made")
        // Without it, the summary is made where the copy is read, the same as the original's.
        const remade = Card.fromPortable(JSON.parse(JSON.stringify(before)))
        assert.strictEqual(remade.title, view.title)
        assert.deepStrictEqual(JSON.parse(JSON.stringify(remade.summary)), JSON.parse(JSON.stringify(view.summary)))
      })
  )

  it.scoped("deadlines are configurable per supervisor and per method", () =>
    Effect.gen(function* () {
      const { connectionCards, wire, thread } = yield* setup({
        deadlines: { default: "10 seconds", perMethod: { "mcpServer/elicitation/request": "3 seconds" } }
      })
      yield* connectionCards.open(command(), { parent: thread })
      yield* connectionCards.open(
        captured("mcpServer/elicitation/request", () => true, 1),
        { parent: thread }
      )
      yield* TestClock.adjust("3 seconds")
      assert.deepStrictEqual(wire.written, [{ jsonrpc: "2.0", id: 1, result: { action: "decline" } }])
      yield* TestClock.adjust("7 seconds")
      assert.deepStrictEqual(wire.written[1], { jsonrpc: "2.0", id: 0, result: { decision: "decline" } })
    })
  )

  it.scoped("a decision after the deadline is dropped and reported late, never written", () =>
    Effect.gen(function* () {
      const { approvals, connectionCards, wire, thread, drained } = yield* setup({ deadlines: { default: "1 minute" } })
      const opened = yield* connectionCards.open(command(), { parent: thread })
      yield* TestClock.adjust("1 minute")
      const cardId = opened._tag === "Opened" ? opened.card.id : ""
      const late = yield* approvals.answer(cardId, Decision.Accept)
      assert.strictEqual(late._tag, "AlreadySettled")
      assert.strictEqual(late._tag === "AlreadySettled" && late.settlement.outcome, "timeout")
      assert.deepStrictEqual(
        wire.written.map((f) => f["result"]),
        [{ decision: "decline" }]
      )
      const lateEvents = (yield* drained()).filter((e) => e._tag === "LateDecision")
      assert.strictEqual(lateEvents.length, 1)
    })
  )

  it.scoped(
    "observers of answers see each answer just before it is written; a throwing one does not stop the answer; gone with their scope",
    () =>
      Effect.gen(function* () {
        const { approvals, connectionCards, wire, thread } = yield* setup()
        const seen: Array<[string, string, string | undefined, number]> = []
        const observing = yield* Scope.make()
        yield* Scope.extend(
          approvals.observeAnswers(() => {
            throw new Error("an observer that throws")
          }),
          observing
        )
        yield* Scope.extend(
          approvals.observeAnswers((a) => seen.push([a.card.id, a.outcome, a.decision, wire.written.length])),
          observing
        )
        const first = yield* connectionCards.open(command(), { parent: thread })
        assert.strictEqual(first._tag, "Opened")
        if (first._tag !== "Opened") return
        yield* approvals.answer(first.card.id, Decision.Accept)
        // Seen before the write (nothing written yet), and written all the same.
        assert.deepStrictEqual(seen, [[first.card.id, "accepted", "accept", 0]])
        assert.strictEqual(wire.written.length, 1)
        yield* Scope.close(observing, Exit.void)
        const second = yield* connectionCards.open(
          captured("item/commandExecution/requestApproval", () => true, 1),
          {
            parent: thread
          }
        )
        if (second._tag !== "Opened") return assert.fail(second._tag)
        yield* approvals.answer(second.card.id, Decision.Decline)
        assert.strictEqual(seen.length, 1)
        assert.strictEqual(wire.written.length, 2)
      })
  )

  it.scoped(
    "under an embedder's tracer a card's span is a child of the caller's, or of its nearest parent that propagates",
    () =>
      Effect.gen(function* () {
        const { made, recording } = yield* recordingTracer
        const { connectionCards, thread } = yield* setup()
        const parentOf = (name: string) => {
          const span = made.find((s) => s.name === name)
          return span !== undefined && Option.isSome(span.parent) ? (span.parent.value as Tracer.Span).name : undefined
        }
        yield* connectionCards
          .open(command(), { parent: thread })
          .pipe(Effect.withSpan("caller"), Effect.withSpan("outer"), Effect.withTracer(recording))
        assert.strictEqual(parentOf("warden.card"), "caller")
        made.length = 0
        // The caller's span does not propagate: the card's is a child of the one above it.
        yield* connectionCards
          .open(
            captured("item/commandExecution/requestApproval", () => true, 1),
            { parent: thread }
          )
          .pipe(
            Effect.withSpan("caller", { context: Context.make(Tracer.DisablePropagation, true) }),
            Effect.withSpan("outer"),
            Effect.withTracer(recording)
          )
        assert.strictEqual(parentOf("warden.card"), "outer")
      })
  )

  it.scoped(
    "observers of events see what a subscription sees, in publishing order even when one's own work publishes (a card it answers as it opens); a throwing one does not stop the others; gone with their scope",
    () =>
      Effect.gen(function* () {
        const { approvals, connectionCards, thread, drained } = yield* setup()
        const seen: Array<string> = []
        const observing = yield* Scope.make()
        // Answers each card as it opens: its settlement is published inside the opening's delivery.
        yield* Scope.extend(
          approvals.observeEvents((event) => {
            if (event._tag === "CardOpened") Effect.runSync(approvals.answer(event.card.id, Decision.Accept))
          }),
          observing
        )
        yield* Scope.extend(
          approvals.observeEvents(() => {
            throw new Error("an observer that throws")
          }),
          observing
        )
        yield* Scope.extend(
          approvals.observeEvents((event) =>
            seen.push(`${event._tag} ${event._tag === "CardSettled" ? event.settlement.card.id : event.card.id}`)
          ),
          observing
        )
        const opened = yield* connectionCards.open(command(), { parent: thread })
        const id =
          opened._tag === "Opened" ? opened.card.id : opened._tag === "Settled" ? opened.settlement.card.id : ""
        assert.deepStrictEqual(seen, [`CardOpened ${id}`, `CardSettled ${id}`])
        const subscribed = (yield* drained()).map(
          (event) => `${event._tag} ${event._tag === "CardSettled" ? event.settlement.card.id : event.card.id}`
        )
        assert.deepStrictEqual(subscribed, seen)
        yield* Scope.close(observing, Exit.void)
        yield* connectionCards.open(
          captured("item/commandExecution/requestApproval", () => true, 1),
          {
            parent: thread
          }
        )
        assert.strictEqual(seen.length, 2, "nothing seen once their scope closed")
      })
  )

  it.scoped("a handler's span is a child of its card's, with the span annotations in force where the card opened", () =>
    Effect.gen(function* () {
      const { made, recording } = yield* recordingTracer
      const { connectionCards, thread } = yield* setup({ handler: () => Effect.succeed(Decision.Accept) })
      yield* connectionCards
        .open(command(), { parent: thread })
        .pipe(Effect.annotateSpans("team", "payments"), Effect.withSpan("caller"), Effect.withTracer(recording))
      // The handler is called after the opening's step.
      for (let i = 0; i < 1_000 && connectionCards.size() > 0; i++) yield* Effect.yieldNow()
      assert.strictEqual(connectionCards.size(), 0, "the handler settled the card")
      const card = made.find((s) => s.name === "warden.card")!
      const handler = made.find((s) => s.name === "warden.card.handler")!
      assert.isDefined(handler, "the handler ran in its span")
      assert.strictEqual(Option.isSome(handler.parent) && handler.parent.value.spanId, card.spanId)
      assert.strictEqual(handler.attributes.get("team"), "payments")
      assert.strictEqual(card.attributes.get("team"), "payments")
      assert.strictEqual(handler.status._tag, "Ended")
    })
  )

  it.scoped("a person's accept is written once; a second answer is already settled", () =>
    Effect.gen(function* () {
      const { approvals, connectionCards, wire, thread } = yield* setup()
      const opened = yield* connectionCards.open(command(), { parent: thread })
      const cardId = opened._tag === "Opened" ? opened.card.id : ""
      const first = yield* approvals.answer(cardId, Decision.Accept)
      assert.strictEqual(first._tag, "Settled")
      assert.strictEqual(first._tag === "Settled" && first.settlement.outcome, "accepted")
      assert.strictEqual(first._tag === "Settled" && first.settlement.source._tag, "Person")
      const second = yield* approvals.answer(cardId, Decision.Decline)
      assert.strictEqual(second._tag, "AlreadySettled")
      yield* TestClock.adjust("1 hour")
      assert.deepStrictEqual(wire.written, [{ jsonrpc: "2.0", id: 0, result: { decision: "accept" } }])
      assert.deepStrictEqual(yield* approvals.answer("c999", Decision.Accept), { _tag: "UnknownCard", cardId: "c999" })
    })
  )

  it.scoped(
    "the settled history is bounded (settledHistory): the most recent settlements answer late, an older card is unknown; neither writes",
    () =>
      Effect.gen(function* () {
        const { approvals, connectionCards, wire, thread } = yield* setup({ settledHistory: 2 })
        const ids: Array<string> = []
        for (let i = 0; i < 3; i++) {
          const opened = yield* connectionCards.open(
            captured("item/commandExecution/requestApproval", () => true, i),
            { parent: thread }
          )
          const cardId = opened._tag === "Opened" ? opened.card.id : ""
          ids.push(cardId)
          assert.strictEqual((yield* approvals.answer(cardId, Decision.Decline))._tag, "Settled")
        }
        assert.deepStrictEqual(yield* approvals.answer(ids[0]!, Decision.Accept), {
          _tag: "UnknownCard",
          cardId: ids[0]!
        })
        assert.strictEqual((yield* approvals.answer(ids[1]!, Decision.Accept))._tag, "AlreadySettled")
        assert.strictEqual((yield* approvals.answer(ids[2]!, Decision.Accept))._tag, "AlreadySettled")
        assert.deepStrictEqual(
          wire.written.map((f) => f["result"]),
          [{ decision: "decline" }, { decision: "decline" }, { decision: "decline" }]
        )
        assert.strictEqual(Approvals.DefaultSettledHistory, 1_000)
      })
  )

  it.scoped("a decision the method cannot express is refused, not coerced", () =>
    Effect.gen(function* () {
      const { approvals, connectionCards, wire, thread } = yield* setup()
      const opened = yield* connectionCards.open(elicitationForm(), { parent: thread })
      const r = yield* approvals.answer(opened._tag === "Opened" ? opened.card.id : "", Decision.AcceptForSession)
      assert.strictEqual(r._tag === "Settled" && r.settlement.outcome, "refused")
      assert.match(r._tag === "Settled" ? (r.settlement.detail ?? "") : "", /cannot be expressed/)
      assert.deepStrictEqual(wire.written, [{ jsonrpc: "2.0", id: 0, result: { action: "decline" } }])
    })
  )

  it.scoped("abort is refused on every v2 card", () =>
    Effect.gen(function* () {
      const { approvals, connectionCards, wire, thread } = yield* setup()
      const opened = yield* connectionCards.open(command(), { parent: thread })
      yield* approvals.answer(opened._tag === "Opened" ? opened.card.id : "", { _tag: "Abort" })
      assert.deepStrictEqual(wire.written[0]?.["result"], { decision: "decline" })
    })
  )

  it.scoped("a handler's decision is written; a handler that fails or dies is a refusal", () =>
    Effect.gen(function* () {
      for (const [handler, expected, outcome] of [
        [() => Effect.succeed(Decision.Accept), { decision: "accept" }, "accepted"],
        [() => Effect.fail("no"), { decision: "decline" }, "refused"],
        [() => Effect.die(new Error("boom")), { decision: "decline" }, "refused"],
        [
          () =>
            Effect.sync(() => {
              throw new Error("thrown")
            }),
          { decision: "decline" },
          "refused"
        ]
      ] as const) {
        const { connectionCards, wire, thread, drained } = yield* setup({ handler })
        yield* connectionCards.open(command(), { parent: thread })
        // Off the loop: the dispatcher's fiber, then (for a handler still deciding) its own.
        for (let i = 0; i < 100 && wire.written.length === 0; i++) yield* Effect.yieldNow()
        assert.deepStrictEqual(
          wire.written.map((f) => f["result"]),
          [expected]
        )
        const s = (yield* drained()).find((e) => e._tag === "CardSettled")
        assert.strictEqual(s?._tag === "CardSettled" && s.settlement.outcome, outcome)
        assert.strictEqual(s?._tag === "CardSettled" && s.settlement.source._tag, "Handler")
      }
    })
  )

  it.scoped(
    "a handler is called after the opener's step, never in it, also one whose answer is already decided (then no fiber runs it); a throw or a non-Effect is a refusal",
    () =>
      Effect.gen(function* () {
        for (const [returned, expected, outcome, detail] of [
          [() => Effect.succeed(Decision.Accept), { decision: "accept" }, "accepted", undefined],
          [() => Exit.succeed(Decision.Accept), { decision: "accept" }, "accepted", undefined],
          [() => Effect.fail("no"), { decision: "decline" }, "refused", "no"],
          [
            () => {
              throw new Error("thrown in the call")
            },
            { decision: "decline" },
            "refused",
            "thrown in the call"
          ],
          [() => 42, { decision: "decline" }, "refused", "the handler returned number"]
        ] as const) {
          let opening = false
          const calls: Array<boolean> = []
          const handler = (() => {
            calls.push(opening)
            return returned()
          }) as unknown as Approvals.Handler
          const { connectionCards, wire, thread, drained } = yield* setup({ handler })
          // The opener's step: from the open to the tap, with nothing in between that yields.
          yield* Effect.sync(() => {
            opening = true
          }).pipe(
            Effect.zipRight(connectionCards.open(command(), { parent: thread })),
            Effect.tap(() =>
              Effect.sync(() => {
                assert.deepStrictEqual(calls, [], "not called in the opener's step")
                assert.deepStrictEqual(wire.written, [])
                opening = false
              })
            )
          )
          for (let i = 0; i < 100 && wire.written.length === 0; i++) yield* Effect.yieldNow()
          assert.deepStrictEqual(calls, [false], "called once, after the opener's step")
          assert.deepStrictEqual(
            wire.written.map((f) => f["result"]),
            [expected]
          )
          const s = (yield* drained()).find((e) => e._tag === "CardSettled")
          assert.strictEqual(s?._tag === "CardSettled" && s.settlement.outcome, outcome)
          assert.strictEqual(s?._tag === "CardSettled" && s.settlement.source._tag, "Handler")
          if (detail !== undefined) assert.include(s?._tag === "CardSettled" ? s.settlement.detail : "", detail)
        }
      })
  )

  it.scoped("a card settled before its handler is called (withdrawn in the same step) never calls it", () =>
    Effect.gen(function* () {
      let called = 0
      const { connectionCards, wire, thread } = yield* setup({
        handler: () =>
          Effect.sync(() => {
            called++
          }).pipe(Effect.as(Decision.Accept))
      })
      const opened = yield* connectionCards.open(command(), { parent: thread })
      assert.strictEqual(opened._tag, "Opened")
      if (opened._tag === "Opened") connectionCards.withdraw(opened.card.requestId)
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
      assert.strictEqual(called, 0)
      assert.deepStrictEqual(wire.written, [])
    })
  )

  it.scoped(
    "a handler's fiber waits for the next card once it has decided: the next handler sees none of its FiberRefs; one interrupted with its card is replaced",
    () =>
      Effect.gen(function* () {
        const mark = FiberRef.unsafeMake("untouched")
        const seen: Array<{ readonly fiber: string; readonly mark: string }> = []
        let call = 0
        const handler = () =>
          Effect.gen(function* () {
            const n = ++call
            seen.push({ fiber: FiberId.threadName(yield* Effect.fiberId), mark: yield* FiberRef.get(mark) })
            yield* FiberRef.set(mark, `set by handler ${n}`)
            if (n === 2) return yield* Effect.never // decided by a person: interrupted with its card
            return Decision.Accept
          })
        const { approvals, connectionCards, wire, thread } = yield* setup({ handler })
        const written = (n: number) =>
          Effect.gen(function* () {
            for (let i = 0; i < 100 && wire.written.length < n; i++) yield* Effect.yieldNow()
            assert.strictEqual(wire.written.length, n)
          })
        yield* connectionCards.open(
          captured("item/commandExecution/requestApproval", () => true, 1),
          { parent: thread }
        )
        yield* written(1)
        const second = yield* connectionCards.open(
          captured("item/commandExecution/requestApproval", () => true, 2),
          { parent: thread }
        )
        for (let i = 0; i < 100 && seen.length < 2; i++) yield* Effect.yieldNow()
        yield* approvals.answer(second._tag === "Opened" ? second.card.id : "", Decision.Decline)
        yield* written(2)
        yield* connectionCards.open(
          captured("item/commandExecution/requestApproval", () => true, 3),
          { parent: thread }
        )
        yield* written(3)
        assert.deepStrictEqual(
          wire.written.map((f) => [f["id"], f["result"]]),
          [
            [1, { decision: "accept" }],
            [2, { decision: "decline" }],
            [3, { decision: "accept" }]
          ]
        )
        assert.deepStrictEqual(
          seen.map((s) => s.mark),
          ["untouched", "untouched", "untouched"],
          "no handler sees what another set"
        )
        assert.strictEqual(seen[1]!.fiber, seen[0]!.fiber, "the first handler's fiber ran the second card's")
        assert.notStrictEqual(seen[2]!.fiber, seen[1]!.fiber, "the interrupted one was replaced")
      })
  )

  it.scoped("a handler with no opinion leaves the card to the person and the deadline", () =>
    Effect.gen(function* () {
      const { connectionCards, wire, thread } = yield* setup({
        handler: () => Effect.succeed(undefined),
        deadlines: { default: "5 seconds" }
      })
      yield* connectionCards.open(command(), { parent: thread })
      yield* Effect.yieldNow()
      assert.deepStrictEqual(wire.written, [])
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(
        wire.written.map((f) => f["result"]),
        [{ decision: "decline" }]
      )
    })
  )

  it.scoped("a slow handler loses to the deadline and its late decision is not written", () =>
    Effect.gen(function* () {
      const { connectionCards, wire, thread } = yield* setup({
        handler: () => Effect.sleep("10 seconds").pipe(Effect.as(Decision.Accept), Effect.uninterruptible),
        deadlines: { default: "5 seconds" }
      })
      yield* connectionCards.open(command(), { parent: thread })
      yield* TestClock.adjust("5 seconds")
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(
        wire.written.map((f) => f["result"]),
        [{ decision: "decline" }]
      )
    })
  )

  it.scoped("closing the thread's scope refuses the open card on a live line", () =>
    Effect.gen(function* () {
      const { connectionCards, wire, thread, drained } = yield* setup()
      yield* connectionCards.open(command(), { parent: thread })
      yield* Scope.close(thread, Exit.void)
      assert.deepStrictEqual(
        wire.written.map((f) => f["result"]),
        [{ decision: "decline" }]
      )
      const s = (yield* drained()).find((e) => e._tag === "CardSettled")
      assert.strictEqual(s?._tag === "CardSettled" && s.settlement.source._tag, "ThreadStopped")
      assert.strictEqual(connectionCards.size(), 0)
    })
  )

  it.scoped(
    "closing the thread's scope settles every card of that thread, and only those; a card opened after it settles at once",
    () =>
      Effect.gen(function* () {
        const { connectionCards, wire, thread, drained } = yield* setup({ handler: () => Effect.never })
        const other = yield* Scope.make()
        yield* connectionCards.open(command(), { parent: thread })
        yield* connectionCards.open(
          captured("item/commandExecution/requestApproval", () => true, 1),
          { parent: thread }
        )
        yield* connectionCards.open(
          captured("item/commandExecution/requestApproval", () => true, 2),
          { parent: other }
        )
        yield* Effect.yieldNow()
        yield* Scope.close(thread, Exit.void)
        assert.deepStrictEqual(wire.written.map((f) => f["id"]).sort(), [0, 1])
        assert.strictEqual(connectionCards.size(), 1)
        const late = yield* connectionCards.open(
          captured("item/commandExecution/requestApproval", () => true, 3),
          { parent: thread }
        )
        assert.strictEqual(late._tag, "Settled")
        assert.deepStrictEqual(wire.written.map((f) => f["id"]).sort(), [0, 1, 3])
        const stopped = (yield* drained()).filter(
          (e) => e._tag === "CardSettled" && e.settlement.source._tag === "ThreadStopped"
        )
        assert.strictEqual(stopped.length, 3)
        assert.strictEqual(connectionCards.size(), 1)
      })
  )

  it.scoped("closing the thread's scope on a dead line writes nothing but settles the card", () =>
    Effect.gen(function* () {
      const { connectionCards, wire, thread, drained } = yield* setup()
      yield* connectionCards.open(command(), { parent: thread })
      wire.cut()
      yield* Scope.close(thread, Exit.void)
      assert.deepStrictEqual(wire.written, [])
      const s = (yield* drained()).find((e) => e._tag === "CardSettled")
      assert.strictEqual(s?._tag === "CardSettled" && s.settlement.outcome, "connection-lost")
      assert.strictEqual(connectionCards.size(), 0)
    })
  )

  it.scoped("serverRequest/resolved withdraws the card: nothing written", () =>
    Effect.gen(function* () {
      const { approvals, connectionCards, wire, thread } = yield* setup()
      const opened = yield* connectionCards.open(command(), { parent: thread })
      const s = connectionCards.withdraw(0)
      assert.strictEqual(s?.outcome, "withdrawn")
      const late = yield* approvals.answer(opened._tag === "Opened" ? opened.card.id : "", Decision.Accept)
      assert.strictEqual(late._tag, "AlreadySettled")
      yield* TestClock.adjust("1 hour")
      assert.deepStrictEqual(wire.written, [])
    })
  )

  it.scoped("a second request on an open id is reported as a duplicate; ids can be reused after settling", () =>
    Effect.gen(function* () {
      const { approvals, connectionCards, thread } = yield* setup()
      const first = yield* connectionCards.open(command(), { parent: thread })
      const dup = yield* connectionCards.open(command(), { parent: thread })
      assert.strictEqual(dup._tag, "Duplicate")
      yield* approvals.answer(first._tag === "Opened" ? first.card.id : "", Decision.Decline)
      const again = yield* connectionCards.open(command(), { parent: thread })
      assert.strictEqual(again._tag, "Opened")
      assert.notStrictEqual(again._tag === "Opened" && again.card.id, first._tag === "Opened" && first.card.id)
    })
  )

  it.scoped(
    "openNow opens in the caller's step: an effect only for a thread's first card (its finalizer), a result otherwise; duplicates too",
    () =>
      Effect.gen(function* () {
        const { connectionCards, thread } = yield* setup()
        const [fiber, flags] = yield* Effect.withFiberRuntime<readonly [any, any]>((f, status) =>
          Effect.succeed([f, status.runtimeFlags] as const)
        )
        const first = connectionCards.openNow(command(), { parent: thread }, fiber, flags)
        assert.isTrue(Effect.isEffect(first), "the thread's first card adds its finalizer: an effect")
        assert.strictEqual(connectionCards.size(), 1, "registered in the call, before the effect runs")
        const firstResult = yield* first as Effect.Effect<Approvals.OpenResult>
        assert.strictEqual(firstResult._tag, "Opened")
        const second = connectionCards.openNow(
          captured("item/commandExecution/requestApproval", () => true, 1),
          { parent: thread },
          fiber,
          flags
        )
        assert.isFalse(Effect.isEffect(second))
        assert.strictEqual((second as Approvals.OpenResult)._tag, "Opened")
        const dup = connectionCards.openNow(
          captured("item/commandExecution/requestApproval", () => true, 1),
          { parent: thread },
          fiber,
          flags
        )
        assert.strictEqual((dup as Approvals.OpenResult)._tag, "Duplicate")
        const noThread = connectionCards.openNow(
          captured("item/commandExecution/requestApproval", () => true, 2),
          { parent: undefined },
          fiber,
          flags
        )
        assert.strictEqual((noThread as Approvals.OpenResult)._tag, "Settled", "refused at once, in the call")
        // The thread's close settles what openNow opened, as for open.
        yield* Scope.close(thread, Exit.void)
        assert.strictEqual(connectionCards.size(), 0)
      })
  )

  it.scoped("connection lost: every open card settles at once, nothing written", () =>
    Effect.gen(function* () {
      const { connectionCards, wire, thread } = yield* setup()
      yield* connectionCards.open(
        captured("item/commandExecution/requestApproval", () => true, 0),
        { parent: thread }
      )
      yield* connectionCards.open(
        captured("item/fileChange/requestApproval", () => true, 1),
        { parent: thread }
      )
      wire.cut()
      const settled = connectionCards.connectionLost("the app-server exited with code 1")
      assert.deepStrictEqual(
        settled.map((s) => s.outcome),
        ["connection-lost", "connection-lost"]
      )
      assert.strictEqual(connectionCards.size(), 0)
      yield* TestClock.adjust("1 hour")
      assert.deepStrictEqual(wire.written, [])
    })
  )

  it.scoped(
    "unknown methods get the error frame at once; malformed params and unknown threads are refused at once",
    () =>
      Effect.gen(function* () {
        const { connectionCards, wire, thread } = yield* setup()
        const { ServerRequests } = yield* Effect.promise(() => import("@warden/protocol"))
        const u = yield* connectionCards.open(ServerRequests.decode(5, "item/teleport/requestApproval", {}), {
          parent: thread
        })
        assert.strictEqual(u._tag === "Settled" && u.settlement.source._tag, "UnknownMethod")
        const m = yield* connectionCards.open(
          ServerRequests.decode(6, "item/commandExecution/requestApproval", { nope: 1 }),
          {
            parent: thread
          }
        )
        assert.strictEqual(m._tag === "Settled" && m.settlement.source._tag, "Malformed")
        const n = yield* connectionCards.open(
          captured("item/commandExecution/requestApproval", () => true, 7),
          { parent: undefined }
        )
        assert.strictEqual(n._tag === "Settled" && n.settlement.source._tag, "NoThread")
        assert.deepStrictEqual(
          wire.written.map((f) => [f["id"], f["error"] ? "error" : f["result"]]),
          [
            [5, "error"],
            [6, { decision: "decline" }],
            [7, { decision: "decline" }]
          ]
        )
      })
  )

  it.effect("shutdown: closing the engine's scope refuses what is open", () =>
    Effect.gen(function* () {
      const outer = yield* Scope.make()
      const { connectionCards, wire, thread } = yield* setup().pipe(Scope.extend(outer))
      yield* connectionCards.open(command(), { parent: thread })
      yield* Scope.close(outer, Exit.void)
      assert.deepStrictEqual(
        wire.written.map((f) => f["result"]),
        [{ decision: "decline" }]
      )
    })
  )

  it.scoped("the inbox shows open cards and their settlement", () =>
    Effect.gen(function* () {
      const { approvals, connectionCards, thread } = yield* setup()
      yield* connectionCards.open(command(), { parent: thread })
      const open = yield* approvals.openCards
      assert.strictEqual(open.length, 1)
      assert.strictEqual(open[0]!.method, "item/commandExecution/requestApproval")
      assert.include(open[0]!.offers, "Decline")
      assert.strictEqual(open[0]!.deadlineAt - open[0]!.openedAt, 15 * 60_000)
    })
  )

  it.scoped("a card settled as it opens (a remembered rule) reaches the inbox in one chunk with its opening", () =>
    Effect.gen(function* () {
      const { approvals, connectionCards, thread } = yield* setup({ remembered: () => ({ ruleId: "m1" }) })
      const chunks: Array<ReadonlyArray<string>> = []
      yield* approvals.inbox.pipe(
        Stream.runForEachChunk((chunk) => Effect.sync(() => chunks.push(Chunk.toArray(chunk).map((u) => u._tag)))),
        Effect.forkScoped
      )
      // The snapshot taken, the inbox waits for the next update (the case that split them).
      yield* Effect.yieldNow().pipe(Effect.repeat({ until: () => chunks.length > 0, times: 100 }))
      yield* Effect.repeatN(Effect.yieldNow(), 20)
      const opened = yield* connectionCards.open(command(), { parent: thread })
      assert.strictEqual(opened._tag, "Settled")
      yield* Effect.yieldNow().pipe(Effect.repeat({ until: () => chunks.length > 1, times: 100 }))
      assert.deepStrictEqual(chunks, [["Snapshot"], ["Opened", "Settled"]])
    })
  )
})
