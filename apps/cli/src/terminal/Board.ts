/**
 * The human view of a run, on stderr: a log line for everything that happens (an item starts, a
 * card opens or settles, a turn completes, the connection is lost), and, when stderr is a
 * terminal, a live board below the log: one row per work item (status, tokens, elapsed, current
 * activity), one line per open card with a countdown to its deadline, and the approval prompt of
 * the card being asked about. Redrawn on every change and once a second for the clocks.
 */
import type { ApprovalEvent, Card } from "@warden/approvals"
import { Card as CardNs, CardGroup, CardText, SecretMask } from "@warden/approvals"
import type { Supervisor } from "@warden/supervisor"
import { Effect, Schedule } from "effect"
import type { Scope } from "effect"
import * as Durations from "../contract/Durations.js"
import type { Screen } from "./Screen.js"
import * as RunState from "@warden/inbox/RunState"
import { Json } from "@warden/protocol"

export interface Board {
  readonly onSupervisorEvent: (event: Supervisor.SupervisorEvent) => void
  readonly onApprovalEvent: (event: ApprovalEvent.ApprovalEvent) => void
  /** The prompt frame shown under the open cards (undefined: none). */
  readonly setPrompt: (lines: ReadonlyArray<string> | undefined) => void
  /** A line in the log above the board. */
  readonly log: (line: string) => void
  readonly redraw: () => void
  /** Draw the final state once more and stop redrawing. */
  readonly finish: () => void
}

export const tokens = (n: number | undefined): string =>
  n === undefined
    ? "-"
    : n < 1_000
      ? String(n)
      : n < 1_000_000
        ? `${(n / 1_000).toFixed(1)}k`
        : `${(n / 1_000_000).toFixed(1)}M`

