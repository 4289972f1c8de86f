/**
 * The schedule model: what a generated interleaving is made of, how FastCheck generates it, and
 * how it prints (one line per step), so a shrunk counterexample reads like a transcript.
 *
 * A schedule is data (JSON), so a failing one can be kept in `regressions.json` and replayed.
 * Steps name what they act on by `pick` (an index taken modulo the list that exists when the step
 * runs: pending client requests, known threads, cards...). A pick that finds nothing is a no-op,
 * which keeps every shrunk schedule runnable.
 */
import { FastCheck as fc } from "effect"

/** The ten server-request methods of 0.171.0, then one nobody knows. */
export const Methods = [
  "item/commandExecution/requestApproval",
  "item/fileChange/requestApproval",
  "item/permissions/requestApproval",
  "mcpServer/elicitation/request",
  "item/tool/requestUserInput",
  "item/tool/call",
  "account/chatgptAuthTokens/refresh",
  "attestation/generate",
  "applyPatchApproval",
  "execCommandApproval",
  "item/unknownThing/request"
] as const
export type Method = (typeof Methods)[number]

export type DecisionPick = "accept" | "acceptForSession" | "decline" | "cancel" | "rich"
export type HandlerScript =
  | "none"
  | "accept"
  | "decline"
  | "rich"
  | "fail"
  | "die"
  | "undecided"
  | "wait"
  // Defects (the defects family): what an embedder's handler can do wrong, or slowly.
  /** The handler function throws before returning anything. */
  | "throw"
  /** It returns a number: neither an Effect nor a Promise. */
  | "number"
  /** It returns a Promise that resolves to a (rich) decision: must decide as an Effect would. */
  | "promise"
  /** It returns a Promise that rejects. */
  | "reject"
  /** It returns a Promise that never settles. */
  | "pending"
  /** It returns `Effect.never`: the card is decided by a person, its deadline or its scope. */
  | "never"
  /** An uninterruptible wait on a gate a later step (or the teardown) opens, then what that step says. */
  | "stubborn"
  /** An uninterruptible sleep past every card deadline (90 s of virtual time), then an acceptance. */
  | "stubbornSleep"
export type HandlerOutcome = "accept" | "decline" | "rich" | "fail" | "die" | "undecided"
export type NotifyKind =
  | "delta"
  | "item"
  | "command"
  | "commandDone"
  | "status"
  | "usage"
  | "error"
  | "global"
  | "orphan"
export type TurnStatus = "completed" | "interrupted" | "failed" | "inProgress" | "weird"
export type ReplyOutcome = "ok" | "error" | "overloaded" | "unusable"
export type Fault =
  | "garbage"
  | "oversized"
  | "badUtf8"
  | "nonObject"
  | "truncated"
  | "failNextWrite"
  | "breakWrites"
  | "stdoutError"
  | "stdinError"
  | "exit"
  | "exitNoDrain"
  | "stderr"
  // Defects (the defects family)
  /** The peer closes its stdout and stays alive (no exit): the end is StdoutClosed after the drain grace. */
  | "closeStdout"
  /** The embedder's tracer will throw when the next card starts waiting: a throw on the read loop. */
  | "cardSpanThrows"
  /** The tracer will throw when the next card's span ends: inside that card's settlement. */
  | "spanEndThrows"
  /** The tracer will throw when the next card settled by its deadline ends its span: inside the deadline timer's callback. */
  | "deadlineSpanEndThrows"

/** How long a `stubbornSleep` handler sleeps, uninterruptibly (longer than every card deadline). */
export const StubbornSleepMs = 90_000

