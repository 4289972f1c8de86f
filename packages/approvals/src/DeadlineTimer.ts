/**
 * The deadlines of one connection's waiting cards, kept by ONE fiber asleep until the next deadline.
 *
 * That is instead of a sleeping fiber (and a timer) per card: a connection with 10,000 open cards holds no
 * fiber for them, and settling them (a connection loss) has nothing to interrupt.
 *
 * Entries are kept in one insertion-ordered list per deadline length. Within a list, an entry added
 * later is due later (the clock is monotonic), so the next deadline is the first entry of one of
 * the lists (there are as many lists as configured deadline lengths: a handful). Adding and removing
 * are O(1). Time is the Clock's nanoseconds (`unsafeCurrentTimeNanos`: monotonic; the TestClock in
 * tests), and the fiber sleeps with `Effect.sleep`, so the TestClock decides when deadlines pass.
 *
 * The lists are intrusive: an entry is a {@link Timed} object carrying its own links, so an
 * object that already exists per deadline (a card) can be the entry itself and a deadline costs
 * no allocation (`schedule` / `cancel`). `add` wraps a callback in a small entry for callers
 * without such an object (our requests).
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

/**
 * Something with a deadline, kept in place by the timer (`schedule`, `cancel`): the `timer*`
 * fields are the timer's own links, never to be written by anyone else; `onDeadline` is called
 * once, from the timer's fiber, when the deadline passes (it is no longer scheduled then).
 */
export abstract class Timed {
  /** When it is due: the Clock's nanoseconds since the timer was made (managed by the timer). */
  timerDue = 0
  /** The list it is in while scheduled (managed by the timer). */
  timerList: TimedList | undefined = undefined
  timerPrev: Timed | undefined = undefined
  timerNext: Timed | undefined = undefined
  /** The deadline passed: called once, from the timer's fiber. */
  abstract onDeadline(): void
}

/** One deadline length's entries, oldest first (internal to the timer). */
export interface TimedList {
  readonly length: number
  head: Timed | undefined
  tail: Timed | undefined
}

/** Many deadlines kept by one fiber (`add` one, call its remover to cancel it). */
export interface DeadlineTimer {
  /** Call `expire` once `after` has passed (measured from now), unless the returned remover runs first. */
  readonly add: (after: Duration.Duration, expire: () => void) => () => void
  /**
   * Call `entry.onDeadline()` once `after` has passed (measured from now), unless `cancel(entry)`
   * runs first. No allocation: the entry carries its links. An entry already scheduled is moved
   * to its new deadline; an infinite `after` schedules nothing (returns false).
   */
  readonly schedule: (entry: Timed, after: Duration.Duration) => boolean
  /** Take `entry` off the timer (nothing if it is not scheduled). */
  readonly cancel: (entry: Timed) => void
  /** Entries waiting (for tests and diagnostics). */
  readonly size: () => number
}

/** An entry for `add`: a callback and nothing else. */
class Callback extends Timed {
  constructor(readonly expire: () => void) {
    super()
  }
  onDeadline(): void {
    this.expire()
  }
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
  // Times are kept as numbers of nanoseconds since this origin: exact integers for 104 days
  // (2^53 ns), and no BigInt per entry.
  const origin = options.nanos()
  const now = (): number => Number(options.nanos() - origin)
  /** One list per deadline length (nanoseconds), entries in the order they were added. */
  const byLength = new Map<number, TimedList>()
  let size = 0
  let generation = 0
  /** When the running fiber wakes next; undefined when no fiber runs. */
  let armedUntil: number | undefined
  let fiber: Fiber.RuntimeFiber<void> | undefined

  const unlink = (entry: Timed, list: TimedList): void => {
    const prev = entry.timerPrev
    const next = entry.timerNext
    if (prev === undefined) list.head = next
    else prev.timerNext = next
    if (next === undefined) list.tail = prev
    else next.timerPrev = prev
    entry.timerPrev = undefined
    entry.timerNext = undefined
    entry.timerList = undefined
    size--
    if (list.head === undefined && byLength.get(list.length) === list) byLength.delete(list.length)
  }

  const earliest = (): Timed | undefined => {
    let best: Timed | undefined
    for (const list of byLength.values()) {
      const first = list.head
      if (first !== undefined && (best === undefined || first.timerDue < best.timerDue)) best = first
    }
    return best
  }

  /** Expire what is due; returns what the callbacks threw (they never stop the others). */
  const expireDue = (at: number): Array<unknown> | undefined => {
    let defects: Array<unknown> | undefined
    for (const list of Array.from(byLength.values())) {
      let entry = list.head
      while (entry !== undefined && entry.timerDue <= at) {
        unlink(entry, list)
        try {
          entry.onDeadline()
        } catch (defect) {
          ;(defects ??= []).push(defect)
        }
        // A callback may have cancelled or scheduled others: read the list again.
        entry = list.head
      }
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
    return Effect.forEach(defects, (defect) => Effect.logError("a deadline callback threw", Cause.die(defect)), {
      discard: true
    })
  }

  const loop = (mine: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (mine !== generation) return Effect.void // replaced by a fiber that wakes earlier
      const at = now()
      const defects = expireDue(at)
      const next = earliest()
      if (next === undefined || mine !== generation) {
        if (mine === generation) {
          armedUntil = undefined
          fiber = undefined
        }
        return report(defects)
      }
      armedUntil = next.timerDue
      return Effect.zipRight(
        report(defects),
        Effect.zipRight(Effect.sleep(Duration.nanos(BigInt(next.timerDue - at))), loop(mine))
      )
    })

  const arm = (due: number): void => {
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

  const cancel = (entry: Timed): void => {
    const list = entry.timerList
    if (list !== undefined) unlink(entry, list)
    // Not stopped when the last entry leaves: the fiber ends by itself when it wakes to nothing,
    // and an entry added meanwhile reuses it (interrupting and starting a fiber per card was most
    // of what a card decided at once cost, measured in bench/).
  }

  const schedule = (entry: Timed, after: Duration.Duration): boolean => {
    cancel(entry)
    if (!Duration.isFinite(after)) return false // never due
    const length = Number(Duration.unsafeToNanos(after))
    let list = byLength.get(length)
    if (list === undefined) {
      list = { length, head: undefined, tail: undefined }
      byLength.set(length, list)
    }
    entry.timerDue = now() + length
    entry.timerList = list
    entry.timerPrev = list.tail
    entry.timerNext = undefined
    if (list.tail === undefined) list.head = entry
    else list.tail.timerNext = entry
    list.tail = entry
    size++
    arm(entry.timerDue)
    return true
  }

  return {
    add: (after, expire) => {
      const entry = new Callback(expire)
      if (!schedule(entry, after)) return () => {}
      return () => cancel(entry)
    },
    schedule,
    cancel,
    size: () => size
  }
}
