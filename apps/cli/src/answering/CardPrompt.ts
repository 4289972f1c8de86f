/**
 * The approval prompt for one card, an @effect/cli `Prompt.custom`: accept once, accept for the
 * session (only where the card offers it), always (only with the ledger, and only for a card a
 * remembered rule can be scoped to: the label names the scope), decline, or show the details (full
 * command, diff, permissions, MCP inputs) and ask again. Keys: `a`, `s`, `r`, `d`, `v`; or ←/→
 * (↑/↓, Tab) to move and Enter to choose.
 */
import { Prompt } from "@effect/cli"
import type { Card } from "@warden/approvals"
import { CardText } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import type * as Terminal from "@effect/platform/Terminal"
import { Data, Effect, Either } from "effect"
import * as RunState from "@warden/inbox/RunState"

/**
 * "always" on the prompt (the ledger's, from StateLedger.ts): `scopeOf` says what would be
 * remembered for a card (one line) or why nothing can be; `remember` stores it (Left: why not).
 */
export interface Always {
  readonly scopeOf: (card: Card.CardView) => Either.Either<string, string>
  readonly remember: (
    card: Card.CardView
  ) => Effect.Effect<Either.Either<{ readonly id: string; readonly describe: string }, string>>
}

export type Choice =
  | { readonly _tag: "Decide"; readonly key: string; readonly label: string; readonly decision: Decision.Decision }
  | { readonly _tag: "Always"; readonly key: string; readonly label: string }
  /** Accept every open card of this card's group (cards asking the same thing). */
  | { readonly _tag: "DecideGroup"; readonly key: string; readonly label: string; readonly decision: Decision.Decision }
  | { readonly _tag: "Details"; readonly key: string; readonly label: string }

/** What the prompt answers: a decision, or "always" (remember, then accept). */
export type Answer =
  | { readonly _tag: "Decide"; readonly decision: Decision.Decision }
  | { readonly _tag: "DecideGroup"; readonly decision: Decision.Decision }
  | { readonly _tag: "Always" }

/**
 * The prompt's choices for `card`. `groupSize`: how many open cards (this one included) ask the
 * same thing; above 1 the prompt offers `[g] accept all N`.
 */
export const choicesFor = (card: Card.CardView, always?: Always, groupSize = 1): ReadonlyArray<Choice> => {
  // "always" accepts: offered only where the card can be accepted and a scope can be derived.
  const scope = always !== undefined && card.offers.includes("Accept") ? always.scopeOf(card) : undefined
  return [
    ...(card.offers.includes("Accept")
      ? [{ _tag: "Decide", key: "a", label: "accept once", decision: Decision.Accept } as const]
      : []),
    ...(card.offers.includes("Accept") && groupSize > 1
      ? [{ _tag: "DecideGroup", key: "g", label: `accept all ${groupSize}`, decision: Decision.Accept } as const]
      : []),
    ...(card.offers.includes("AcceptForSession")
      ? [{ _tag: "Decide", key: "s", label: "accept for session", decision: Decision.AcceptForSession } as const]
      : []),
    ...(scope !== undefined && Either.isRight(scope)
      ? [{ _tag: "Always", key: "r", label: `always: ${CardText.escapeControls(scope.right)}` } as const]
      : []),
    { _tag: "Decide", key: "d", label: "decline", decision: Decision.Decline },
    { _tag: "Details", key: "v", label: "details" }
  ]
}

interface State {
  readonly selected: number
  readonly details: boolean
}

const Action = Data.taggedEnum<Prompt.Prompt.ActionDefinition>()

const inverse = (s: string) => `\u001b[7m${s}\u001b[27m`
const bold = (s: string) => `\u001b[1m${s}\u001b[22m`

/** The frame's lines (without a trailing newline). */
export const frame = (
  card: Card.CardView,
  choices: ReadonlyArray<Choice>,
  state: State,
  chosen?: string
): ReadonlyArray<string> => {
  const item = RunState.itemIndexOf(card.workItem)
  const head = bold(`── card ${card.id} · item ${item ?? "?"} · ${CardText.kindLabel(card)} ──`)
  const lines = [head, `  ${CardText.escapeControls(card.title)}`]
  if (state.details) lines.push(...CardText.details(card).map((l) => `  │ ${l}`))
  if (chosen !== undefined) {
    lines.push(`  → ${chosen}`)
    return lines
  }
  const menu = choices.map((c, i) => {
    const label = `[${c.key}] ${c._tag === "Details" && state.details ? "hide details" : c.label}`
    return i === state.selected ? inverse(label) : label
  })
  lines.push(`  ${menu.join("   ")}`, `  ${choices.map((c) => c.key).join("/")}, or ←/→ and Enter`)
  return lines
}

/** Ask about `card`; the prompt's output is the answer. */
export const make = (card: Card.CardView, always?: Always, groupSize = 1): Prompt.Prompt<Answer> => {
  const choices = choicesFor(card, always, groupSize)
  const decide = (state: State, index: number): Prompt.Prompt.Action<State, Answer> => {
    const choice = choices[index]!
    switch (choice._tag) {
      case "Details":
        return Action.NextFrame({ state: { selected: index, details: !state.details } })
      case "Always":
        return Action.Submit({ value: { _tag: "Always" } })
      case "Decide":
        return Action.Submit({ value: { _tag: "Decide", decision: choice.decision } })
      case "DecideGroup":
        return Action.Submit({ value: { _tag: "DecideGroup", decision: choice.decision } })
    }
  }
  const process = (input: Terminal.UserInput, state: State): Prompt.Prompt.Action<State, Answer> => {
    const key = input.key.name
    switch (key) {
      case "left":
      case "up":
        return Action.NextFrame({
          state: { ...state, selected: (state.selected + choices.length - 1) % choices.length }
        })
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
  return Prompt.custom<State, Answer>(
    { selected: 0, details: false },
    {
      render: (state, action) =>
        Effect.succeed(
          frame(
            card,
            choices,
            state,
            action._tag === "Submit"
              ? action.value._tag === "Always"
                ? "always"
                : action.value._tag === "DecideGroup"
                  ? `${Decision.describe(action.value.decision)} (all ${groupSize})`
                  : Decision.describe(action.value.decision)
              : undefined
          ).join("\n")
        ),
      process: (input, state) => Effect.succeed(process(input, state)),
      clear: () => Effect.succeed("")
    }
  )
}