export type Step =
  /** Client: start work item #n (1-3 prompts), fresh, or resuming a finished item's thread / an unknown thread. */
  | {
      readonly _tag: "Start"
      readonly prompts: number
      readonly resume: "no" | "finished" | "unknown"
      readonly pick: number
    }
  | { readonly _tag: "Steer"; readonly item: number }
  | { readonly _tag: "Interrupt"; readonly item: number }
  | { readonly _tag: "StopItem"; readonly item: number }
  | { readonly _tag: "StopSupervisor" }
  /** Server: answer a pending client request (packed: notifications in the same chunk; split: cut the bytes). */
  | {
      readonly _tag: "Reply"
      readonly request: number
      readonly outcome: ReplyOutcome
      readonly packed: number
      readonly split: number | null
    }
  | { readonly _tag: "Notify"; readonly thread: number; readonly kind: NotifyKind; readonly split: number | null }
  | {
      readonly _tag: "CompleteTurn"
      readonly thread: number
      readonly status: TurnStatus
      readonly resolve: boolean
      readonly otherTurn: boolean
    }
  | {
      readonly _tag: "ServerRequest"
      readonly method: number
      readonly thread: number | "none" | "unknown" | "stale"
      readonly id: "fresh" | "reuseOpen" | "reuseSettled"
      readonly pick: number
      readonly params: "good" | "malformed" | "unsafe"
      readonly command: "plain" | "allowed" | "denied"
      readonly handler: HandlerScript
      readonly split: number | null
    }
  | { readonly _tag: "Resolve"; readonly request: number }
  /** A person answers card #pick through the inbox: an open card, or (late) a settled one. */
  | { readonly _tag: "Decide"; readonly card: number; readonly late: boolean; readonly decision: DecisionPick }
  /** The handler that was told to wait for card #pick decides now (or fails, or dies). */
  | { readonly _tag: "HandlerDecides"; readonly card: number; readonly outcome: HandlerOutcome }
  /** Time: to the nth next timer instant (+offset ms), or by a fixed amount. */
  | { readonly _tag: "Advance"; readonly nth: number; readonly offset: number; readonly by: number | null }
  | { readonly _tag: "Fault"; readonly fault: Fault; readonly code: number }

export interface Setup {
  /** Admission: running work items at most. */
  readonly concurrency: number
  /** `scripted`: a handler is installed and each request says what it does; `none`: a person decides. */
  readonly handler: "none" | "scripted"
  /** Policy rules: allow `git status`, deny `rm` (command approvals). */
  readonly rules: boolean
  /** The peer ignores SIGTERM (the stop sequence needs SIGKILL after the grace). */
  readonly trapSigterm: boolean
  /**
   * The defects family: the slot restarts its app-server (policy "fail"), the embedder's tracer is
   * on (and hostile when a fault arms it), and after the steps a new work item must be served
   * (invariant 9). Absent in older schedules: no restarts, one connection, spans off.
   */
  readonly restarts?: boolean
}

export interface Schedule {
  readonly setup: Setup
  readonly steps: ReadonlyArray<Step>
}

// ---------------------------------------------------------------------------------------------
// Printing: one line per step

const splitText = (split: number | null) => (split === null ? "" : ` split@${split.toFixed(2)}`)

