// Load shedding at the rpc edge. Past its capacity a Node process does not get slower evenly: every
// request it accepts waits behind all the others for the one thread, so latency grows without
// bound, callers' deadlines pass while their answers are still being computed, and the work done
// for them is wasted. The event loop's delay is that wait, measured directly (telemetry's loop-lag
// monitor: how late a 10 ms timer fires, over the last 100 ms). While the recent delay is above the bound, new rpcs
// are answered `resource_exhausted` at once (a fraction of a read's cost), so the requests that
// are accepted are answered within the bound plus their own time.
import { counter, gauge, onLoopLag } from '@openplane/telemetry'

const shedding = gauge(
  'openplane_load_shedding',
  '1 while rpcs are refused (resource_exhausted) because the event loop lags past DATAPLANE_SHED_DELAY_MS',
)
const loopDelay = gauge(
  'openplane_event_loop_delay_seconds',
  "The event loop's recent delay (mean lateness of a 10 ms timer over the last 100 ms)",
)

export const shedTotal = counter(
  'openplane_rpcs_shed_total',
  'Rpcs refused for overload (resource_exhausted), by reason (loop_delay: the event loop lags past DATAPLANE_SHED_DELAY_MS; in_flight: DATAPLANE_MAX_TIMELINE_READS reads already in progress; rpcs_in_flight: DATAPLANE_MAX_RPCS_IN_FLIGHT rpcs already in progress)',
  ['reason'],
)

export interface Admission {
  /** Whether a new rpc should be refused now. */
  shed(): boolean
  stop(): void
}

/** Sheds while the event loop's mean delay over the last 100 ms exceeds `maxDelayMs` (0: never). */
export function startAdmission(maxDelayMs: number): Admission {
  let over = false
  let ticks = 0
  const stop = onLoopLag((mean) => {
    const was = over
    over = maxDelayMs > 0 && mean > maxDelayMs
    if (over !== was) shedding.set(over ? 1 : 0)
    if (++ticks % 10 === 0) loopDelay.set(mean / 1000)
  })
  return {
    shed: () => over,
    stop,
  }
}
