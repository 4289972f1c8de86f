import { assert, describe, it } from "@effect/vitest"
import { notifications, serverMessages, transcript, transcripts } from "@warden/test-support/Transcripts"
import { FastCheck } from "effect"
import * as Events from "../src/Events.js"
import type { ThreadItem } from "../src/ThreadItem.js"
import type { TurnStatus } from "../src/Turn.js"

const eventsOf = (name: string) => notifications(transcript(name)).map((n) => Events.toEvent(n.method, n.params))

const only = <T extends Events.DomainEvent["_tag"]>(
  events: ReadonlyArray<Events.DomainEvent>,
  tag: T
): Array<Extract<Events.DomainEvent, { _tag: T }>> =>
  events.filter((e): e is Extract<Events.DomainEvent, { _tag: T }> => e._tag === tag)

const completedItems = (events: ReadonlyArray<Events.DomainEvent>) => only(events, "ItemCompleted").map((e) => e.item)

describe("Events.toEvent on every transcript", () => {
  it("translates every notification the server sent, none malformed, every mapped method typed", () => {
    let count = 0
    const others = new Set<string>()
    for (const t of transcripts) {
      for (const n of notifications(t)) {
        const event = Events.toEvent(n.method, n.params)
        count++
        assert.notStrictEqual(event._tag, "Malformed", `${t.name} ${n.method}: ${JSON.stringify(event).slice(0, 800)}`)
        if (Events.MappedNotificationMethods.includes(n.method)) {
          assert.notStrictEqual(event._tag, "Other", `${t.name} ${n.method} is mapped`)
        } else {
          assert.deepStrictEqual(event, { _tag: "Other", method: n.method, params: n.params })
          others.add(n.method)
        }
      }
    }
    assert.isAbove(count, 1000)
    // Unmapped methods seen on 0.171.0 pass through as Other.
    assert.isTrue(others.has("remoteControl/status/changed"))
    assert.isTrue(others.has("mcpServer/startupStatus/updated"))
  })

  it("no item in the transcripts falls back to unknown", () => {
    for (const t of transcripts) {
      for (const event of eventsOf(t.name)) {
        const items: ReadonlyArray<ThreadItem> =
          event._tag === "ItemStarted" || event._tag === "ItemCompleted"
            ? [event.item]
            : event._tag === "TurnCompleted"
              ? event.items
              : []
        for (const item of items) assert.notStrictEqual(item.type, "unknown", `${t.name}: ${JSON.stringify(item)}`)
      }
    }
  })

  it("h-http-500: retries reported, then turn/completed failed with codexErrorInfo internalServerError", () => {
    const events = eventsOf("h-http-500")
    const errors = only(events, "Error")
    assert.deepStrictEqual(
      errors.map((e) => [e.willRetry, e.error.codexErrorInfo?.code]),
      [
        [true, "responseStreamDisconnected"],
        [true, "responseStreamDisconnected"],
        [false, "internalServerError"]
      ]
    )
    assert.strictEqual(errors[0]!.error.message, "Reconnecting... 1/2")
    const [completed] = only(events, "TurnCompleted")
    assert.strictEqual(completed!.status, "failed")
    assert.strictEqual(completed!.threadId, "01a2299f-344e-7371-a857-93b4e763ebf4")
    assert.strictEqual(completed!.turnId, "01a2299f-3466-7592-a767-a62fec0e47e6")
    assert.deepStrictEqual(completed!.error, {
      message: "We’re currently experiencing high demand, which may cause temporary errors.",
      codexErrorInfo: { code: "internalServerError", httpStatusCode: null, detail: null },
      additionalDetails: null
    })
    assert.deepStrictEqual(
      only(events, "ThreadStatusChanged").map((e) => e.status._tag),
      ["Active", "SystemError"]
    )
  })

  it("a-cmd-accept: the command item completes with exitCode and aggregatedOutput, the turn with the final message", () => {
    const events = eventsOf("a-cmd-accept")
    const command = completedItems(events).find((item) => item.type === "commandExecution")
    assert.isDefined(command)
    if (command?.type !== "commandExecution") return
    assert.strictEqual(command.status, "completed")
    assert.strictEqual(command.exitCode, 0)
    assert.strictEqual(
      command.aggregatedOutput,
      "approved-output-accept\ntick-1\ntick-2\ntick-3\n/var/tmp/rc-probe-accept\n"
    )
    assert.strictEqual(command.cwd, "/tmp/rc-ws-a-cmd-accept-BOiw0A")
    assert.isNumber(command.durationMs)

    const outputs = only(events, "CommandOutputDelta")
    assert.strictEqual(outputs[0]?.delta, "approved-output-accept\n")
    assert.strictEqual(outputs[0]?.itemId, command.id)

    const [completed] = only(events, "TurnCompleted")
    assert.strictEqual(completed!.status, "completed")
    assert.isNull(completed!.error)
    assert.deepStrictEqual(
      completed!.items.map((i) => (i.type === "agentMessage" ? i.text : i.type)),
      ["after accept"]
    )

    const usage = only(events, "TokenUsageUpdated")
    assert.deepStrictEqual(usage[0]!.total, {
      totalTokens: 15,
      inputTokens: 10,
      cachedInputTokens: 0,
      cacheWriteInputTokens: 0,
      outputTokens: 5,
      reasoningOutputTokens: 0
    })
    assert.strictEqual(usage[0]!.modelContextWindow, 258400)
    assert.strictEqual(usage.at(-1)!.total.totalTokens, 30)

    const [limits] = only(events, "RateLimitsUpdated")
    assert.strictEqual(limits!.rateLimits.limitId, "codex")
    assert.isNull(limits!.rateLimits.primary)
  })

  it("declined and failed tool items keep their status; a refused MCP call keeps its error", () => {
    const declined = completedItems(eventsOf("a-cmd-decline")).find((i) => i.type === "commandExecution")
    assert.strictEqual(declined?.type === "commandExecution" ? declined.status : undefined, "declined")
    const patch = completedItems(eventsOf("b-patch-decline")).find((i) => i.type === "fileChange")
    assert.strictEqual(patch?.type === "fileChange" ? patch.status : undefined, "declined")
    const mcp = completedItems(eventsOf("e-mcp-poke-decline")).find((i) => i.type === "mcpToolCall")
    assert.deepStrictEqual(mcp?.type === "mcpToolCall" ? [mcp.status, mcp.error, mcp.server] : undefined, [
      "failed",
      { message: "user rejected MCP tool call" },
      "probe"
    ])
    const dynamic = completedItems(eventsOf("x-dynamic-tool")).filter((i) => i.type === "dynamicToolCall")
    assert.deepStrictEqual(
      dynamic.map((i) => (i.type === "dynamicToolCall" ? [i.tool, i.status, i.success] : [])),
      [
        ["probe_dyn", "completed", true],
        ["probe_dyn", "failed", false]
      ]
    )
  })

  it("serverRequest/resolved becomes RequestWithdrawn with the server's request id", () => {
    const withdrawn = only(eventsOf("a-cmd-accept"), "RequestWithdrawn")
    assert.deepStrictEqual(withdrawn, [
      { _tag: "RequestWithdrawn", threadId: "01a2299e-64e8-7690-b331-db5260c075fa", requestId: 0 }
    ])
  })

  it("thread/started carries the thread id at params.thread.id", () => {
    const [started] = only(eventsOf("a-cmd-accept"), "ThreadStarted")
    assert.strictEqual(started!.threadId, "01a2299e-64e8-7690-b331-db5260c075fa")
    assert.strictEqual(started!.thread.id, started!.threadId)
    assert.strictEqual(started!.thread.cwd, "/tmp/rc-ws-a-cmd-accept-BOiw0A")
    assert.strictEqual(started!.thread.cliVersion, "0.171.0")
    assert.isFalse(started!.thread.ephemeral)
    assert.isNull(started!.thread.parentThreadId)
    assert.deepStrictEqual(started!.thread.status, { _tag: "Idle" })
  })

  it("a fileChange item carries its changes (started and completed) and the turn diff follows", () => {
    const events = eventsOf("b-patch-accept")
    const expected = [
      { path: "/var/tmp/rc-probe-patch-accept.txt", kind: "add", movePath: null, diff: "hello from accept\n" }
    ]
    const started = only(events, "ItemStarted")
      .map((e) => e.item)
      .find((i) => i.type === "fileChange")
    const completed = completedItems(events).find((i) => i.type === "fileChange")
    assert.deepStrictEqual(started?.type === "fileChange" ? [started.status, started.changes] : [], [
      "inProgress",
      expected
    ])
    assert.deepStrictEqual(completed?.type === "fileChange" ? [completed.status, completed.changes] : [], [
      "completed",
      expected
    ])
    const diffs = only(events, "TurnDiffUpdated")
    assert.isAbove(diffs.length, 0)
    assert.include(diffs.at(-1)!.diff, "+hello from accept")
  })

  it("thread status: active flags while an approval or a question waits", () => {
    const statuses = only(eventsOf("a-cmd-accept"), "ThreadStatusChanged").map((e) => e.status)
    assert.deepStrictEqual(statuses.slice(0, 2), [
      { _tag: "Active", activeFlags: [] },
      { _tag: "Active", activeFlags: ["waitingOnApproval"] }
    ])
    assert.deepStrictEqual(statuses.at(-1), { _tag: "Idle" })
    const input = only(eventsOf("d-rui-flag"), "ThreadStatusChanged").map((e) => e.status)
    assert.isTrue(input.some((s) => s._tag === "Active" && s.activeFlags.includes("waitingOnUserInput")))
  })

  it("text deltas, warnings and config warnings", () => {
    const [delta] = only(eventsOf("g-steer"), "AgentMessageDelta")
    assert.deepStrictEqual(delta, {
      _tag: "AgentMessageDelta",
      threadId: "01a2299f-1c46-7ed1-bcf3-313967f7c199",
      turnId: "01a2299f-1c66-7223-9fd3-0ec0ec21f37d",
      itemId: "msg_1_0",
      delta: "first an"
    })
    const events = eventsOf("a-cmd-accept")
    const [warning] = only(events, "Warning")
    assert.strictEqual(warning!.threadId, "01a2299e-64e8-7690-b331-db5260c075fa")
    assert.include(warning!.message, "mock-model")
    const [config] = only(events, "ConfigWarning")
    assert.include(config!.summary, "bubblewrap")
    assert.isNull(config!.details)
  })

  it("interrupted turns end with status interrupted and no error", () => {
    const [completed] = only(eventsOf("g-interrupt-pending-approval"), "TurnCompleted")
    assert.strictEqual(completed!.status, "interrupted")
    assert.isNull(completed!.error)
  })

  it("folds into a work item result: final message, items, usage, errors", () => {
    const fold = (events: ReadonlyArray<Events.DomainEvent>) => {
      const items: Array<ThreadItem> = []
      let usage: Events.TokenBreakdown | null = null
      let finalMessage: string | null = null
      const errors: Array<string> = []
      let end: TurnStatus | null = null
      for (const e of events) {
        if (e._tag === "ItemCompleted") {
          items.push(e.item)
          if (e.item.type === "agentMessage") finalMessage = e.item.text
        } else if (e._tag === "TokenUsageUpdated") usage = e.total
        else if (e._tag === "Error" && !e.willRetry) errors.push(`${e.error.codexErrorInfo?.code}: ${e.error.message}`)
        else if (e._tag === "TurnCompleted") end = e.status
      }
      return { items: items.map((i) => i.type), usage: usage?.totalTokens, finalMessage, errors, end }
    }
    assert.deepStrictEqual(fold(eventsOf("a-cmd-accept")), {
      items: ["userMessage", "commandExecution", "agentMessage"],
      usage: 30,
      finalMessage: "after accept",
      errors: [],
      end: "completed"
    })
    assert.deepStrictEqual(fold(eventsOf("h-stream-drop")).errors, [
      "other: stream disconnected before completion: error sending request"
    ])
  })
})

