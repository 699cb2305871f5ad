// How far behind this process runs. A timer that should fire every TICK_MS notes how late it
// ran; the mean over the last WINDOW ticks (100 ms) is the event loop's recent delay: how long
// anything that became ready (a request, a store's answer) waited for the one thread. One
// monitor per process, shared: load shedding reads it, and so does the timeline reader, to tell
// a store that answers late from a process that reads its answers late.
import { performance } from 'node:perf_hooks'

const TICK_MS = 10
/** Ticks averaged: the last 100 ms. One slow tick (a GC pause) does not dominate it. */
const WINDOW = 10
/** Ticks kept for the recent maximum: the last second. */
const HISTORY = 100

/** A process past this recent delay is behind on its own work (a healthy loop is 0–2 ms late). */
export const BUSY_LAG_MS = 10

type Listener = (meanMs: number) => void

let monitor:
  { mean: number; late: Float64Array; listeners: Set<Listener>; timer: NodeJS.Timeout } | undefined

function start(): NonNullable<typeof monitor> {
  const late = new Float64Array(HISTORY)
  let i = 0
  let sum = 0
  let last = performance.now()
  const m = {
    mean: 0,
    late,
    listeners: new Set<Listener>(),
    timer: setInterval(() => {
      const now = performance.now()
      const lateness = Math.max(0, now - last - TICK_MS)
      last = now
      // The window's sum: add this tick, drop the one WINDOW ticks back.
      sum += lateness - late[(i + HISTORY - WINDOW) % HISTORY]!
      late[i] = lateness
      i = (i + 1) % HISTORY
      m.mean = Math.max(0, sum / WINDOW)
      for (const fn of m.listeners) fn(m.mean)
    }, TICK_MS),
  }
  m.timer.unref()
  return m
}

/** The event loop's mean delay over the last 100 ms, in ms (starts the monitor on first use). */
export function loopLagMs(): number {
  monitor ??= start()
  return monitor.mean
}

/**
 * The longest the event loop ran late in the last second, in ms: a store answer that missed its
 * deadline while this was high was most likely read late by this process, not sent late.
 */
export function loopLagMaxMs(): number {
  monitor ??= start()
  return Math.max(...monitor.late)
}

/** Calls `fn` with the mean delay after every tick; returns the call that stops it. */
export function onLoopLag(fn: Listener): () => void {
  monitor ??= start()
  monitor.listeners.add(fn)
  return () => monitor?.listeners.delete(fn)
}

/**
 * Thrown for work refused because this process is past its capacity (not because anything it
 * depends on failed); the rpc edge answers it resource_exhausted.
 */
export class Overloaded extends Error {
  override readonly name = 'Overloaded'
}
