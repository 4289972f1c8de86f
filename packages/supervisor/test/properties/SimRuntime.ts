/**
 * A deterministic runtime for schedule tests: a scheduler that runs fiber tasks only when the
 * driver drains it (so "quiescent" is a fact, not a guess), and a virtual clock whose timers
 * fire only when the driver advances it, one instant at a time, draining after each.
 */
import type { Fiber } from "effect"
import {
  Clock,
  type Context,
  Duration,
  Effect,
  Exit,
  FiberRef,
  HashSet,
  Logger,
  type Option,
  Random,
  Scheduler,
  Supervisor,
  type Tracer
} from "effect"

/** Runs fiber tasks on demand, in priority order, FIFO within a priority. */
export class StepScheduler implements Scheduler.Scheduler {
  private tasks = new Scheduler.PriorityBuckets()
  private pending = 0
  /** Tasks run so far (a cheap work counter). */
  ran = 0

  scheduleTask(task: Scheduler.Task, priority: number): void {
    this.tasks.scheduleTask(task, priority)
    this.pending++
  }

  shouldYield(fiber: Fiber.RuntimeFiber<unknown, unknown>): number | false {
    return Scheduler.defaultShouldYield(fiber)
  }

  /** Run every task, including the ones they schedule, until none is left. */
  drain(budget = 1_000_000): void {
    let budgetLeft = budget
    while (this.pending > 0) {
      const buckets = this.tasks.buckets
      this.tasks.buckets = []
      for (const [, toRun] of buckets) {
        for (const task of toRun) {
          this.pending--
          this.ran++
          if (--budgetLeft < 0) throw new LivelockError(budget)
          task()
        }
      }
    }
  }
}

export class LivelockError extends Error {
  constructor(readonly budget: number) {
    super(`the system did not become quiescent within ${budget} scheduler tasks (livelock or busy loop)`)
  }
}

interface Timer {
  readonly at: number
  readonly seq: number
  readonly fire: () => void
}

/** Virtual time: sleeps register timers that only `advanceTo` fires. */
export class StepClock implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  now = 0
  private timers: Array<Timer> = []
  private seq = 0

  unsafeCurrentTimeMillis(): number {
    return this.now
  }
  readonly currentTimeMillis = Effect.sync(() => this.now)
  unsafeCurrentTimeNanos(): bigint {
    return BigInt(Math.round(this.now * 1_000_000))
  }
  readonly currentTimeNanos = Effect.sync(() => this.unsafeCurrentTimeNanos())

  sleep(duration: Duration.Duration): Effect.Effect<void> {
    return Effect.async<void>((resume) => {
      const millis = Duration.toMillis(duration)
      if (millis <= 0) return resume(Effect.void)
      if (!Number.isFinite(millis)) return
      const timer: Timer = { at: this.now + millis, seq: this.seq++, fire: () => resume(Effect.void) }
      this.timers.push(timer)
      return Effect.sync(() => {
        const i = this.timers.indexOf(timer)
        if (i >= 0) this.timers.splice(i, 1)
      })
    })
  }

  /** The earliest pending timer's instant, if any. */
  nextTimer(): number | undefined {
    let best: number | undefined
    for (const t of this.timers) if (best === undefined || t.at < best) best = t.at
    return best
  }

  timerCount(): number {
    return this.timers.length
  }

  /** The distinct instants at which timers are due, earliest first. */
  instants(): Array<number> {
    return Array.from(new Set(this.timers.map((t) => t.at))).sort((a, b) => a - b)
  }

  /** Fire every timer due at or before `at`, one by one in order, calling `afterEach` after each; time is then `at`. */
  fireAllAt(at: number, afterEach: () => void): void {
    while (this.fireNext(at)) afterEach()
    this.now = Math.max(this.now, at)
  }

  /** Fire the earliest due timer (by instant, then registration order); false when none is due by `limit`. */
  fireNext(limit: number): boolean {
    let index = -1
    for (let i = 0; i < this.timers.length; i++) {
      const t = this.timers[i]!
      if (t.at > limit) continue
      if (index === -1) index = i
      else {
        const b = this.timers[index]!
        if (t.at < b.at || (t.at === b.at && t.seq < b.seq)) index = i
      }
    }
    if (index === -1) return false
    const [timer] = this.timers.splice(index, 1)
    this.now = Math.max(this.now, timer!.at)
    timer!.fire()
    return true
  }
}

/**
 * Which connection a fiber belongs to: the world sets it (`FiberRef.set`) in the slot's fiber
 * right before each `connect`, so every fiber the connection forks (transport, reader, deadline
 * timers, handlers) inherits that connection's number; the rest of the world's fibers carry 0.
 */
export const ConnectionTag: FiberRef.FiberRef<number> = FiberRef.unsafeMake(0)

