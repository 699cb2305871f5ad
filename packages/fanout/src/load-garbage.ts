// A full garbage collection right after the graph is loaded. Loading reads every follow row in
// pages that outlive a young-generation collection (each page waits on Postgres to intern its
// DIDs), so they are promoted: 5.36M follows leave 170–230 MB of garbage in the old generation.
// Left alone it is collected at V8's first full collection, which comes under load, stops the
// process once for long (279 ms on one host) and sheds the reads that arrive meanwhile.
// Collected here, the stop comes before the graph serves anything.
//
// `gc` is exposed to a fresh context only, and the flag is put back at once: nothing else in
// the process gets a global `gc` (the way jest's leak detector reaches it without --expose-gc).
import { performance } from 'node:perf_hooks'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

let gc: (() => void) | undefined

function fullGc(): () => void {
  if (!gc) {
    setFlagsFromString('--expose-gc')
    try {
      gc = runInNewContext('gc') as () => void
    } finally {
      setFlagsFromString('--no-expose-gc')
    }
  }
  return gc
}

/** Collects the whole heap now; says how long it took and how much of the heap it freed. */
export function collectLoadGarbage(): { gcMs: number; freedMb: number } {
  const before = process.memoryUsage().heapUsed
  const started = performance.now()
  fullGc()()
  return {
    gcMs: Math.round(performance.now() - started),
    freedMb: Math.round((before - process.memoryUsage().heapUsed) / 2 ** 20),
  }
}