export const describeStep = (step: Step, setup?: Setup): string => {
  switch (step._tag) {
    case "Start":
      return `client: start work item (${step.prompts} prompt${step.prompts > 1 ? "s" : ""}${step.resume === "no" ? "" : step.resume === "finished" ? `, resume the thread of finished item #${step.pick}` : ", resume an unknown thread"})`
    case "Steer":
      return `client: steer item #${step.item}`
    case "Interrupt":
      return `client: interrupt item #${step.item}'s turn`
    case "StopItem":
      return `client: stop item #${step.item}`
    case "StopSupervisor":
      return "client: stop the supervisor"
    case "Reply":
      return `server: reply ${step.outcome} to pending client request #${step.request}${step.packed > 0 ? ` (+${step.packed} packed)` : ""}${splitText(step.split)}`
    case "Notify":
      return `server: notify ${step.kind} on thread #${step.thread}${splitText(step.split)}`
    case "CompleteTurn":
      return `server: turn/completed ${step.status} on thread #${step.thread}${step.otherTurn ? " (another turn id)" : ""}${step.resolve ? " with serverRequest/resolved" : " without resolving"}`
    case "ServerRequest": {
      const method = Methods[step.method % Methods.length]!
      const thread =
        typeof step.thread === "number"
          ? `thread #${step.thread}`
          : step.thread === "none"
            ? "no thread"
            : step.thread === "stale"
              ? `a thread nobody runs now (#${step.pick})`
              : "unknown thread"
      const id =
        step.id === "fresh"
          ? "fresh id"
          : step.id === "reuseOpen"
            ? `id of open request #${step.pick}`
            : `id of settled request #${step.pick}`
      const extra = [
        step.params !== "good" ? `${step.params} params` : "",
        method === "item/commandExecution/requestApproval" && step.command !== "plain" ? `${step.command} command` : "",
        step.handler !== "none" && setup?.handler !== "none" ? `handler ${step.handler}` : ""
      ].filter((s) => s.length > 0)
      return `server: request ${method} (${thread}, ${id}${extra.length > 0 ? ", " + extra.join(", ") : ""})${splitText(step.split)}`
    }
    case "Resolve":
      return `server: serverRequest/resolved for request #${step.request}`
    case "Decide":
      return `person: ${step.decision} ${step.late ? "settled" : "open"} card #${step.card}`
    case "HandlerDecides":
      return `handler: ${step.outcome} for waiting card #${step.card}`
    case "Advance":
      return step.by !== null
        ? `time: +${step.by} ms`
        : `time: to timer #${step.nth}${step.offset === 0 ? "" : step.offset > 0 ? ` +${step.offset} ms` : ` ${step.offset} ms`}`
    case "Fault":
      return `fault: ${FaultText[step.fault] ?? step.fault}${step.fault === "exit" || step.fault === "exitNoDrain" ? ` (code ${step.code})` : ""}`
  }
}

const FaultText: Partial<Record<Fault, string>> = {
  closeStdout: "the peer closes its stdout and stays alive",
  cardSpanThrows: "arm the tracer: it throws when the next card starts waiting (on the read loop)",
  spanEndThrows: "arm the tracer: it throws when the next card's span ends (in its settlement)",
  deadlineSpanEndThrows:
    "arm the tracer: it throws when the next card settled by its deadline ends its span (in the deadline timer)"
}

export const describeSetup = (setup: Setup): string =>
  `setup: concurrency ${setup.concurrency}, handler ${setup.handler}, rules ${setup.rules ? "on" : "off"}${setup.trapSigterm ? ", peer traps SIGTERM" : ""}${
    setup.restarts ? ", restarts on (policy fail), tracer on" : ""
  }`

export const render = (schedule: Schedule): string =>
  [
    describeSetup(schedule.setup),
    ...schedule.steps.map((step, i) => `${String(i + 1).padStart(3)}. ${describeStep(step, schedule.setup)}`),
    "JSON: " + JSON.stringify(schedule)
  ].join("\n")

/** A schedule as FastCheck shows it in a counterexample: the readable transcript. */
export class Printable {
  constructor(readonly schedule: Schedule) {}
  [fc.toStringMethod](): string {
    return "\n" + render(this.schedule) + "\n"
  }
  toJSON(): Schedule {
    return this.schedule
  }
}

// ---------------------------------------------------------------------------------------------
// Generation

/** How often each kind of step is drawn (a family of properties leans on the invariants it targets). */
export interface Weights {
  readonly start: number
  readonly clientOps: number
  readonly reply: number
  readonly notify: number
  readonly complete: number
  readonly request: number
  readonly resolve: number
  readonly decide: number
  readonly handler: number
  readonly advance: number
  readonly fault: number
  readonly stopSupervisor: number
  /** Defect faults (stdout closed with the peer alive, a hostile tracer armed); defects family only. */
  readonly defect?: number
}

const pick = fc.nat({ max: 7 })
const split = fc.option(
  fc.double({ min: 0, max: 1, noNaN: true }).map((x) => Math.round(x * 100) / 100),
  { freq: 4, nil: null }
)

const faultArb: fc.Arbitrary<Fault> = fc.constantFrom<Fault>(
  "garbage",
  "oversized",
  "badUtf8",
  "nonObject",
  "truncated",
  "failNextWrite",
  "breakWrites",
  "stdoutError",
  "stdinError",
  "exit",
  "exitNoDrain",
  "stderr"
)

