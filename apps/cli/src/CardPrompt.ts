/**
 * The approval prompt for one card, an @effect/cli `Prompt.custom`: accept once, accept for the
 * session (only where the card offers it), decline, or show the details (full command, diff,
 * permissions, MCP inputs) and ask again. Keys: `a`, `s`, `d`, `v`; or ←/→ (↑/↓, Tab) to move and
 * Enter to choose.
 */
import { Prompt } from "@effect/cli"
import type { Card } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import type * as Terminal from "@effect/platform/Terminal"
import { Data, Effect } from "effect"
import * as CardText from "./CardText.js"
import { escapeControls } from "./TerminalText.js"
import * as Tally from "./Tally.js"

export type Choice =
  | { readonly _tag: "Decide"; readonly key: string; readonly label: string; readonly decision: Decision.Decision }
  | { readonly _tag: "Details"; readonly key: string; readonly label: string }

export const choicesFor = (card: Card.CardView): ReadonlyArray<Choice> => [
  ...(card.offers.includes("Accept") ? [{ _tag: "Decide", key: "a", label: "accept once", decision: Decision.Accept } as const] : []),
  ...(card.offers.includes("AcceptForSession")
    ? [{ _tag: "Decide", key: "s", label: "accept for session", decision: Decision.AcceptForSession } as const]
    : []),
  { _tag: "Decide", key: "d", label: "decline", decision: Decision.Decline },
  { _tag: "Details", key: "v", label: "details" }
]

interface State {
  readonly selected: number
  readonly details: boolean
}

const Action = Data.taggedEnum<Prompt.Prompt.ActionDefinition>()

const inverse = (s: string) => `\u001b[7m${s}\u001b[27m`
const bold = (s: string) => `\u001b[1m${s}\u001b[22m`

/** The frame's lines (without a trailing newline). */
export const frame = (card: Card.CardView, choices: ReadonlyArray<Choice>, state: State, chosen?: string): ReadonlyArray<string> => {
  const item = Tally.itemIndexOf(card.workItem)
  const head = bold(`── card ${card.id} · item ${item ?? "?"} · ${CardText.kindLabel(card)} ──`)
  const lines = [head, `  ${escapeControls(card.title)}`]
  if (state.details) lines.push(...CardText.details(card).map((l) => `  │ ${l}`))
  if (chosen !== undefined) {
    lines.push(`  → ${chosen}`)
    return lines
  }
  const menu = choices.map((c, i) => {
    const label = `[${c.key}] ${c._tag === "Details" && state.details ? "hide details" : c.label}`
    return i === state.selected ? inverse(label) : label
  })
  lines.push(`  ${menu.join("   ")}`, "  a/s/d/v, or ←/→ and Enter")
  return lines
}

/** Ask about `card`; the prompt's output is the decision. */
export const make = (card: Card.CardView): Prompt.Prompt<Decision.Decision> => {
  const choices = choicesFor(card)
  const decide = (state: State, index: number): Prompt.Prompt.Action<State, Decision.Decision> => {
    const choice = choices[index]!
    return choice._tag === "Details"
      ? Action.NextFrame({ state: { selected: index, details: !state.details } })
      : Action.Submit({ value: choice.decision })
  }
  const process = (input: Terminal.UserInput, state: State): Prompt.Prompt.Action<State, Decision.Decision> => {
    const key = input.key.name
    switch (key) {
      case "left":
      case "up":
        return Action.NextFrame({ state: { ...state, selected: (state.selected + choices.length - 1) % choices.length } })
      case "right":
      case "down":
      case "tab":
        return Action.NextFrame({ state: { ...state, selected: (state.selected + 1) % choices.length } })
      case "return":
      case "enter":
        return decide(state, state.selected)
      default: {
        const index = choices.findIndex((c) => c.key === key && !input.key.ctrl && !input.key.meta)
        return index >= 0 ? decide(state, index) : Action.Beep()
      }
    }
  }
  return Prompt.custom<State, Decision.Decision>({ selected: 0, details: false }, {
    render: (state, action) =>
      Effect.succeed(
        frame(card, choices, state, action._tag === "Submit" ? Decision.describe(action.value) : undefined).join("\n")
      ),
    process: (input, state) => Effect.succeed(process(input, state)),
    clear: () => Effect.succeed("")
  })
}