describe("Events.toEvent on shapes the transcripts do not cover (taken from the 0.171.0 schema)", () => {
  const inTurn = { threadId: "th", turnId: "tu" }
  const itemOf = (item: unknown) => {
    const event = Events.toEvent("item/completed", { ...inTurn, item, completedAtMs: 5 })
    assert.strictEqual(event._tag, "ItemCompleted")
    return event._tag === "ItemCompleted" ? event.item : undefined
  }

  it("reasoning deltas (summary and raw text) and summary parts", () => {
    assert.deepStrictEqual(
      Events.toEvent("item/reasoning/summaryTextDelta", { ...inTurn, itemId: "r", delta: "think", summaryIndex: 1 }),
      { _tag: "ReasoningDelta", threadId: "th", turnId: "tu", itemId: "r", part: "summary", index: 1, delta: "think" }
    )
    assert.deepStrictEqual(
      Events.toEvent("item/reasoning/textDelta", { ...inTurn, itemId: "r", delta: "raw", contentIndex: 0 }),
      { _tag: "ReasoningDelta", threadId: "th", turnId: "tu", itemId: "r", part: "text", index: 0, delta: "raw" }
    )
    assert.deepStrictEqual(
      Events.toEvent("item/reasoning/summaryPartAdded", { ...inTurn, itemId: "r", summaryIndex: 2 }),
      { _tag: "ReasoningSummaryPartAdded", threadId: "th", turnId: "tu", itemId: "r", summaryIndex: 2 }
    )
  })

  it("item kinds: reasoning, plan, collab, sub-agent activity, web search, compaction, and new kinds", () => {
    assert.deepStrictEqual(itemOf({ type: "reasoning", id: "r", summary: ["a"], content: [] }), {
      type: "reasoning",
      id: "r",
      summary: ["a"],
      content: []
    })
    assert.deepStrictEqual(itemOf({ type: "plan", id: "p", text: "1. x" }), { type: "plan", id: "p", text: "1. x" })
    assert.deepStrictEqual(
      itemOf({
        type: "collabAgentToolCall",
        id: "c",
        tool: "spawnAgent",
        status: "interrupted",
        senderThreadId: "th",
        receiverThreadIds: ["sub"],
        prompt: "go",
        agentsStates: { sub: { status: "running", message: null } }
      }),
      {
        type: "collabAgentToolCall",
        id: "c",
        tool: "spawnAgent",
        status: "interrupted",
        senderThreadId: "th",
        receiverThreadIds: ["sub"],
        prompt: "go",
        model: null,
        agentsStates: { sub: { status: "running", message: null } }
      }
    )
    assert.deepStrictEqual(
      itemOf({ type: "subAgentActivity", id: "s", kind: "started", agentThreadId: "sub", agentPath: "/root/helper" }),
      {
        type: "subAgentActivity",
        id: "s",
        activity: "started",
        agentThreadId: "sub",
        agentPath: "/root/helper",
        model: null
      }
    )
    assert.deepStrictEqual(
      itemOf({ type: "subAgentActivity", id: "s", kind: "hibernated", agentThreadId: "sub", agentPath: "/x" }),
      { type: "subAgentActivity", id: "s", activity: "unknown", agentThreadId: "sub", agentPath: "/x", model: null }
    )
    assert.deepStrictEqual(itemOf({ type: "webSearch", id: "w", query: "effect" }), {
      type: "webSearch",
      id: "w",
      query: "effect"
    })
    assert.deepStrictEqual(itemOf({ type: "contextCompaction", id: "k" }), { type: "contextCompaction", id: "k" })
    assert.deepStrictEqual(itemOf({ type: "imageView", id: "i", path: "/a.png" }), {
      type: "unknown",
      id: "i",
      itemType: "imageView",
      raw: { type: "imageView", id: "i", path: "/a.png" },
      issue: null
    })
  })

  it("a known item kind that drifted becomes unknown with the issue, and the event still arrives", () => {
    const item = itemOf({ type: "commandExecution", id: "c", status: "completed" })
    assert.strictEqual(item?.type, "unknown")
    if (item?.type !== "unknown") return
    assert.strictEqual(item.itemType, "commandExecution")
    assert.include(item.issue ?? "", "command")
  })

  it("unknown statuses and flags decode as unknown", () => {
    const command = itemOf({ type: "commandExecution", id: "c", status: "quarantined", command: "ls", cwd: "/" })
    assert.strictEqual(command?.type === "commandExecution" ? command.status : undefined, "unknown")
    const turn = Events.toEvent("turn/completed", { threadId: "th", turn: { id: "tu", status: "paused", items: [] } })
    assert.deepStrictEqual(turn, {
      _tag: "TurnCompleted",
      threadId: "th",
      turnId: "tu",
      status: "unknown",
      error: null,
      items: [],
      durationMs: null
    })
    assert.deepStrictEqual(
      Events.toEvent("thread/status/changed", {
        threadId: "th",
        status: { type: "active", activeFlags: ["waitingOnBudget"] }
      }),
      { _tag: "ThreadStatusChanged", threadId: "th", status: { _tag: "Active", activeFlags: ["unknown"] } }
    )
    assert.deepStrictEqual(
      Events.toEvent("thread/status/changed", { threadId: "th", status: { type: "hibernating" } }),
      { _tag: "ThreadStatusChanged", threadId: "th", status: { _tag: "Unknown", type: "hibernating" } }
    )
    assert.deepStrictEqual(Events.toEvent("thread/status/changed", { threadId: "th", status: { type: "notLoaded" } }), {
      _tag: "ThreadStatusChanged",
      threadId: "th",
      status: { _tag: "NotLoaded" }
    })
  })

  it("codexErrorInfo: bare codes, object codes with an HTTP status, and an error without a message", () => {
    const failed = (error: unknown) => {
      const event = Events.toEvent("turn/completed", { threadId: "th", turn: { id: "tu", status: "failed", error } })
      return event._tag === "TurnCompleted" ? event.error : undefined
    }
    assert.deepStrictEqual(failed({ message: "limit", codexErrorInfo: "usageLimitExceeded" })?.codexErrorInfo, {
      code: "usageLimitExceeded",
      httpStatusCode: null,
      detail: null
    })
    assert.deepStrictEqual(
      failed({ message: "conn", codexErrorInfo: { httpConnectionFailed: { httpStatusCode: 502 } } })?.codexErrorInfo,
      { code: "httpConnectionFailed", httpStatusCode: 502, detail: { httpStatusCode: 502 } }
    )
    assert.deepStrictEqual(failed({ message: "plain" }), {
      message: "plain",
      codexErrorInfo: null,
      additionalDetails: null
    })
    assert.include(failed({ code: 7 })?.message ?? "", "unreadable turn error")
  })

  it("turn plan updates, patch updates, model reroutes, thread closed", () => {
    assert.deepStrictEqual(
      Events.toEvent("turn/plan/updated", {
        ...inTurn,
        explanation: null,
        plan: [{ step: "a", status: "inProgress" }]
      }),
      {
        _tag: "TurnPlanUpdated",
        threadId: "th",
        turnId: "tu",
        explanation: null,
        plan: [{ step: "a", status: "inProgress" }]
      }
    )
    assert.deepStrictEqual(
      Events.toEvent("item/fileChange/patchUpdated", {
        ...inTurn,
        itemId: "f",
        changes: [{ path: "/a", kind: { type: "update", move_path: "/b" }, diff: "-x\n+y\n" }]
      }),
      {
        _tag: "FileChangePatchUpdated",
        threadId: "th",
        turnId: "tu",
        itemId: "f",
        changes: [{ path: "/a", kind: "update", movePath: "/b", diff: "-x\n+y\n" }]
      }
    )
    assert.deepStrictEqual(
      Events.toEvent("model/rerouted", { ...inTurn, fromModel: "a", toModel: "b", reason: "highRiskCyberActivity" }),
      {
        _tag: "ModelRerouted",
        threadId: "th",
        turnId: "tu",
        fromModel: "a",
        toModel: "b",
        reason: "highRiskCyberActivity"
      }
    )
    assert.deepStrictEqual(Events.toEvent("thread/closed", { threadId: "th" }), {
      _tag: "ThreadClosed",
      threadId: "th"
    })
  })

  it("a known method with unreadable params is Malformed (with the issue), an unknown one is Other", () => {
    const broken = Events.toEvent("turn/completed", { threadId: "th", turn: { status: "completed" } })
    assert.strictEqual(broken._tag, "Malformed")
    assert.include(broken._tag === "Malformed" ? broken.issue : "", "id")
    assert.strictEqual(Events.toEvent("thread/started", { threadId: "th" })._tag, "Malformed")
    assert.strictEqual(Events.toEvent("thread/started", { thread: { id: "" } })._tag, "Malformed")
    assert.strictEqual(Events.toEvent("item/completed", null)._tag, "Malformed")
    assert.deepStrictEqual(Events.toEvent("brand/new", { a: 1 }), {
      _tag: "Other",
      method: "brand/new",
      params: { a: 1 }
    })
    // Object.prototype keys are not methods.
    assert.strictEqual(Events.toEvent("constructor", {})._tag, "Other")
    assert.strictEqual(Events.toEvent("__proto__", {})._tag, "Other")
  })

  it.prop(
    "never throws, whatever the params",
    [FastCheck.constantFrom(...Events.MappedNotificationMethods, "x/y"), FastCheck.anything()],
    ([method, params]) => {
      const event = Events.toEvent(method, params)
      assert.isString(event._tag)
      assert.strictEqual(event._tag === "Other", method === "x/y")
    },
    { fastCheck: { numRuns: 300 } }
  )
})

