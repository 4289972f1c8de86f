/**
 * The deadlines of one desk's waiting cards, kept by ONE fiber asleep until the next deadline.
 *
 * That is instead of a sleeping fiber (and a timer) per card: a desk with 10,000 open cards holds no
 * fiber for them, and settling them (a connection loss) has nothing to interrupt.
 *
 * Entries are kept in one insertion-ordered set per deadline length. Within a set, an entry added
 * later is due later (the clock is monotonic), so the next deadline is the first entry of one of
 * the sets (there are as many sets as configured deadline lengths: a handful). Adding and removing
 * are O(1). Time is the Clock's nanoseconds (`unsafeCurrentTimeNanos`: monotonic; the TestClock in
 * tests), and the fiber sleeps with `Effect.sleep`, so the TestClock decides when deadlines pass.
 *
 * The fiber is started when an entry is due earlier than anything the timer is asleep for (a
 * newer fiber replaces the older one, which is interrupted; a generation number makes a late
 * waker of a replaced fiber harmless), and it ends when it wakes and no entry is left (not when
 * the last entry is removed: the next entry, usually due later, reuses the sleeping fiber).
 *
 * The timer cannot die of what it calls: an `expire` that throws is caught and handed to
 * `onDefect` (the other entries due at that instant, and every later one, still expire). If its
 * fiber ends anyway (interrupted from outside, its owner closed), the next `add` starts a new one.
 */
import { Cause, Duration, Effect, Fiber } from "effect"

/** Where the timer gets its time and runs its fiber (the owner's clock and fiber set). */
export interface Options {
  /** The Clock's current time in nanoseconds. */
  readonly nanos: () => bigint
  /** Start a fiber in a long-lived owner (not on the caller's stack) and return it. */
  readonly spawn: (effect: Effect.Effect<void>) => Fiber.RuntimeFiber<void>
  /** Run an effect in a long-lived owner (not on the caller's stack). */
  readonly fork: (effect: Effect.Effect<void>) => void
  /** An `expire` callback threw (default: logged at error level by the timer fiber). */
  readonly onDefect?: (defect: unknown) => void
}

/** Many deadlines kept by one fiber (`add` one, call its remover to cancel it). */
export interface DeadlineTimer {
  /** Call `expire` once `after` has passed (measured from now), unless the returned remover runs first. */
  readonly add: (after: Duration.Duration, expire: () => void) => () => void
  /** Entries waiting (for tests and diagnostics). */
  readonly size: () => number
}

interface Entry {
  readonly due: bigint
  readonly expire: () => void
}

/**
 * A new timer; no fiber runs until the first entry is added. Nothing it does fails: an `expire`
 * that throws goes to `onDefect`, and an infinite duration is never due.
 *
 * @example
 * ```ts
 * const timer = DeadlineTimer.make({
 *   nanos: () => clock.unsafeCurrentTimeNanos(),
 *   spawn: (effect) => runFork(effect), // e.g. from FiberSet.makeRuntime, in a long-lived scope
 *   fork: (effect) => void runFork(effect)
 * })
 * const cancel = timer.add(Duration.minutes(15), () => card.refuse())
 * cancel() // the card settled first
 * ```
 */
export const make = (options: Options): DeadlineTimer => {
  /** One set per deadline length (nanoseconds), entries in the order they were added. */
  const byLength = new Map<bigint, Set<Entry>>()
  let size = 0
  let generation = 0
  /** When the running fiber wakes next; undefined when no fiber runs. */
  let armedUntil: bigint | undefined
  let fiber: Fiber.RuntimeFiber<void> | undefined

  const earliest = (): Entry | undefined => {
    let best: Entry | undefined
    for (const set of byLength.values()) {
      const first = set.values().next().value
      if (first !== undefined && (best === undefined || first.due < best.due)) best = first
    }
    return best
  }

  /** Expire what is due; returns what the callbacks threw (they never stop the others). */
  const expireDue = (now: bigint): Array<unknown> | undefined => {
    let defects: Array<unknown> | undefined
    for (const [length, set] of Array.from(byLength)) {
      for (const entry of set) {
        if (entry.due > now) break
        set.delete(entry)
        size--
        try {
          entry.expire()
        } catch (defect) {
          ;(defects ??= []).push(defect)
        }
      }
      if (set.size === 0 && byLength.get(length) === set) byLength.delete(length)
    }
    return defects
  }

  const report = (defects: Array<unknown> | undefined): Effect.Effect<void> => {
    if (defects === undefined) return Effect.void
    if (options.onDefect !== undefined) {
      for (const defect of defects) {
        try {
          options.onDefect(defect)
        } catch {
          // a reporter that throws must not kill the timer either
        }
      }
      return Effect.void
    }
    return Effect.forEach(defects, (defect) => Effect.logError("a deadline callback threw", Cause.die(defect)), { discard: true })
  }

  const loop = (mine: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (mine !== generation) return Effect.void // replaced by a fiber that wakes earlier
      const now = options.nanos()
      const defects = expireDue(now)
      const next = earliest()
      if (next === undefined || mine !== generation) {
        if (mine === generation) {
          armedUntil = undefined
          fiber = undefined
        }
        return report(defects)
      }
      armedUntil = next.due
      return Effect.zipRight(report(defects), Effect.zipRight(Effect.sleep(Duration.nanos(next.due - now)), loop(mine)))
    })



  const arm = (due: bigint): void => {
    if (armedUntil !== undefined && armedUntil <= due) return
    const replaced = fiber
    const mine = ++generation
    armedUntil = due
    const started = options.spawn(loop(mine))
    fiber = started
    // However the fiber ends (interrupted by its owner's close, even before it started), a later
    // `add` re-arms: an observer, not a finalizer inside the fiber, which a fiber that never ran lacks.
    started.addObserver(() => {
      if (mine === generation && fiber === started) {
        armedUntil = undefined
        fiber = undefined
      }
    })
    if (replaced !== undefined) options.fork(Effect.asVoid(Fiber.interrupt(replaced)))
  }

  return {
    add: (after, expire) => {
      if (!Duration.isFinite(after)) return () => {} // never due
      const length = Duration.unsafeToNanos(after)
      const entry: Entry = { due: options.nanos() + length, expire }
      let set = byLength.get(length)
      if (set === undefined) {
        set = new Set()
        byLength.set(length, set)
      }
      set.add(entry)
      size++
      arm(entry.due)
      return () => {
        const owner = byLength.get(length)
        if (owner === undefined || !owner.delete(entry)) return
        size--
        if (owner.size === 0) byLength.delete(length)
        // Not stopped when the last entry leaves: the fiber ends by itself when it wakes to nothing,
        // and a card opened meanwhile reuses it (interrupting and starting a fiber per card was most
        // of what a card decided at once cost: bench/, issue 11).
      }
    },
    size: () => size
  }
}
