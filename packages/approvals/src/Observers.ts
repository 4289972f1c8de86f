/**
 * Synchronous observers of what something publishes: each observer is called in the step that
 * publishes, in registration order, until its scope closes. What `Approvals.observeEvents`,
 * `Approvals.observeAnswers` and the supervisor's `observe` are made of.
 *
 * - A value published by an observer's own work (a card it answers as it opens) is delivered
 *   after the one being delivered: every observer sees the values in publishing order.
 * - An observer that throws does not stop the others or the publisher; `onThrow` is told once
 *   per observer (not at every value).
 * - Observers are kept in a new array on each change, so registering or removing one while
 *   values are delivered is safe.
 */
import { Effect } from "effect"
import type { Scope } from "effect"

/** The observers of values of `A` (`make`): how they register, and how a publisher delivers to them. */
export interface Observers<A> {
  /** Call `observer` with every value delivered from now on, until the caller's scope closes. */
  readonly observe: (observer: (value: A) => void) => Effect.Effect<void, never, Scope.Scope>
  /** Deliver `value` to every observer, now (after the one being delivered, if any). Never throws. */
  readonly deliver: (value: A) => void
  /** No observer: the publisher may skip making the value. */
  readonly isEmpty: () => boolean
}

/** Observers of `A`; `onThrow` hears of each observer's first throw (it must not throw itself). */
export const make = <A>(onThrow: (defect: unknown) => void): Observers<A> => {
  let observers: ReadonlyArray<(value: A) => void> = []
  let delivering = false
  const nested: Array<A> = []
  const threw = new WeakSet<object>()
  const deliverOne = (value: A) => {
    for (const observer of observers) {
      try {
        observer(value)
      } catch (defect) {
        if (threw.has(observer)) continue
        threw.add(observer)
        onThrow(defect)
      }
    }
  }
  const deliver = (value: A) => {
    if (observers.length === 0) return
    if (delivering) {
      nested.push(value)
      return
    }
    delivering = true
    try {
      deliverOne(value)
      for (let next = nested.shift(); next !== undefined; next = nested.shift()) deliverOne(next)
    } finally {
      delivering = false
    }
  }
  const observe = (observer: (value: A) => void): Effect.Effect<void, never, Scope.Scope> =>
    Effect.acquireRelease(
      Effect.sync(() => {
        observers = [...observers, observer]
      }),
      () =>
        Effect.sync(() => {
          observers = observers.filter((o) => o !== observer)
        })
    )
  return { observe, deliver, isEmpty: () => observers.length === 0 }
}
