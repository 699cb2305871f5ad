// CPU profiles of a running child process through its inspector (started with
// --inspect=127.0.0.1:<port>): only the window a benchmark step covers, not start-up or warm-up,
// which a whole-process --cpu-prof would mix in.

interface Pending {
  resolve(v: unknown): void
  reject(e: Error): void
}

/** One Chrome DevTools Protocol session to the process's first target. */
export class InspectorSession {
  #ws: WebSocket
  #next = 1
  #pending = new Map<number, Pending>()

  private constructor(ws: WebSocket) {
    this.#ws = ws
    ws.addEventListener('message', (ev) => {
      const msg = JSON.parse(String(ev.data)) as {
        id?: number
        result?: unknown
        error?: { message: string }
      }
      const p = msg.id === undefined ? undefined : this.#pending.get(msg.id)
      if (!p) return
      this.#pending.delete(msg.id!)
      if (msg.error) p.reject(new Error(msg.error.message))
      else p.resolve(msg.result)
    })
  }

  static async connect(port: number): Promise<InspectorSession> {
    const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
      webSocketDebuggerUrl: string
    }[]
    const url = targets[0]?.webSocketDebuggerUrl
    if (!url) throw new Error(`no inspector target on port ${port}`)
    const ws = new WebSocket(url)
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener('open', () => resolve(), { once: true })
      ws.addEventListener('error', () => reject(new Error(`inspector ${url} refused`)), {
        once: true,
      })
    })
    return new InspectorSession(ws)
  }

  send(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.#next++
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject })
      this.#ws.send(JSON.stringify({ id, method, params }))
    })
  }

  close(): void {
    this.#ws.close()
  }
}

/**
 * Runs `work` while the process at `port` records a CPU profile; returns both. With `allocations`,
 * it also samples what the process allocates (every ~`allocations.interval` bytes, objects the GC
 * has already collected included): what a read allocates is what its minor GCs cost. With
 * `allocations.survivors`, only objects that outlived a minor GC are kept: what each scavenge
 * copies and promotes, the part of its pause that grows with what lives.
 */
export async function profileWhile<T>(
  port: number,
  work: () => Promise<T>,
  intervalUs = 200,
  allocations?: { interval: number; survivors?: boolean },
): Promise<{ result: T; profile: unknown; heap?: unknown }> {
  const session = await InspectorSession.connect(port)
  try {
    await session.send('Profiler.enable')
    await session.send('Profiler.setSamplingInterval', { interval: intervalUs })
    if (allocations) {
      await session.send('HeapProfiler.enable')
      await session.send('HeapProfiler.startSampling', {
        samplingInterval: allocations.interval,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: !allocations.survivors,
      })
    }
    await session.send('Profiler.start')
    const result = await work()
    const { profile } = (await session.send('Profiler.stop')) as { profile: unknown }
    await session.send('Profiler.disable')
    let heap: unknown
    if (allocations) {
      heap = ((await session.send('HeapProfiler.stopSampling')) as { profile: unknown }).profile
      await session.send('HeapProfiler.disable')
    }
    return { result, profile, heap }
  } finally {
    session.close()
  }
}
