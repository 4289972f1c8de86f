/**
 * `--approvals prompt|deny|rules|stdin`: who decides the cards that no policy rule decided.
 * Rules (`--rules FILE`) are applied first in every mode, by the approvals engine.
 *
 * - `prompt`: a person on this terminal (needs stdin to be a terminal);
 * - `deny`: every card is declined at once (outcome `declined`, decided by `handler`);
 * - `rules`: what no rule decides is refused (outcome `refused`);
 * - `stdin`: JSON decision lines on standard input;
 * - `inbox`: only the web inbox (`--inbox`), or each card's deadline.
 *
 * The web inbox (`--inbox`) answers beside `prompt` and `stdin` too: the first answer wins.
 */
import type { Approvals } from "@warden/approvals"
import { Decision } from "@warden/protocol"
import { Data, Effect } from "effect"
import type { Answering } from "../commands/SupervisedRun.js"

export type Mode = "prompt" | "deny" | "rules" | "stdin" | "inbox"

/** The handler's failure in `rules` mode: the card is refused, and the detail says why. */
export class NoRuleDecided extends Data.TaggedError("NoRuleDecided")<{}> {
  override get message() {
    return "no rule decides this card (--approvals rules refuses what the rules leave open)"
  }
}

export const defaultMode = (stdinIsTerminal: boolean, inbox = false): Mode =>
  stdinIsTerminal ? "prompt" : inbox ? "inbox" : "deny"

export const handlerFor = (mode: Mode): Approvals.Handler | undefined => {
  switch (mode) {
    case "deny":
      return () => Effect.succeed(Decision.Decline)
    case "rules":
      return () => Effect.fail(new NoRuleDecided())
    case "prompt":
    case "stdin":
    case "inbox":
      return undefined
  }
}

export const answeringFor = (mode: Mode): Answering =>
  mode === "prompt" ? "prompt" : mode === "stdin" ? "stdin" : "none"
