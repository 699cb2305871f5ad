// node bench/profile-summary.ts <file.cpuprofile> [top] — where a V8 CPU profile's time went:
// self time by function (top N) and by area (our packages, connect/protobuf, ioredis, node
// internals, GC, idle), as shares of the busy time. Used to record profiles in
// docs/benchmarks.md; `reads` (optional third argument) divides busy time into ms per read.
import { readFileSync } from 'node:fs'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  hitCount?: number
  children?: number[]
}

interface Profile {
  nodes: ProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

/** The area a frame's code belongs to, from its script URL. */
function area(url: string, fn: string): string {
  if (fn === '(garbage collector)') return 'gc'
  if (fn === '(idle)') return 'idle'
  if (fn === '(program)') return 'program (native, unattributed)'
  if (!url) return 'native'
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`
  const pkg = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg) return pkg[1]!
  const ours = /packages\/([^/]+)\//.exec(url)
  if (ours) return `@openplane/${ours[1]}`
  return url
}

export function summarise(file: string, top = 25, reads?: number): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<number, number>()
  profile.samples.forEach((id, i) => {
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
  })
  const fnTime = new Map<string, number>()
  const areaTime = new Map<string, number>()
  let busy = 0
  for (const [id, us] of self) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame
    const a = area(url, functionName)
    areaTime.set(a, (areaTime.get(a) ?? 0) + us)
    if (a === 'idle') continue
    busy += us
    const name = `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${lineNumber + 1}`
    fnTime.set(name, (fnTime.get(name) ?? 0) + us)
  }
  const total = profile.endTime - profile.startTime
  const pct = (us: number) => ((100 * us) / busy).toFixed(1).padStart(5)
  const lines = [
    `${file}: ${(total / 1e6).toFixed(1)} s sampled, busy ${(busy / 1e6).toFixed(2)} s` +
      (reads ? `, ${(busy / 1000 / reads).toFixed(3)} ms per read over ${reads} reads` : ''),
    'by area (share of busy time):',
  ]
  for (const [a, us] of [...areaTime].sort((x, y) => y[1] - x[1])) {
    if (a !== 'idle') lines.push(`  ${pct(us)}%  ${a}`)
  }
  lines.push(`top ${top} functions by self time:`)
  for (const [name, us] of [...fnTime].sort((x, y) => y[1] - x[1]).slice(0, top)) {
    lines.push(`  ${pct(us)}%  ${name}`)
  }
  return lines.join('\n')
}

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number }
  selfSize: number
  children: HeapNode[]
}

/**
 * Where a sampled allocation profile's bytes were allocated: by function (with its caller, since
 * the allocating function is often a library's), as shares and, given `reads`, bytes per read.
 */
export function summariseAllocations(file: string, top = 25, reads?: number): string {
  const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: HeapNode }
  const bySite = new Map<string, number>()
  let total = 0
  const frame = (n: HeapNode | undefined) =>
    n
      ? `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber + 1}`
      : ''
  const walk = (n: HeapNode, parent: HeapNode | undefined) => {
    if (n.selfSize) {
      total += n.selfSize
      const site = `${frame(n)} < ${frame(parent)}`
      bySite.set(site, (bySite.get(site) ?? 0) + n.selfSize)
    }
    for (const c of n.children) walk(c, n)
  }
  walk(head, undefined)
  const per = (b: number) => (reads ? `${(b / reads).toFixed(0).padStart(6)} B/read ` : '')
  const lines = [`${file}: ${(total / 2 ** 20).toFixed(1)} MiB sampled, ${per(total)}`]
  for (const [site, b] of [...bySite].sort((x, y) => y[1] - x[1]).slice(0, top)) {
    lines.push(`  ${((100 * b) / total).toFixed(1).padStart(5)}% ${per(b)} ${site}`)
  }
  return lines.join('\n')
}

if (import.meta.main) {
  const [file, top, reads] = process.argv.slice(2)
  if (!file) {
    console.error('usage: node bench/profile-summary.ts <file.cpuprofile> [top] [reads]')
    process.exit(2)
  }
  console.log(summarise(file, Number(top ?? 25), reads ? Number(reads) : undefined))
}