const defectFaultArb: fc.Arbitrary<Fault> = fc.constantFrom<Fault>(
  "closeStdout",
  "closeStdout",
  "cardSpanThrows",
  "cardSpanThrows",
  "spanEndThrows",
  "deadlineSpanEndThrows",
  "deadlineSpanEndThrows"
)

const handlerScriptArb = (defects: boolean): fc.Arbitrary<HandlerScript> =>
  defects
    ? fc.constantFrom<HandlerScript>(
        "wait",
        "wait",
        "undecided",
        "accept",
        "decline",
        "rich",
        "fail",
        "die",
        "throw",
        "number",
        "promise",
        "reject",
        "pending",
        "never",
        "stubborn",
        "stubborn",
        "stubbornSleep"
      )
    : fc.constantFrom<HandlerScript>(
        "wait",
        "wait",
        "wait",
        "wait",
        "undecided",
        "accept",
        "decline",
        "rich",
        "fail",
        "die"
      )

/** `defects`: handler scripts and faults of the defects family too. */
export const stepArb = (w: Weights, defects = false): fc.Arbitrary<Step> =>
  fc.oneof(
    {
      weight: w.start,
      arbitrary: fc.record({
        _tag: fc.constant("Start" as const),
        prompts: fc.integer({ min: 1, max: 3 }),
        resume: fc.constantFrom("no" as const, "no" as const, "no" as const, "finished" as const, "unknown" as const),
        pick
      })
    },
    {
      weight: w.clientOps,
      arbitrary: fc.oneof(
        fc.record({ _tag: fc.constant("Steer" as const), item: pick }),
        fc.record({ _tag: fc.constant("Interrupt" as const), item: pick }),
        fc.record({ _tag: fc.constant("StopItem" as const), item: pick })
      )
    },
    {
      weight: w.reply,
      arbitrary: fc.record({
        _tag: fc.constant("Reply" as const),
        request: pick,
        outcome: fc.constantFrom<ReplyOutcome>("ok", "ok", "ok", "ok", "ok", "ok", "error", "overloaded", "unusable"),
        packed: fc.integer({ min: 0, max: 3 }),
        split
      })
    },
    {
      weight: w.notify,
      arbitrary: fc.record({
        _tag: fc.constant("Notify" as const),
        thread: pick,
        kind: fc.constantFrom<NotifyKind>(
          "delta",
          "delta",
          "item",
          "command",
          "commandDone",
          "status",
          "usage",
          "error",
          "global",
          "orphan"
        ),
        split
      })
    },
    {
      weight: w.complete,
      arbitrary: fc.record({
        _tag: fc.constant("CompleteTurn" as const),
        thread: pick,
        status: fc.constantFrom<TurnStatus>(
          "completed",
          "completed",
          "completed",
          "interrupted",
          "failed",
          "inProgress",
          "weird"
        ),
        resolve: fc.boolean(),
        otherTurn: fc.constantFrom(false, false, false, true)
      })
    },
    {
      weight: w.request,
      arbitrary: fc.record({
        _tag: fc.constant("ServerRequest" as const),
        method: fc.oneof(
          { weight: 10, arbitrary: fc.nat({ max: 5 }) },
          { weight: 1, arbitrary: fc.integer({ min: 6, max: 10 }) }
        ),
        thread: fc.oneof(
          { weight: 12, arbitrary: pick },
          { weight: 1, arbitrary: fc.constantFrom("none" as const, "unknown" as const, "stale" as const) }
        ),
        id: fc.constantFrom(
          "fresh" as const,
          "fresh" as const,
          "fresh" as const,
          "fresh" as const,
          "reuseOpen" as const,
          "reuseSettled" as const
        ),
        pick,
        params: fc.oneof(
          { weight: 12, arbitrary: fc.constant("good" as const) },
          { weight: 1, arbitrary: fc.constantFrom("malformed" as const, "unsafe" as const) }
        ),
        command: fc.constantFrom("plain" as const, "plain" as const, "allowed" as const, "denied" as const),
        handler: handlerScriptArb(defects),
        split
      })
    },
    { weight: w.resolve, arbitrary: fc.record({ _tag: fc.constant("Resolve" as const), request: pick }) },
    {
      weight: w.decide,
      arbitrary: fc.record({
        _tag: fc.constant("Decide" as const),
        card: pick,
        late: fc.constantFrom(false, false, false, true),
        decision: fc.constantFrom<DecisionPick>("accept", "accept", "acceptForSession", "decline", "cancel", "rich")
      })
    },
    {
      weight: w.handler,
      arbitrary: fc.record({
        _tag: fc.constant("HandlerDecides" as const),
        card: pick,
        outcome: fc.constantFrom<HandlerOutcome>("accept", "accept", "decline", "rich", "fail", "die", "undecided")
      })
    },
    {
      weight: w.advance,
      arbitrary: fc.oneof(
        {
          weight: 3,
          arbitrary: fc.record({
            _tag: fc.constant("Advance" as const),
            nth: fc.nat({ max: 2 }),
            offset: fc.constantFrom(-1, 0, 0, 0, 1),
            by: fc.constant(null)
          })
        },
        {
          weight: 1,
          arbitrary: fc.record({
            _tag: fc.constant("Advance" as const),
            nth: fc.constant(0),
            offset: fc.constant(0),
            by: fc.constantFrom(1, 499, 500, 2_000, 5_000, 30_000, 60_000)
          })
        }
      )
    },
    {
      weight: w.fault,
      arbitrary: fc.record({ _tag: fc.constant("Fault" as const), fault: faultArb, code: fc.constantFrom(0, 1, 101) })
    },
    { weight: w.stopSupervisor, arbitrary: fc.constant({ _tag: "StopSupervisor" as const }) },
    {
      weight: defects ? (w.defect ?? 0) : 0,
      arbitrary: fc.record({ _tag: fc.constant("Fault" as const), fault: defectFaultArb, code: fc.constant(0) })
    }
  )