/** Server text on one line: whitespace runs (newlines, carriage returns) as one space, controls escaped. */
const oneLine = (text: string, max = 80): string => {
  const flat = CardText.escapeControls(text.replace(/\s+/g, " ").trim())
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

const record = Json.asRecord

/** A log line for the items worth telling a person about: commands, file changes, tool calls. */
export const completedItemLine = (params: unknown): string | undefined => {
  const item = record(record(params)?.["item"])
  if (!item) return undefined
  const status = typeof item["status"] === "string" ? item["status"] : "done"
  switch (item["type"]) {
    case "commandExecution": {
      const output = typeof item["aggregatedOutput"] === "string" ? oneLine(item["aggregatedOutput"], 120) : ""
      const exit = typeof item["exitCode"] === "number" ? ` (exit ${item["exitCode"]})` : ""
      return `command ${status}${exit}: ${oneLine(String(item["command"] ?? ""), 80)}${output ? ` → ${output}` : ""}`
    }
    case "fileChange": {
      const changes = Array.isArray(item["changes"]) ? item["changes"] : []
      const paths = changes.map((c) => record(c)?.["path"]).filter((p): p is string => typeof p === "string")
      return `file change ${status}: ${paths.join(", ") || "(no paths)"}`
    }
    case "mcpToolCall": {
      const error = record(item["error"])?.["message"]
      return `mcp ${String(item["server"] ?? "?")}.${String(item["tool"] ?? "?")} ${status}${typeof error === "string" ? `: ${oneLine(error, 120)}` : ""}`
    }
    default:
      return undefined
  }
}

const pad = (text: string, width: number) => (text.length >= width ? text : text + " ".repeat(width - text.length))
const padLeft = (text: string, width: number) => (text.length >= width ? text : " ".repeat(width - text.length) + text)

const bold = (s: string) => `\u001b[1m${s}\u001b[22m`
const dim = (s: string) => `\u001b[2m${s}\u001b[22m`

export const make = (
  screen: Screen,
  tally: RunState.RunState,
  options: { readonly title: string; readonly now?: () => number }
): Effect.Effect<Board, never, Scope.Scope> =>
  Effect.gen(function* () {
    const now = options.now ?? (() => Date.now())
    let prompt: ReadonlyArray<string> | undefined
    let finished = false

    const elapsed = (item: RunState.ItemState) =>
      item.startedAt === undefined ? "-" : Durations.clock((item.finishedAt ?? now()) - item.startedAt)

    const regionLines = (): ReadonlyArray<string> => {
      const t = now()
      const running = tally.items.filter((i) => i.status === "running").length
      const done = tally.items.filter((i) => i.status !== "running" && i.status !== "queued").length
      const connection =
        tally.connection._tag === "Ready"
          ? (tally.connection.userAgent.split(" ")[0] ?? "ready")
          : tally.connection._tag === "Starting"
            ? "starting app-server"
            : tally.connection._tag === "Restarting"
              ? `app-server restarting (attempt ${tally.connection.attempt})`
              : "app-server lost"
      const lines: Array<string> = [
        bold(
          `${options.title} · ${connection} · ${tally.items.length} items: ${running} running${tally.admission !== undefined && tally.admission.limit < tally.admission.max ? ` (admission ${tally.admission.limit} of ${tally.admission.max})` : ""}, ${done} done · ${tally.openCards.size} open cards · ${Durations.clock(t - tally.startedAt)}`
        ),
        dim(` #  ${pad("STATUS", 16)}${padLeft("TOKENS", 7)}  ${padLeft("ELAPSED", 7)}  ACTIVITY`)
      ]
      for (const item of tally.items) {
        lines.push(
          `${padLeft(String(item.index), 2)}  ${pad(item.status, 16)}${padLeft(tokens(item.tokens), 7)}  ${padLeft(elapsed(item), 7)}  ${oneLine(item.activity, 200)}`
        )
      }
      if (tally.openCards.size > 0) {
        lines.push(dim(`open cards (${tally.openCards.size}), oldest first:`))
        // Cards asking the same thing (CardGroup) share one line, at the place of the oldest.
        const groups = new Map<string, Array<Card.CardView>>()
        for (const card of tally.openCards.values()) {
          const group = CardGroup.groupOf(card)
          if (group !== undefined) groups.set(group, [...(groups.get(group) ?? []), card])
        }
        for (const card of tally.openCards.values()) {
          const group = CardGroup.groupOf(card)
          const members = group === undefined ? [card] : groups.get(group)!
          if (members[0] !== card) continue
          const closes = Durations.clock(Math.min(...members.map((m) => m.deadlineAt)) - t)
          if (members.length === 1) {
            const item = RunState.itemIndexOf(card.workItem)
            lines.push(
              ` ${pad(card.id, 4)} item ${item ?? "?"}  ${pad(CardText.kindLabel(card), 12)} closes in ${padLeft(closes, 5)}  ${oneLine(card.title, 200)}`
            )
          } else {
            const items = members.map((m) => RunState.itemIndexOf(m.workItem) ?? "?").join(", ")
            lines.push(
              ` ${pad(card.id, 4)} ${members.length} items ${pad(CardText.kindLabel(card), 12)} closes in ${padLeft(closes, 5)}  ${oneLine(card.title, 160)} — ${members.length} items (${oneLine(items, 60)})`
            )
          }
        }
      }
      if (prompt) lines.push(...prompt)
      return lines
    }

    // Without a live region (stderr is not a terminal) nothing is drawn, so nothing is worked
    // out: the region's lines are one per item, and a fleet redraws at every event.
    const redraw = () => {
      if (!finished && screen.live) screen.region(regionLines())
    }

    // Log lines carry server text (messages, stderr tails): masked, and each line with its controls escaped.
    const log = (text: string) => {
      for (const line of SecretMask.maskText(text).split("\n")) screen.err(CardText.escapeControls(line))
    }

    const itemTag = (id: string | number | undefined) => `[${RunState.itemIndexOf(id) ?? "?"}]`

    const onSupervisorEvent = (event: Supervisor.SupervisorEvent) => {
      switch (event._tag) {
        case "ConnectionReady":
          log(`warden: app-server ready: ${event.init.userAgent} (CODEX_HOME ${event.init.codexHome})`)
          break
        case "ConnectionLost":
          log(`warden: app-server connection lost: ${event.message}`)
          break
        case "ConnectionFailed":
          log(`warden: the app-server could not be started: ${event.message}`)
          break
        case "ConnectionRestarting":
          log(`warden: restarting the app-server in ${Durations.short(event.delayMs)} (attempt ${event.attempt})`)
          break
        case "AdmissionChanged":
          log(
            event.reason === "recovered"
              ? `warden: admission back up to ${event.limit} of ${event.max} running items (no pressure for a while)`
              : `warden: admission lowered to ${event.limit} of ${event.max} running items: ${oneLine(event.reason, 160)}`
          )
          break
        case "ConnectionGaveUp":
          log(`warden: giving up on the app-server: ${event.detail}`)
          break
        case "ItemFinished": {
          const outcome = RunState.outcomeOf(event.exit)
          const message = outcome.finalMessage !== undefined ? `: ${oneLine(outcome.finalMessage, 160)}` : ""
          const error =
            outcome.error !== undefined && outcome.status !== "completed" ? `: ${oneLine(outcome.error, 300)}` : ""
          log(`${itemTag(event.item)} ${outcome.status}${message}${error}`)
          break
        }
        case "Work": {
          const work = event.event
          switch (work._tag) {
            case "WorktreeReady":
              log(
                `${itemTag(work.item)} works in ${work.path} on branch ${work.branch}${work.reused ? " (left by an earlier run, taken up)" : ""}`
              )
              break
            case "WorktreeFinished": {
              const w = work.worktree
              log(
                w.error !== undefined
                  ? `${itemTag(work.item)} worktree ${w.path} kept as it was: ${oneLine(w.error, 200)}`
                  : w.changed
                    ? `${itemTag(work.item)} changed ${w.files} file${w.files === 1 ? "" : "s"} (+${w.insertions} -${w.deletions}) on branch ${w.branch}; worktree kept at ${w.path}`
                    : w.kept
                      ? `${itemTag(work.item)} changed nothing; worktree kept at ${w.path} (branch ${w.branch})`
                      : `${itemTag(work.item)} changed nothing; worktree and branch ${w.branch} removed`
              )
              break
            }
            case "ThreadStartedFresh":
              log(
                `${itemTag(work.item)}: codex never saved thread ${work.missingThreadId}; starting a new thread (it does not know the old one's turns)`
              )
              break
            case "ThreadReady":
              if (work.resumed) {
                log(
                  `${itemTag(work.item)} resumed thread ${work.threadId} on a new app-server; the interrupted turn runs again`
                )
              } else {
                const index = RunState.itemIndexOf(work.item)
                const text = index === null ? "" : (tally.items[index]?.prompt ?? "")
                log(`${itemTag(work.item)} started on thread ${work.threadId}: ${oneLine(text, 100)}`)
              }
              break
            case "TurnCompleted":
              log(
                `${itemTag(work.item)} turn ${work.turn.status}${work.turn.error ? `: ${oneLine(work.turn.error.message, 200)}` : ""}`
              )
              break
            case "Stalled":
              log(`${itemTag(work.item)} stalled: no event for too long; interrupting the turn`)
              break
            case "Notification":
              if (work.method === "item/completed") {
                const line = completedItemLine(work.params)
                if (line !== undefined) log(`${itemTag(work.item)} ${line}`)
              }
              break
            default:
              break
          }
          break
        }
      }
      redraw()
    }

    const onApprovalEvent = (event: ApprovalEvent.ApprovalEvent) => {
      switch (event._tag) {
        case "CardOpened": {
          const card = event.card
          log(
            `${itemTag(card.workItem)} card ${card.id} opened (${CardText.kindLabel(card)}): ${oneLine(card.title, 160)}`
          )
          break
        }
        case "CardSettled": {
          const s = event.settlement
          const source = CardNs.describeSource(s.source)
          const by = source === s.outcome ? "" : ` by ${source}`
          log(
            `${itemTag(s.card.workItem)} card ${s.card.id} ${s.outcome}${by}${s.detail ? ` (${oneLine(s.detail, 160)})` : ""}`
          )
          break
        }
        case "LateDecision":
          log(
            `${itemTag(event.card.workItem)} card ${event.card.id}: a late ${event.decision} was dropped (already ${event.outcome})`
          )
          break
      }
      redraw()
    }

    if (screen.live) {
      yield* Effect.sync(redraw).pipe(
        Effect.repeat(Schedule.spaced("1 second")),
        Effect.interruptible,
        Effect.forkScoped
      )
    }

    return {
      onSupervisorEvent,
      onApprovalEvent,
      setPrompt: (lines) => {
        // Without a live board (stderr is not a terminal) the prompt is printed as it changes.
        if (!screen.live && lines !== undefined && lines.join("\n") !== prompt?.join("\n"))
          for (const line of lines) log(line)
        prompt = lines
        redraw()
      },
      log,
      redraw,
      finish: () => {
        prompt = undefined
        redraw()
        finished = true
        screen.release()
      }
    }
  })
