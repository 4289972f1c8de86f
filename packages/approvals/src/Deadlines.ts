/**
 * How long a card waits for a decision before it refuses by itself: 15 minutes by default,
 * configurable per supervisor and per method.
 */
import { Duration } from "effect"

export interface DeadlineConfig {
  readonly default?: Duration.DurationInput
  readonly perMethod?: Readonly<Record<string, Duration.DurationInput>>
}

export const DefaultCardDeadline = Duration.minutes(15)

export const forMethod = (config: DeadlineConfig | undefined, method: string): Duration.Duration => {
  const perMethod = config?.perMethod?.[method]
  if (perMethod !== undefined) return Duration.decode(perMethod)
  return config?.default !== undefined ? Duration.decode(config.default) : DefaultCardDeadline
}