/** `scriptedHandler`: the percentage of schedules with a scripted handler; `restarts`: the defects family's setup. */
export const setupArb = (scriptedHandler: number, restarts = false): fc.Arbitrary<Setup> => {
  const base = fc.record({
    concurrency: fc.constantFrom(4, 4, 2, 1),
    handler: fc.oneof(
      { weight: 100 - scriptedHandler, arbitrary: fc.constant("none" as const) },
      { weight: scriptedHandler, arbitrary: fc.constant("scripted" as const) }
    ),
    rules: fc.boolean(),
    trapSigterm: restarts ? fc.constantFrom(false, true) : fc.constantFrom(false, false, false, true)
  })
  return restarts ? base.map((setup): Setup => ({ ...setup, restarts: true })) : base
}

/** Warm-up: `items` work items started, their threads and first turns answered (as steps, so they print and shrink). */
export const warmUp = (items: number): ReadonlyArray<Step> => {
  const steps: Array<Step> = []
  for (let i = 0; i < items; i++) steps.push({ _tag: "Start", prompts: 2 + (i % 2), resume: "no", pick: 0 })
  for (let i = 0; i < items; i++) steps.push({ _tag: "Reply", request: 0, outcome: "ok", packed: 1, split: null })
  for (let i = 0; i < items; i++) steps.push({ _tag: "Reply", request: 0, outcome: "ok", packed: 1, split: null })
  return steps
}

export const scheduleArb = (
  w: Weights,
  options: {
    readonly maxSteps: number
    readonly minWarm: number
    readonly maxWarm: number
    readonly scriptedHandler: number
    /** The defects family: restarts, the tracer, defect handler scripts and faults. */
    readonly defects?: boolean
  }
): fc.Arbitrary<Printable> =>
  fc
    .tuple(
      setupArb(options.scriptedHandler, options.defects ?? false),
      fc.integer({ min: options.minWarm, max: options.maxWarm }),
      fc.array(stepArb(w, options.defects ?? false), { minLength: 1, maxLength: options.maxSteps, size: "medium" })
    )
    .map(([setup, warm, steps]) => new Printable({ setup, steps: [...warmUp(warm), ...steps] }))
