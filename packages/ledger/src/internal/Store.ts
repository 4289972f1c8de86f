/**
 * What reaches the database, and how: every text and every JSON value goes through approvals'
 * `SecretMask` (the one place that decides what is secret) on its way in. Nothing else in the
 * package writes a string column without passing it through one of these.
 *
 * Identifiers (run, card, thread and turn ids, the embedder's work-item ids, request ids, method
 * names, outcome words) are keys, not texts: masking one could merge two rows, so they are stored
 * as they are, bounded. Warden's own ids and the server's ids are not secrets; an embedder that puts
 * a secret into a work-item id stores it (docs/ledger.md says so).
 */
import { SecretMask } from "@warden/approvals"

/** Longest identifier stored; longer ones are cut (they are ours or the server's, and short). */
export const MaxId = 512

/** Longest display text stored (titles, details, final messages); prompts are kept whole up to `SecretMask`'s cut. */
export const MaxShown = 4_000

/** A free text: masked (cut at SecretMask's 100 000 characters, ending with "…" when cut). */
export const text = (value: string): string => SecretMask.maskText(value)

/** A free text for display: masked and bounded to `max` characters. */
export const shown = (value: string, max: number = MaxShown): string => SecretMask.maskShown(value, max)

export const optionalText = (value: string | null | undefined): string | null =>
  value === null || value === undefined ? null : text(value)

export const optionalShown = (value: string | null | undefined, max: number = MaxShown): string | null =>
  value === null || value === undefined ? null : shown(value, max)

/**
 * A JSON value as text: every string and key masked, values under secret-looking keys masked
 * whole (`SecretMask.maskJson`); what JSON cannot carry (a BigInt, a cycle) is stored as `Mask`.
 */
export const json = (value: unknown): string => {
  try {
    return JSON.stringify(SecretMask.maskJson(value === undefined ? null : value)) ?? "null"
  } catch {
    return JSON.stringify(SecretMask.Mask)
  }
}

/** An identifier: kept as it is (see the module comment), bounded. */
export const id = (value: string | number): string => {
  const s = String(value)
  return s.length > MaxId ? s.slice(0, MaxId) : s
}

export const optionalId = (value: string | number | null | undefined): string | null =>
  value === null || value === undefined ? null : id(value)

/** The key a work item is stored under: its id as text (`1` and `"1"` are the same item). */
export const itemKey = (item: string | number | undefined): string => (item === undefined ? NoItem : id(item))

/** The key of events whose work item has no id. */
export const NoItem = "(none)"

/** A request id as stored: its JSON (so `1` and `"1"` stay apart). */
export const requestId = (value: string | number): string => id(JSON.stringify(value))

export const bool = (value: boolean): number => (value ? 1 : 0)

/** Read a JSON column back (the value was masked on the way in); unreadable text reads as null. */
export const parse = (value: unknown): unknown => {
  if (typeof value !== "string") return null
  try {
    return JSON.parse(value)
  } catch {
    return null
  }
}
