/**
 * How long a card waits for a decision before it refuses by itself (15 minutes by default,
 * configurable per supervisor and per method).
 */
import { Duration } from "effect"

/** Card deadlines, one for every method and overrides by server-request method. */
export interface DeadlineConfig {
  /** For every method without an override (default {@link DefaultCardDeadline}). */
  readonly default?: Duration.DurationInput
  /** By method name, e.g. `{ "mcpServer/elicitation/request": "30 seconds" }`. */
  readonly perMethod?: Readonly<Record<string, Duration.DurationInput>>
}

/** The deadline of a card when nothing is configured, 15 minutes. */
export const DefaultCardDeadline = Duration.minutes(15)

/**
 * The deadline of a card for `method`.
 *
 * Its `perMethod` entry, else `default`, else {@link DefaultCardDeadline}. Inputs are read with
 * `Duration.decode` (checked beforehand by the configuration's decoding; a value it rejects here
 * throws).
 */
export const forMethod = (config: DeadlineConfig | undefined, method: string): Duration.Duration => {
  const perMethod = config?.perMethod?.[method]
  if (perMethod !== undefined) return Duration.decode(perMethod)
  return config?.default !== undefined ? Duration.decode(config.default) : DefaultCardDeadline
}
