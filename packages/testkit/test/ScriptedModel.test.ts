import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Exit, Option, Scope } from "effect"
import { ScriptedModel, Step } from "../src/index.js"

interface SseEvent {
  readonly event: string
  readonly data: Record<string, unknown>
}

/** Parses an SSE body, checking the framing strictly: `event: T\ndata: JSON\n\n`, data.type === T. */
const parseSse = (text: string): Array<SseEvent> => {
  assert.isTrue(text.endsWith("\n\n"), "an SSE body ends with a blank line")
  return text
    .slice(0, -2)
    .split("\n\n")
    .map((frame) => {
      const lines = frame.split("\n")
      assert.strictEqual(lines.length, 2, `one event line and one data line: ${JSON.stringify(frame)}`)
      assert.isTrue(lines[0]!.startsWith("event: "))
      assert.isTrue(lines[1]!.startsWith("data: "))
      const event = lines[0]!.slice("event: ".length)
      const data = JSON.parse(lines[1]!.slice("data: ".length)) as Record<string, unknown>
      assert.strictEqual(data["type"], event, "data repeats the event type")
      return { event, data }
    })
}

const userMessage = (text: string) => ({ type: "message", role: "user", content: [{ type: "input_text", text }] })

const post = (model: ScriptedModel.Service, input: ReadonlyArray<unknown>, path = "/responses") =>
  Effect.promise(() =>
    fetch(`${model.baseUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "mock-model", stream: true, input })
    })
  )

const postText = (model: ScriptedModel.Service, input: ReadonlyArray<unknown>) =>
  Effect.flatMap(post(model, input), (res) =>
    Effect.promise(() => res.text()).pipe(Effect.map((text) => ({ res, text })))
  )

/** Reads a streaming body until `needle` has been seen; returns the reader and what was read. */
const readUntil = (res: Response, needle: string) =>
  Effect.promise(async () => {
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    let text = ""
    while (!text.includes(needle)) {
      const { done, value } = await reader.read()
      if (done) break
      text += decoder.decode(value, { stream: true })
    }
    return { reader, text }
  })

/** Reads the rest of a body: how it ended (a clean end, or an error such as a cut connection). */
const readRest = (reader: ReadableStreamDefaultReader<Uint8Array>) =>
  Effect.promise(async () => {
    const decoder = new TextDecoder()
    let text = ""
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return { ended: "clean" as const, text }
        text += decoder.decode(value, { stream: true })
      }
    } catch (error) {
      return { ended: "error" as const, text, error }
    }
  })

describe("ScriptedModel", () => {
  it.scopedLive("serves a reply as SSE: created, one output_item.done per item, completed with usage", () =>
    Effect.gen(function* () {
      const model = yield* ScriptedModel.make([
        Step.reply(
          Step.execCommand({ cmd: "echo hi", escalated: true, justification: "because" }),
          Step.mcpCall("probe", "ping", { why: "x" }, { callId: "call_mcp" }),
          Step.message("and a message")
        )
      ])
      const { res, text } = yield* postText(model, [userMessage("hello")])
      assert.strictEqual(res.status, 200)
      assert.strictEqual(res.headers.get("content-type"), "text/event-stream")
      const events = parseSse(text)
      assert.deepStrictEqual(
        events.map((e) => e.event),
        [
          "response.created",
          "response.output_item.done",
          "response.output_item.done",
          "response.output_item.done",
          "response.completed"
        ]
      )
      assert.deepStrictEqual(events[1]!.data["item"], {
        type: "function_call",
        call_id: "call_1_0",
        name: "exec_command",
        arguments: JSON.stringify({
          cmd: "echo hi",
          sandbox_permissions: "require_escalated",
          justification: "because"
        })
      })
      assert.deepStrictEqual(events[2]!.data["item"], {
        type: "function_call",
        call_id: "call_mcp",
        name: "ping",
        arguments: '{"why":"x"}',
        namespace: "mcp__probe"
      })
      assert.deepStrictEqual(events[3]!.data["item"], {
        type: "message",
        role: "assistant",
        id: "msg_1_2",
        content: [{ type: "output_text", text: "and a message", annotations: [] }]
      })
      const completed = events[4]!.data["response"] as Record<string, unknown>
      assert.strictEqual(completed["id"], (events[0]!.data["response"] as Record<string, unknown>)["id"])
      assert.deepStrictEqual(completed["usage"], { input_tokens: 10, output_tokens: 5, total_tokens: 15 })
    })
  )

  it.scopedLive("streams a message as output_text deltas between output_item.added and done", () =>
    Effect.gen(function* () {
      const text = "héllo ✓ 日本 and a longer tail"
      const model = yield* ScriptedModel.make([Step.message(text, { stream: true, chunkSize: 4 })])
      const events = parseSse((yield* postText(model, [userMessage("hi")])).text)
      assert.strictEqual(events[1]!.event, "response.output_item.added")
      const deltas = events.filter((e) => e.event === "response.output_text.delta")
      assert.isAbove(deltas.length, 2)
      assert.strictEqual(deltas.map((d) => d.data["delta"]).join(""), text)
      assert.isTrue(deltas.every((d) => d.data["item_id"] === "msg_1_0"))
      assert.deepStrictEqual(
        events.slice(-2).map((e) => e.event),
        ["response.output_item.done", "response.completed"]
      )
    })
  )

  it.scopedLive("routes by the last [lane:NAME] marker in user messages; exhausted lanes answer a plain message", () =>
    Effect.gen(function* () {
      const model = yield* ScriptedModel.make({
        lanes: { A: [Step.message("a1"), Step.message("a2")], B: [Step.message("b1")] },
        exhaustedText: "nothing more"
      })
      const textOf = (input: ReadonlyArray<unknown>) =>
        Effect.map(postText(model, input), ({ text }) => {
          const done = parseSse(text).find((e) => e.event === "response.output_item.done")!
          return (done.data["item"] as { content: Array<{ text: string }> }).content[0]!.text
        })
      assert.strictEqual(yield* textOf([userMessage("[lane:A] first")]), "a1")
      assert.strictEqual(yield* textOf([userMessage(`${ScriptedModel.laneMarker("B")} first`)]), "b1")
      // a later prompt switches lanes; developer/assistant text never routes
      assert.strictEqual(
        yield* textOf([
          userMessage("[lane:B] old"),
          { type: "message", role: "developer", content: [{ type: "input_text", text: "[lane:B]" }] },
          userMessage("now [lane:A]")
        ]),
        "a2"
      )
      assert.strictEqual(yield* textOf([userMessage("[lane:B] again")]), "nothing more")
      assert.strictEqual(yield* textOf([userMessage("no marker")]), "nothing more")

      const requests = yield* model.requests
      assert.deepStrictEqual(
        requests.map((r) => [r.seq, r.lane, r.stepIndex, r.served]),
        [
          [1, "A", 0, "Reply"],
          [2, "B", 0, "Reply"],
          [3, "A", 1, "Reply"],
          [4, "B", null, "Exhausted"],
          [5, "default", null, "Exhausted"]
        ]
      )
      assert.deepStrictEqual(ScriptedModel.userTexts(requests[0]!), ["[lane:A] first"])
      assert.strictEqual(yield* model.remaining("A"), 0)
      assert.strictEqual((yield* model.awaitRequests(2, "B")).length, 2)
    })
  )

  it.scopedLive("records bodies: function_call_output helpers and appended steps", () =>
    Effect.gen(function* () {
      const model = yield* ScriptedModel.make([])
      yield* model.append("default", [Step.message("appended")])
      const output = {
        type: "function_call_output" as const,
        call_id: "call_7",
        output: "Process exited with code 0\nhi\n"
      }
      const { text } = yield* postText(model, [userMessage("go"), { type: "function_call", call_id: "call_7" }, output])
      assert.isTrue(text.includes("appended"))
      const [request] = yield* model.requests
      assert.strictEqual(request!.method, "POST")
      assert.strictEqual(request!.path, "/v1/responses")
      assert.deepStrictEqual(ScriptedModel.lastInputItem(request!), output)
      assert.deepStrictEqual(ScriptedModel.functionCallOutputs(request!), [output])
      assert.deepStrictEqual(ScriptedModel.outputFor(request!, "call_7"), Option.some(output))
      assert.isTrue(Option.isNone(ScriptedModel.outputFor(request!, "call_8")))
      assert.strictEqual((request!.body as { model: string }).model, "mock-model")
    })
  )

  it.scopedLive("answers HTTP errors, response.failed, and 404 for other paths", () =>
    Effect.gen(function* () {
      const model = yield* ScriptedModel.make([
        Step.httpError(500, "boom"),
        Step.failed("too long", "context_length_exceeded")
      ])
      const first = yield* postText(model, [userMessage("x")])
      assert.strictEqual(first.res.status, 500)
      assert.deepStrictEqual(JSON.parse(first.text), { error: { message: "boom", type: "server_error", code: null } })
      const events = parseSse((yield* postText(model, [userMessage("x")])).text)
      assert.deepStrictEqual(
        events.map((e) => e.event),
        ["response.created", "response.failed"]
      )
      assert.deepStrictEqual((events[1]!.data["response"] as Record<string, unknown>)["error"], {
        code: "context_length_exceeded",
        message: "too long"
      })
      const notFound = yield* post(model, [], "/models")
      assert.strictEqual(notFound.status, 404)
      const requests = yield* model.requests
      assert.deepStrictEqual(
        requests.map((r) => r.served),
        ["HttpError", "Failed", "NotFound"]
      )
      assert.strictEqual(yield* model.remaining(), 0)
    })
  )

  it.scopedLive("drop cuts the stream mid-way: the client sees a partial body and an error, never completed", () =>
    Effect.gen(function* () {
      const model = yield* ScriptedModel.make([Step.drop("partial words")])
      const res = yield* post(model, [userMessage("x")])
      assert.strictEqual(res.status, 200)
      const { ended, text } = yield* readRest(res.body!.getReader())
      assert.strictEqual(ended, "error")
      assert.isTrue(text.includes("event: response.created"))
      assert.isTrue(text.includes("partial words"))
      assert.isFalse(text.includes("response.completed"))
      assert.strictEqual(yield* model.openResponses, 0)
    })
  )

  it.live("a stall never completes; closing the model's scope cuts it and stops the server", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const model = yield* ScriptedModel.make([Step.stall()]).pipe(Scope.extend(scope))
      const res = yield* post(model, [userMessage("x")])
      const { reader, text } = yield* readUntil(res, "response.created")
      assert.isTrue(text.includes("event: response.created"))
      assert.strictEqual(yield* model.openResponses, 1)
      yield* Scope.close(scope, Exit.void)
      const rest = yield* readRest(reader)
      assert.strictEqual(rest.ended, "error", "the stalled stream is cut, not completed")
      assert.isFalse(rest.text.includes("response.completed"))
      const after = yield* Effect.either(
        Effect.tryPromise(() => fetch(`${model.baseUrl}/responses`, { method: "POST" }))
      )
      assert.isTrue(Either.isLeft(after), "the server no longer accepts connections")
    })
  )

  it.scopedLive("a delayed step answers after its delay", () =>
    Effect.gen(function* () {
      const model = yield* ScriptedModel.make([Step.delayed(150, Step.message("late"))])
      const start = Date.now()
      const { text } = yield* postText(model, [userMessage("x")])
      assert.isAtLeast(Date.now() - start, 140)
      assert.isTrue(text.includes("late"))
    })
  )

  it.scopedLive("rejects an invalid script with a readable ScriptError", () =>
    Effect.gen(function* () {
      const bad = yield* Effect.flip(ScriptedModel.make({ lanes: { A: [{ _tag: "HttpError", status: 200 }] } }))
      assert.strictEqual(bad._tag, "ScriptError")
      assert.isTrue(bad.message.includes("The ScriptedModel script is not valid"))
      const typo = yield* Effect.flip(
        ScriptedModel.make([{ _tag: "Reply", items: [{ _tag: "Message", text: "x", strem: true }] }] as never)
      )
      assert.isTrue(typo.message.includes("strem"), typo.message)
      const appendBad = yield* ScriptedModel.make([]).pipe(
        Effect.flatMap((m) => Effect.flip(m.append("A", [{ _tag: "Nope" } as never])))
      )
      assert.strictEqual(appendBad._tag, "ScriptError")
    })
  )
})
