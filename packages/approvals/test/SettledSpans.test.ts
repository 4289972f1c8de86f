/**
 * With telemetry (a turn's span to hang cards under), a settled card's span is described (source,
 * decision, masked title...) and its log record written off the read loop, in batches: 64 cards,
 * 20 ms after the first, the connection's close, or `describeSettled()`, whichever comes first.
 * These tests hold the connection's owner (a FiberSet in a scope of the test's) and look at the
 * spans and records themselves.
 */
import { assert, describe, it } from "@effect/vitest"
import { Decision } from "@warden/protocol"
import {
  Context,
  Effect,
  Exit,
  FiberRef,
  FiberRefs,
  FiberSet,
  HashSet,
  Logger,
  LogLevel,
  Option,
  Scope,
  Tracer
} from "effect"
import { Approvals } from "../src/index.js"
import { captured, recordingLine } from "./support.js"

const command = (id: number) => captured("item/commandExecution/requestApproval", () => true, id)

/** Effect's tracer keeping its spans; `failOn` makes one span's attribute of that key throw, once. */
const recordingTracer = (failOn?: string) =>
  Effect.map(Effect.tracer, (base) => {
    const made: Array<Tracer.Span> = []
    let failed = false
    const recording = Tracer.make({
      span: (...args) => {
        const span = base.span(...args)
        made.push(span)
        if (failOn === undefined || args[0] !== "warden.card") return span
        const attribute = span.attribute.bind(span)
        span.attribute = (key, value) => {
          if (key === failOn && !failed) {
            failed = true
            throw new Error("an embedder's tracer that throws")
          }
          attribute(key, value)
        }
        return span
      },
      context: base.context
    })
    return { made, recording }
  })

/**
 * An engine whose handler accepts (at once by default), a connection's cards owned by a FiberSet
 * of `owner`'s scope, a thread, the turn's span, and a logger that keeps what it is given: the
 * test fiber's only, added after the owner's runtime was made, so a record it has was written by
 * the loggers of the fiber that opened the card. `throwOnce` makes the logger throw at its first
 * card record.
 */
const setup = (
  failOn?: string,
  options: {
    readonly handler?: Approvals.Handler
    readonly throwOnce?: boolean
  } = {}
) =>
  Effect.gen(function* () {
    const records: Array<Logger.Logger.Options<unknown>> = []
    const approvals = yield* Approvals.make({ handler: options.handler ?? (() => Effect.succeed(Decision.Accept)) })
    const owner = yield* Scope.make()
    const run = yield* FiberSet.makeRuntime<never, void, never>().pipe(Scope.extend(owner))
    let threw = options.throwOnce !== true
    yield* Effect.locallyScopedWith(
      FiberRef.currentLoggers,
      HashSet.add(
        Logger.make((record) => {
          if (!threw && String(record.message).startsWith("card ")) {
            threw = true
            throw new Error("a logger that throws")
          }
          records.push(record)
        })
      )
    )
    const connectionCards = approvals.cardsFor(recordingLine().line, undefined, {
      fork: (effect) => void run(effect, { immediate: false }),
      spawn: (effect) => run(effect, { immediate: false })
    })
    const thread = yield* Scope.make()
    const turn = yield* Effect.makeSpan("warden.turn")
    const { made, recording } = yield* recordingTracer(failOn)
    const open = (n: number, from = 0) =>
      Effect.gen(function* () {
        for (let i = 0; i < n; i++) {
          yield* connectionCards
            .open(command(from + i), { parent: thread, traceParent: turn })
            .pipe(Effect.withTracer(recording))
        }
        // The handler answers after the opening's step.
        for (let i = 0; i < 1_000 && connectionCards.size() > 0; i++) yield* Effect.yieldNow()
        assert.strictEqual(connectionCards.size(), 0, "the handler settled every card")
      })
    const cards = () => made.filter((s) => s.name === "warden.card")
    const described = () => cards().filter((s) => s.attributes.has("warden.source"))
    const cardRecords = () => records.filter((r) => String(r.message).startsWith("card "))
    return { connectionCards, owner, open, cards, described, records, cardRecords, made: () => made }
  })

const parentSpanOf = (record: Logger.Logger.Options<unknown>) =>
  Context.getOption(FiberRefs.getOrDefault(record.context, FiberRef.currentContext), Tracer.ParentSpan)

