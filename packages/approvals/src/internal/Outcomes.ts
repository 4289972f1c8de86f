/**
 * How a card's ending is said: the outcome a decision gives (`accepted`, `declined`,
 * `cancelled`), and who decided as one word (`Card.describeSource`).
 */
import { Decision } from "@warden/protocol"
import type { Outcome, Source } from "../Card.js"

/** The outcome a written decision gives (an acceptance that says what the refusal says is turned into `declined` by the card). */
export const outcomeOf = (decision: Decision.Decision): Outcome => {
  switch (decision._tag) {
    case "Decline":
      return "declined"
    case "Cancel":
      return "cancelled"
    case "Elicitation":
      return decision.action === "accept" ? "accepted" : decision.action === "decline" ? "declined" : "cancelled"
    case "ApplyNetworkPolicyAmendment":
      return decision.action === "allow" ? "accepted" : "declined"
    default:
      return Decision.isAcceptance(decision) ? "accepted" : "declined"
  }
}

/** `Card.describeSource`: the source as one word for logs and the audit trail. */
export const describeSource = (source: Source): string => {
  switch (source._tag) {
    case "Rule":
      return `rule:${source.ruleId}`
    case "Remembered":
      return `remembered:${source.ruleId}`
    case "Handler":
      return "handler"
    case "Person":
      return "person"
    case "SafetyFilter":
      return "safety-filter"
    case "Malformed":
      return "malformed"
    case "UnknownMethod":
      return "unknown-method"
    case "NoThread":
      return "no-thread"
    case "Deadline":
      return "deadline"
    case "Withdrawn":
      return "withdrawn"
    case "ConnectionLost":
      return "connection-lost"
    case "ThreadStopped":
      return "thread-stopped"
    case "TurnEnded":
      return "turn-ended"
    case "Shutdown":
      return "shutdown"
  }
}