describe("Events.threadIdOf", () => {
  it("agrees with the params for every frame the server sent (notifications and requests)", () => {
    let withThread = 0
    let withoutThread = 0
    for (const t of transcripts) {
      for (const m of serverMessages(t)) {
        const params = m.params as { threadId?: unknown; thread?: { id?: unknown } } | undefined
        const expected =
          m.method === "thread/started"
            ? (params?.thread?.id as string)
            : typeof params?.threadId === "string"
              ? params.threadId
              : undefined
        const actual = Events.threadIdOf(m.method, m.params)
        assert.strictEqual(actual, expected, `${t.name} ${m.method}`)
        if (actual === undefined) withoutThread++
        else withThread++
        if (m.id === undefined && actual !== undefined) {
          const event = Events.toEvent(m.method, m.params)
          if ("threadId" in event && event.threadId !== null) assert.strictEqual(event.threadId, actual)
        }
      }
    }
    assert.isAbove(withThread, 900)
    // account/rateLimits/updated, configWarning, remoteControl/status/changed, ... carry no thread.
    assert.isAbove(withoutThread, 200)
  })

  it("reads thread/started only at params.thread.id, and tolerates junk", () => {
    assert.strictEqual(Events.threadIdOf("thread/started", { thread: { id: "a" }, threadId: "b" }), "a")
    assert.isUndefined(Events.threadIdOf("thread/started", { threadId: "b" }))
    assert.isUndefined(Events.threadIdOf("turn/started", { threadId: 7 }))
    assert.isUndefined(Events.threadIdOf("turn/started", null))
    assert.isUndefined(Events.threadIdOf("turn/started", "th"))
    assert.isUndefined(Events.threadIdOf("warning", { threadId: null, message: "m" }))
  })
})
