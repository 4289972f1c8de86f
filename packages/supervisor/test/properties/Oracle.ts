/**
 * What the wire may carry, per method: the answer each decision must produce, which answers are
 * acceptances, and which are refusals. Written from the protocol facts
 * (/work/shared/reference/codex-app-server-protocol.md), not from the encoder under test.
 */
import { Decision } from "@warden/protocol"
import type { DecisionPick, HandlerOutcome, HandlerScript } from "./Schedule.js"

type Frame = { readonly [key: string]: unknown }

const record = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined

const resultOf = (frame: Frame) => record(frame["result"])
const errorOf = (frame: Frame) => record(frame["error"])
const isEmptyObject = (value: unknown) => {
  const r = record(value)
  return r !== undefined && Object.keys(r).length === 0
}
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/** An allowed final outcome for one server request: a particular answer, or nothing on the wire. */
export type Outcome =
  | {
      readonly _tag: "Answer"
      readonly label: string
      readonly accepting: boolean
      readonly matches: (frame: Frame) => boolean
    }
  | { readonly _tag: "Nothing"; readonly label: string }

export const nothing = (label: string): Outcome => ({ _tag: "Nothing", label })

const answer = (label: string, accepting: boolean, matches: (frame: Frame) => boolean): Outcome => ({
  _tag: "Answer",
  label,
  accepting,
  matches
})

const word = (key: string, value: string, accepting: boolean) =>
  answer(`{${key}:"${value}"}`, accepting, (f) => resultOf(f)?.[key] === value)

const Command = "item/commandExecution/requestApproval"
const FileChange = "item/fileChange/requestApproval"
const Permissions = "item/permissions/requestApproval"
const Elicitation = "mcpServer/elicitation/request"
const UserInput = "item/tool/requestUserInput"
const ToolCall = "item/tool/call"
const ErrorOnly = ["account/chatgptAuthTokens/refresh", "attestation/generate"]
const Legacy = ["applyPatchApproval", "execCommandApproval"]

export const isKnownMethod = (method: string) =>
  [Command, FileChange, Permissions, Elicitation, UserInput, ToolCall, ...ErrorOnly, ...Legacy].includes(method)

/** Methods whose requests carry a thread (the rest can never name a thread we run). */
export const carriesThread = (method: string) =>
  [Command, FileChange, Permissions, Elicitation, UserInput, ToolCall].includes(method)

/** The refusal that keeps the turn going, per method (unknown methods: the -32601 error frame). */
export const refusal = (method: string): Outcome => {
  switch (method) {
    case Command:
    case FileChange:
      return word("decision", "decline", false)
    case Permissions:
      return answer(
        "{permissions:{}}",
        false,
        (f) => isEmptyObject(resultOf(f)?.["permissions"]) && resultOf(f)?.["scope"] === "turn"
      )
    case Elicitation:
      return word("action", "decline", false)
    case UserInput:
      return answer("{answers:{}}", false, (f) => isEmptyObject(resultOf(f)?.["answers"]))
    case ToolCall:
      return answer("{contentItems:[],success:false}", false, (f) =>
        same(resultOf(f), { contentItems: [], success: false })
      )
    default:
      if (ErrorOnly.includes(method))
        return answer("error frame", false, (f) => typeof errorOf(f)?.["code"] === "number")
      if (Legacy.includes(method)) {
        return answer("{decision:denied}", false, (f) => {
          const d = resultOf(f)?.["decision"]
          return d === "denied" || record(d)?.["denied"] !== undefined
        })
      }
      return answer("error -32601", false, (f) => errorOf(f)?.["code"] === -32601)
  }
}

/** Params the generator gives each method (see World.paramsFor): what an acceptance echoes. */
export const Amendment = ["echo", "hi"]
export const AskedWrite = "/tmp/ws/out"

const grant = (scope: "turn" | "session") =>
  answer(`{permissions:<asked>, scope:"${scope}"}`, true, (f) => {
    const r = resultOf(f)
    return (
      r?.["scope"] === scope &&
      record(r["permissions"]) !== undefined &&
      !isEmptyObject(r["permissions"]) &&
      JSON.stringify(r["permissions"]).includes(AskedWrite)
    )
  })