/** Fiber supervision that remembers the fibers alive now (for "no fiber left running"), with their connection tag. */
export class FiberTracker extends Supervisor.AbstractSupervisor<void> {
  readonly alive = new Map<Fiber.RuntimeFiber<any, any>, number>()
  readonly value = Effect.void
  override onStart<A, E, R>(
    _context: Context.Context<R>,
    _effect: Effect.Effect<A, E, R>,
    _parent: Option.Option<Fiber.RuntimeFiber<any, any>>,
    fiber: Fiber.RuntimeFiber<A, E>
  ): void {
    this.alive.set(fiber, fiber.getFiberRef(ConnectionTag))
  }
  override onEnd<A, E>(_value: Exit.Exit<A, E>, fiber: Fiber.RuntimeFiber<A, E>): void {
    this.alive.delete(fiber)
  }
  /** The fibers of connection `n` still running. */
  aliveOf(n: number): Array<Fiber.RuntimeFiber<any, any>> {
    const out: Array<Fiber.RuntimeFiber<any, any>> = []
    for (const [fiber, tag] of this.alive) if (tag === n) out.push(fiber)
    return out
  }
}

/**
 * A span that records nothing but what a hostile tracer needs (its name, attributes and end), with
 * deterministic ids (the native span draws random ones). Subclass it to make `end` throw.
 */
export class SimSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly traceId = "sim"
  readonly sampled = true
  readonly links: Array<Tracer.SpanLink>
  readonly attributes = new Map<string, unknown>()
  status: Tracer.SpanStatus
  constructor(
    readonly name: string,
    readonly spanId: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind,
    private readonly onEnd?: (span: SimSpan) => void
  ) {
    this.status = { _tag: "Started", startTime }
    this.links = links.slice()
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
    this.onEnd?.(this)
  }
  attribute(key: string, value: unknown): void {
    this.attributes.set(key, value)
  }
  event(): void {}
  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    this.links.push(...links)
  }
}

/** One world: scheduler, clock, seeded random, fiber tracker, captured error logs, and (optionally) the embedder's tracer. */
export class Sim {
  readonly scheduler = new StepScheduler()
  readonly clock = new StepClock()
  readonly tracker = new FiberTracker()
  readonly errorLogs: Array<string> = []
  private readonly random: Random.Random
  private readonly logger: Logger.Logger<unknown, void>

  /** `tracer`: the embedder's tracer, enabled (a hostile one injects defects); none: spans are off. */
  constructor(
    seed: number,
    private readonly tracer?: Tracer.Tracer
  ) {
    this.random = Random.make(seed)
    this.logger = Logger.make(({ logLevel, message, cause }) => {
      if (logLevel._tag === "Error" || logLevel._tag === "Fatal") {
        this.errorLogs.push(
          `${String(Array.isArray(message) ? message.join(" ") : message)} ${cause._tag === "Empty" ? "" : String(cause)}`
        )
      }
    })
  }

  private wrap<A, E>(effect: Effect.Effect<A, E>, tracked: boolean): Effect.Effect<A, E> {
    const traced =
      this.tracer === undefined
        ? // Spans are observability, not behaviour: off unless a tracer is given (each one formats a stack trace).
          Effect.withTracerEnabled(effect, false)
        : effect.pipe(Effect.withTracer(this.tracer), Effect.withTracerEnabled(true))
    const inWorld = traced.pipe(
      Effect.withClock(this.clock),
      Effect.withRandom(this.random),
      Effect.locally(FiberRef.currentLoggers, HashSet.make(this.logger))
    )
    return tracked ? Effect.supervised(inWorld, this.tracker) : inWorld
  }

  /** Start `effect` as a root fiber of this world and run until quiescent. */
  fork<A, E>(effect: Effect.Effect<A, E>, options: { readonly tracked?: boolean } = {}): Fiber.RuntimeFiber<A, E> {
    const fiber = Effect.runFork(this.wrap(effect, options.tracked ?? true), { scheduler: this.scheduler })
    this.scheduler.drain()
    return fiber
  }

  /** Run `effect` to completion now (it must not wait on time or on the peer). */
  run<A, E>(effect: Effect.Effect<A, E>, options: { readonly tracked?: boolean } = {}): A {
    const fiber = this.fork(effect, { tracked: options.tracked ?? false })
    const exit = fiber.unsafePoll()
    if (exit === null) throw new Error("Sim.run: the effect did not complete without waiting")
    if (Exit.isFailure(exit)) throw new Error(`Sim.run: the effect failed: ${String(exit.cause)}`)
    return exit.value
  }

  drain(): void {
    this.scheduler.drain()
  }

  /** Advance virtual time to `to`, firing each due timer in order and draining after each. */
  advanceTo(to: number): number {
    let fired = 0
    while (this.clock.fireNext(to)) {
      fired++
      this.scheduler.drain()
    }
    this.clock.now = Math.max(this.clock.now, to)
    this.scheduler.drain()
    return fired
  }
}
