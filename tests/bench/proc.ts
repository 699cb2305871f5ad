// What a process costs, read from /proc (Linux): CPU seconds and resident memory, for benches
// that run the dataplane, Postgres and Redis as separate processes.
import { readdirSync, readFileSync } from 'node:fs'

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const HZ = 100

/** A stat line's fields after the command name (which may hold spaces): state is [0]. */
function statFields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

/** utime + stime of one process, from its stat line. */
function statCpu(stat: string): number {
  const fields = statFields(stat)
  return (Number(fields[11]) + Number(fields[12])) / HZ
}

/** minflt of one process, from its stat line. */
function statMinorFaults(stat: string): number {
  return Number(statFields(stat)[7])
}

/** User and system CPU seconds a process has used so far (NaN once it is gone). */
export function processCpuSplit(pid: number): { user: number; system: number } {
  try {
    const fields = statFields(readFileSync(`/proc/${pid}/stat`, 'utf8'))
    return { user: Number(fields[11]) / HZ, system: Number(fields[12]) / HZ }
  } catch {
    return { user: NaN, system: NaN }
  }
}

/** CPU seconds a process has used so far (NaN once it is gone). */
export function processCpu(pid: number): number {
  try {
    return statCpu(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return NaN
  }
}

/**
 * `value` summed over every process with this command name (e.g. every postgres backend), given
 * its pid and stat line; processes that end meanwhile are left out.
 */
function sumByName(name: string, value: (pid: string, stat: string) => number): number {
  let total = 0
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) === name) {
        total += value(pid, stat)
      }
    } catch {
      // The process ended meanwhile.
    }
  }
  return total
}

/**
 * CPU seconds of every process with this command name, and of its children that ended: a
 * Postgres backend whose connection closed is counted by the postmaster that reaped it, so a
 * pool closed before the reading still shows the work its connections did.
 */
export function cpuByName(name: string): number {
  return sumByName(name, (_, stat) => statCpu(stat) + statChildrenCpu(stat))
}

/** cutime + cstime of one process: the CPU of its children that ended and were waited for. */
function statChildrenCpu(stat: string): number {
  const fields = statFields(stat)
  return (Number(fields[13]) + Number(fields[14])) / HZ
}

/** Context switches (voluntary and not) of every process with this command name. */
export function contextSwitchesByName(name: string): number {
  return sumByName(name, (pid) => {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    let switches = 0
    for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)$/gm)) {
      switches += Number(m[1])
    }
    return switches
  })
}

/** Minor page faults of every process with this command name (pages mapped on first touch). */
export function minorFaultsByName(name: string): number {
  return sumByName(name, (_, stat) => statMinorFaults(stat))
}

/** Minor page faults of one process so far (NaN once it is gone). */
export function minorFaults(pid: number): number {
  try {
    return statMinorFaults(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return NaN
  }
}

/** Resident set size of a process, in bytes. */
export function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) * 1024 : NaN
}