/** The answer a decision must produce on a card of `method` (a decision the method cannot express is refused). */
export const expectedFor = (method: string, decision: DecisionPick): Outcome => {
  switch (method) {
    case Command:
      switch (decision) {
        case "accept":
          return word("decision", "accept", true)
        case "acceptForSession":
          return word("decision", "acceptForSession", true)
        case "decline":
          return word("decision", "decline", false)
        case "cancel":
          return word("decision", "cancel", false)
        case "rich":
          return answer("{decision:{acceptWithExecpolicyAmendment}}", true, (f) =>
            same(record(resultOf(f)?.["decision"])?.["acceptWithExecpolicyAmendment"], {
              execpolicy_amendment: Amendment
            })
          )
      }
      break
    case FileChange:
      switch (decision) {
        case "accept":
        case "rich":
          return word("decision", "accept", true)
        case "acceptForSession":
          return word("decision", "acceptForSession", true)
        case "decline":
          return word("decision", "decline", false)
        case "cancel":
          return word("decision", "cancel", false)
      }
      break
    case Permissions:
      switch (decision) {
        case "accept":
        case "rich":
          return grant("turn")
        case "acceptForSession":
          return grant("session")
        default:
          return refusal(method)
      }
    case Elicitation:
      switch (decision) {
        case "accept":
        case "rich":
          return word("action", "accept", true)
        case "cancel":
          return word("action", "cancel", false)
        default:
          return refusal(method)
      }
    case UserInput:
      return decision === "rich"
        ? answer("{answers:{q1:[main]}}", true, (f) => same(resultOf(f)?.["answers"], { q1: { answers: ["main"] } }))
        : refusal(method)
    case ToolCall:
      return decision === "rich"
        ? answer("{contentItems:[ok],success:true}", true, (f) =>
            same(resultOf(f), { contentItems: [{ type: "inputText", text: "ok" }], success: true })
          )
        : refusal(method)
  }
  return refusal(method)
}

export const expectedForHandler = (method: string, outcome: HandlerOutcome): Outcome | undefined => {
  switch (outcome) {
    case "accept":
    case "decline":
    case "rich":
      return expectedFor(method, outcome)
    case "fail":
    case "die":
      return refusal(method)
    case "undecided":
      return undefined
  }
}

/**
 * What a scripted handler settles its card with, as soon as it runs (in the step the request
 * arrives): undefined while it has not decided (it waits, has no opinion, never returns, or is
 * stuck in an uninterruptible region). A handler that throws, returns something that is neither
 * an Effect nor a Promise, fails, dies or rejects refuses its card; a Promise decides as an Effect.
 */
export const expectedForScript = (method: string, script: HandlerScript): Outcome | undefined => {
  switch (script) {
    case "accept":
    case "decline":
    case "rich":
    case "fail":
    case "die":
      return expectedForHandler(method, script)
    case "throw":
    case "number":
    case "reject":
      return refusal(method)
    case "promise":
      return expectedFor(method, "rich")
    default:
      return undefined
  }
}

const AllPicks: ReadonlyArray<DecisionPick> = ["accept", "acceptForSession", "decline", "cancel", "rich"]

/** Is `frame` an answer this method can carry at all (a refusal or some decision's encoding)? */
export const inVocabulary = (method: string, frame: Frame): boolean =>
  matchesOutcome(refusal(method), frame) || AllPicks.some((d) => matchesOutcome(expectedFor(method, d), frame))

/** Does `frame` grant anything? */
export const isAcceptance = (method: string, frame: Frame): boolean =>
  AllPicks.some((d) => {
    const o = expectedFor(method, d)
    return o._tag === "Answer" && o.accepting && o.matches(frame)
  })

export const matchesOutcome = (outcome: Outcome, frame: Frame): boolean =>
  outcome._tag === "Answer" && outcome.matches(frame)

/** The Decision a person or handler gives for a pick, given the params the generator used. */
export const decisionFor = (method: string, pick: DecisionPick): Decision.Decision => {
  switch (pick) {
    case "accept":
      return Decision.Accept
    case "acceptForSession":
      return Decision.AcceptForSession
    case "decline":
      return Decision.Decline
    case "cancel":
      return Decision.Cancel
    case "rich":
      switch (method) {
        case Command:
          return { _tag: "AcceptWithExecpolicyAmendment", amendment: Amendment }
        case Permissions:
          return { _tag: "Grant", permissions: { fileSystem: { write: [AskedWrite] } }, scope: "turn" }
        case Elicitation:
          return { _tag: "Elicitation", action: "accept" }
        case UserInput:
          return { _tag: "Answers", answers: { q1: ["main"] } }
        case ToolCall:
          return { _tag: "ToolResult", contentItems: [{ type: "inputText", text: "ok" }], success: true }
        default:
          return Decision.Accept
      }
  }
}