describe("settled cards' spans, described in batches", () => {
  it.scoped("each span is described and ended, its record written by the opener's loggers, in the card's span", () =>
    Effect.gen(function* () {
      const { connectionCards, open, cards, described, cardRecords, made } = yield* setup()
      yield* open(3)
      connectionCards.describeSettled()
      assert.strictEqual(cards().length, 3)
      assert.strictEqual(described().length, 3)
      for (const span of cards()) {
        assert.strictEqual(span.status._tag, "Ended")
        assert.strictEqual(span.attributes.get("warden.outcome"), "accepted")
        assert.strictEqual(span.attributes.get("warden.source"), "handler")
        assert.strictEqual(span.attributes.get("warden.card.kind"), "command")
        assert.match(String(span.attributes.get("warden.card.title")), /^run: /)
      }
      const records = cardRecords()
      assert.strictEqual(records.length, 3)
      for (const record of records) {
        assert.deepStrictEqual(record.message, ["card accepted"])
        assert.strictEqual(record.logLevel, LogLevel.Info)
        const span = parentSpanOf(record)
        assert.isTrue(Option.isSome(span), "the record is in a span")
        const card = cards().find((s) => Option.isSome(span) && s.spanId === span.value.spanId)
        assert.isDefined(card, "in its card's span")
        const annotations = Object.fromEntries(record.annotations)
        assert.strictEqual(annotations["cardId"], card?.attributes.get("warden.card_id"))
        assert.strictEqual(annotations["outcome"], "accepted")
        assert.strictEqual(annotations["source"], "handler")
      }
      // The handler answered at once: its span, made with its card's, a child of it, ended.
      const handlers = made().filter((s) => s.name === "warden.card.handler")
      assert.strictEqual(handlers.length, 3)
      for (const handler of handlers) {
        const parent = Option.isSome(handler.parent) ? handler.parent.value.spanId : undefined
        assert.isDefined(
          cards().find((c) => c.spanId === parent),
          "a handler's span is a child of its card's"
        )
        assert.strictEqual(handler.status._tag, "Ended")
      }
      // Described once: asking again describes nothing more.
      connectionCards.describeSettled()
      assert.strictEqual(cardRecords().length, 3)
    })
  )

  it.scoped("a full batch (64 cards) is described by the owner's fiber, without waiting for the time limit", () =>
    Effect.gen(function* () {
      const { open, cards, described, cardRecords } = yield* setup()
      yield* open(64)
      for (let i = 0; i < 100 && described().length < 64; i++) yield* Effect.yieldNow()
      assert.strictEqual(cards().length, 64)
      assert.strictEqual(described().length, 64)
      assert.strictEqual(cardRecords().length, 64)
    })
  )

  it.scoped("what waits is described when the owner closes; a card settled after that, in its own step", () =>
    Effect.gen(function* () {
      const { owner, open, cards, described, cardRecords } = yield* setup()
      yield* open(2)
      yield* Scope.close(owner, Exit.void)
      assert.strictEqual(described().length, 2, "described at the close")
      assert.isTrue(cards().every((s) => s.status._tag === "Ended"))
      assert.strictEqual(cardRecords().length, 2)
      yield* open(1, 2)
      assert.strictEqual(described().length, 3, "the late card at once")
      assert.strictEqual(cardRecords().length, 3)
    })
  )

  it.scoped("a description that throws ends its span all the same, is logged, and the others are described", () =>
    Effect.gen(function* () {
      const { connectionCards, open, cards, records, cardRecords } = yield* setup("warden.card.title")
      yield* open(3)
      connectionCards.describeSettled()
      assert.isTrue(cards().every((s) => s.status._tag === "Ended"))
      assert.strictEqual(cards().filter((s) => s.attributes.has("warden.card.title")).length, 2)
      assert.strictEqual(cardRecords().length, 2)
      const errors = records.filter((r) => r.logLevel === LogLevel.Error)
      assert.deepStrictEqual(
        errors.map((r) => r.message),
        [["a card's settlement step threw"]]
      )
    })
  )

  it.scoped("without a full batch or a close, the time limit describes them (a real 20 ms timer)", () =>
    Effect.gen(function* () {
      const { open, described, cardRecords } = yield* setup()
      yield* open(3)
      // Polled in real time (the timer is not the test clock's), bounded.
      for (let i = 0; i < 20_000 && described().length < 3; i++) {
        yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
      }
      assert.strictEqual(described().length, 3)
      assert.strictEqual(cardRecords().length, 3)
    })
  )

  it.scoped(
    "a logger that throws: the span is described all the same, the others' records written, the throw logged",
    () =>
      Effect.gen(function* () {
        const { connectionCards, open, cards, described, records, cardRecords } = yield* setup(undefined, {
          throwOnce: true
        })
        yield* open(3)
        connectionCards.describeSettled()
        assert.strictEqual(described().length, 3)
        assert.isTrue(cards().every((s) => s.status._tag === "Ended"))
        assert.strictEqual(cardRecords().length, 2)
        assert.deepStrictEqual(
          records.filter((r) => r.logLevel === LogLevel.Error).map((r) => r.message),
          [["a card's settlement step threw"]]
        )
      })
  )

  it.scoped("a handler that runs in a fiber: its span's parent, the card's, is made when the handler starts", () =>
    Effect.gen(function* () {
      const { connectionCards, open, cards, made } = yield* setup(undefined, {
        handler: () => Effect.as(Effect.yieldNow(), Decision.Accept)
      })
      yield* open(2)
      const handlers = made().filter((s) => s.name === "warden.card.handler")
      assert.strictEqual(handlers.length, 2, "made when each handler ran")
      assert.strictEqual(cards().length, 2, "the cards' spans, made as their parents")
      connectionCards.describeSettled()
      for (const handler of handlers) {
        const parent = Option.isSome(handler.parent) ? handler.parent.value.spanId : undefined
        const card = cards().find((c) => c.spanId === parent)
        assert.isDefined(card, "a child of its card's")
        assert.strictEqual(handler.status._tag, "Ended")
        assert.strictEqual(card?.attributes.get("warden.source"), "handler")
        assert.strictEqual(card?.status._tag, "Ended")
      }
    })
  )
})
